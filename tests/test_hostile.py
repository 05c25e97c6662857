"""Hostile input: every record and query gives a correct result or a typed error, never a crash,
and a refused write leaves the database exactly as it was."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine

from discovery import InvalidLimit, InvalidRecord, QueryWithoutTerms, ToolIndex, ToolIndexError
from discovery.models import MAX_SCHEMA_DEPTH
from store import sessions
from tests.catalogs import WORKED_EXAMPLE

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)
SQLISH = st.sampled_from(["'", '"', ";", "--", "/*", "*/", "%", "_", "\\", "' OR 1=1 --", "\x00", "\ud800"])
NAMES = st.one_of(ANY_TEXT, st.lists(st.one_of(SQLISH, ANY_TEXT), min_size=1, max_size=5).map("".join))
HOSTILE = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

records = st.fixed_dictionaries(
    {"name": NAMES},
    optional={
        "label": st.one_of(st.none(), NAMES),
        "description": st.one_of(st.none(), ANY_TEXT),
        "server_name": st.one_of(st.none(), NAMES),
        "mcp_tool_name": st.one_of(st.none(), NAMES),
        "source": st.sampled_from(["builtin", "mcp", "extension", "custom", "bogus", 3]),
        "load_mode": st.sampled_from(["essential", "discoverable", "none", None, "sometimes"]),
        "input_schema": st.one_of(
            st.none(),
            st.dictionaries(NAMES, st.just({"type": "string"}), max_size=5).map(lambda p: {"properties": p}),
            st.integers(),
            st.text(max_size=5),
        ),
    },
)


def _snapshot(index: ToolIndex) -> dict[str, Any]:
    return {"stats": index.stats(), "tools": [tool.as_record() for tool in index.tools()]}


@HOSTILE
@given(batch=st.lists(records, min_size=1, max_size=5))
def test_any_record_batch_is_stored_or_refused_whole(index: ToolIndex, batch: list[dict[str, Any]]) -> None:
    before = _snapshot(index)
    try:
        index.upsert_tools(batch)
    except InvalidRecord:
        assert _snapshot(index) == before
        return
    for record in batch:
        stored = index.tool(record["name"])
        assert stored.name == record["name"]
    from discovery.verify import verify

    assert verify(index).ok


@HOSTILE
@given(query=st.one_of(ANY_TEXT, NAMES), limit=st.integers(min_value=1, max_value=10**40))
def test_any_query_gives_a_ranking_or_a_typed_error(index: ToolIndex, query: str, limit: int) -> None:
    if not index.stats()["tools"]:
        index.upsert_tools(WORKED_EXAMPLE)
    try:
        hits = index.search(query, limit=limit)
    except QueryWithoutTerms:
        return
    assert all(hit.score > 0 and math.isfinite(hit.score) for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


@pytest.mark.parametrize("limit", [0, -5, 1.5, float("nan"), float("inf"), -float("inf"), True, False, "3"])
def test_bad_limits_are_refused(index: ToolIndex, limit: Any) -> None:
    with pytest.raises(InvalidLimit):
        index.search("github", limit=limit)


def test_megabyte_fields_and_many_keys(index: ToolIndex) -> None:
    huge = "lorem ipsum dolor " * 300_000  # about 5 MB, stored whole, its first 200 units indexed
    properties = {f"key_{number}": {"type": "string"} for number in range(10_000)}
    index.upsert_tools(
        [
            {"name": "big_description", "description": huge},
            {"name": "many_keys", "description": "wide schema", "input_schema": {"properties": properties}},
            {"name": "big_summary", "summary": "needle " + "hay " * 200_000},
        ]
    )
    assert index.tool("big_description").description == huge
    assert len(index.tool("many_keys").schema_keys) == 10_000
    assert index.search("key_9999")[0].name == "many_keys"
    assert index.search("needle")[0].name == "big_summary"
    from discovery.verify import verify

    assert verify(index).ok


def test_deep_schemas_are_refused_with_a_reason(index: ToolIndex) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_SCHEMA_DEPTH + 5):
        node["properties"] = {}
        node = node["properties"]
    with pytest.raises(InvalidRecord, match="nests deeper"):
        index.upsert_tools([{"name": "ok"}, {"name": "deep", "input_schema": deep}])
    assert index.stats()["tools"] == 0


def test_a_schema_at_the_depth_limit_is_stored(index: ToolIndex) -> None:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(MAX_SCHEMA_DEPTH // 2 - 1):
        node["items"] = {}
        node = node["items"]
    index.upsert_tools([{"name": "nested", "input_schema": schema}])
    assert index.tool("nested").input_schema == schema


def test_names_that_cannot_be_stored_are_refused(index: ToolIndex) -> None:
    for name in ["bad\x00name", "lone\ud800", "   ", ""]:
        with pytest.raises(ToolIndexError):
            index.upsert_tools([{"name": name}])
    assert index.stats()["tools"] == 0


JSON_KEYS = st.one_of(ANY_TEXT, SQLISH, st.integers(), st.floats(), st.booleans(), st.none())
JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), ANY_TEXT, SQLISH, st.sets(st.integers(), max_size=2)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(JSON_KEYS, inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=JSON_VALUES)
def test_logged_json_is_the_storable_value_whichever_path_encodes_it(value: Any) -> None:
    """The log encodes most values without walking them; the text must be what the walk gives."""
    walked = json.dumps(sessions.storable(value), ensure_ascii=False, separators=(",", ":"))
    assert sessions.json_text(value) == walked
    assert "\x00" not in walked and walked.encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(value=JSON_VALUES)
def test_the_library_s_own_values_are_logged_as_the_standard_path_would(value: Any) -> None:
    """Details and name lists go to ``orjson``; whatever it writes must read back as the value
    the standard path stores (NaN, NUL, lone surrogates and huge integers included)."""
    assert json.loads(sessions.plain_json_text(value)) == json.loads(sessions.json_text(value))


def test_stored_name_lists_orjson_cannot_read_are_read_the_standard_way() -> None:
    with create_engine("sqlite://").connect() as connection:
        codec = sessions._codec(connection)
    assert codec.load_names('["a","\\ud800",NaN]') == json.loads('["a","\\ud800",NaN]')
    assert codec.load_names('["mcp__x","é"]') == ["mcp__x", "é"]


@HOSTILE
@given(extra=st.dictionaries(JSON_KEYS, JSON_VALUES, max_size=3))
def test_any_call_params_are_logged_as_storable_values(index: ToolIndex, extra: dict[Any, Any]) -> None:
    if not index.stats()["tools"]:
        index.upsert_tools(WORKED_EXAMPLE)
    session = index.session(discovery_mode="mcp-only")
    params = {**extra, "query": "github"}
    session.search_tool.execute("c", params)
    logged = index.session_record(session.id)["calls"][-1]["params"]
    assert logged == json.loads(sessions.json_text(params))


@pytest.mark.parametrize("bad", ["a\x00b", "lone\ud800", 7, None, b"bytes"])
def test_ids_the_store_cannot_keep_are_refused_and_nothing_is_written(index: ToolIndex, bad: Any) -> None:
    index.upsert_tools(WORKED_EXAMPLE)
    session = index.session("kept", discovery_mode="mcp-only")
    before = index.session_record("kept")
    with pytest.raises(ToolIndexError, match="call id"):
        session.search_tool.execute(bad, {"query": "github"})
    if bad is not None:  # no id means "make one up"
        for attempt in (lambda: index.session(bad), lambda: index.session_record(bad)):
            with pytest.raises(ToolIndexError, match="session id"):
                attempt()
        with pytest.raises(ToolIndexError, match="session id"):
            index.delete_session(bad)
    assert index.session_record("kept") == before
    assert [summary.id for summary in index.sessions()] == ["kept"]
