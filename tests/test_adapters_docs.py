"""The loops of "Use from a Python agent" run as written, each against its real SDK and a
scripted model, so the section cannot rot."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from discovery import ToolIndex
from discovery.adapters._names import wire_name
from tests.providers import (
    LONG_NAME,
    REPO_ROOT,
    ScriptedModel,
    anthropic_message,
    catalog_index,
    chat_completion,
    tool_names,
    tool_use,
)

DOCUMENT = REPO_ROOT / "README.md"
SECTION = "Use from a Python agent"
WIRE = wire_name(LONG_NAME)


def python_blocks() -> list[str]:
    """The fenced Python blocks of the section, in order."""
    text = DOCUMENT.read_text(encoding="utf-8")
    body = text.split(f"## {SECTION}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, flags=re.DOTALL)


ANTHROPIC, CHAT, PYDANTIC_AI, ASYNCIO = python_blocks()


class Host:
    """The host's own ``call_tool``, recording what it was asked to run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, arguments: dict[str, Any]) -> str:
        self.calls.append((name, arguments))
        return f"ran {name}"


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ToolIndex:
    monkeypatch.chdir(tmp_path)
    return catalog_index(tmp_path)


def run(block: str, **names: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(names)
    exec(compile(block, str(DOCUMENT), "exec"), namespace)  # the section's own code, as a user runs it
    return namespace


def test_the_anthropic_loop(index: ToolIndex) -> None:
    model = ScriptedModel(
        anthropic_message(tool_use("toolu_1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        anthropic_message(tool_use("toolu_2", WIRE, {"selector": "#next"})),
        anthropic_message({"type": "text", "text": "done"}),
    )
    client = anthropic.Anthropic(
        api_key="test", base_url="http://127.0.0.1:9", http_client=model.http_client(), max_retries=0
    )
    host = Host()
    run(ANTHROPIC, client=client, session=index.session("a", discovery_mode="all"), call_tool=host)
    assert host.calls == [(LONG_NAME, {"selector": "#next"})]
    assert WIRE in tool_names(model.requests[1]["tools"])
    assert model.requests[2]["messages"][-1]["content"][0]["content"] == f"ran {LONG_NAME}"
    assert len(model.requests) == 3


def test_the_openai_chat_loop(index: ToolIndex) -> None:
    model = ScriptedModel(
        chat_completion(("call_1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        chat_completion(("call_2", WIRE, {"selector": "#next"})),
        chat_completion(text="done"),
    )
    client = openai.OpenAI(
        api_key="test", base_url="http://127.0.0.1:9/v1", http_client=model.http_client(), max_retries=0
    )
    host = Host()
    run(CHAT, client=client, session=index.session("c", discovery_mode="all"), call_tool=host)
    assert host.calls == [(LONG_NAME, {"selector": "#next"})]
    assert WIRE in tool_names(model.requests[1]["tools"])
    assert model.requests[2]["messages"][-1]["content"] == f"ran {LONG_NAME}"
    assert len(model.requests) == 3


UNMAPPED = ["mcp__made_up__tool", "mcp__github__create_issue", WIRE[:-1] + "0", LONG_NAME]
"""Names the model may call that no tool of the session has: made up, a catalog tool not active
yet, a wire name with another digest, a catalog name instead of its wire name."""


@pytest.mark.parametrize("name", UNMAPPED)
def test_the_anthropic_loop_never_gives_the_host_a_name_it_could_not_map(index: ToolIndex, name: str) -> None:
    model = ScriptedModel(
        anthropic_message(tool_use("toolu_1", name, {"x": 1})),
        anthropic_message({"type": "text", "text": "ok"}),
    )
    client = anthropic.Anthropic(
        api_key="test", base_url="http://127.0.0.1:9", http_client=model.http_client(), max_retries=0
    )
    host = Host()
    run(ANTHROPIC, client=client, session=index.session("a", discovery_mode="all"), call_tool=host)
    assert host.calls == []
    result = model.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and result["content"].startswith(f"Unknown tool {name!r}")


@pytest.mark.parametrize("name", UNMAPPED)
def test_the_openai_chat_loop_never_gives_the_host_a_name_it_could_not_map(
    index: ToolIndex, name: str
) -> None:
    model = ScriptedModel(chat_completion(("call_1", name, {"x": 1})), chat_completion(text="ok"))
    client = openai.OpenAI(
        api_key="test", base_url="http://127.0.0.1:9/v1", http_client=model.http_client(), max_retries=0
    )
    host = Host()
    run(CHAT, client=client, session=index.session("c", discovery_mode="all"), call_tool=host)
    assert host.calls == []
    assert model.requests[1]["messages"][-1]["content"].startswith(f"Unknown tool {name!r}")


def test_the_pydantic_ai_agent(index: ToolIndex, capsys: pytest.CaptureFixture[str]) -> None:
    offered: list[list[str]] = []

    def play(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([tool.name for tool in info.function_tools])
        steps = [
            ToolCallPart("search_tool_bm25", {"query": "switch tab", "limit": 1}, tool_call_id="c1"),
            ToolCallPart(WIRE, {"selector": "#next"}, tool_call_id="c2"),
        ]
        return ModelResponse(
            parts=[steps[len(offered) - 1]] if len(offered) <= len(steps) else [TextPart("done")]
        )

    host = Host()
    session = index.session("p", discovery_mode="all")
    run(PYDANTIC_AI, model=FunctionModel(play), session=session, call_tool=host)
    assert host.calls == [(LONG_NAME, {"selector": "#next"})]
    assert offered[0] == ["search_tool_bm25", "read", "bash"] and WIRE in offered[1]
    assert capsys.readouterr().out == "done\n"


def test_the_asyncio_snippet(index: ToolIndex) -> None:
    code = compile(ASYNCIO, str(DOCUMENT), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    coroutine = eval(code, namespace)  # top-level await: the block as an asyncio REPL runs it
    assert coroutine is not None
    asyncio.run(coroutine)
    assert namespace["result"].details["activated_tools"] == ["mcp__github__create_issue"]
    asyncio.run(namespace["index"].close())
