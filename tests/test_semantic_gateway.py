"""The semantic signal through the MCP gateway: a real ``serve`` process over stdio, a real
upstream server, the SDK client; the index embedded with the tests' offline model."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from discovery import ToolIndex
from tests.mcp_helpers import call, cli, search, stdio_gateway, text_of, upstream_entry

pytestmark = pytest.mark.slow


def test_the_gateway_finds_tools_by_meaning_and_calls_them(tmp_path: Path, model_dir: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"up": upstream_entry()}}), encoding="utf-8")
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    # Lexically, "pause for a while" meets no tool's words and "hash of my secret" only "of".
    with ToolIndex.open(db) as index:
        assert [hit.name for hit in index.search("pause for a while", 1)] == []
        index.embed(str(model_dir))

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "meaning") as client:
            found = await search(client, "pause for a while", limit=1)
            assert found["activated_tools"] == ["mcp__up__stall"]
            found = await search(client, "hash of my secret", limit=1)
            assert found["activated_tools"] == ["mcp__up__token_digest"]
            answered = await call(client, "mcp__up__token_digest")
            assert not answered.is_error, text_of(answered)

    anyio.run(run)
