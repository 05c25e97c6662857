"""One check of query and limit for every entry point: the same input gets the same answer from a
read-only search, its details, a session's preview and a session's search call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from discovery import ToolCallError, ToolIndex
from discovery._params import DEFAULT_LIMIT, Query, checked_limit, checked_search, query_terms
from discovery.errors import EmptyQuery, InvalidLimit, QueryNotText, QueryWithoutTerms
from tests.catalogs import WORKED_EXAMPLE

Search = Callable[[ToolIndex, Any, Any], int]


def read_only(index: ToolIndex, query: Any, limit: Any) -> int:
    return len(index.search(query, limit))


def read_only_details(index: ToolIndex, query: Any, limit: Any) -> int:
    return len(index.search_details(query, limit)["tools"])


def preview(index: ToolIndex, query: Any, limit: Any) -> int:
    return len(index.session("p", discovery_mode="all").preview(query, limit))


def search_call(index: ToolIndex, query: Any, limit: Any) -> int:
    params = {"query": query} if limit is None else {"query": query, "limit": limit}
    result = index.session("s", discovery_mode="all").search_tool.execute("", params)
    return result.details["limit"] and len(result.details["tools"])


ENTRY_POINTS = [read_only, read_only_details, preview, search_call]


@pytest.fixture
def example(index: ToolIndex) -> ToolIndex:
    index.upsert_tools(WORKED_EXAMPLE)
    return index


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: entry.__name__)
@pytest.mark.parametrize(
    ("query", "limit", "error"),
    [
        ("", 5, EmptyQuery),
        ("   ", 5, EmptyQuery),
        (None, 5, EmptyQuery),
        (5, 5, QueryNotText),
        ("!!", 5, QueryWithoutTerms),
        ("github", 0, InvalidLimit),
        ("github", 1.5, InvalidLimit),
        ("github", float("nan"), InvalidLimit),
        ("github", True, InvalidLimit),
        ("github", "3", InvalidLimit),
        ("", 0, EmptyQuery),  # the query is checked before the limit
        ("!!", 0, InvalidLimit),  # the limit is checked before the terms
    ],
)
def test_every_entry_point_refuses_the_same_input_the_same_way(
    example: ToolIndex, entry: Search, query: Any, limit: Any, error: type[ToolCallError]
) -> None:
    with pytest.raises(error) as raised:
        entry(example, query, limit)
    assert type(raised.value) is error


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: entry.__name__)
@pytest.mark.parametrize(("limit", "matches"), [(5.0, 2), (1, 1), (None, 2)])
def test_every_entry_point_takes_an_integral_float_and_a_missing_limit(
    example: ToolIndex, entry: Search, limit: Any, matches: int
) -> None:
    assert entry(example, "  github  ", limit) == matches


def test_the_checks_in_order() -> None:
    assert checked_search("  open PR ", None) == (Query("open PR", ("open", "pr")), DEFAULT_LIMIT)
    assert query_terms("open PR") == {"open": 1, "pr": 1}
    assert checked_limit(7.0) == 7 and type(checked_limit(7.0)) is int
