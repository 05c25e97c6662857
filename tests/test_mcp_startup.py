"""What ``sync`` and ``serve`` make of a database: the analyzer of a new one, what ``serve``
says on stderr when it starts, and how it ends. Real parts: ``tool-index`` processes, upstreams as
processes."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from discovery import ToolIndex
from discovery._text import enhanced
from tests.mcp_helpers import HANDSHAKE, WAIT, cli, stdio_gateway, synced_into, upstream_entry, write_config

pytestmark = pytest.mark.slow


def raw_serve(db: str, config: Path, messages: list[dict[str, Any]], *args: str) -> subprocess.Popen[str]:
    """``tool-index serve`` as a process, written to without a client library: ``messages`` sent
    at once, and its stdin left open, as a client that waits for its answers leaves it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "discovery.cli", "--db", db, "serve", "--config", str(config), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    process.stdin.write("".join(json.dumps(message) + "\n" for message in messages))
    process.stdin.flush()
    return process


def analyzer_of(db: str) -> str:
    with ToolIndex.open(db, create=False) as index:
        return index.analyzer


def test_a_new_database_gets_the_enhanced_analyzer_and_an_existing_one_keeps_its_own(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"up": upstream_entry()})
    new = f"sqlite:///{tmp_path / 'new.db'}"
    assert cli(new, "sync", "--config", str(config)).returncode == 0
    assert analyzer_of(new) == "enhanced"
    chosen = f"sqlite:///{tmp_path / 'chosen.db'}"
    assert cli(chosen, "sync", "--config", str(config), "--analyzer", "reference").returncode == 0
    assert analyzer_of(chosen) == "reference"
    existing = f"sqlite:///{tmp_path / 'existing.db'}"
    assert cli(existing, "import", "--example").returncode == 0
    done = cli(existing, "sync", "--config", str(config))
    assert (done.returncode, done.stderr) == (0, "")
    assert analyzer_of(existing) == "reference"
    refused = cli(existing, "sync", "--config", str(config), "--analyzer", "enhanced")
    assert refused.returncode == 1 and refused.stderr.startswith("Error: ")
    assert "reindex" in refused.stderr
    unknown = cli(f"sqlite:///{tmp_path / 'x.db'}", "sync", "--config", str(config), "--analyzer", "fancy")
    assert unknown.returncode == 1 and "fancy" in unknown.stderr
    assert not (tmp_path / "x.db").exists()


def test_sync_and_serve_rebuild_a_catalog_of_an_older_analyzer_version(tmp_path: Path) -> None:
    """The gateway's own database, made by an older release's ``enhanced``: rebuilt on the way in,
    said once, rather than refused until the user runs ``reindex``; a newer release's is refused."""
    config = write_config(tmp_path, {"up": upstream_entry()})
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    assert cli(db, "sync", "--config", str(config)).returncode == 0

    def recorded(analyzer: str) -> None:
        with sqlite3.connect(tmp_path / "tools.db") as connection:
            connection.execute(
                "UPDATE catalog_state SET analyzer = ?, generation = generation + 1", (analyzer,)
            )

    recorded("enhanced")  # how version 1 recorded itself
    assert cli(db, "search", "echo").returncode == 1  # refused until rebuilt
    done = cli(db, "sync", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"Reindexed 6 tools with version {enhanced.VERSION} of the enhanced analyzer "
        "(the catalog was made with version 1)\n"
    )
    assert cli(db, "search", "echo a text back").returncode == 0
    assert cli(db, "verify").returncode == 0
    recorded("enhanced/99")
    refused = cli(db, "sync", "--config", str(config))
    assert refused.returncode == 1 and "from a newer tool-index" in refused.stderr


def test_serve_says_which_database_and_how_many_tools_each_server_has(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    synced_into(db, tmp_path)
    config = write_config(tmp_path, {"up": upstream_entry(), "later": upstream_entry()})
    errlog = tmp_path / "serve-stderr.txt"

    async def run(db: str) -> None:
        with errlog.open("w") as stream:
            # Its tools in scope are counted: the filter leaves one of the six stored out.
            args = ("--session", "s", "--deny", "up/stall")
            async with stdio_gateway(db, config, *args, errlog=stream) as client:
                await client.list_tools()

    anyio.run(run, db)
    lines = errlog.read_text().splitlines()
    assert lines[:2] == [
        f"tool-index serve: database {db} (analyzer enhanced)",
        f"tool-index serve: servers of {config}: up 5 tools, later 0 tools",
    ]
    assert not any("Warning" in line for line in lines)
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    anyio.run(run, empty)
    lines = errlog.read_text().splitlines()
    assert lines[:3] == [
        f"tool-index serve: database {empty} (analyzer enhanced)",
        f"tool-index serve: servers of {config}: up 0 tools, later 0 tools",
        f"tool-index serve: Warning: no server of {config} has tools in this database yet: syncing them "
        "in the background; searches find their tools once each is synced",
    ]


SERVE_AND_SAY_WHAT_WAS_LOADED = """
import atexit, sys
atexit.register(lambda: print("loaded:", *sorted({"numpy", "alembic"} & set(sys.modules)), file=sys.stderr))
from discovery.cli._main import main
main(sys.argv[1:])
"""


def test_a_gateway_answers_its_first_tools_list_without_loading_numpy_or_alembic(tmp_path: Path) -> None:
    # What a start needs is imported, the rest when first used: numpy by the first search (and
    # alembic only to migrate). A gateway opens its session over a catalog holding tools out of
    # its scope (another server's) and answers tools/list, then its client leaves.
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    synced_into(db, tmp_path, {"up": upstream_entry(), "other": upstream_entry("--tool", "elsewhere")})
    config = write_config(tmp_path, {"up": upstream_entry()})
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE_AND_SAY_WHAT_WAS_LOADED, "--db", db, "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("".join(json.dumps(message) + "\n" for message in HANDSHAKE))
    process.stdin.flush()
    listed = None
    for line in process.stdout:  # until the answer to tools/list: then the client leaves
        answer = json.loads(line)
        if answer.get("id") == 2:
            listed = answer
            break
    _, err = process.communicate(timeout=WAIT)  # closes stdin: the client has gone
    assert listed is not None and "tools" in listed["result"], err
    assert process.returncode == 0, err
    assert err.splitlines()[-1] == "loaded:"


@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
def test_a_signal_ends_serve_as_the_client_leaving_does(tmp_path: Path, stop: signal.Signals) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = synced_into(db, tmp_path)
    search = {"name": "search_tool_bm25", "arguments": {"query": "echo text"}}
    messages = [*HANDSHAKE[:2], {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search}]
    process = raw_serve(db, config, messages, "--session", "s")
    assert process.stdin is not None and process.stdout is not None
    for line in process.stdout:
        if json.loads(line).get("id") == 2:
            break
    process.send_signal(stop)
    process.wait(timeout=WAIT)  # its stdin still open, as a client that signals may leave it
    assert process.stderr is not None
    err = process.stderr.read()
    assert process.returncode == 0 and "Traceback" not in err, err
    process.stdin.close()
    shown = cli(db, "session", "show", "s", "--json")
    kinds = [call["kind"] for call in json.loads(shown.stdout)["calls"]]
    assert kinds[-2:] == ["search", "pin"]  # the pin of what it activated, written on the way out


def answered(process: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any]:
    """Send ``message`` to a ``raw_serve`` process and read lines until its answer."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()
    for line in process.stdout:
        answer: dict[str, Any] = json.loads(line)
        if answer.get("id") == message["id"]:
            return answer
    raise AssertionError(f"no answer to {message['method']}")  # pragma: no cover


@pytest.mark.parametrize("after", [0.0, 0.01, 0.05])
def test_a_client_that_closes_stdin_then_signals_ends_serve_with_its_calls_logged(
    tmp_path: Path, after: float
) -> None:
    """As the SDK's stdio client leaves a server that is slow to go (stdin closed, then SIGTERM),
    however soon the signal follows: the process exits 0 with every answered call logged."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = synced_into(db, tmp_path)
    for round_ in range(3):
        process = raw_serve(db, config, HANDSHAKE[:2], "--session", f"s{round_}")
        assert process.stdin is not None and process.stderr is not None
        search = {"name": "search_tool_bm25", "arguments": {"query": "echo a text back", "limit": 1}}
        request = {"jsonrpc": "2.0", "method": "tools/call"}
        assert "error" not in answered(process, {**request, "id": 2, "params": search})
        for number in range(3, 6):
            echo = {"name": "call_tool", "arguments": {"name": "mcp__up__echo", "arguments": {"text": "hi"}}}
            assert not answered(process, {**request, "id": number, "params": echo})["result"]["isError"]
        process.stdin.close()
        time.sleep(after)
        process.send_signal(signal.SIGTERM)
        err = process.stderr.read()
        assert process.wait(timeout=WAIT) == 0 and "Traceback" not in err, err
        shown = json.loads(cli(db, "session", "show", f"s{round_}", "--json").stdout)
        assert [call["kind"] for call in shown["calls"]].count("tool_call") == 3, round_


def test_a_gateway_that_cannot_open_ends_serve_with_its_error_while_the_client_waits(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "import", "--example").returncode == 0
    with sqlite3.connect(tmp_path / "tools.db") as connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    process = raw_serve(db, config, HANDSHAKE)
    assert process.stdin is not None and process.stderr is not None
    process.wait(timeout=WAIT)  # the client waits for its tools/list, its stdin open
    err = process.stderr.read()
    assert process.returncode == 1 and err.startswith("Error: ") and "9999" in err, err
    process.stdin.close()
