"""What passes through ``serve`` besides tool calls: the whole of a tool's listing in
``call_tool``'s description. Real parts: ``tool-index serve`` processes driven by the SDK's
``Client``, upstreams (``tests/mcp_upstream.py``) as processes over stdio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import types

from tests.mcp_helpers import eventually, stdio_gateway, text_of, upstream_entry, write_config


def answer(result: types.CallToolResult) -> Any:
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


# call_tool's description


def test_call_tool_describes_a_tool_with_its_whole_listing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"  # new: serve syncs it, and so reads its listing
    config = write_config(tmp_path, {"up": upstream_entry("--slow")})

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s") as client:

            async def activated() -> bool:
                found = await client.call_tool(
                    "search_tool_bm25", {"query": "every optional field", "limit": 1}
                )
                return not found.is_error and "mcp__up__described" in text_of(found)

            await eventually(activated, "the tool is synced and activated")
            described = answer(await client.call_tool("call_tool", {"name": "mcp__up__described"}))
            assert described == {
                "name": "mcp__up__described",
                "title": "A Described Tool",
                "description": "A tool with every optional field a tool can have",
                "input_schema": {"type": "object"},
                "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                "annotations": {"readOnlyHint": True, "title": "Described"},
                "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
                "call": "call_tool with arguments",
            }

    anyio.run(run)
