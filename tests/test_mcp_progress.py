"""Long tool calls through ``serve``: progress notifications relayed from the upstream to the
client that asked for them, a call timeout of its own (``--call-timeout``) apart from the start
timeout, and the fields only a server's listing has kept in ``--expose-active`` listings. Real
parts: ``tool-index serve`` processes driven by the SDK's ``Client``, upstreams as processes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import types

from tests.mcp_helpers import (
    call,
    cli,
    eventually,
    search,
    stdio_gateway,
    text_of,
    upstream_entry,
    write_config,
)

pytestmark = pytest.mark.slow

MODES = ["auto", "legacy"]


def synced_slow(tmp_path: Path) -> tuple[str, Path]:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry("--slow")})
    done = cli(db, "sync", "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    return db, config


@pytest.mark.parametrize("mode", MODES)
def test_progress_is_relayed_and_a_call_may_outlast_the_start_timeout(tmp_path: Path, mode: str) -> None:
    db, config = synced_slow(tmp_path)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def run() -> None:
        options = ("--session", "s", "--timeout", "2", "--call-timeout", "30", "--expose-active")
        async with stdio_gateway(db, config, *options, mode=mode) as client:
            found = await search(client, "answer slowly reporting progress", limit=1)
            assert found["activated_tools"] == ["mcp__up__slow"]
            wrapped = {"name": "mcp__up__slow", "arguments": {"steps": 3}}
            result = await client.call_tool("call_tool", wrapped, progress_callback=progress)
            assert (text_of(result), result.is_error) == ("slow: 3 steps", False)  # 3 s, over --timeout
            assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            seen.clear()
            assert "mcp__up__slow" in [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("mcp__up__slow", {"steps": 1}, progress_callback=progress)
            assert (text_of(result), seen) == ("slow: 1 steps", [(1, 1, "step 1")])

            quiet = await call(client, "mcp__up__slow", {"steps": 1})  # no token asked: no progress
            assert (text_of(quiet), quiet.is_error) == ("slow: 1 steps", False)

    anyio.run(run)


def test_a_call_longer_than_the_call_timeout_is_an_error(tmp_path: Path) -> None:
    db, config = synced_slow(tmp_path)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s", "--call-timeout", "1") as client:
            await search(client, "answer slowly reporting progress", limit=1)
            late = await call(client, "mcp__up__slow", {"steps": 3})
            assert late.is_error
            assert text_of(late) == (
                "Calling mcp__up__slow failed: server 'up': slow did not answer within 1 s; the call was "
                "cancelled on the server."
            )

    anyio.run(run)


def assert_listed_whole(described: types.Tool) -> None:
    """``described`` as the upstream lists it: title, annotations, output schema and icons."""
    assert described.title == "A Described Tool"
    assert described.annotations == types.ToolAnnotations(read_only_hint=True, title="Described")
    assert described.output_schema == {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert described.icons == [types.Icon(src="https://example.com/icon.png", mime_type="image/png")]


@pytest.mark.parametrize("mode", MODES)
def test_expose_active_keeps_title_annotations_output_schema_and_icons(tmp_path: Path, mode: str) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"  # new: serve syncs it, and so reads its listing
    config = write_config(tmp_path, {"up": upstream_entry("--slow")})

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s", "--expose-active", mode=mode) as client:

            async def activated() -> list[str]:
                found = await client.call_tool(
                    "search_tool_bm25", {"query": "every optional field", "limit": 1}
                )
                return [] if found.is_error or "mcp__up__described" not in text_of(found) else ["yes"]

            await eventually(activated, "the tool is synced and activated")
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            described = listed["mcp__up__described"]
            assert_listed_whole(described)
            result = await client.call_tool("mcp__up__described", {})
            assert (result.structured_content, result.is_error) == ({"ok": True}, False)

    anyio.run(run)


def test_what_another_process_synced_is_listed_whole(tmp_path: Path) -> None:
    """The title, annotations, output schema and icons live in the catalog: a server synced by
    ``tool-index sync`` in another process is listed with them by a ``serve`` that never listed
    it itself, and ``call_tool`` describes the tool with them."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry("--slow")})
    assert cli(db, "sync", "--config", str(config)).returncode == 0

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s", "--expose-active") as client:
            await search(client, "every optional field", limit=1)
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            described = listed["mcp__up__described"]
            assert_listed_whole(described)
            answer = json.loads(text_of(await client.call_tool("call_tool", {"name": "mcp__up__described"})))
            assert answer["title"] == "A Described Tool"
            assert answer["annotations"] == {"readOnlyHint": True, "title": "Described"}

    anyio.run(run)
