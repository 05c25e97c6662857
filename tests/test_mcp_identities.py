"""Identities and sessions over HTTP: ``serve --tokens`` makes each token an identity of the
gateway's realm, whose sessions no other identity reaches (ids are per identity); a session is
stored when it first changes; opening one reads only its rows; what the gateway keeps per session
and per connection stays bounded.

Real parts: ``tool-index serve`` processes (or, where the test must look at the gateway's memory,
the gateway served over real HTTP in the test's process) driven by the SDK's ``Client``, upstream
servers as processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import gc
import io
import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from discovery import ToolIndex
from discovery._mcp.config import load_config
from discovery._mcp.gateway import Gateway
from discovery._mcp.options import GatewayOptions
from discovery._mcp.serve import TokensError, http_app, load_tokens
from discovery._mcp.sessions import GatewaySession
from store import _driver as driver
from tests.mcp_helpers import (
    call,
    cli,
    eventually,
    http_gateway,
    process_announcing,
    search,
    synced_into,
    text_of,
    upstream_entry,
    write_config,
)

ALICE, BOB = "alice-secret-4f1e9a", "bob-secret-77c2d0"


def tokens_file(directory: Path) -> Path:
    path = directory / "tokens.json"
    path.write_text(json.dumps({"alice": ALICE, "bob": BOB}), encoding="utf-8")
    return path


@asynccontextmanager
async def as_identity(url: str, secret: str, *, mode: str = "auto") -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(url, http_client=http), cache=None, mode=mode) as client:
        yield client


def record(db: str, session_id: str, identity: str = "local") -> dict[str, Any]:
    with ToolIndex.open(db, create=False) as index:
        return index.session_record(session_id, identity=identity)


def stored_ids(db: str) -> list[str]:
    with ToolIndex.open(db, create=False) as index:
        return sorted(summary.id for summary in index.sessions())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_session_ids_are_per_identity(db_url: str, tmp_path: Path, mode: str) -> None:
    """bob naming alice's session id gets a session of his own: he neither reaches hers nor
    learns that it exists; nor does alice reach a session made without tokens."""
    config = synced_into(db_url, tmp_path)
    assert cli(db_url, "search", "echo", "--session", "made-locally", "--mode", "mcp-only").returncode == 0
    local_before = record(db_url, "made-locally")
    tokens = ("--tokens", str(tokens_file(tmp_path)), "--realm", "team")
    with http_gateway(db_url, config, *tokens, "--expose-active") as url:

        async def run() -> None:
            async with as_identity(f"{url}?session=work", ALICE, mode=mode) as alice:
                await search(alice, "echo a text back", limit=1)
                echoed = await call(alice, "mcp__up__echo", {"text": "hi"})
                assert (text_of(echoed), echoed.is_error) == ("echo: hi", False)

            async def logged() -> dict[str, Any] | None:  # the call is logged after its answer
                now = record(db_url, "work", "alice@team")
                return now if now["calls"][-1]["kind"] == "tool_call" else None

            before = await eventually(logged, "alice's call is logged")
            async with as_identity(f"{url}?session=work", BOB, mode=mode) as bob:
                listed = await bob.list_tools()  # a new session's tools: nothing of alice's
                assert [tool.name for tool in listed.tools] == ["search_tool_bm25", "call_tool"]
                not_active = await call(bob, "mcp__up__echo", {"text": "bob"})
                assert not_active.is_error and "is not active in this session" in text_of(not_active)
                assert "alice" not in text_of(not_active)
                assert (await search(bob, "echo a text back", limit=1))["activated_tools"] == [
                    "mcp__up__echo"
                ]
                assert not (await call(bob, "mcp__up__echo", {"text": "bob"})).is_error
            async with as_identity(f"{url}?session=made-locally", ALICE, mode=mode) as alice:
                await search(alice, "echo a text back", limit=1)

            async def bob_logged() -> dict[str, Any] | None:
                now = record(db_url, "work", "bob@team")
                return now if now["calls"][-1]["kind"] == "tool_call" else None

            await eventually(bob_logged, "bob's call is logged")
            assert record(db_url, "work", "alice@team") == before  # bob changed nothing of alice's

        anyio.run(run)
    assert record(db_url, "made-locally") == local_before
    listed = json.loads(cli(db_url, "sessions", "--json").stdout)
    assert sorted((entry["identity"], entry["id"]) for entry in listed) == [
        ("alice@team", "made-locally"),
        ("alice@team", "work"),
        ("bob@team", "work"),
        ("local", "made-locally"),
    ]
    assert not [
        entry
        for entry in listed
        if entry["id"] == "work"
        and not entry["opened_by"].startswith(f"tool-index serve --config {config.resolve()} on ")
    ]
    shown = cli(db_url, "session", "show", "work", "--identity", "bob@team").stdout
    assert "  identity: bob@team\n" in shown
    if db_url.startswith("sqlite"):
        stored = b"".join(path.read_bytes() for path in tmp_path.glob("tools.db*"))
        assert ALICE.encode() not in stored and BOB.encode() not in stored
    assert cli(db_url, "verify").returncode == 0


@pytest.mark.slow
def test_a_connection_of_one_identity_is_refused_to_another(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = synced_into(db, tmp_path)
    with http_gateway(db, config, "--tokens", str(tokens_file(tmp_path))) as url:

        async def run() -> None:
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            initialize = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            async with httpx2.AsyncClient() as http:
                opened = await http.post(
                    url, json=initialize, headers={**headers, "Authorization": f"Bearer {ALICE}"}
                )
                assert opened.status_code == 200
                connection = opened.headers["mcp-session-id"]
                listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
                stolen = await http.post(
                    url,
                    json=listing,
                    headers={**headers, "Authorization": f"Bearer {BOB}", "Mcp-Session-Id": connection},
                )
                assert stolen.status_code == 404  # as if alice's connection did not exist

        anyio.run(run)


@pytest.mark.slow
def test_read_only_requests_store_no_session(db_url: str, tmp_path: Path) -> None:
    config = synced_into(db_url, tmp_path)
    with http_gateway(db_url, config, "--expose-active") as url:

        async def run() -> None:
            for mode in ("auto", "legacy"):
                async with Client(f"{url}?session=ghost-{mode}", cache=None, mode=mode) as ghost:
                    listed = await ghost.list_tools()
                    assert [tool.name for tool in listed.tools] == ["search_tool_bm25", "call_tool"]
                    assert "up (6 tools)" in (listed.tools[0].description or "")
                    refused = await call(ghost, "mcp__up__echo", {"text": "x"})
                    assert refused.is_error and "is not active in this session" in text_of(refused)
                    unknown = await ghost.call_tool("call_tool", {"name": "mcp__up__nope"})
                    assert unknown.is_error
                    assert (await ghost.call_tool("nope", {})).is_error
            assert stored_ids(db_url) == []
            async with Client(f"{url}?session=real", cache=None) as real:
                described = await real.call_tool("call_tool", {"name": "mcp__up__echo"})
                assert described.is_error  # not active: a refusal, not stored
                assert stored_ids(db_url) == []
                await search(real, "echo a text back", limit=1)  # the first change stores it
                assert stored_ids(db_url) == ["real"]
                described = await real.call_tool("call_tool", {"name": "mcp__up__echo"})
                assert not described.is_error

        anyio.run(run)
    kinds = [entry["kind"] for entry in record(db_url, "real")["calls"]]
    assert kinds == ["create", "search", "pin", "tool_call"]
    assert cli(db_url, "verify").returncode == 0


def test_opening_a_session_reads_its_own_rows_only(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools([{"name": "mcp__up__echo", "description": "Echo a text back"}])
        for session_id in ("first", "wanted", "third"):
            GatewaySession.open(index, session_id).store()
        statements: list[tuple[str, tuple[Any, ...]]] = []
        fetch = driver.fetch

        def recorded(connection: Any, statement: str, params: Any = None) -> list[Any]:
            statements.append((statement, tuple((params or {}).values())))
            return fetch(connection, statement, params)

        monkeypatch.setattr(driver, "fetch", recorded)
        opened = GatewaySession.open(index, "wanted")
        unknown = GatewaySession.open(index, "not-yet")
        monkeypatch.undo()
        assert opened.stored and not unknown.stored
        about_sessions = [(text, params) for text, params in statements if "session" in text.lower()]
        assert about_sessions
        for text, params in about_sessions:  # each names the session it reads
            assert "wanted" in params or "not-yet" in params, text
        assert sorted(summary.id for summary in index.sessions()) == ["first", "third", "wanted"]


def test_a_tokens_file_is_checked_and_never_quoted(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    cases = [
        ("[]", "expected a JSON object"),
        ("{}", "expected a JSON object"),
        ('{"alice": "s3cr3t-one", "bob": "s3cr3t-one"}', "'alice' and 'bob' have the same secret"),
        ('{"al ice": "s3cr3t-one"}', "identity 'al ice'"),
        ('{"alice": ""}', "must be a non-empty printable string"),
        ('{"alice": 12}', "must be a non-empty printable string"),
        ('{"alice": "s3cr3t-one",}', "invalid JSON"),
    ]
    for text, message in cases:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(TokensError, match=message) as caught:
            load_tokens(path)
        assert "s3cr3t" not in str(caught.value)
    path.write_text('{"alice": "one-secret", "bob.b@x": "another"}', encoding="utf-8")
    assert load_tokens(path) == {"alice": "one-secret", "bob.b@x": "another"}
    config = write_config(tmp_path, {"up": upstream_entry()})
    stdio = cli(f"sqlite:///{tmp_path / 'x.db'}", "serve", "--config", str(config), "--tokens", str(path))
    assert stdio.returncode == 2 and "--tokens is for --transport http" in stdio.stderr


@pytest.mark.slow
def test_memory_per_session_and_connection_stays_bounded(db_url: str, tmp_path: Path) -> None:
    """Clients naming sessions at random, or opening connection after connection, leave at most
    the cache's sessions in memory and nothing per connection once connections end; a session
    evicted from memory is read back with its activations when next used."""
    config = write_config(tmp_path, {"up": upstream_entry()})
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(
            [
                {
                    "name": f"mcp__up__{name}",
                    "description": description,
                    "server_name": "up",
                    "mcp_tool_name": name,
                }
                for name, description in [("echo", "Echo a text back"), ("fail", "Always fails")]
            ]
        )
        options = GatewayOptions(per_client=True, expose_active=True, session_cache=3)
        errlog = io.StringIO()
        gateway = Gateway(index, load_config(config), options, errlog=errlog)

        async def run() -> None:
            server = uvicorn.Server(
                uvicorn.Config(
                    http_app(gateway, "127.0.0.1", None), port=0, log_level="warning", lifespan="on"
                )
            )
            async with gateway, anyio.create_task_group() as group:
                group.start_soon(server.serve)
                while not server.started:
                    await anyio.sleep(0.01)
                url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/mcp"
                async with Client(f"{url}?session=kept", cache=None) as kept:
                    await search(kept, "echo a text back", limit=1)
                for number in range(8):  # named sessions, 2026-07-28 clients listening for changes
                    async with (
                        Client(f"{url}?session=named-{number}", cache=None) as client,
                        client.listen(tools_list_changed=True),
                    ):
                        await search(client, "echo a text back", limit=1)
                        assert gateway.relay.buses
                for _ in range(8):  # handshake-era clients, each a connection with a session of its own
                    async with Client(url, cache=None, mode="legacy") as client:
                        await client.list_tools()
                        await search(client, "echo a text back", limit=1)
                for number in range(50):  # invented names, read-only
                    async with Client(
                        f"{url}?session=invented-{number}", cache=None, mode="legacy"
                    ) as client:
                        await client.list_tools()
                assert len(gateway.pool.sessions) <= 3
                assert "kept" not in {key.id for key in gateway.pool.sessions}
                async with Client(f"{url}?session=kept", cache=None) as kept:
                    described = await kept.call_tool("call_tool", {"name": "mcp__up__echo"})
                    assert not described.is_error, text_of(described)  # still active, read back
                    listed = await kept.list_tools()
                    assert [tool.name for tool in listed.tools][2:] == ["mcp__up__echo"]

                async def released() -> bool:
                    gc.collect()
                    return (
                        not gateway.pool.by_connection
                        and not gateway.pool.clients
                        and not gateway.relay.buses
                    )

                await eventually(released, "every connection's entries are gone")
                server.should_exit = True

        anyio.run(run)
    stored = stored_ids(db_url)
    assert not [session_id for session_id in stored if session_id.startswith("invented-")]
    assert {"kept", *(f"named-{number}" for number in range(8))} <= set(stored)
    assert len(stored) == 1 + 8 + 8  # and one per handshake-era connection


def gateway_command(db: str, config: Path, *args: str) -> list[str]:
    """``http_gateway``'s command, for a test that reads what the gateway says before it listens."""
    serve = ["serve", "--config", str(config), "--transport", "http", "--port", "0"]
    return [sys.executable, "-m", "discovery.cli", "--db", db, *serve, *args]


def tokens_in(directory: Path, tokens: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "tokens.json"
    path.write_text(json.dumps(tokens), encoding="utf-8")
    return path


def identities_of(db: str, session_id: str) -> list[str]:
    with ToolIndex.open(db, create=False) as index:
        return sorted(summary.identity for summary in index.sessions() if summary.id == session_id)


async def echo_in(url: str, secret: str) -> None:
    """Search for the echo tool in the session of ``url`` and call it."""
    async with as_identity(url, secret) as client:
        assert (await search(client, "echo a text back", limit=1))["activated_tools"] == ["mcp__up__echo"]
        assert not (await call(client, "mcp__up__echo", {"text": "hi"})).is_error


async def sees_a_new_session(url: str, secret: str) -> None:
    """The session of ``url`` is a new one: nothing active, no call allowed, nothing revealed."""
    async with as_identity(url, secret) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ["search_tool_bm25", "call_tool"]
        refused = await call(client, "mcp__up__echo", {"text": "x"})
        assert refused.is_error and "is not active in this session" in text_of(refused)


@pytest.mark.slow
def test_two_gateways_alices_are_two_identities_unless_one_realm(db_url: str, tmp_path: Path) -> None:
    """Two gateways on one database, each with a tokens file naming an alice of its own: a session
    alice opens through one is never opened, searched or called through the other; given one
    --realm they are one alice. bob's and alice's my-project are two sessions."""
    config = synced_into(db_url, tmp_path)
    first = tokens_in(tmp_path / "a", {"alice": "alice-of-a-1b2c3d", "bob": BOB})
    second = tokens_in(tmp_path / "b", {"alice": "alice-of-b-9e8f7a"})
    with (
        http_gateway(db_url, config, "--tokens", str(first)) as a,
        http_gateway(db_url, config, "--tokens", str(second)) as b,
    ):
        alice_of_a = f"alice@{socket.gethostname()}:{first.resolve()}"

        async def logged() -> dict[str, Any] | None:  # the call is logged after its answer
            now = record(db_url, "my-project", alice_of_a)
            return now if now["calls"][-1]["kind"] == "tool_call" else None

        async def apart() -> None:
            await echo_in(f"{a}?session=my-project", "alice-of-a-1b2c3d")
            before = await eventually(logged, "alice's call is logged")
            await sees_a_new_session(f"{b}?session=my-project", "alice-of-b-9e8f7a")
            await sees_a_new_session(f"{a}?session=my-project", BOB)
            await echo_in(f"{b}?session=my-project", "alice-of-b-9e8f7a")
            await echo_in(f"{a}?session=my-project", BOB)
            assert record(db_url, "my-project", alice_of_a) == before

        anyio.run(apart)
    host = socket.gethostname()
    assert identities_of(db_url, "my-project") == sorted(
        [
            f"alice@{host}:{first.resolve()}",
            f"alice@{host}:{second.resolve()}",
            f"bob@{host}:{first.resolve()}",
        ]
    )
    realm = ("--realm", "team")
    with (
        http_gateway(db_url, config, "--tokens", str(first), *realm) as a,
        http_gateway(db_url, config, "--tokens", str(second), *realm) as b,
    ):

        async def one() -> None:
            await echo_in(f"{a}?session=shared", "alice-of-a-1b2c3d")
            async with as_identity(f"{b}?session=shared", "alice-of-b-9e8f7a") as alice:
                assert not (await call(alice, "mcp__up__echo", {"text": "again"})).is_error

        anyio.run(one)
    assert identities_of(db_url, "shared") == ["alice@team"]
    assert cli(db_url, "verify").returncode == 0


@pytest.mark.slow
def test_a_tokens_gateway_adopts_the_sessions_of_its_names_made_before_realms(
    db_url: str, tmp_path: Path
) -> None:
    config = synced_into(db_url, tmp_path)
    with ToolIndex.open(db_url) as index:  # as revision 0013 migrates a 0012 gateway's alice's session
        index.session("old-work", identity="alice", discovery_mode="mcp-only").search_tool.execute(
            "c1", {"query": "echo a text back", "limit": 1}
        )
        index.session("old-work", identity="carol", discovery_mode="mcp-only")
    command = gateway_command(db_url, config, "--tokens", str(tokens_file(tmp_path)), "--realm", "team")
    with process_announcing(command, "adopted sessions made before realms: ", stream="stderr") as (
        process,
        said,
    ):
        assert said == "1 of alice as alice@team"
        assert process.stderr is not None
        while "listening on " not in (line := process.stderr.readline()):
            assert line and "adopted" not in line
        url = line.split("listening on ", 1)[1].strip()

        async def resumed() -> None:
            async with as_identity(f"{url}?session=old-work", ALICE) as alice:
                assert not (await call(alice, "mcp__up__echo", {"text": "still mine"})).is_error

        anyio.run(resumed)
    assert identities_of(db_url, "old-work") == ["alice@team", "carol"]
    with process_announcing(command, "listening on ", stream="stderr"):
        pass  # nothing left to adopt: said once
    assert cli(db_url, "verify").returncode == 0
