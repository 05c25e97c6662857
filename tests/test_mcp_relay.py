"""What passes through ``serve`` besides tool calls: cancellation (the client's, and the call
timeout's) reaching the upstream, whose connection stays open; an upstream's sampling,
elicitation and roots requests and its log messages reaching the client; the client's roots
changes reaching the upstreams; and the whole of a tool's listing in ``call_tool``'s description.
Real parts: ``tool-index serve`` processes driven by the SDK's ``Client``, upstreams
(``tests/mcp_upstream.py --relay``) as processes over stdio.

Most tests share a gateway over HTTP per upstream mode (``served``): each test's clients are
sessions of their own on it, and its one upstream connection serves them all, as it serves a
team's clients. What a test checks of the upstream's files it checks as what changed during the
test. The tests that need a gateway started with options of their own (a call timeout, a new
database) start one over stdio."""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from pydantic import FileUrl

from discovery import ToolIndex
from tests.mcp_helpers import (
    WAIT,
    call,
    eventually,
    gateway_process,
    search,
    stdio_gateway,
    sync,
    text_of,
    upstream_entry,
    write_config,
)

STEP = 0.1
"""Seconds between the progress reports of a slow call that a test cancels."""

UPSTREAM_MODES = ["modern", "legacy"]
"""How the gateway's connection to the upstream goes: 2026-07-28 (input requests embedded in a
call's result), or the initialize handshake (requests of the server's own)."""


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database synced once per module from the upstream 'up' (whose tools are the same in
    either upstream mode): the gateway only syncs a server the catalog has no tool of, so a copy
    serves a config whose mode, event file and live directory are a test's own."""
    directory = tmp_path_factory.mktemp("synced")
    db, config, _, _ = relay_config(directory, ())
    sync(db, config)
    return directory / "tools.db"


def relay_config(directory: Path, extra: tuple[str, ...]) -> tuple[str, Path, Path, Path]:
    """The database URL, config (one upstream 'up'), event file and live directory in
    ``directory``."""
    events = directory / "events"
    live = directory / "live"
    live.mkdir()
    args = ("--slow", "--relay", "--events", str(events), "--live-dir", str(live), *extra)
    config = write_config(directory, {"up": upstream_entry(*args)})
    return f"sqlite:///{directory / 'tools.db'}", config, events, live


def setup(tmp_path: Path, synced: Path, *extra: str) -> tuple[str, Path, Path, Path]:
    """A synced database, its config (one upstream 'up'), the upstream's event file and the
    directory that counts its starts (the gateway's only: the database was synced elsewhere)."""
    db, config, events, live = relay_config(tmp_path, extra)
    shutil.copyfile(synced, tmp_path / "tools.db")
    # The config here runs 'up' with this test's own files: another server than the one the copy
    # recorded, which the gateway would sync again. Without the record, as a catalog synced before
    # servers were recorded, it serves the copy's tools.
    with closing(sqlite3.connect(tmp_path / "tools.db")) as connection, connection:
        connection.execute("DELETE FROM mcp_servers")
    return db, config, events, live


def events_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def starts(live: Path) -> int:
    counts = live / "counts"
    return len(counts.read_text().splitlines()) if counts.exists() else 0


class Served:
    """A gateway of this module's over HTTP with its upstream 'up': its endpoint, database, the
    upstream's event file and the directory that counts its starts."""

    def __init__(self, url: str, db: str, events: Path, live: Path) -> None:
        self.url, self.db, self.events, self.live = url, db, events, live

    def told(self, event: str) -> int:
        """How many times the upstream has recorded ``event``."""
        return events_of(self.events).count(event)


Serving = Callable[[str], Served]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, synced: Path) -> Iterator[Serving]:
    """The gateway of an upstream mode (``UPSTREAM_MODES``), started on first use and kept for
    the module."""
    with ExitStack() as stack:
        gateways: dict[str, Served] = {}

        def gateway(upstream: str) -> Served:
            if upstream not in gateways:
                directory = tmp_path_factory.mktemp(f"served-{upstream}")
                db, config, events, live = setup(directory, synced, *legacy_if(upstream))
                # Its stderr goes to a file: a pipe nobody reads would stop it once full.
                _, url = stack.enter_context(gateway_process(db, config, directory / "stderr"))
                gateways[upstream] = Served(url, db, events, live)
            return gateways[upstream]

        yield gateway


def legacy_if(upstream: str) -> tuple[str, ...]:
    return ("--legacy",) if upstream == "legacy" else ()


async def activate(client: Client, *names: str) -> None:
    for name in names:
        query = {
            "slow": "answer slowly reporting progress",
            "echo": "echo a text back",
            "ask_sampling": "ask the client's model to sample a message",
            "ask_elicitation": "ask the user for a value through the client",
            "ask_roots": "ask the client for its roots",
            "log": "send a log message to the client",
            "freeze": "block the whole server process",
        }[name]
        found = await search(client, query, limit=1)
        assert found["activated_tools"] == [f"mcp__up__{name}"], found


class Asked:
    """The test client's answers to what the gateway asks, and what it heard."""

    def __init__(self) -> None:
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampled: list[types.CreateMessageRequestParams] = []

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="sampled by the client"), model="test-model"
        )

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams) and params.message == "your name?"
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work/project"), name="project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)


@asynccontextmanager
async def relaying_client(
    gateway: Served, asked: Asked | None, *, mode: str = "legacy", session: str | None = None
) -> AsyncIterator[Client]:
    """A client of ``gateway`` in a session of its own (``session``, or a new one) that declares
    sampling, elicitation and roots (``asked``), or nothing (``None``)."""
    callbacks: dict[str, Any] = {}
    if asked is not None:
        callbacks = {
            "sampling_callback": asked.sampling,
            "elicitation_callback": asked.elicitation,
            "list_roots_callback": asked.roots,
            "logging_callback": asked.log,
        }
    url = f"{gateway.url}?session={session or new_session()}"
    async with Client(url, mode=mode, cache=None, read_timeout_seconds=WAIT, **callbacks) as client:
        yield client


def new_session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def answer(result: types.CallToolResult) -> Any:
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


# Cancellation


@pytest.mark.parametrize(("mode", "askable"), [("auto", False), ("auto", True), ("legacy", False)])
def test_a_call_the_client_cancels_is_cancelled_upstream_whose_connection_stays(
    served: Serving, mode: str, askable: bool
) -> None:
    """``askable``: a 2026-07-28 client that can be asked, whose calls go in rounds."""
    gateway = served("modern")
    session = new_session()
    cancelled_before = gateway.told("cancelled slow")

    async def run() -> None:
        async with relaying_client(
            gateway, Asked() if askable else None, mode=mode, session=session
        ) as client:
            await activate(client, "slow", "echo")
            # Cancelled once the upstream is in the call (its first progress came back), however
            # long the machine took to get there.
            running = anyio.Event()
            answered = []

            async def progressed(progress: float, total: float | None, message: str | None) -> None:
                running.set()

            async def slow_call() -> None:
                # Steps short enough that the first progress comes soon, and many enough that
                # the call would outlast any wait of the test's.
                arguments = {"steps": int(WAIT / STEP), "interval": STEP}
                wrapped = {"name": "mcp__up__slow", "arguments": arguments}
                answered.append(await client.call_tool("call_tool", wrapped, progress_callback=progressed))

            async with anyio.create_task_group() as calling:
                calling.start_soon(slow_call)
                with anyio.fail_after(WAIT):
                    await running.wait()
                calling.cancel_scope.cancel()
            assert answered == []

            async def cancelled() -> bool:
                return gateway.told("cancelled slow") > cancelled_before

            await eventually(cancelled, "the upstream was never told the call was cancelled")
            echoed = await call(client, "mcp__up__echo", {"text": "after"})
            assert (text_of(echoed), echoed.is_error) == ("echo: after", False)
            assert starts(gateway.live) == 1  # the same connection answered

        async def logged() -> list[str]:
            # The gateway writes a call's outcome after its answer.
            with ToolIndex.open(gateway.db) as index:
                calls = index.session_record(session)["calls"]
            outcomes = [entry["params"]["outcome"] for entry in calls if entry["kind"] == "tool_call"]
            return outcomes if len(outcomes) >= 2 else []

        assert await eventually(logged, "the calls' outcomes were never logged") == ["cancelled", "called"]

    anyio.run(run)


def test_a_call_timeout_cancels_the_call_upstream_and_keeps_the_connection(
    tmp_path: Path, synced: Path
) -> None:
    db, config, events, live = setup(tmp_path, synced)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s", "--call-timeout", "1") as client:
            await activate(client, "slow", "echo")
            late = await call(client, "mcp__up__slow", {"steps": 3})
            assert late.is_error
            assert text_of(late) == (
                "Calling mcp__up__slow failed: server 'up': slow did not answer within 1 s; the call was "
                "cancelled on the server."
            )
            assert "cancelled slow" in events_of(events)  # told before the gateway answered
            echoed = await call(client, "mcp__up__echo", {"text": "after"})
            assert (text_of(echoed), echoed.is_error) == ("echo: after", False)
            assert starts(live) == 1

    anyio.run(run)


@pytest.mark.slow
def test_a_server_that_stops_answering_after_a_call_timeout_is_restarted(
    tmp_path: Path, synced: Path
) -> None:
    db, config, _, live = setup(tmp_path, synced)

    async def run() -> None:
        options = ("--session", "s", "--call-timeout", "1", "--timeout", "2")
        async with stdio_gateway(db, config, *options) as client:
            await activate(client, "freeze", "echo")
            frozen = await call(client, "mcp__up__freeze")
            assert frozen.is_error
            assert text_of(frozen) == (
                "Calling mcp__up__freeze failed: server 'up': freeze did not answer within 1 s, nor the "
                "server to tools/list afterwards; the server is restarted on the next call."
            )
            echoed = await call(client, "mcp__up__echo", {"text": "after"})
            assert (text_of(echoed), echoed.is_error) == ("echo: after", False)
            assert starts(live) == 2

    anyio.run(run)


# What an upstream asks of the client


@pytest.mark.parametrize("upstream", UPSTREAM_MODES)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sampling_elicitation_and_roots_reach_the_client(served: Serving, upstream: str, mode: str) -> None:
    """A handshake-era client gets requests of the gateway's own; a 2026-07-28 client gets them as
    input-required results of its call, answered in its retries."""
    gateway = served(upstream)
    asked = Asked()

    async def run() -> None:
        async with relaying_client(gateway, asked, mode=mode) as client:
            await activate(client, "ask_sampling", "ask_elicitation", "ask_roots")
            sampled = answer(await call(client, "mcp__up__ask_sampling"))
            assert sampled["content"] == {"type": "text", "text": "sampled by the client"}
            assert sampled["model"] == "test-model"
            assert asked.sampled[0].max_tokens == 20
            elicited = answer(await call(client, "mcp__up__ask_elicitation"))
            assert (elicited["action"], elicited["content"]) == ("accept", {"name": "Ada"})
            rooted = answer(await call(client, "mcp__up__ask_roots"))
            assert rooted["roots"] == [{"uri": "file:///work/project", "name": "project"}]
            assert starts(gateway.live) == 1

    anyio.run(run)


@pytest.mark.parametrize(
    ("mode", "upstream"), [("legacy", "legacy"), ("legacy", "modern"), ("auto", "modern")]
)
def test_over_http_a_request_goes_to_the_client_whose_call_it_is(
    served: Serving, mode: str, upstream: str
) -> None:
    gateway = served(upstream)

    def sampler(text: str) -> Any:
        async def sample(
            context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult:
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(text=text), model="m"
            )

        return sample

    def client_of(name: str) -> Client:
        """A client in a session of its own, whose model samples ``name``."""
        url = f"{gateway.url}?session={new_session()}"
        return Client(url, cache=None, mode=mode, sampling_callback=sampler(name))

    async def run() -> None:
        async with client_of("alice") as alice, client_of("bob") as bob:
            await activate(alice, "ask_sampling")
            await activate(bob, "ask_sampling")
            for client, name in [(alice, "alice"), (bob, "bob")]:
                sampled = answer(await call(client, "mcp__up__ask_sampling"))
                assert sampled["content"]["text"] == name
            sampled_by: list[str] = []

            async def alice_calls() -> None:
                result = answer(await call(alice, "mcp__up__ask_sampling", {"delay": 1}))
                sampled_by.append(result["content"]["text"])

            async with anyio.create_task_group() as group:
                group.start_soon(alice_calls)
                await anyio.sleep(0.3)
                await search(bob, "echo", limit=1)  # bob's is now the latest request
            assert sampled_by == ["alice"]  # the server asked during alice's call
            assert starts(gateway.live) == 1  # one upstream connection served both

    anyio.run(run)


def test_a_call_in_rounds_is_continued_only_by_its_own_session(served: Serving) -> None:
    gateway = served("modern")
    asked = Asked()
    wrapped = {"name": "mcp__up__ask_sampling", "arguments": {}}

    async def run() -> None:
        async with (
            Client(
                f"{gateway.url}?session={new_session()}", cache=None, sampling_callback=asked.sampling
            ) as alice,
            Client(
                f"{gateway.url}?session={new_session()}", cache=None, sampling_callback=asked.sampling
            ) as bob,
        ):
            await activate(alice, "ask_sampling")
            await activate(bob, "ask_sampling")
            first = await alice.session.call_tool("call_tool", wrapped, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            assert first.request_state is not None
            [(key, request)] = first.input_requests.items()
            assert isinstance(request, types.CreateMessageRequest)
            sampled = types.CreateMessageResult(
                role="assistant", content=types.TextContent(text="alice's answer"), model="m"
            )
            stolen = await bob.session.call_tool(
                "call_tool",
                wrapped,
                input_responses={key: sampled},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(stolen, types.CallToolResult) and stolen.is_error
            assert "names no call in progress here" in text_of(stolen)
            done = await alice.session.call_tool(
                "call_tool",
                wrapped,
                input_responses={key: sampled},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult)
            assert answer(done)["content"]["text"] == "alice's answer"

            # An answer that is not one to the question fails the call, and only the call.
            again = await alice.session.call_tool("call_tool", wrapped, allow_input_required=True)
            assert isinstance(again, types.InputRequiredResult) and again.input_requests
            [key] = again.input_requests
            wrong = await alice.session.call_tool(
                "call_tool",
                wrapped,
                input_responses={key: types.ElicitResult(action="decline")},
                request_state=again.request_state,
                allow_input_required=True,
            )
            assert isinstance(wrong, types.CallToolResult) and wrong.is_error
            assert text_of(wrong) == (
                "Calling mcp__up__ask_sampling failed: server 'up': the call of ask_sampling failed: "
                f"error {types.INVALID_PARAMS}: Sampling: the client's answer is not one."
            )
            assert (
                answer(await call(alice, "mcp__up__ask_sampling"))["content"]["text"]
                == "sampled by the client"
            )

    anyio.run(run)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_what_the_client_did_not_declare_is_an_error_for_the_upstream(served: Serving, mode: str) -> None:
    gateway = served("legacy")

    async def run() -> None:
        async with relaying_client(gateway, None, mode=mode) as client:
            await activate(client, "ask_sampling", "ask_elicitation", "ask_roots", "echo")
            for name, what in [
                ("sampling", "Sampling"),
                ("elicitation", "Elicitation"),
                ("roots", "List roots"),
            ]:
                with anyio.fail_after(WAIT):
                    refused = answer(await call(client, f"mcp__up__ask_{name}"))
                assert refused == {
                    "error": types.INVALID_REQUEST,
                    "message": f"{what} not supported: the gateway's client did not declare it",
                }
            echoed = await call(client, "mcp__up__echo", {"text": "still there"})
            assert (text_of(echoed), echoed.is_error) == ("echo: still there", False)

    anyio.run(run)


@pytest.mark.parametrize("upstream", UPSTREAM_MODES)
def test_log_messages_reach_the_client_above_the_level_it_set(served: Serving, upstream: str) -> None:
    gateway = served(upstream)
    asked = Asked()

    async def run() -> None:
        async with relaying_client(gateway, asked) as client:
            await activate(client, "log")
            await call(client, "mcp__up__log", {"level": "warning", "text": "first"})

            async def heard() -> list[tuple[str, Any, str | None]]:
                return [(log.level, log.data, log.logger) for log in asked.logs]

            assert await eventually(heard, "the log message never came") == [("warning", "first", "up/up")]
            await client.session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level="error")), types.EmptyResult
            )
            await call(client, "mcp__up__log", {"level": "warning", "text": "below"})
            await call(client, "mcp__up__log", {"level": "error", "text": "second"})

            async def second() -> bool:
                return any(log.data == "second" for log in asked.logs)

            await eventually(second, "the error-level message never came")
            assert [log.data for log in asked.logs] == ["first", "second"]
            if upstream == "legacy":  # only handshake-era servers log outside a request
                await call(client, "mcp__up__log", {"level": "critical", "text": "outside", "later": True})

                async def outside() -> bool:
                    return any(log.data == "outside" for log in asked.logs)

                await eventually(outside, "the message sent outside a call never came")

    anyio.run(run)


def test_a_roots_change_reaches_the_connected_upstreams(served: Serving) -> None:
    gateway = served("legacy")
    asked = Asked()
    changes = gateway.told("roots changed")

    async def run() -> None:
        async with relaying_client(gateway, asked) as client:
            await activate(client, "echo")
            await call(client, "mcp__up__echo", {"text": "connect"})
            assert gateway.told("roots changed") == changes
            await client.session.send_notification(types.RootsListChangedNotification())

            async def told() -> bool:
                return gateway.told("roots changed") > changes

            await eventually(told, "the upstream never heard that the roots changed")

    anyio.run(run)


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
