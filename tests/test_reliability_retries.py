"""A retried search call with the same params is answered from the log, whatever the store had to
change to keep them (NUL, lone surrogates, NaN, infinities, tuples, non-text keys), on both
backends; a retry with other params is still refused."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from discovery import ToolCallError, ToolIndex
from discovery._sessions.session import Session
from store._logged_json import logged_value
from tests.examples import examples

DEMO = Path(__file__).resolve().parent.parent / "discovery" / "examples" / "demo-catalog.jsonl"


@pytest.fixture
def session(index: ToolIndex) -> Iterator[Session]:
    lines = DEMO.read_text(encoding="utf-8").splitlines()
    index.upsert_tools([json.loads(line) for line in lines])
    yield index.session("retries", discovery_mode="all")


def answer(session: Session, call_id: str, params: Any) -> tuple[str, Any]:
    """What a call returns, or the error it raises, as one comparable value: the details as the
    log keeps them, since a retry is answered from the log (NUL there reads back as U+FFFD)."""
    try:
        result = session.search_tool.execute(call_id, params)
    except ToolCallError as error:
        return "error", str(error)
    return "result", (result.content, logged_value(result.details))


HOSTILE = {
    "NUL in the query": {"query": "weather\x00forecast"},
    "lone surrogate in the query": {"query": "calendar \ud800 events"},
    "NaN limit": {"query": "weather", "limit": math.nan},
    "infinite limit": {"query": "weather", "limit": math.inf},
    "NUL in a key": {"query": "weather", "x\x00y": 1},
    "surrogate in a key": {"\udfff": "read"},
    "non-text key": {"query": "weather", 3: "three"},
    "tuple value": {"query": "weather", "extra": ("a", "b")},
    "not an object": ["query", "weather"],
    "a bare NaN": math.nan,
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_retry_of_hostile_params_gets_the_first_answer(session: Session, case: str) -> None:
    params = HOSTILE[case]
    first = answer(session, "call-1", params)
    assert answer(session, "call-1", params) == first
    assert "already used" not in str(first[1])


def test_a_retry_with_other_params_is_still_refused(session: Session) -> None:
    answer(session, "c", {"query": "weather\x00forecast", "limit": math.nan})
    for other in (
        {"query": "weather\x00forecast"},
        {"query": "weather forecast", "limit": math.nan},
        {"query": "weather\x00forecast", "limit": 1},
    ):
        kind, message = answer(session, "c", other)
        assert (kind, message) == ("error", "call id 'c' was already used with other parameters")


def test_true_and_one_are_other_params_but_one_and_one_point_zero_are_not(session: Session) -> None:
    first = answer(session, "bool", {"query": "weather", "limit": True})
    assert first[0] == "error"
    assert answer(session, "bool", {"query": "weather", "limit": 1}) == (
        "error",
        "call id 'bool' was already used with other parameters",
    )
    counted = answer(session, "num", {"query": "weather", "limit": 2})
    assert answer(session, "num", {"query": "weather", "limit": 2.0}) == counted
    assert answer(session, "num", {"limit": 2, "query": "weather"}) == counted


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=8),
)
PARAMS = st.dictionaries(
    st.sampled_from(["query", "limit", "\x00", "\ud83d", "k"]) | st.integers(-3, 3),
    st.recursive(
        JSON_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner), max_leaves=6
    ),
    max_size=4,
)


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(params=PARAMS, query=st.text(max_size=12))
def test_any_params_retried_get_the_first_answer(
    session: Session, params: dict[Any, Any], query: str
) -> None:
    params = {"query": query, **params} if "query" not in params else params
    call_id = f"prop-{len(session.view().state.selected)}-{session.view().state.event_count}"
    first = answer(session, call_id, params)
    assert "already used" not in str(first[1])
    assert answer(session, call_id, params) == first
