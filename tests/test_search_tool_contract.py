"""search_tool_bm25 as its published schema says (types, no other properties) and a description
that a host can cache (issue 21, items 8 and 10)."""

from __future__ import annotations

from typing import Any

import pytest

from discovery import ToolCallError, ToolIndex
from discovery._sessions.search_tool import PARAMETERS
from discovery.errors import EmptyQuery, QueryNotText
from tests.test_cli import DEMO


@pytest.fixture
def demo(index: ToolIndex) -> ToolIndex:
    from discovery._catalog.formats import read_catalog

    index.upsert_tools(read_catalog([str(DEMO)], server=None, skip_invalid=False).records)
    return index


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"query": 5}, "Query must be a string, not number."),
        ({"query": ["a"]}, "Query must be a string, not array."),
        ({"query": True}, "Query must be a string, not boolean."),
        (
            {"query": "issue", "lmit": 3},
            'Unknown parameter "lmit": search_tool_bm25 takes only query and limit.',
        ),
        ({}, "Query is required and must not be empty."),
        ({"query": None}, "Query is required and must not be empty."),
    ],
)
def test_params_are_checked_as_the_schema_says(demo: ToolIndex, params: dict[str, Any], message: str) -> None:
    assert PARAMETERS["additionalProperties"] is False
    tool = demo.session(discovery_mode="all").search_tool
    with pytest.raises(ToolCallError) as raised:
        tool.execute("c1", params)
    assert str(raised.value) == message
    assert isinstance(raised.value, QueryNotText) == message.startswith("Query must be a string")
    assert isinstance(raised.value, EmptyQuery) == message.startswith("Query is required")


def test_the_stable_description_does_not_change_with_searches(demo: ToolIndex) -> None:
    tool = demo.session(discovery_mode="all").search_tool
    before, stable = tool.description, tool.stable_description
    assert before == stable  # nothing activated yet: the same text
    tool.execute("c1", {"query": "create an issue", "limit": 3})
    assert tool.stable_description == stable
    assert tool.description != before  # contract §6: the default counts what is still discoverable
    demo.remove_tools(["mcp__gitforge__create_issue"])
    assert tool.stable_description != stable  # a catalog write is what changes it
