"""The Anthropic adapter against the real ``anthropic`` SDK, whose requests go to a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from discovery import ToolIndex
from discovery.adapters import anthropic as adapter
from discovery.adapters._names import wire_name
from discovery.adapters.errors import TooManyTools
from tests.providers import (
    LONG_NAME,
    WIRE_NAME,
    ScriptedModel,
    anthropic_message,
    catalog_index,
    tool_names,
    tool_use,
)


@pytest.fixture
def index(tmp_path: Path) -> ToolIndex:
    return catalog_index(tmp_path)


def client(model: ScriptedModel) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", base_url="http://127.0.0.1:9", http_client=model.http_client(), max_retries=0
    )


def converse(
    index: ToolIndex, model: ScriptedModel, *, deferred: bool = False, turns: int = 3
) -> tuple[list[dict[str, Any]], list[str]]:
    """The host loop: send, answer the search calls, route the other calls back to the catalog."""
    session = index.session("chat", discovery_mode="all")
    sdk = client(model)
    messages: list[Any] = [{"role": "user", "content": "click the link that opens a tab"}]
    routed: list[str] = []
    for _ in range(turns):
        reply = sdk.messages.create(
            model="claude-test",
            max_tokens=256,
            messages=messages,
            tools=adapter.tools(session, deferred=deferred),  # type: ignore[arg-type]
        )
        messages.append({"role": "assistant", "content": reply.content})
        results: list[dict[str, Any]] = []
        for block in reply.content:
            if block.type != "tool_use":
                continue
            answer = adapter.handle(session, block, deferred=deferred)
            if answer is None:
                name = adapter.catalog_name(session, block.name)
                routed.append(str(name))
                answer = {"type": "tool_result", "tool_use_id": block.id, "content": f"ran {name}"}
            results.append(answer)
        if not results:
            break
        messages.append({"role": "user", "content": results})
    return model.requests, routed


def call_offered(name_part: str) -> Any:
    """A reply that calls the offered tool whose wire name contains ``name_part``."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        (wire,) = [name for name in tool_names(body["tools"]) if name_part in name]
        return anthropic_message(tool_use("toolu_2", wire, {"selector": "#next"}))

    return reply


def test_a_search_activates_a_long_named_tool_the_next_request_offers_and_the_host_routes(
    index: ToolIndex,
) -> None:
    model = ScriptedModel(
        anthropic_message(tool_use("toolu_1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        call_offered("playwright"),
        anthropic_message({"type": "text", "text": "done"}),
    )
    requests, routed = converse(index, model)
    first, second, third = requests
    assert tool_names(first["tools"]) == ["search_tool_bm25", "read", "bash"]
    assert first["tools"][0]["input_schema"]["required"] == ["query"]
    assert first["tools"][2]["input_schema"] == {"type": "object"}  # bash has no schema
    wire = wire_name(LONG_NAME)
    assert tool_names(second["tools"]) == ["search_tool_bm25", "read", "bash", wire]
    assert all(WIRE_NAME.fullmatch(name) for name in tool_names(second["tools"]))
    (result,) = second["messages"][-1]["content"]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": f'{{"query":"switch tab","activated_tools":["{wire}"],"match_count":1,"total_tools":5}}',
    }
    assert routed == [LONG_NAME]
    assert third["messages"][-1]["content"][0]["content"] == f"ran {LONG_NAME}"
    assert len(requests) == 3


def test_the_tool_result_is_the_logged_content_when_no_name_needs_mapping(index: ToolIndex) -> None:
    model = ScriptedModel(
        anthropic_message(tool_use("toolu_1", "search_tool_bm25", {"query": "github issue"})),
        anthropic_message({"type": "text", "text": "done"}),
    )
    requests, _ = converse(index, model)
    (result,) = requests[1]["messages"][-1]["content"]
    (call,) = [call for call in index.session_record("chat")["calls"] if call["kind"] == "search"]
    assert result["content"] == call["content"]
    assert json.loads(result["content"])["activated_tools"] == ["mcp__github__create_issue"]
    assert "mcp__github__create_issue" in tool_names(requests[1]["tools"])


def test_a_refused_call_is_an_error_result_with_the_spec_message(index: ToolIndex) -> None:
    model = ScriptedModel(
        anthropic_message(tool_use("toolu_1", "search_tool_bm25", {"query": "   "})),
        anthropic_message({"type": "text", "text": "sorry"}),
    )
    requests, _ = converse(index, model)
    (result,) = requests[1]["messages"][-1]["content"]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "Query is required and must not be empty.",
        "is_error": True,
    }
    assert tool_names(requests[1]["tools"]) == ["search_tool_bm25", "read", "bash"]


def test_deferred_mode_references_the_activated_tools_and_keeps_them_deferred(index: ToolIndex) -> None:
    model = ScriptedModel(
        anthropic_message(tool_use("toolu_1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        call_offered("playwright"),
        anthropic_message({"type": "text", "text": "done"}),
    )
    requests, routed = converse(index, model, deferred=True)
    first, second, _ = requests
    loading = {tool["name"]: tool.get("defer_loading", False) for tool in first["tools"]}
    # Every tool a search in mode ``all`` can reach is deferred; the search tool and the tools
    # active from the start are not.
    assert loading == {
        "search_tool_bm25": False,
        "read": False,
        "bash": False,
        "mcp__github__create_issue": True,
        "mcp__slack__post_message": True,
        wire_name(LONG_NAME): True,
        wire_name("mcp__docs.example/search pages"): True,
        "calendar_lookup": True,
    }
    (result,) = second["messages"][-1]["content"]
    wire = wire_name(LONG_NAME)
    assert result["content"] == [
        {
            "type": "text",
            "text": f'{{"query":"switch tab","activated_tools":["{wire}"],"match_count":1,"total_tools":5}}',
        },
        {"type": "tool_reference", "tool_name": wire},
    ]
    # A referenced tool must stay deferred (the API refuses a reference to a loaded one).
    assert {tool["name"]: tool.get("defer_loading", False) for tool in second["tools"]} == loading
    assert routed == [LONG_NAME]


def test_deferred_mode_in_mcp_only_sessions_defers_only_mcp_tools(index: ToolIndex) -> None:
    session = index.session("mcp", discovery_mode="mcp-only")
    deferred = [tool["name"] for tool in adapter.tools(session, deferred=True) if tool.get("defer_loading")]
    assert len(deferred) == 4 and all(name.startswith("mcp__") for name in deferred)


def test_more_tools_than_the_api_takes_is_a_clear_error(tmp_path: Path) -> None:
    records = [{"name": f"mcp__bulk__tool_{n}", "description": f"bulk tool {n}"} for n in range(9_999)]
    index = catalog_index(tmp_path, records)
    session = index.session("big", discovery_mode="mcp-only")
    assert len(adapter.tools(session, deferred=True)) == adapter.MAX_TOOLS
    index.upsert_tools([{"name": "mcp__bulk__one_more", "description": "one more"}])
    with pytest.raises(TooManyTools, match=r"10001 tool definitions exceed the Anthropic Messages API limit"):
        adapter.tools(session, deferred=True)
    assert len(adapter.tools(session)) == 1  # the plain mode sends the active tools only


def test_blocks_of_other_tools_and_other_kinds_are_left_to_the_host(index: ToolIndex) -> None:
    session = index.session("other", discovery_mode="all")
    assert adapter.handle(session, {"type": "tool_use", "id": "t", "name": "read", "input": {}}) is None
    assert adapter.handle(session, {"type": "text", "text": "search_tool_bm25"}) is None
    assert [call for call in index.session_record("other")["calls"] if call["kind"] == "search"] == []


def test_without_discovery_every_tool_is_offered_and_the_search_tool_is_not(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [
        {
            "name": "no_type",
            "description": "a schema without a type",
            "input_schema": {"properties": {"x": {}}},
        },
        {"name": "not_object", "description": "a schema of another type", "input_schema": {"type": "array"}},
        {"name": "mcp__s__t", "description": "an MCP tool"},
    ]
    index = catalog_index(tmp_path, records)
    session = index.session("off", discovery_mode="off")
    for deferred in (False, True):
        assert adapter.tools(session, deferred=deferred) == [
            {
                "name": "no_type",
                "description": "a schema without a type",
                "input_schema": {"type": "object", "properties": {"x": {}}},
            },
            {
                "name": "not_object",
                "description": "a schema of another type",
                "input_schema": {"type": "object"},
            },
            {"name": "mcp__s__t", "description": "an MCP tool", "input_schema": {"type": "object"}},
        ]
    answer = adapter.handle(session, tool_use("t1", "search_tool_bm25", {"query": "x"}))
    assert answer is not None and answer["is_error"] is True
    assert str(answer["content"]).startswith("Tool discovery is disabled.")


def test_a_host_that_drops_the_search_tool_sends_only_its_active_tools(index: ToolIndex) -> None:
    session = index.session("dropped", discovery_mode="all")
    session.set_active(["read"])
    assert tool_names(adapter.tools(session)) == ["read"]
    assert tool_names(adapter.tools(session, deferred=True)) == ["read"]
