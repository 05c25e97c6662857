"""The pydantic-ai toolset in a real agent run, with ``FunctionModel`` playing the model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from discovery import ToolIndex
from discovery.adapters.names import wire_name
from discovery.adapters.pydantic_ai import DiscoveryToolset
from discovery.aio import AsyncToolIndex
from tests.providers import LONG_NAME, WIRE_NAME, catalog_index

WIRE = wire_name(LONG_NAME)


@pytest.fixture
def index(tmp_path: Path) -> ToolIndex:
    return catalog_index(tmp_path)


class Script:
    """Plays the model: one scripted step per request; records the tools each request offered."""

    def __init__(self, *steps: list[ToolCallPart]) -> None:
        self.steps = list(steps)
        self.offered: list[dict[str, Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append({tool.name: tool for tool in info.function_tools})
        if not self.steps:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=list(self.steps.pop(0)))


def search(call_id: str, query: str, limit: int = 1) -> ToolCallPart:
    return ToolCallPart("search_tool_bm25", {"query": query, "limit": limit}, tool_call_id=call_id)


def returns(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    return {
        part.tool_call_id: part
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def test_the_agents_tools_grow_as_it_searches_and_activated_tools_run_through_the_host(
    index: ToolIndex,
) -> None:
    session = index.session("agent", discovery_mode="all")
    calls: list[tuple[str, dict[str, Any]]] = []

    async def call(name: str, arguments: dict[str, Any]) -> str:
        calls.append((name, arguments))
        return f"ran {name}"

    script = Script(
        [search("c1", "switch tab")],
        [ToolCallPart(WIRE, {"selector": "#next"}, tool_call_id="c2")],
    )
    run = Agent(FunctionModel(script), toolsets=[DiscoveryToolset(session, call)]).run_sync("open the tab")
    assert [list(offered) for offered in script.offered] == [
        ["search_tool_bm25", "read", "bash"],
        ["search_tool_bm25", "read", "bash", WIRE],
        ["search_tool_bm25", "read", "bash", WIRE],
    ]
    assert all(WIRE_NAME.fullmatch(name) for name in script.offered[1])
    definition = script.offered[1][WIRE]
    assert definition.parameters_json_schema == {
        "type": "object",
        "properties": {"selector": {"type": "string"}},
    }
    assert definition.description == "Click a link that opens a new browser tab and switch to that tab"
    assert script.offered[0]["search_tool_bm25"].description.startswith("Search hidden tool metadata")
    answers = returns(run.all_messages())
    assert answers["c1"].content == (
        f'{{"query":"switch tab","activated_tools":["{WIRE}"],"match_count":1,"total_tools":5}}'
    )
    assert calls == [(LONG_NAME, {"selector": "#next"})]
    assert answers["c2"].content == f"ran {LONG_NAME}"
    assert run.output == "done"
    assert session.selected == [LONG_NAME]


def test_a_refused_search_is_a_failed_tool_result_with_the_spec_message(index: ToolIndex) -> None:
    session = index.session("refused", discovery_mode="all")
    script = Script([search("c1", "  ")])
    run = Agent(
        FunctionModel(script), toolsets=[DiscoveryToolset(session, lambda name, args: None)]
    ).run_sync("go")
    answer = returns(run.all_messages())["c1"]
    assert answer.content == "Query is required and must not be empty."
    assert answer.outcome == "failed"
    assert list(script.offered[1]) == ["search_tool_bm25", "read", "bash"]


def test_a_plain_function_as_the_host_call_and_an_async_session(tmp_path: Path) -> None:
    catalog_index(tmp_path).close()

    async def main() -> tuple[list[ModelMessage], list[str]]:
        async with await AsyncToolIndex.open(f"sqlite:///{tmp_path / 'tools.db'}") as index:
            session = await index.session("async-agent", discovery_mode="mcp-only")
            script = Script(
                [search("c1", "github issue")],
                [ToolCallPart("mcp__github__create_issue", {"title": "crash"}, tool_call_id="c2")],
            )
            toolset = DiscoveryToolset(session, lambda name, args: f"{name}: {args['title']}")
            run = await Agent(FunctionModel(script), toolsets=[toolset]).run("file it")
            return run.all_messages(), await session.selected()

    messages, selected = asyncio.run(main())
    assert returns(messages)["c2"].content == "mcp__github__create_issue: crash"
    assert selected == ["mcp__github__create_issue"]
