"""Hostile input: every record and query gives a correct result or a typed error, never a crash,
and a refused write leaves the database exactly as it was."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine

from discovery import InvalidRecord, ToolCallError, ToolIndex, ToolIndexError
from discovery._catalog.indexing import content_hash
from discovery._catalog.models import MAX_SCHEMA_DEPTH, ToolRecord
from discovery._text.tokenizer import tokenize
from discovery.errors import EmptyQuery, InvalidLimit, QueryWithoutTerms
from store import _logged_json as logged_json
from store import _session_rows as session_rows
from store._digests import json_digest, record_digest
from store._logged_json import column_json
from tests.catalogs import ROUTE, WORKED_EXAMPLE
from tests.examples import examples

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)
SQLISH = st.sampled_from(["'", '"', ";", "--", "/*", "*/", "%", "_", "\\", "' OR 1=1 --", "\x00", "\ud800"])
NAMES = st.one_of(ANY_TEXT, st.lists(st.one_of(SQLISH, ANY_TEXT), min_size=1, max_size=5).map("".join))
HOSTILE = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
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
    from discovery._diagnostics.verify import verify

    assert verify(index).ok


@HOSTILE
@given(query=st.one_of(ANY_TEXT, NAMES), limit=st.integers(min_value=1, max_value=10**40))
def test_any_query_gives_a_ranking_or_a_typed_error(index: ToolIndex, query: str, limit: int) -> None:
    if not index.stats()["tools"]:
        index.upsert_tools(WORKED_EXAMPLE)
    try:
        hits = index.search(query, limit=limit)
    except (EmptyQuery, QueryWithoutTerms):
        assert not query.strip() or not tokenize(query)
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
    from discovery._diagnostics.verify import verify

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


@settings(max_examples=examples(400), deadline=None)
@given(value=JSON_VALUES)
@example({"true": 1, True: 2, 3: "a", "3": "b", None: 4, "null": 5})
def test_logged_json_is_the_storable_value_whichever_path_encodes_it(value: Any) -> None:
    """The log encodes most values without walking them; the text must read back as what the
    walk gives. Keys JSON spells alike (``True`` and ``"true"``) are written twice by the
    standard encoder and once by the walk: the texts differ, the value read back (the last one
    written) does not."""
    walked = json.dumps(logged_json.storable(value), ensure_ascii=False, separators=(",", ":"))
    text = logged_json.json_text(value)
    assert json.loads(text) == json.loads(walked)
    assert "\x00" not in text and text.encode("utf-8")


@settings(max_examples=examples(400), deadline=None)
@given(value=JSON_VALUES)
def test_the_library_s_own_values_are_logged_as_the_standard_path_would(value: Any) -> None:
    """Details and name lists go to ``orjson``; whatever it writes must read back as the value
    the standard path stores (NaN, NUL, lone surrogates and huge integers included)."""
    assert json.loads(logged_json.plain_json_text(value)) == json.loads(logged_json.json_text(value))


@settings(max_examples=examples(400), deadline=None)
@given(value=JSON_VALUES)
@example({"maximum": math.inf, "minimum": -math.inf, "default": math.nan, "const": None})
@example({"default": 2**70, "title": "\ud800", "enum": ["é", 1e16]})
@example({1: "a", "1": "b"})
def test_tool_json_columns_read_back_as_the_standard_encoder_s_text(value: Any) -> None:
    """An import encodes schemas with ``orjson``; the stored text must read back as what the
    standard encoder writes (NaN and huge integers included), and what it refuses stays refused."""
    try:
        standard = json.dumps(value)
    except (TypeError, ValueError) as refused:
        with pytest.raises(type(refused)):
            column_json(value)
        return
    # Compared re-encoded: NaN is not equal to itself.
    assert json.dumps(json.loads(column_json(value))) == json.dumps(json.loads(standard))


def _canonical(value: Any) -> str:
    """The standard encoder's sorted text: equal exactly for equal JSON values, NaN included."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


@settings(max_examples=examples(300), deadline=None)
@given(first=records, second=records)
def test_records_share_a_content_hash_exactly_when_they_are_equal(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    """Stored digests decide which rows an upsert rewrites: a record read back from its row
    must have its digest, and records that differ must not share one."""
    try:
        a, b = ToolRecord.model_validate(first), ToolRecord.model_validate(second)
    except ValueError:
        return
    read_back = ToolRecord.model_validate(json.loads(json.dumps(a.model_dump())))
    assert content_hash(read_back) == content_hash(a)
    assert (content_hash(a) == content_hash(b)) == (_canonical(a.model_dump()) == _canonical(b.model_dump()))


@settings(max_examples=examples(300), deadline=None)
@given(first=JSON_VALUES, second=JSON_VALUES)
@example({"default": math.nan}, {"default": None})
@example({"maximum": math.inf}, {"maximum": -math.inf})
@example({"default": 1}, {"default": 1.0})
@example({"default": 2**70}, {"default": 2**70 + 1})
@example({"title": "\ud800"}, {"title": "\ufffd"})
@example({"enum": ["é"]}, {"enum": ["\\u00e9"]})
def test_schemas_share_a_digest_exactly_when_they_are_equal(first: Any, second: Any) -> None:
    """Where ``orjson`` would write two schemas alike (NaN and ``null``) or refuses one, the
    digest takes the standard encoder's text, which tells them apart."""
    try:
        same = _canonical(first) == _canonical(second)
    except (TypeError, ValueError):
        return
    fields = {"name": "t", "summary": "", "server_name": None, "schema_keys": ["a"]}
    assert (record_digest(fields, first) == record_digest(fields, second)) == same
    assert record_digest(fields, first) == record_digest(dict(reversed(fields.items())), first)


def test_a_record_s_content_hash_does_not_change_between_versions() -> None:
    """A digest stored by this version must match in the next, or re-importing an unchanged
    catalog would rewrite every row; the digest before revision 0005 must stay computable for
    its downgrade."""
    record = ROUTE
    tool = ToolRecord.model_validate(record)
    assert content_hash(tool) == "eb6c2abb5cd73f3f23b1636fda611e067f58826423605dd2ff1b33d35c582dc8"
    assert (
        json_digest(tool.model_dump(exclude={"mcp_meta"}))
        == "e10aa98374eb19d5d9c38e68d16e50a6d2da88889c5862a9781211c6a6706cf4"
    )
    with_null = ToolRecord.model_validate({**record, "input_schema": {"default": None}})
    assert content_hash(with_null) == "7628d30ae8b8451fc936a9567f49a80df12b1d802429c8c508658401e618ee22"


def test_stored_name_lists_orjson_cannot_read_are_read_the_standard_way() -> None:
    with create_engine("sqlite://").connect() as connection:
        codec = session_rows.codec_of(connection)
    assert codec.load_names('["a","\\ud800",NaN]') == json.loads('["a","\\ud800",NaN]')
    assert codec.load_names('["mcp__x","é"]') == ["mcp__x", "é"]


@HOSTILE
@given(extra=st.dictionaries(JSON_KEYS, JSON_VALUES, max_size=3))
def test_any_call_params_are_logged_as_storable_values(index: ToolIndex, extra: dict[Any, Any]) -> None:
    if not index.stats()["tools"]:
        index.upsert_tools(WORKED_EXAMPLE)
    session = index.session(discovery_mode="mcp-only")
    params = {**extra, "query": "github"}
    # Other properties are refused (the schema says additionalProperties: false), and logged.
    with contextlib.suppress(ToolCallError):
        session.search_tool.execute("c", params)
    logged = index.session_record(session.id)["calls"][-1]["params"]
    assert logged == json.loads(logged_json.json_text(params))


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
