"""The pydantic-ai toolset in real agent runs: ``FunctionModel`` playing the model, and once
pydantic-ai's own OpenAI model sending real requests to a scripted one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from discovery import ToolIndex
from discovery.adapters._names import wire_name
from discovery.adapters.pydantic_ai import DiscoveryToolset
from discovery.aio import AsyncToolIndex
from tests.providers import LONG_NAME, WIRE_NAME, ScriptedModel, catalog_index, chat_completion, tool_names

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
    recorded = [call for call in index.session_record("agent")["calls"] if call["kind"] == "tool_call"]
    assert [(call["params"]["tool"], call["params"]["is_error"]) for call in recorded] == [(LONG_NAME, False)]


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


def test_through_pydantic_ais_openai_model_the_real_requests_carry_wire_names(index: ToolIndex) -> None:
    """pydantic-ai's own OpenAI model sends the toolset's tools with the real SDK."""
    model = ScriptedModel(
        chat_completion(("c1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        chat_completion(("c2", WIRE, {"selector": "#next"})),
        chat_completion(text="done"),
    )
    client = openai.AsyncOpenAI(
        api_key="test",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model)),
        max_retries=0,
    )
    session = index.session("openai-agent", discovery_mode="all")
    calls: list[str] = []

    async def call(name: str, arguments: dict[str, Any]) -> str:
        calls.append(name)
        return f"ran {name}"

    agent_model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client))
    run = Agent(agent_model, toolsets=[DiscoveryToolset(session, call)]).run_sync("open the tab")
    first, second, third = model.requests
    assert tool_names(first["tools"]) == ["search_tool_bm25", "read", "bash"]
    assert tool_names(second["tools"]) == ["search_tool_bm25", "read", "bash", WIRE]
    (search_answer,) = [m for m in second["messages"] if m.get("tool_call_id") == "c1"]
    assert search_answer["content"] == (
        f'{{"query":"switch tab","activated_tools":["{WIRE}"],"match_count":1,"total_tools":5}}'
    )
    assert third["messages"][-1] == {"role": "tool", "tool_call_id": "c2", "content": f"ran {LONG_NAME}"}
    assert calls == [LONG_NAME] and run.output == "done"


def test_a_tool_the_toolset_did_not_list_never_reaches_the_host(index: ToolIndex) -> None:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import ToolsetTool
    from pydantic_ai.usage import RunUsage

    from discovery.adapters.pydantic_ai import _ARGUMENTS

    calls: list[str] = []
    toolset = DiscoveryToolset(
        index.session("p", discovery_mode="all"), lambda name, args: calls.append(name)
    )
    context: RunContext[Any] = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    foreign: ToolsetTool[Any] = ToolsetTool(
        toolset=toolset,
        tool_def=ToolDefinition(name="mcp__made_up__tool"),
        max_retries=1,
        args_validator=_ARGUMENTS,
    )
    with pytest.raises(ToolFailed, match="Unknown tool 'mcp__made_up__tool'"):
        asyncio.run(toolset.call_tool("mcp__made_up__tool", {}, context, foreign))
    assert calls == []
