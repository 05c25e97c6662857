"""A model behind a mock HTTP transport, for driving the real provider SDKs, and the catalog the
adapter tests share.

The SDKs build and send their real requests; ``ScriptedModel`` answers each with the next
scripted reply, which may be built from the request (to call a tool the request offered), and
keeps every request body as sent. Nothing leaves the process: the transport is in memory and the
base URLs name loopback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from discovery import ToolIndex
from tests.conftest import migrated_sqlite_url

REPO_ROOT = Path(__file__).resolve().parent.parent

Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]

WIRE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
LONG_NAME = "mcp__playwright-executeautomation__playwright_click_and_switch_tab"
"""A real catalog name, two characters longer than the providers accept."""
ODD_NAME = "mcp__docs.example/search pages"
"""A name with characters the providers refuse."""

CATALOG: list[dict[str, Any]] = [
    {
        "name": "read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {}}},
    },
    {"name": "bash", "description": "Run a shell command"},
    {
        "name": "mcp__github__create_issue",
        "description": "Create a GitHub issue in the selected repository",
        "input_schema": {
            "type": "object",
            "properties": {"repo": {"type": "string"}, "title": {"type": "string"}},
        },
    },
    {"name": "mcp__slack__post_message", "description": "Post a message to a Slack channel"},
    {
        "name": LONG_NAME,
        "description": "Click a link that opens a new browser tab and switch to that tab",
        "input_schema": {"type": "object", "properties": {"selector": {"type": "string"}}},
    },
    {"name": ODD_NAME, "description": "Search the pages of the documentation site"},
    {"name": "calendar_lookup", "description": "Look up events in a calendar", "load_mode": "discoverable"},
]


def catalog_index(directory: Path, records: list[dict[str, Any]] | None = None) -> ToolIndex:
    """A SQLite file holding ``records`` (the shared catalog by default)."""
    index = ToolIndex.open(migrated_sqlite_url(directory / "tools.db"))
    index.upsert_tools(CATALOG if records is None else records)
    return index


class ScriptedModel:
    """Plays the model: the next reply for each request; ``requests`` holds the bodies sent."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.paths.append(request.url.path)
        if not self.replies:
            return httpx2.Response(500, json={"error": {"message": "the script has no more replies"}})
        reply = self.replies.pop(0)
        return httpx2.Response(200, json=reply(body) if callable(reply) else reply)

    def http_client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """Names of a request's tools, in the Anthropic / Responses shape or the Chat shape."""
    return [tool["function"]["name"] if "function" in tool else tool["name"] for tool in tools]


def anthropic_message(*content: dict[str, Any]) -> dict[str, Any]:
    stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def chat_completion(*tool_calls: tuple[str, str, dict[str, Any]], text: str | None = None) -> dict[str, Any]:
    calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for call_id, name, arguments in tool_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
    }


def response(*output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "status": "completed",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def tool_search_call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_search_call",
        "id": f"ts_{call_id}",
        "call_id": call_id,
        "execution": "client",
        "arguments": arguments,
        "status": "completed",
    }


def output_text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
