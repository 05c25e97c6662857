"""The first ``tools/list`` of ``serve``, answered before the library loads: the front gives the
answer the previous process stored, and only while the catalog, the session, the config scope and
the code are as they were when it was made. Real parts: SQLite files, the front under the SDK's
in-process client, ``tool-index serve`` processes with upstreams as processes."""

from __future__ import annotations

import dataclasses
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPDeprecationWarning

from discovery import ToolIndex
from discovery._mcp.config import load_config
from discovery._mcp.front import Front, first_answer_key
from discovery._mcp.gateway import Gateway, GatewayOptions
from discovery._mcp.scope import ToolFilter
from store import Store, stored_first_answer
from store._first_answers import KEPT
from store._location import plain_sqlite_file
from tests.mcp_helpers import WAIT, cli, eventually, search, stdio_gateway, upstream_entry, write_config

HANDSHAKE: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]
ANSWER = json.dumps({"tools": [{"name": "search_tool_bm25", "inputSchema": {"type": "object"}}]})


def keep(url: str, key: str, session_id: str | None, answer: str = ANSWER) -> None:
    """Store ``answer`` under ``key`` with the stamp of the database as it is now."""
    store = Store.at(url)
    try:
        with store.writing() as writer:
            stamp = writer.first_answers.stamp(session_id)
            assert stamp is not None
            writer.first_answers.keep(key, stamp, answer)
    finally:
        store.close()


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'tools.db'}"
    with ToolIndex.open(url, create=True) as index:
        index.upsert_tools([{"name": "mcp__github__create_issue", "description": "Create an issue"}])
    return url


def test_an_answer_is_given_while_the_catalog_is_as_it_was(url: str) -> None:
    keep(url, "k", None)
    assert stored_first_answer(url, "k", None) == ANSWER
    assert stored_first_answer(url, "other key", None) is None
    with ToolIndex.open(url) as index:
        index.upsert_tools([{"name": "mcp__slack__post", "description": "Post a message"}])
    assert stored_first_answer(url, "k", None) is None


def test_an_answer_for_a_session_is_not_given_once_the_session_changed(url: str) -> None:
    keep(url, "new", "s")  # made while the session was not stored
    assert stored_first_answer(url, "new", "s") == ANSWER
    with ToolIndex.open(url) as index:
        index.session("s", discovery_mode="all").search_tool.execute("c1", {"query": "issue"})
    assert stored_first_answer(url, "new", "s") is None
    keep(url, "searched", "s")
    assert stored_first_answer(url, "searched", "s") == ANSWER
    assert stored_first_answer(url, "searched", "another") is None
    with ToolIndex.open(url) as index:
        index.session("s").reset()
    assert stored_first_answer(url, "searched", "s") is None


def test_only_the_latest_answers_are_kept(url: str) -> None:
    for number in range(KEPT + 5):
        keep(url, f"key {number}", None)
    found = [number for number in range(KEPT + 5) if stored_first_answer(url, f"key {number}", None)]
    assert found == list(range(5, KEPT + 5))


@pytest.mark.parametrize(
    "damage",
    ["missing", "older schema", "garbage", "other database"],
)
def test_what_cannot_be_read_gives_no_answer_and_is_left_as_it_was(
    tmp_path: Path, url: str, damage: str
) -> None:
    path = Path(url.removeprefix("sqlite:///"))
    keep(url, "k", None)
    if damage == "missing":
        target = tmp_path / "absent.db"
        assert stored_first_answer(f"sqlite:///{target}", "k", None) is None
        assert not target.exists()
        return
    if damage == "older schema":
        with sqlite3.connect(path) as connection:
            connection.execute("DROP TABLE first_answers")
    elif damage == "garbage":
        path.write_bytes(b"not a database" * 100)
    before = path.read_bytes()
    given = url if damage != "other database" else "postgresql+psycopg://nobody@127.0.0.1:1/none"
    assert stored_first_answer(given, "k", None) is None
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////tmp/x.db", "/tmp/x.db"),
        ("sqlite:///x.db", "x.db"),
        ("/tmp/x.db", "/tmp/x.db"),
        ("sqlite:///x.db?timeout=5", None),
        ("sqlite+pysqlite:///x.db", None),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("file:x.db?mode=ro", None),
        ("postgresql://u@h/db", None),
        ("c:x.db", None),
        ("sqlite:///~/x.db", None),
        ("~/x.db", None),
        ("sqlite:///a%20b.db", None),
        ("a%41.db", None),
        ("", None),
    ],
)
def test_only_plain_sqlite_files_are_read_before_the_store_loads(url: str, path: str | None) -> None:
    assert plain_sqlite_file(url) == path


def test_the_key_covers_the_scope_the_session_and_the_listing_options() -> None:
    base: dict[str, Any] = {"session_id": "s", "mode": "mcp-only", "expose_active": False}
    key = first_answer_key(["a", "b"], ToolFilter(), **base)
    assert key == first_answer_key(["a", "b"], ToolFilter(), **base)
    others = [
        first_answer_key(["a"], ToolFilter(), **base),
        first_answer_key(["a", "b"], ToolFilter(deny=("a/x",)), **base),
        first_answer_key(["a", "b"], ToolFilter(allow=("a/*",)), **base),
        first_answer_key(["a", "b"], ToolFilter(), **{**base, "session_id": None}),
        first_answer_key(["a", "b"], ToolFilter(), **{**base, "mode": "all"}),
        first_answer_key(["a", "b"], ToolFilter(), **{**base, "expose_active": True}),
    ]
    assert len({key, *others}) == len(others) + 1


class Waiting:
    """A gateway that is still loading: the front's requests wait for it."""

    def __init__(self) -> None:
        self.shown: list[Any] = []

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="from_the_gateway", input_schema={"type": "object"})]
        )

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=f"called {params.name}")])

    async def listen(self, ctx: Any, params: Any) -> Any:
        raise NotImplementedError

    async def roots_changed(self) -> None:
        return None

    def input_schema(self, name: str) -> None:
        return None

    async def seen(self, ctx: Any) -> None:
        self.shown.append(ctx)


def test_the_front_gives_the_stored_answer_once_and_then_waits_for_the_gateway() -> None:
    async def run() -> None:
        reads: list[str] = []

        def read() -> str:
            reads.append(ANSWER)
            return ANSWER

        front = Front(expose_active=False, first_answer=read)
        gateway = Waiting()
        async with Client(front.server, read_timeout_seconds=WAIT, mode="legacy") as client:
            first = await client.list_tools()
            assert [tool.name for tool in first.tools] == ["search_tool_bm25"]
            assert front.answered_first and len(reads) == 1  # read when asked, and once
            with pytest.warns(MCPDeprecationWarning):  # handshake-era clients still send it
                await client.set_logging_level("info")  # the connection's own: answered at once
            answers: list[Any] = []

            async def ask() -> None:
                answers.append(await client.call_tool("search_tool_bm25", {"query": "x"}))
                answers.append(await client.list_tools())

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask)
                await anyio.sleep(0.2)
                assert answers == []  # waits for the gateway
                await front.attach(gateway)
            called, listed = answers
            assert called.content[0].text == "called search_tool_bm25"
            assert [tool.name for tool in listed.tools] == ["from_the_gateway"]
            assert len(gateway.shown) == 1  # the client the front answered is shown to the gateway

    anyio.run(run)


@pytest.mark.parametrize("stored", [None, "not json", '{"tools": "not a list"}', "[]"])
def test_without_a_stored_answer_the_first_list_is_the_gateways(stored: str | None) -> None:
    async def run() -> None:
        front = Front(expose_active=False, first_answer=lambda: stored)
        async with Client(front.server, read_timeout_seconds=WAIT, mode="legacy") as client:
            async with anyio.create_task_group() as tasks:
                listed: list[types.ListToolsResult] = []

                async def ask() -> None:
                    listed.append(await client.list_tools())

                tasks.start_soon(ask)
                await anyio.sleep(0.2)
                assert listed == []
                await front.attach(Waiting())
            assert [tool.name for tool in listed[0].tools] == ["from_the_gateway"]
            assert not front.answered_first

    anyio.run(run)


# ``tool-index serve`` processes


def stored(db: str) -> list[tuple[str, str]]:
    with sqlite3.connect(db.removeprefix("sqlite:///")) as connection:
        return connection.execute("SELECT key, answer FROM first_answers").fetchall()


def mark(db: str) -> None:
    """Rewrite every stored answer's description (its stamp unchanged): a start that gives the
    marked answer took it from the store, not from its gateway."""
    with sqlite3.connect(db.removeprefix("sqlite:///")) as connection:
        for key, answer in connection.execute("SELECT key, answer FROM first_answers").fetchall():
            marked = json.loads(answer)
            marked["tools"][0]["description"] = "MARKED"
            connection.execute("UPDATE first_answers SET answer = ? WHERE key = ?", (json.dumps(marked), key))


async def two_lists(db: str, config: Path, *args: str) -> tuple[types.ListToolsResult, types.ListToolsResult]:
    async with stdio_gateway(db, config, *args) as client:
        return await client.list_tools(), await client.list_tools()


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


def description(listed: types.ListToolsResult) -> str | None:
    return listed.tools[0].description


@pytest.mark.slow
def test_the_next_start_answers_from_the_stored_answer_until_something_it_depends_on_changes(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    first, again = anyio.run(two_lists, db, config, "--session", "s")
    assert first == again and len(stored(db)) == 1
    mark(db)
    early, later = anyio.run(two_lists, db, config, "--session", "s")
    assert description(early) == "MARKED"  # given before the gateway loaded
    assert later == first  # and then every list is the gateway's own
    # Another scope, another session: another key, answered by the gateway.
    mark(db)
    for args in (
        ("--session", "s", "--deny", "up/fail"),
        ("--session", "t"),
        ("--session", "s", "--mode", "all"),
    ):
        early, _ = anyio.run(two_lists, db, config, *args)
        assert description(early) != "MARKED", args
    # The catalog changed: the stored answer is not given.
    mark(db)
    more = write_config(tmp_path, {"up": upstream_entry("--tool", "added")})
    assert cli(db, "sync", "--config", str(more)).returncode == 0
    early, later = anyio.run(two_lists, db, config, "--session", "s")
    assert description(early) != "MARKED" and early == later


@pytest.mark.slow
def test_a_resumed_session_lists_its_active_tools_from_the_first_answer(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    args = ("--session", "s", "--expose-active")

    async def activate() -> None:
        async with stdio_gateway(db, config, *args) as client:
            await client.list_tools()
            await search(client, "echo text back")

    anyio.run(activate)
    early, later = anyio.run(two_lists, db, config, *args)
    assert "mcp__up__echo" in [tool.name for tool in early.tools]
    assert early == later
    mark(db)
    early, _ = anyio.run(two_lists, db, config, *args)
    assert description(early) == "MARKED"
    # The session changed in another process: the stored answer is not given.
    mark(db)
    assert cli(db, "session", "reset", "s").returncode == 0
    early, later = anyio.run(two_lists, db, config, *args)
    assert description(early) != "MARKED" and early == later
    assert "mcp__up__echo" not in [tool.name for tool in early.tools]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_serve_as_the_client_leaving_does(tmp_path: Path, stop: signal.Signals) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
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
    key = first_answer_key(["up"], ToolFilter(), session_id="s", mode="mcp-only", expose_active=False)
    assert stored_first_answer(db, key, "s") is not None  # stored as the session is now


def test_a_damaged_session_row_gives_no_answer_and_no_error(url: str) -> None:
    with ToolIndex.open(url) as index:
        index.session("s", discovery_mode="all").search_tool.execute("c1", {"query": "issue"})
    keep(url, "k", "s")
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("UPDATE sessions SET selected = CAST(selected AS BLOB) WHERE id = 's'")
    assert stored_first_answer(url, "k", "s") is None  # another state now, read without an error
    keep(url, "k", "s")  # the stamp of a damaged row is a stamp all the same
    assert stored_first_answer(url, "k", "s") == ANSWER


def test_a_config_applied_while_the_answer_is_made_leaves_nothing_stored(tmp_path: Path, url: str) -> None:
    """The answer is made from the config in force when the gateway began to make it; one applied
    meanwhile (here at the first await, where the config watcher could apply it) would have the
    old config's key name the new scope's answer."""
    with ToolIndex.open(url) as index:
        index.upsert_tools([{"name": "mcp__slack__post", "description": "Post a message"}])
    both = write_config(tmp_path, {"github": {"command": "true"}, "slack": {"command": "true"}})
    config = load_config(both)
    fewer = dataclasses.replace(config, servers={"github": config.servers["github"]})
    key = first_answer_key(
        ["github", "slack"], ToolFilter(), session_id=None, mode="mcp-only", expose_active=False
    )

    async def run() -> None:
        with ToolIndex.open(url) as index:
            gateway = Gateway(index, config, GatewayOptions())
            async with gateway:
                with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
                    connection.execute("DELETE FROM first_answers")
                run_in_library = gateway.library.run

                async def reloading(work: Any, *args: Any) -> Any:
                    done = await run_in_library(work, *args)
                    if gateway.config is config:
                        await gateway.apply_config(fewer)
                    return done

                gateway.library.run = reloading  # type: ignore[method-assign]
                await gateway._keep_first_answer()
                assert gateway.config is fewer

    anyio.run(run)
    assert stored_first_answer(url, key, None) is None


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_answer_stored_after_a_first_start_has_the_tools_it_synced(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})  # never synced: serve syncs it

    async def first_start() -> None:
        async with stdio_gateway(db, config) as client:

            async def synced() -> bool:
                return "up (6 tools)" in (description(await client.list_tools()) or "")

            await eventually(synced, "the background sync")

    anyio.run(first_start)
    key = first_answer_key(["up"], ToolFilter(), session_id=None, mode="mcp-only", expose_active=False)
    stored_answer = stored_first_answer(db, key, None)
    assert stored_answer is not None and "up (6 tools)" in stored_answer
    mark(db)
    early, later = anyio.run(two_lists, db, config)
    assert description(early) == "MARKED" and "up (6 tools)" in (description(later) or "")
