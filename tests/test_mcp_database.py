"""The gateway and its database: PostgreSQL connections named after the command and host; an
outage (the server stopped under a running gateway, a SQLite file locked) told to each client as
an error to retry, said once on stderr when it starts and once when it ends, and recovered from
without a restart; and a call in the log before it is forwarded, so a gateway killed during it
leaves its trace.

Real parts: PostgreSQL servers (the test server of ``TOOL_INDEX_TEST_PG``, or one of the test's
own that it stops and starts again; skipped without the PostgreSQL tier), SQLite files,
``tool-index serve`` processes and the SDK's client."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client, MCPError
from sqlalchemy import create_engine, make_url, text

from tests.conftest import PG_ENV, REPO
from tests.mcp_helpers import (
    WAIT,
    call,
    cli,
    eventually,
    gateway_process,
    http_gateway,
    search,
    text_of,
    upstream_entry,
    write_config,
)


@contextmanager
def own_database() -> Iterator[tuple[str, str]]:
    """A new, empty database on the PostgreSQL test server, dropped afterwards: its URL and name
    (what ``pg_stat_activity`` tells its connections apart by)."""
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(f"set {PG_ENV} to a PostgreSQL URL to run the gateway on PostgreSQL")
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server).set(database=name).render_as_string(hide_password=False), name
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def applications(server_url: str, database: str) -> set[str]:
    """The ``application_name`` of every connection to ``database`` now."""
    engine = create_engine(server_url)
    try:
        with engine.connect() as connection:
            query = text("SELECT application_name FROM pg_stat_activity WHERE datname = :name")
            rows = connection.execute(query, {"name": database})
            return {str(row[0]) for row in rows}
    finally:
        engine.dispose()


def test_a_gateway_connects_to_postgresql_as_tool_index_serve_at_its_host(tmp_path: Path) -> None:
    with own_database() as (url, name):
        config = write_config(tmp_path, {"up": upstream_entry()})
        with http_gateway(url, config):
            # The gateway has answered its start from the database, so its connection is open.
            assert applications(os.environ[PG_ENV], name) == {f"tool-index serve@{socket.gethostname()}"[:63]}


class OwnServer:
    """A PostgreSQL server of the test's own (``.ci/postgres.sh``), which it can stop and start."""

    def __init__(self) -> None:
        if not os.environ.get(PG_ENV):
            pytest.skip(f"set {PG_ENV} (the PostgreSQL tier) to stop and start a server of the test's own")
        exports = self._script("start").stdout
        found = dict(line.removeprefix("export ").split("=", 1) for line in exports.splitlines())
        self.url, self.directory = found[PG_ENV], found["TOOL_INDEX_PG_DIR"]

    def _script(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(REPO / ".ci" / "postgres.sh"), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=WAIT * 2,
        )

    def pause(self) -> None:
        self._script("pause", self.directory)

    def resume(self) -> None:
        self._script("resume", self.directory)

    def remove(self) -> None:
        self._script("stop", self.directory)


@contextmanager
def own_server() -> Iterator[OwnServer]:
    server = OwnServer()
    try:
        yield server
    finally:
        server.remove()


@contextmanager
def gateway_logging_to(db: str, config: Path, stderr: Path) -> Iterator[str]:
    with gateway_process(db, config, stderr) as (_, url):
        yield url


@pytest.mark.slow
def test_a_database_outage_is_an_error_to_retry_said_once_and_ends_by_itself(tmp_path: Path) -> None:
    with own_server() as server:
        config = write_config(tmp_path, {"up": upstream_entry()})
        assert cli(server.url, "sync", "--config", str(config)).returncode == 0
        stderr = tmp_path / "serve.err"
        with gateway_logging_to(server.url, config, stderr) as url:

            async def run() -> None:
                async with Client(f"{url}?session=s", cache=None, read_timeout_seconds=WAIT) as client:
                    assert "mcp__up__echo" in (await search(client, "echo a text"))["activated_tools"]
                    assert not (await call(client, "mcp__up__echo", {"text": "before"})).is_error
                    server.pause()
                    for _ in range(3):
                        failed = await client.call_tool("search_tool_bm25", {"query": "echo a text"})
                        assert failed.is_error and "unreachable" in text_of(failed), text_of(failed)
                        assert "try again" in text_of(failed) and server.url not in text_of(failed)
                        refused = await call(client, "mcp__up__echo", {"text": "during"})
                        assert refused.is_error and "unreachable" in text_of(refused), text_of(refused)
                    await client.list_tools()  # the session in memory lists without the database
                    async with Client(f"{url}?session=t", cache=None, read_timeout_seconds=WAIT) as other:
                        with pytest.raises(MCPError, match="unreachable"):  # one read from it first
                            await other.list_tools()
                    server.resume()
                    found = await search(client, "echo a text")
                    assert {"name": "mcp__up__echo", "active": True}.items() <= found["tools"][0].items()
                    assert not (await call(client, "mcp__up__echo", {"text": "after"})).is_error

            anyio.run(run)
        said = stderr.read_text()
        assert said.count("the catalog database cannot be used") == 1, said
        assert said.count("the catalog database answers again") == 1, said
        assert "Internal server error" not in said and "Traceback" not in said
        shown = cli(server.url, "session", "show", "s", "--json")
        logged = json.loads(shown.stdout)["calls"]
        # Nothing was done during the outage, so nothing of it is logged: two calls, each started.
        assert [entry["params"]["tool"] for entry in logged if entry["kind"] == "tool_call"] == [
            "mcp__up__echo"
        ] * 2
        assert [entry["outcome_logged"] for entry in logged if entry["kind"] == "tool_call_start"] == [
            True
        ] * 2


@pytest.mark.slow
def test_a_sqlite_file_locked_past_its_timeout_is_a_busy_error_to_retry_said_once(tmp_path: Path) -> None:
    path = tmp_path / "tools.db"
    db = f"sqlite:///{path}?timeout=0.2"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    stderr = tmp_path / "serve.err"
    with gateway_logging_to(db, config, stderr) as url:

        async def run() -> None:
            async with Client(f"{url}?session=s", cache=None, read_timeout_seconds=WAIT) as client:
                await search(client, "echo a text")
                locker = sqlite3.connect(path, isolation_level=None)
                locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
                for _ in range(3):
                    failed = await client.call_tool("search_tool_bm25", {"query": "echo a text"})
                    assert failed.is_error and "busy" in text_of(failed) and "try again" in text_of(failed)
                    assert str(path) not in text_of(failed)
                locker.execute("ROLLBACK")
                locker.close()
                await search(client, "echo a text")

        anyio.run(run)
    said = stderr.read_text()
    assert said.count("the catalog database cannot be used") == 1, said
    assert said.count("the catalog database answers again") == 1, said


@pytest.mark.slow
def test_a_call_is_logged_before_it_is_forwarded_so_a_killed_gateway_leaves_its_trace(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0

    def started() -> list[dict[str, Any]]:
        shown = cli(db, "session", "show", "s", "--json")
        calls = json.loads(shown.stdout)["calls"] if shown.returncode == 0 else []
        return [entry for entry in calls if entry["kind"] == "tool_call_start"]

    with gateway_process(db, config, tmp_path / "serve.err") as (process, url):

        async def run() -> None:
            async with Client(f"{url}?session=s", cache=None, read_timeout_seconds=WAIT) as client:
                assert "mcp__up__stall" in (await search(client, "wait a long time"))["activated_tools"]
                async with anyio.create_task_group() as group:
                    group.start_soon(call, client, "mcp__up__stall")  # its server never answers

                    async def forwarded() -> bool:
                        return bool(await anyio.to_thread.run_sync(started))

                    await eventually(forwarded, "the call's start was never logged")
                    process.kill()  # the gateway dies with the call in flight
                    process.wait(timeout=WAIT)
                    group.cancel_scope.cancel()

        with contextlib.suppress(Exception):  # the client's connection broke: its own errors
            anyio.run(run)
    assert process.returncode == -signal.SIGKILL
    [start] = started()
    assert start["params"] == {"tool": "mcp__up__stall", "server": "up", "call": start["params"]["call"]}
    assert start["outcome_logged"] is False
    shown = cli(db, "session", "show", "s").stdout
    assert "tool_call_start mcp__up__stall (server up): started, no outcome logged" in shown


async def calls_then_signal_while_locked(
    url: str, process: subprocess.Popen[bytes], path: Path, stop: signal.Signals, held: float, calls: int
) -> int:
    """Calls answered in a session, then the file's write lock taken by another connection, the
    signal sent, and the lock let go ``held`` seconds later; how many calls were answered."""
    answered = 0
    async with Client(url, cache=None, read_timeout_seconds=WAIT) as client:
        await search(client, "echo a text back", limit=1)
        for i in range(calls):
            answered += not (await call(client, "mcp__up__echo", {"text": str(i)})).is_error
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        process.send_signal(stop)
        await anyio.sleep(held)
        locker.execute("ROLLBACK")
        locker.close()
    return answered


@pytest.mark.slow
@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
def test_a_signal_while_the_log_is_being_written_loses_no_answered_call(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """Right after the last answer, another process takes the file's write lock, so the log's
    write of that call waits on it, and the signal comes; the lock is let go a moment later, a
    different moment each round. Every round the gateway exits 0 with every answered call logged."""
    path = tmp_path / "tools.db"
    db = f"sqlite:///{path}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    calls = 3
    for round_, held in enumerate((0.0, 0.05, 0.2, 0.5)):
        stderr = tmp_path / f"serve-{round_}.err"
        with gateway_process(db, config, stderr) as (process, url):
            answered = anyio.run(
                calls_then_signal_while_locked, f"{url}?session=s{round_}", process, path, stop, held, calls
            )
            assert process.wait(timeout=WAIT) == 0, stderr.read_text()
        shown = json.loads(cli(db, "session", "show", f"s{round_}", "--json").stdout)
        outcomes = [entry for entry in shown["calls"] if entry["kind"] == "tool_call"]
        assert (answered, len(outcomes)) == (calls, calls), round_
        assert all(entry["outcome_logged"] for entry in shown["calls"] if entry["kind"] == "tool_call_start")
