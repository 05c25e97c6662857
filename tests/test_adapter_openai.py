"""The OpenAI adapter against the real ``openai`` SDK (Chat Completions and Responses), whose
requests go to a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from discovery import ToolIndex
from discovery.adapters import openai as adapter
from discovery.adapters._names import wire_name
from tests.providers import (
    LONG_NAME,
    WIRE_NAME,
    ScriptedModel,
    catalog_index,
    chat_completion,
    function_call,
    output_text,
    response,
    tool_names,
    tool_search_call,
)

WIRE = wire_name(LONG_NAME)
CONTENT = f'{{"query":"switch tab","activated_tools":["{WIRE}"],"match_count":1,"total_tools":5}}'


@pytest.fixture
def index(tmp_path: Path) -> ToolIndex:
    return catalog_index(tmp_path)


def client(model: ScriptedModel) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="test", base_url="http://127.0.0.1:9/v1", http_client=model.http_client(), max_retries=0
    )


def chat(index: ToolIndex, model: ScriptedModel) -> list[str]:
    """The Chat Completions host loop; returns the catalog names of the calls it routed."""
    session = index.session("chat", discovery_mode="all")
    sdk = client(model)
    messages: list[Any] = [{"role": "user", "content": "click the link that opens a tab"}]
    routed: list[str] = []
    while True:
        reply = sdk.chat.completions.create(
            model="gpt-test",
            messages=messages,
            tools=adapter.chat_tools(session),  # type: ignore[arg-type]
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return routed
        for call in message.tool_calls:
            answer = adapter.handle_chat(session, call)
            if answer is None:
                assert call.type == "function"
                name = str(adapter.catalog_name(session, call.function.name))
                routed.append(name)
                answer = {"role": "tool", "tool_call_id": call.id, "content": f"ran {name}"}
            messages.append(answer)


def offered(body: dict[str, Any], part: str) -> str:
    (wire,) = [name for name in tool_names(body["tools"]) if part in name]
    return wire


def test_chat_a_search_activates_a_long_named_tool_and_the_host_routes_its_call(index: ToolIndex) -> None:
    model = ScriptedModel(
        chat_completion(("call_1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        lambda body: chat_completion(("call_2", offered(body, "playwright"), {"selector": "#next"})),
        chat_completion(text="done"),
    )
    assert chat(index, model) == [LONG_NAME]
    first, second, third = model.requests
    assert model.paths == ["/v1/chat/completions"] * 3
    assert tool_names(first["tools"]) == ["search_tool_bm25", "read", "bash"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["query"]
    assert tool_names(second["tools"]) == ["search_tool_bm25", "read", "bash", WIRE]
    assert all(WIRE_NAME.fullmatch(name) for name in tool_names(second["tools"]))
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": CONTENT}
    assert third["messages"][-1] == {"role": "tool", "tool_call_id": "call_2", "content": f"ran {LONG_NAME}"}


def test_chat_a_refused_call_answers_with_the_spec_message(index: ToolIndex) -> None:
    model = ScriptedModel(
        chat_completion(("call_1", "search_tool_bm25", {"query": ""})), chat_completion(text="sorry")
    )
    assert chat(index, model) == []
    assert model.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Query is required and must not be empty.",
    }


def test_chat_arguments_that_are_not_json_are_refused_and_logged(index: ToolIndex) -> None:
    session = index.session("bad", discovery_mode="all")
    call = {"id": "c", "type": "function", "function": {"name": "search_tool_bm25", "arguments": "{not json"}}
    answer = adapter.handle_chat(session, call)
    assert answer == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "Query is required and must not be empty.",
    }
    (logged,) = [call for call in index.session_record("bad")["calls"] if call["kind"] == "search"]
    assert logged["params"] == {"value": "{not json"}


def responses(index: ToolIndex, model: ScriptedModel, *, tool_search: bool = False) -> list[str]:
    """The Responses host loop; returns the catalog names of the calls it routed."""
    session = index.session("responses", discovery_mode="all")
    sdk = client(model)
    items: list[Any] = [{"role": "user", "content": "click the link that opens a tab"}]
    routed: list[str] = []
    while True:
        reply = sdk.responses.create(
            model="gpt-test",
            input=items,
            tools=adapter.responses_tools(session, tool_search=tool_search),  # type: ignore[arg-type]
        )
        answers: list[dict[str, Any]] = []
        for item in reply.output:
            items.append(item.model_dump(exclude_none=True))
            answer = adapter.handle_response(session, item)
            if answer is None and item.type == "function_call":
                name = str(adapter.catalog_name(session, item.name))
                routed.append(name)
                answer = {"type": "function_call_output", "call_id": item.call_id, "output": f"ran {name}"}
            if answer is not None:
                answers.append(answer)
        if not answers:
            return routed
        items.extend(answers)


def test_responses_a_search_activates_a_long_named_tool_and_the_host_routes_its_call(
    index: ToolIndex,
) -> None:
    model = ScriptedModel(
        response(function_call("call_1", "search_tool_bm25", {"query": "switch tab", "limit": 1})),
        lambda body: response(function_call("call_2", offered(body, "playwright"), {"selector": "#next"})),
        response(output_text("done")),
    )
    assert responses(index, model) == [LONG_NAME]
    first, second, third = model.requests
    assert model.paths == ["/v1/responses"] * 3
    assert first["tools"][0] == {
        "type": "function",
        "name": "search_tool_bm25",
        "description": first["tools"][0]["description"],
        "parameters": first["tools"][0]["parameters"],
        "strict": False,
    }
    assert first["tools"][0]["description"].startswith("Search hidden tool metadata")
    assert tool_names(second["tools"]) == ["search_tool_bm25", "read", "bash", WIRE]
    assert all(WIRE_NAME.fullmatch(name) for name in tool_names(second["tools"]))
    assert second["input"][-1] == {"type": "function_call_output", "call_id": "call_1", "output": CONTENT}
    assert third["input"][-1]["output"] == f"ran {LONG_NAME}"


def test_responses_a_refused_call_answers_with_the_spec_message(index: ToolIndex) -> None:
    model = ScriptedModel(
        response(function_call("call_1", "search_tool_bm25", {"query": " "})), response(output_text("sorry"))
    )
    assert responses(index, model) == []
    assert model.requests[1]["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "Query is required and must not be empty.",
    }


def test_client_tool_search_answers_with_the_activated_definitions(index: ToolIndex) -> None:
    model = ScriptedModel(
        response(tool_search_call("call_1", {"query": "switch tab", "limit": 1})),
        lambda body: response(function_call("call_2", WIRE, {"selector": "#next"})),
        response(output_text("done")),
    )
    assert responses(index, model, tool_search=True) == [LONG_NAME]
    first, second, _ = model.requests
    search = first["tools"][0]
    assert {key: search[key] for key in ("type", "execution")} == {
        "type": "tool_search",
        "execution": "client",
    }
    assert search["parameters"]["properties"]["query"] == {
        "type": "string",
        "description": "tool search query",
    }
    assert tool_names(first["tools"][1:]) == ["read", "bash"]
    output = second["input"][-1]
    assert {key: output[key] for key in ("type", "call_id", "execution", "status")} == {
        "type": "tool_search_output",
        "call_id": "call_1",
        "execution": "client",
        "status": "completed",
    }
    (definition,) = output["tools"]
    assert definition["name"] == WIRE and WIRE_NAME.fullmatch(WIRE)
    assert definition["parameters"] == {"type": "object", "properties": {"selector": {"type": "string"}}}
    # The definition reaches the model through the conversation, not the tool list.
    assert tool_names(second["tools"][1:]) == ["read", "bash"]
    assert json.loads(index.session_record("responses")["calls"][-1]["content"])["activated_tools"] == [
        LONG_NAME
    ]


def test_client_tool_search_refused_loads_nothing(index: ToolIndex) -> None:
    session = index.session("refused", discovery_mode="all")
    answer = adapter.handle_response(session, tool_search_call("call_1", {"query": ""}))
    assert answer == {
        "type": "tool_search_output",
        "call_id": "call_1",
        "execution": "client",
        "status": "completed",
        "tools": [],
    }
    (logged,) = [call for call in index.session_record("refused")["calls"] if call["kind"] == "search"]
    assert logged["error"] == "Query is required and must not be empty."


@pytest.mark.parametrize("arguments", ['{"query": ', "[1, 2]", "[" * 100_000])
def test_the_host_never_runs_a_call_whose_arguments_are_not_an_object(
    index: ToolIndex, arguments: str
) -> None:
    session = index.session("args", discovery_mode="all")
    calls: list[str] = []
    answer = adapter.run_chat_tool(
        session,
        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": arguments}},
        lambda name, args: calls.append(name),
    )
    assert answer == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "read: the arguments must be a JSON object.",
    }
    item = {"type": "function_call", "call_id": "c2", "name": "mcp__made_up", "arguments": "{}"}
    output = adapter.run_response_tool(session, item, lambda name, args: calls.append(name))
    assert output["call_id"] == "c2" and output["output"].startswith("Unknown tool 'mcp__made_up'")
    assert calls == []
    ran = adapter.run_response_tool(
        session, {**item, "name": "read", "arguments": '{"path": "x"}'}, lambda n, a: f"ran {n} {a}"
    )
    assert ran == {"type": "function_call_output", "call_id": "c2", "output": "ran read {'path': 'x'}"}
