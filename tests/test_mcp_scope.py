"""What a gateway offers: the tools of its config's servers that its filters allow, with
``--allow``/``--deny`` and the config's ``toolIndex`` object, at search and call time (a sync
stores every tool and counts what the filters leave out). Real
parts: ``tool-index`` processes and upstream servers run as processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from discovery import ToolIndex
from tests.mcp_helpers import call, cli, search, stdio_gateway, text_of, upstream_entry

pytestmark = pytest.mark.slow

UP_TOOLS = ["echo", "fail", "crash", "grow", "token_digest", "stall"]


def config_file(tmp_path: Path, servers: dict[str, Any], **options: Any) -> Path:
    path = tmp_path / "mcp.json"
    document: dict[str, Any] = {"mcpServers": servers}
    if options:
        document["toolIndex"] = options
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def names(db: str, server: str) -> list[str]:
    with ToolIndex.open(db) as index:
        return [tool.name for tool in index.tools(server=server)]


def test_sync_stores_every_tool_and_counts_what_the_filters_leave_out(tmp_path: Path) -> None:
    """Filters are a host's view: the catalog, shared with other hosts, gets every listed tool."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = config_file(tmp_path, {"up": upstream_entry("--tools", "3")}, deny=["up/crash"])
    every = [f"mcp__up__{tool}" for tool in UP_TOOLS] + [f"mcp__up__filler_00{i}" for i in range(3)]
    done = cli(db, "sync", "--config", str(config), "--deny", "up/filler_*")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "up: added 9, updated 0, unchanged 0, removed 0; 4 not offered by this config's filters\n",
        "",
    )
    assert sorted(names(db, "up")) == sorted(every)
    # With allow patterns only matching tools are offered, and deny still wins over allow.
    done = cli(
        db, "sync", "--config", str(config), "--allow", "up/e*", "--allow", "up/f*", "--deny", "up/fail"
    )
    assert (
        done.stdout
        == "up: added 0, updated 0, unchanged 9, removed 0; 5 not offered by this config's filters\n"
    )
    assert sorted(names(db, "up")) == sorted(every)
    done = cli(db, "sync", "--config", str(config_file(tmp_path, {"up": upstream_entry("--tools", "3")})))
    assert done.stdout == "up: added 0, updated 0, unchanged 9, removed 0\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"allow": "up/*"}, "toolIndex.allow: expected a list of server/tool patterns"),
        ({"deny": [""]}, "toolIndex.deny: expected a list of server/tool patterns"),
        ({"block": []}, "toolIndex.block: unknown field (use allow and deny)"),
    ],
)
def test_bad_filters_in_the_config(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    config = config_file(tmp_path, {"up": upstream_entry()}, **options)
    done = cli(f"sqlite:///{tmp_path / 'tools.db'}", "sync", "--config", str(config))
    assert (done.returncode, done.stderr) == (1, f"Error: {config}: {message}\n")


def test_serve_finds_and_calls_only_tools_in_its_scope(tmp_path: Path) -> None:
    """The database also holds the example catalog and every tool of 'up', from an unfiltered sync;
    the gateway's config has only 'up' and denies 'up/fail' and 'up/crash'."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    assert cli(db, "import", "--example").returncode == 0
    unfiltered = config_file(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(unfiltered)).returncode == 0
    # A search outside the gateway (no scope) activates the denied tool in the session first.
    done = cli(
        db, "search", "--session", "s", "--mode", "mcp-only", "always reports a failure", "--limit", "1"
    )
    assert done.returncode == 0, done.stderr
    config = config_file(tmp_path, {"up": upstream_entry()}, deny=["up/crash"])

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s", "--deny", "up/fail") as client:
            listed = await client.list_tools()
            description = listed.tools[0].description or ""
            assert "Servers: up (4 tools); 4 tools in all." in description
            found = await search(client, "kill the process; report a failure; create an issue", limit=8)
            assert all(name.startswith("mcp__up__") for name in found["activated_tools"])
            assert not {"mcp__up__crash", "mcp__up__fail"} & set(found["activated_tools"])
            assert found["total_tools"] == 4
            assert (await search(client, "create an issue in a repository"))["activated_tools"] == []
            denied = await call(client, "mcp__up__fail")
            assert denied.is_error
            assert text_of(denied) == (
                "'mcp__up__fail' is not allowed by this gateway's tool filters: the deny pattern "
                "'up/fail' matches 'up/fail'."
            )
            elsewhere = await call(client, "mcp__gitforge__create_issue", {"title": "x"})
            assert elsewhere.is_error
            assert text_of(elsewhere) == (
                "'mcp__gitforge__create_issue' is not a tool of a server this gateway fronts "
                "(its servers: up)."
            )
            assert (await search(client, "echo a text back", limit=1))["activated_tools"] == ["mcp__up__echo"]
            echoed = await call(client, "mcp__up__echo", {"text": "in scope"})
            assert not echoed.is_error, text_of(echoed)

    anyio.run(run)


def test_expose_active_lists_only_tools_in_scope(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    assert cli(db, "import", "--example").returncode == 0
    config = config_file(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    # Activated outside the gateway: an example tool and a tool the gateway denies.
    for query in ("create an issue in a repository", "always reports a failure", "echo a text back"):
        done = cli(db, "search", "--session", "s", "--mode", "mcp-only", query, "--limit", "1")
        assert done.returncode == 0, done.stderr

    async def run() -> None:
        args = ("--session", "s", "--expose-active", "--deny", "up/fail")
        async with stdio_gateway(db, config, *args) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            assert listed == ["search_tool_bm25", "call_tool", "mcp__up__echo"]
            refused = await client.call_tool("mcp__up__fail", {})
            assert refused.is_error and "not allowed by this gateway's tool filters" in text_of(refused)

    anyio.run(run)
