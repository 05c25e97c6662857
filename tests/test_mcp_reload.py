"""``serve`` on a first start (servers never synced are synced in the background while it answers)
and while its config file changes (applied without a restart, a bad edit ignored). Real parts:
``tool-index serve`` processes driven by the SDK's ``Client``, upstream servers as processes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.session import IncomingMessage

from discovery import ToolIndex
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


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_a_first_start_syncs_the_servers_never_synced_while_it_answers(db_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"up": upstream_entry("--start-delay", "1")})
    errlog = tmp_path / "serve-stderr.txt"
    notes: list[IncomingMessage] = []

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(
                db_url,
                config,
                "--session",
                "s",
                "--expose-active",
                errlog=stream,
                mode="legacy",
                on_message=notes.append,
            ) as client:
                listed = await client.list_tools()  # at once: the server is still starting
                assert [tool.name for tool in listed.tools] == ["search_tool_bm25", "call_tool"]

                async def found() -> list[str]:
                    result = await client.call_tool(
                        "search_tool_bm25", {"query": "echo a text back", "limit": 1}
                    )
                    return list(json.loads(text_of(result))["activated_tools"]) if not result.is_error else []

                assert await eventually(found, "the synced tools are found") == ["mcp__up__echo"]
                echoed = await call(client, "mcp__up__echo", {"text": "first"})
                assert (text_of(echoed), echoed.is_error) == ("echo: first", False)

                async def told() -> bool:
                    return any(isinstance(note, types.ToolListChangedNotification) for note in notes)

                await eventually(told, "the client is told to list its tools again")
                described = (await client.list_tools()).tools[0].description or ""
                assert "up (" in described  # the search tool's description counts the new tools

    anyio.run(run)
    lines = lines_of(errlog)
    assert lines[0] == f"tool-index serve: database {db_url} (analyzer enhanced)"
    assert lines[1] == f"tool-index serve: servers of {config}: up 0 tools"
    assert lines[2] == (
        f"tool-index serve: Warning: no server of {config} has tools in this database yet: syncing them "
        "in the background; searches find their tools once each is synced"
    )
    assert any(line.startswith("tool-index serve: sync up: added 6") for line in lines), lines
    with ToolIndex.open(db_url, create=False) as index:
        assert len(index.tools(server="up")) == 6


def test_only_the_servers_never_synced_are_synced_at_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    state = tmp_path / "state.json"
    synced = write_config(tmp_path, {"up": upstream_entry("--state", str(state))})
    assert cli(db, "sync", "--config", str(synced)).returncode == 0
    state.write_text(json.dumps({"echo": "Changed since the last sync"}), encoding="utf-8")
    config = write_config(tmp_path, {"up": upstream_entry("--state", str(state)), "later": upstream_entry()})
    errlog = tmp_path / "serve-stderr.txt"

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(db, config, "--session", "s", errlog=stream) as client:

                async def later_synced() -> bool:
                    return bool((await search(client, "filler", limit=1))["total_tools"] == 12)

                await eventually(later_synced, "server later is synced")

    anyio.run(run)
    lines = lines_of(errlog)
    assert f"tool-index serve: servers of {config}: up 6 tools, later 0 tools" in lines
    assert "tool-index serve: syncing in the background, never synced before: later" in lines
    assert not any("Warning" in line or "sync up:" in line for line in lines), lines
    with ToolIndex.open(db, create=False) as index:
        assert (
            index.tool("mcp__up__echo").description == "Echo a text back, as text and as structured content"
        )


def test_a_changed_config_is_applied_without_a_restart(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    errlog = tmp_path / "serve-stderr.txt"
    extra = upstream_entry("--tool", "special_lookup")

    def rewrite(servers: dict[str, Any]) -> None:
        write_config(tmp_path, servers)

    async def said(text: str, count: int = 1) -> None:
        async def check() -> bool:
            return sum(text in line for line in lines_of(errlog)) >= count

        await eventually(check, f"serve says {text!r}")

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(
                db, config, "--session", "s", "--expose-active", errlog=stream
            ) as client:
                assert (await search(client, "echo a text back", limit=1))["activated_tools"] == [
                    "mcp__up__echo"
                ]

                rewrite({"up": upstream_entry(), "extra": extra})  # a server added
                await said("reloaded: added extra")
                await said("sync extra: added 7")
                found = await search(client, "special_lookup", limit=1)
                assert found["activated_tools"] == ["mcp__extra__special_lookup"]
                done = await call(client, "mcp__extra__special_lookup")
                assert (text_of(done), done.is_error) == ("special_lookup: done", False)

                changed = upstream_entry("--tool", "special_lookup", "--tool", "second_gadget")
                rewrite({"up": upstream_entry(), "extra": changed})  # an entry changed: restarted
                await said("reloaded: changed extra")
                await said("sync extra: ", 2)
                assert (await search(client, "second_gadget", limit=1))["activated_tools"] == [
                    "mcp__extra__second_gadget"
                ]
                done = await call(client, "mcp__extra__second_gadget")
                assert (text_of(done), done.is_error) == ("second_gadget: done", False)

                rewrite({"extra": changed})  # a server removed: its tools leave search and lists
                await said("reloaded: removed up")
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert names == [
                    "search_tool_bm25",
                    "call_tool",
                    "mcp__extra__special_lookup",
                    "mcp__extra__second_gadget",
                ]
                refused = await call(client, "mcp__up__echo", {"text": "x"})
                assert refused.is_error and "is not a tool of a server this gateway fronts" in text_of(
                    refused
                )
                left = await search(client, "echo a text back filler", limit=50)
                assert not [name for name in left["activated_tools"] if name.startswith("mcp__up__")]
                assert left["total_tools"] == 8  # extra's tools: a rich answer ranks the active ones too

                config.write_text('{"mcpServers": {"extra": ', encoding="utf-8")  # a bad edit
                await said("the config is unchanged (serving its previous version)")
                done = await call(client, "mcp__extra__special_lookup")
                assert (text_of(done), done.is_error) == ("special_lookup: done", False)

                rewrite({"up": upstream_entry(), "extra": changed})  # back: the session kept its tools
                await said("reloaded: added up")
                echoed = await call(client, "mcp__up__echo", {"text": "again"})
                assert (text_of(echoed), echoed.is_error) == ("echo: again", False)

    anyio.run(run)
    warning = [line for line in lines_of(errlog) if "Warning" in line]
    assert warning == [
        f"tool-index serve: Warning: {config}:1: invalid JSON: Expecting value (column 26); the config is "
        "unchanged (serving its previous version)"
    ]
    with ToolIndex.open(db, create=False) as index:
        assert [summary.id for summary in index.sessions()] == ["s"]
        record = index.session_record("s")
    assert record["selected"][:3] == [
        "mcp__up__echo",
        "mcp__extra__special_lookup",
        "mcp__extra__second_gadget",
    ]
    assert cli(db, "verify").returncode == 0


def test_new_filters_in_the_config_apply_while_it_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = tmp_path / "mcp.json"
    servers = {"up": upstream_entry()}
    config.write_text(
        json.dumps({"mcpServers": servers, "toolIndex": {"deny": ["up/echo"]}}), encoding="utf-8"
    )
    errlog = tmp_path / "serve-stderr.txt"

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(db, config, "--session", "s", errlog=stream) as client:

                async def synced() -> bool:
                    return any("sync up: added 6" in line for line in lines_of(errlog))

                await eventually(synced, "the first start syncs every tool of up, echo included")
                assert (
                    "mcp__up__echo"
                    not in (await search(client, "echo a text back", limit=3))["activated_tools"]
                )
                config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")  # deny no more

                async def found() -> list[str]:
                    return list((await search(client, "echo a text back", limit=1))["activated_tools"])

                assert await eventually(found, "echo is offered and found") == ["mcp__up__echo"]
                echoed = await call(client, "mcp__up__echo", {"text": "now"})
                assert (text_of(echoed), echoed.is_error) == ("echo: now", False)

    anyio.run(run)
    lines = lines_of(errlog)
    assert f"tool-index serve: config {config} reloaded: filters changed" in lines
    # The catalog held echo all along: new filters change the view, with no second sync.
    assert [line for line in lines if line.startswith("tool-index serve: sync up:")] == [
        "tool-index serve: sync up: added 6, updated 0, unchanged 0, removed 0"
    ]


def test_a_config_that_cannot_be_read_leaves_the_previous_one_in_force(tmp_path: Path) -> None:
    """Each way a config file can turn unreadable while serve runs: one warning line, the previous
    config in force, and searches answered all along (the file is read in a worker, bounded)."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    good = config.read_text(encoding="utf-8")
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    errlog = tmp_path / "serve-stderr.txt"
    aside = tmp_path / "aside"

    def replaced_by(make: Callable[[Path], object]) -> None:
        make(aside)
        os.replace(aside, config)

    def zero() -> None:
        replaced_by(lambda path: path.symlink_to("/dev/zero"))

    def fifo() -> None:
        replaced_by(os.mkfifo)

    def directory() -> None:
        config.unlink()
        config.mkdir()

    def truncated() -> None:
        replaced_by(lambda path: path.write_text(good[: len(good) // 2], encoding="utf-8"))

    ways: dict[str, Callable[[], None]] = {
        "/dev/zero": zero,
        "a FIFO": fifo,
        "a directory": directory,
        "deleted": config.unlink,
        "truncated": truncated,
    }

    async def said(text: str, count: int) -> None:
        async def check() -> bool:
            return sum(text in line for line in lines_of(errlog)) >= count

        await eventually(check, f"serve says {text!r} {count} times")

    def restore(round_: int) -> None:
        if config.is_dir():
            config.rmdir()
        elif config.exists() or config.is_symlink():
            config.unlink()
        config.write_text(good + " " * round_, encoding="utf-8")  # a new digest: said when applied

    async def grow_for(seconds: float) -> None:
        with config.open("a", encoding="utf-8") as stream:
            for _ in range(int(seconds * 50)):
                stream.write("x")
                stream.flush()
                await anyio.sleep(0.02)

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(db, config, "--session", "s", errlog=stream) as client:
                # The watcher runs once the gateway has loaded, and knows the file once it says so.
                assert (await search(client, "echo a text back", limit=1))["total_tools"] == 6
                config.write_text(good + "\n", encoding="utf-8")
                await said("reloaded: nothing that serve uses changed", 1)
                for round_, (way, make) in enumerate(ways.items(), start=1):
                    make()
                    await said("Warning: ", round_)
                    found = await search(client, "echo a text back", limit=1)
                    assert found["total_tools"] == 6, way  # the config's tools, echo counted too
                    await anyio.sleep(2)  # the watcher has seen it again: still one line
                    restore(round_)
                    await said("reloaded: nothing that serve uses changed", round_ + 1)
                async with anyio.create_task_group() as writers:
                    writers.start_soon(grow_for, 4)
                    for _ in range(8):
                        assert (await search(client, "echo a text back", limit=1))["total_tools"] == 6
                        await anyio.sleep(0.5)
                await said("Warning: ", len(ways) + 1)
                echoed = await call(client, "mcp__up__echo", {"text": "still"})
                assert (text_of(echoed), echoed.is_error) == ("echo: still", False)

    anyio.run(run)
    warnings = [
        line.removeprefix("tool-index serve: Warning: ") for line in lines_of(errlog) if "Warning" in line
    ]
    unreadable = f"{config}: cannot read: not a regular file; serving its previous version"
    assert warnings[:3] == [unreadable] * 3
    assert warnings[3] == f"{config}: cannot read: No such file or directory; serving its previous version"
    assert warnings[4].startswith(f"{config}:") and "the config is unchanged" in warnings[4]
    assert len(warnings) == 6, warnings  # the growing file: one line however often it changed
