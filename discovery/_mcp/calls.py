"""``tools/call``: a search in the session, or a call of an activated tool checked, pinned and
forwarded to its server, every call logged (never its arguments or result).

A search is one write transaction: its log entry, the pins of what it activated, and the log
entries queued before it. A forwarded call reads the tool and the session once, writes what its
check asks for first (a pin, a deactivation), logs its start (with the entries queued before),
and queues its outcome's entry for after the answer.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import anyio
from mcp import types
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from discovery._mcp.description import still_syncing
from discovery._mcp.failures import UpstreamError
from discovery._mcp.listing import CALL_TOOL_NAME, described, listed_tool
from discovery._mcp.names import route, split_catalog_name
from discovery._mcp.options import GatewayOptions, Served
from discovery._mcp.pool import Context, SessionPool
from discovery._mcp.relay import Relay
from discovery._mcp.rounds import Rounds, progress_relay, text_result
from discovery._mcp.sessions import GatewaySession, SearchOutcome
from discovery._mcp.upstreams import Upstreams
from discovery._mcp.watch import Syncing
from discovery._mcp.writes import WriteQueue
from discovery._results import compact_json
from discovery._rules import SEARCH_TOOL_NAME
from store import StoredTool, Writer

CallAnswer = types.CallToolResult | types.InputRequiredResult


@dataclass(frozen=True, slots=True)
class Check:
    """What the check of a call found: ``refused`` names the outcome the log records (with the
    ``message`` the client gets) when the call cannot go on; ``then`` is the write that must come
    first (``pin`` an active tool no pin covers yet, ``deactivate`` one that changed)."""

    refused: str | None = None
    message: str = ""
    then: Literal["pin", "deactivate"] | None = None


class Calls:
    """Answers ``tools/call``."""

    def __init__(
        self,
        options: GatewayOptions,
        served: Served,
        pool: SessionPool,
        writes: WriteQueue,
        relay: Relay,
        upstreams: Upstreams,
        syncing: Syncing,
        say: Callable[[str], None],
    ) -> None:
        self.options = options
        self.syncing = syncing
        self.served = served
        self.pool = pool
        self.writes = writes
        self.relay = relay
        self.upstreams = upstreams
        self._say = say
        self._rounds: dict[str, Rounds] = {}
        """The calls of 2026-07-28 clients that go in rounds, by the ``requestState`` naming each."""

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> CallAnswer:
        gateway_session = await self.pool.session_of(ctx)
        arguments = params.arguments
        if params.name == SEARCH_TOOL_NAME:
            return await self.search(gateway_session, arguments or {})
        if params.name == CALL_TOOL_NAME:
            name = (arguments or {}).get("name")
            if not isinstance(name, str) or not name:
                return text_result(
                    "call_tool needs `name`: a tool name that search_tool_bm25 activated.", is_error=True
                )
            inner = (arguments or {}).get("arguments")
            if inner is not None and not isinstance(inner, dict):
                return text_result("call_tool: `arguments` must be an object ({} for none).", is_error=True)
            return await self._forward_for(ctx, params, gateway_session, name, inner)
        if self.options.expose_active or params.name in self.served.direct.names:
            return await self._forward_for(ctx, params, gateway_session, params.name, arguments or {})
        return text_result(
            f"Unknown tool {params.name!r}: call search_tool_bm25 to find tools, then call_tool to call "
            "them.",
            is_error=True,
        )

    async def roots_changed(self, ctx: Context, params: types.NotificationParams) -> None:
        """The client's roots changed: the upstreams that may ask for them are told."""
        await self.upstreams.roots_changed()

    async def search(
        self, gateway_session: GatewaySession, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """``search_tool_bm25``: the search, its log and the pins of what it activated, written
        in one transaction (the session stored first, when it is not yet). While servers are
        synced for the first time, it waits a while for them; its answer names those still
        syncing."""
        await self.syncing.wait()
        if not gateway_session.stored:
            await self.writes.run(gateway_session.store)
        loaded = self.served.direct.names
        outcome = await self.writes.write(partial(_search_and_pin, gateway_session, arguments, loaded))
        if outcome.activated and self.options.expose_active:
            await self.relay.notify(gateway_session.key)
        if outcome.structured is None:
            return text_result(outcome.text, is_error=outcome.is_error)
        answer = still_syncing(outcome.structured, self.syncing.servers)
        return types.CallToolResult(
            content=[types.TextContent(text=compact_json(answer))], structured_content=answer, is_error=False
        )

    async def _forward_for(
        self,
        ctx: Context,
        params: types.CallToolRequestParams,
        gateway_session: GatewaySession,
        name: str,
        arguments: dict[str, Any] | None,
    ) -> CallAnswer:
        """``forward`` for the client's request ``ctx``. A 2026-07-28 client that can be asked
        something (it declared sampling, elicitation or roots) gets the call in rounds: the
        upstream call runs apart, each question of its server ends the client's request with an
        input-required result, and the client's retry (its ``requestState`` names the call)
        brings the answers back and waits on."""
        capabilities = ctx.session.client_capabilities
        askable = capabilities is not None and (
            capabilities.sampling is not None
            or capabilities.elicitation is not None
            or capabilities.roots is not None
        )
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or not askable:
            return await self.forward(
                gateway_session, name, arguments, progress=progress_relay(ctx), caller=ctx
            )
        owner = (self.pool.identity(ctx), gateway_session.id)
        token = params.request_state
        if token is not None:
            rounds = self._rounds.get(token)
            if rounds is None or rounds.owner != owner:
                return text_result(
                    f"Calling {name} failed: its requestState names no call in progress here (it ended, "
                    "or the gateway restarted): call it again.",
                    is_error=True,
                )
            rounds.ctx = ctx
            rounds.answer(params.input_responses or {})
        else:
            token = secrets.token_urlsafe(24)
            rounds = self._rounds[token] = Rounds(owner, ctx)
            self.upstreams.start_soon(
                partial(self._run_rounds, token, rounds, gateway_session, name, arguments)
            )
        try:
            return await rounds.next_round(token)
        except anyio.get_cancelled_exc_class():
            rounds.scope.cancel()  # the client cancelled the call: so is its upstream call
            self._rounds.pop(token, None)
            raise
        finally:
            if rounds.done.is_set():
                self._rounds.pop(token, None)

    async def _run_rounds(
        self,
        token: str,
        rounds: Rounds,
        gateway_session: GatewaySession,
        name: str,
        arguments: dict[str, Any] | None,
    ) -> None:
        with rounds.scope:
            try:
                rounds.result = await self.forward(
                    gateway_session, name, arguments, progress=rounds.progress, caller=rounds
                )
            except Exception as exc:  # noqa: BLE001 - raised in the client's request, as a direct call's
                rounds.failure = exc
            finally:
                rounds.done.set()
                rounds.wake()
        if token in self._rounds:
            # A result its client has not come back for waits as long as a call may take.
            await anyio.sleep(self.options.call_timeout)
            self._rounds.pop(token, None)

    async def forward(
        self,
        gateway_session: GatewaySession,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        progress: ProgressFnT | None = None,
        caller: object | None = None,
    ) -> types.CallToolResult:
        """Call the activated tool ``name`` on its server; every call is logged, never its
        arguments or result. ``arguments`` ``None`` describes the tool instead of calling it.
        ``progress`` gets the server's progress notifications (the caller asked for them);
        ``caller``, the client's request, gets what the server asks during the call. A name that
        is not a full name but one tool's label or MCP name (``fs/read_text_file``,
        ``read_text_file``), as ``select:`` takes them, is that tool's."""
        started = time.perf_counter()
        servers = self.served.config.servers
        tool, active = await self.writes.run(gateway_session.resolve, name)
        meant: list[str] = []
        if tool is None:
            meant = await self.writes.run(served_names, self.served, gateway_session, name)
            if len(meant) == 1:
                name = meant[0]
                tool, active = await self.writes.run(gateway_session.resolve, name)
        # The server and upstream name come from the record the model was shown (and its pin).
        located = None if tool is None else route(tool, servers)
        # The log of a call of an unknown name still says which server the name points to.
        guessed = split_catalog_name(name, servers) if tool is None else None
        server = located[0] if located else guessed[0] if guessed else None
        check = self.check(gateway_session, name, tool, active, located, named=len(meant))
        if check.then == "pin":
            # Activated outside the gateway (a search on the command line, say).
            await self.writes.run(gateway_session.pin_missing, name)
        elif check.then == "deactivate":
            await self.writes.run(gateway_session.unpin_changed, name)
            if self.options.expose_active:
                await self.relay.notify(gateway_session.key)
        if check.refused is not None:
            self._log(gateway_session, name, server, started, True, check.refused)
            return text_result(check.message, is_error=True)
        assert tool is not None and located is not None
        if arguments is None:
            self._log(gateway_session, name, server, started, False, "described")
            return text_result(described(listed_tool(tool)), is_error=False)
        if not gateway_session.stored:
            # The call is logged, so the session is stored first (active at the start of a new one).
            await self.writes.run(gateway_session.store)
        call = uuid.uuid4().hex
        # In the log before the server hears of it (with the entries queued before, in one
        # transaction): a gateway killed during the call leaves the trace of a call that may have
        # had effects. The database down, the call is not made.
        await self.writes.write(partial(gateway_session.start_in, name, located[0], call))
        upstream = self.upstreams.upstream(located[0])
        try:
            result = await self.upstreams.call_upstream(
                upstream, located[1], arguments, progress=progress, caller=caller
            )
        except UpstreamError as exc:
            self._log(gateway_session, name, server, started, True, "server failed", call)
            self._say(f"call of {name} failed: {exc.reported}")  # with what the model is not told
            return text_result(f"Calling {name} failed: {exc}.", is_error=True)
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call (or the gateway is stopping): the server was told, and
            # the client gets no answer; the log still says the call was made.
            self._log(gateway_session, name, server, started, True, "cancelled", call)
            raise
        self._log(gateway_session, name, server, started, result.is_error, "called", call)
        return result.model_copy(update={"meta": None})

    def check(
        self,
        gateway_session: GatewaySession,
        name: str,
        tool: StoredTool | None,
        active: bool,
        located: tuple[str, str] | None,
        *,
        named: int = 0,
    ) -> Check:
        """Whether ``name`` can be called now, from what one read found (``tool``, ``active``) and
        the session's pins; it reads and writes nothing itself, and says what the caller must
        write first (pin the tool, or deactivate it). ``named``: how many tools have ``name`` as
        their label or MCP name."""
        config, scope = self.served.config, self.served.scope
        if tool is None and named > 1:
            return Check(
                "unknown",
                f"{name!r} is the name of {named} tools: call_tool takes a tool's full name, which "
                f"search_tool_bm25 with select:{name} lists.",
            )
        if tool is None:
            return Check(
                "unknown",
                f"Unknown tool {name!r}: it is not in the catalog. Call search_tool_bm25 to find a tool, "
                "then call_tool with a name it activated.",
            )
        if tool.server_name in self.served.refused:
            return Check(
                "not served",
                f"{name!r} is not offered here: the catalog's server {tool.server_name!r} is another "
                f"config's, not the {tool.server_name!r} of this gateway's config (its sync was refused).",
            )
        not_allowed = (
            config.tool_filter.refusal(tool.server_name, tool.mcp_tool_name)
            if tool.server_name in config.servers and tool.mcp_tool_name is not None
            else None
        )
        if not_allowed is not None:
            return Check(
                "not allowed", f"{name!r} is not allowed by this gateway's tool filters: {not_allowed}."
            )
        if located is None or not scope.admits(tool.server_name, tool.mcp_tool_name):
            servers = ", ".join(config.servers) or "none"
            return Check(
                "not served",
                f"{name!r} is not a tool of a server this gateway fronts (its servers: {servers}).",
            )
        if name in self.served.direct.names:
            return Check()
        if not active:
            return Check(
                "not active",
                f"{name!r} is not active in this session: call search_tool_bm25 first; it activates the "
                "tools it finds, which call_tool can then call.",
            )
        if name not in gateway_session.pins:
            return Check(then="pin")
        if gateway_session.changed(name, tool):
            return Check(
                "changed",
                f"Refused: {name!r} changed on server {located[0]!r} since it was activated (what it says "
                "of itself differs: its description, input schema or annotations), so it was deactivated. "
                "Call search_tool_bm25 again to find it, with what it now says, before calling it.",
                then="deactivate",
            )
        return Check()

    def _log(
        self,
        gateway_session: GatewaySession,
        name: str,
        server: str | None,
        started: float,
        is_error: bool,
        outcome: str,
        call: str | None = None,
    ) -> None:
        """Queue the call's log entry: written after the answer is sent. ``call`` names a
        forwarded call, whose start is logged already."""
        duration_ms = (time.perf_counter() - started) * 1000
        self.writes.later(
            gateway_session, gateway_session.call_logging(name, server, duration_ms, is_error, outcome, call)
        )


def _search_and_pin(
    gateway_session: GatewaySession, arguments: dict[str, Any], loaded: Collection[str], writer: Writer
) -> SearchOutcome:
    """In the writer's transaction: the tools listed under their own names made active (so the
    answer marks them active and never activates them again), the search, and the pins of what
    it activated."""
    gateway_session.load_in(writer, loaded)
    outcome = gateway_session.search_in(writer, arguments)
    if outcome.activated:
        gateway_session.pin_in(writer, outcome.activated)
    return outcome


def served_names(served: Served, gateway_session: GatewaySession, name: str) -> list[str]:
    """In the worker: the full names of the tools this gateway serves whose label or MCP name
    ``name`` is (a tool of a server it does not front, refuses or leaves out is not one of them)."""
    session = gateway_session.session
    found = session.tools_by_names(list(session.names_written(name)))
    servers, scope = served.config.servers, served.scope
    return [
        tool.name
        for tool in found.values()
        if scope.admits(tool.server_name, tool.mcp_tool_name) and route(tool, servers) is not None
    ]
