"""``serve``: one MCP server in front of a config's servers.

Its tools/list is static — ``search_tool_bm25`` (contract §6, run in the gateway's persisted
session) and ``call_tool`` (forwards a call of an activated tool to its server) — so it works
with every client, those that ignore ``notifications/tools/list_changed`` included. With
``expose_active`` the session's active tools are listed as well, and a change notification goes
out after each activation. It answers from the persisted index at once: upstream servers are
connected when a call needs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import sys
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar, get_args

import anyio
import anyio.to_thread
from mcp import MCPError, types
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from discovery._files import read_regular
from discovery._index import ToolIndex
from discovery._mcp.config import ConfigError, McpConfig
from discovery._mcp.description import still_syncing
from discovery._mcp.direct import Direct, direct_tools
from discovery._mcp.scope import GatewayScope
from discovery._mcp.server import IDENTITY, LOG_LEVEL, connection_of, make_server
from discovery._mcp.sessions import (
    NEW_SESSION_MODE,
    GatewaySession,
    NotYourSession,
    Pending,
    write_pending,
)
from discovery._mcp.sync import Library, ServerSync, sync_server, sync_servers
from discovery._mcp.upstreams import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_STARTING,
    DEFAULT_TIMEOUT,
    SamplingAnswer,
    UpstreamError,
    Upstreams,
    route,
    split_catalog_name,
)
from discovery._results import compact_json
from discovery._rules import SEARCH_TOOL_NAME
from discovery._sessions.search_tool import PARAMETERS as SEARCH_PARAMETERS
from discovery.errors import ToolIndexError
from store import StoredTool
from store.errors import StoreError

T = TypeVar("T")

SYNC_WAIT = 10.0
"""How long a search waits for the servers a gateway is syncing for the first time: a cold
gateway's first search finds their tools rather than none; past it, the answer says which are
still syncing and to search again."""

DEFAULT_SESSION_CACHE = 256
"""Sessions kept in memory, the most recently used; another is read again from the database
when it is next used. Each holds its pins and a cached view: a client naming sessions at random
must not grow the process without bound."""
LOG_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
"""Log levels from the least severe up."""

CALL_TOOL_NAME = "call_tool"
CALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "a tool name that search_tool_bm25 activated"},
        "arguments": {
            "type": "object",
            "description": "the tool's arguments ({} for none); leave out to get its input schema",
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}
CALL_DESCRIPTION = (
    "Call a tool that search_tool_bm25 activated in this session, on the MCP server that has it.\n"
    "\n"
    "- `name` — a tool name a search listed (every tool in its `tools` is active)\n"
    "- `arguments` — the tool's arguments as an object (`{}` for none)\n"
    "\n"
    "Without `arguments`, the tool is not called: you get its description and input schema. "
    "The result is the tool's own result. Search first: only activated tools can be called."
)


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """How ``serve`` runs: the session of the process, the mode of new sessions, and the rest."""

    session_id: str | None = None
    mode: str = NEW_SESSION_MODE
    expose_active: bool = False
    refresh: float | None = None
    timeout: float = DEFAULT_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    max_starting: int = DEFAULT_MAX_STARTING
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    per_client: bool = False
    """Over HTTP: no process session; a client that names none gets its own, by its connection."""
    identities: bool = False
    """Over HTTP with ``--tokens``: each session belongs to the identity that made it."""
    session_cache: int = DEFAULT_SESSION_CACHE
    watch_interval: float = 1.0
    """Seconds between two looks at the config file (when the gateway reloads it)."""


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _digest(path: Path) -> str | ConfigError:
    """A digest of what the config file holds, or why it cannot be read now (as while an editor
    replaces it, or when it is no regular file): read bounded, in a worker, never on the loop."""
    try:
        _, text = read_regular(path, ConfigError, what="config file")
    except ConfigError as exc:
        return exc
    return hashlib.sha256(text.encode()).hexdigest()


def _relay(ctx: ServerRequestContext[Any, Any]) -> ProgressFnT | None:
    """When the client gave its call a progress token: what passes the upstream's progress on to
    it (the upstream gets a token of its own from the gateway's client, which routes it back)."""
    if not (ctx.meta or {}).get("progress_token"):
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return relay


def text_result(text: str, *, is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)


class Gateway:
    """The MCP server, its upstream pool and the sessions it serves; use in ``async with``."""

    def __init__(
        self,
        index: ToolIndex,
        config: McpConfig,
        options: GatewayOptions,
        *,
        errlog: TextIO | None = None,
        upstream_errlog: TextIO | None = None,
        reload_config: Callable[[], McpConfig] | None = None,
    ) -> None:
        self.index = index
        self.config = config
        self.reload_config = reload_config
        """Reads the config file again (its filters joined with the command line's); with it, the
        file is watched and a new version applied while the gateway runs."""
        self.options = options
        self.errlog = errlog if errlog is not None else sys.stderr
        self.library = Library(index)
        self.scope = GatewayScope(frozenset(config.servers), config.tool_filter)
        self.upstreams = Upstreams(
            config,
            timeout=options.timeout,
            errlog=upstream_errlog,
            on_tools_changed=self._server_changed,
            max_starting=options.max_starting,
            max_result_bytes=options.max_result_bytes,
            call_timeout=options.call_timeout,
            peer=self,
        )
        self.sessions: OrderedDict[tuple[str | None, str], GatewaySession] = OrderedDict()
        """The sessions in memory by (identity, id), least recently used first."""
        self.default_session: GatewaySession | None = None
        # Keyed by the connection's own object, so an entry goes when its connection does (the
        # transport ends idle connections): nothing here outlives the clients.
        self._by_connection: weakref.WeakKeyDictionary[Connection, str] = weakref.WeakKeyDictionary()
        self._clients: weakref.WeakKeyDictionary[Connection, set[str]] = weakref.WeakKeyDictionary()
        self._recent: weakref.ref[Connection] | None = None
        """The handshake-era client connection that made the latest request: what an upstream
        asks outside any call goes to it."""
        self._opening = anyio.Lock()
        self._connecting = anyio.Lock()
        self._buses: dict[str, tuple[InMemorySubscriptionBus, ListenHandler, int]] = {}
        self._backlog: deque[tuple[GatewaySession, Pending]] = deque()
        self._draining = False
        self._rounds: dict[str, _Rounds] = {}
        """The calls of 2026-07-28 clients that go in rounds, by the ``requestState`` naming each."""
        self.server = make_server(self, expose_active=options.expose_active)
        """The server the clients talk to; this gateway answers its requests once entered."""
        self.direct = Direct()
        """The tools listed under their own names (``alwaysLoad``, ``--mode auto``)."""
        self.syncing: list[str] = []
        """The servers being synced for the first time, whose tools searches do not find yet."""
        self._synced = anyio.Event()

    async def __aenter__(self) -> Gateway:
        await self.upstreams.__aenter__()
        try:
            unsynced = await self.library.run(self._say_what_is_served)
            self.syncing = list(unsynced)
            self.direct = await self.library.run(self._direct_tools)
            if not self.options.per_client:
                self.default_session = await self._open(self.options.session_id, announce=True)
        except BaseException:
            await self.upstreams.__aexit__(None, None, None)
            raise
        if self.options.refresh:
            self.upstreams.start_soon(self._refresh_forever)
        elif unsynced:
            self.upstreams.start_soon(lambda: self._sync_in_background(unsynced))
        if self.reload_config is not None:
            self.upstreams.start_soon(self._watch_config)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            with anyio.CancelScope(shield=True):  # what was answered is logged, even on the way out
                await self.library.run(self._write_backlog)
        finally:
            await self.upstreams.__aexit__(None, None, None)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()

    def _say_what_is_served(self) -> list[str]:
        """In the worker: the database and how many tools in scope each server has, so that a
        gateway in front of servers never synced says so instead of finding nothing. Returns
        the servers the catalog has no tool of (never synced), which are synced in the
        background while the gateway already answers."""
        self.say(f"database {self.index.url} (analyzer {self.index.analyzer})")
        unsynced = [server for server in self.config.servers if not self.index.tools(server=server)]
        counts = {
            server: sum(
                1
                for tool in self.index.tools(server=server)
                if self.scope.admits(tool.server_name, tool.mcp_tool_name)
            )
            for server in self.config.servers
        }
        shown = ", ".join(f"{server} {count} tools" for server, count in counts.items()) or "none"
        self.say(f"servers of {self.config.path}: {shown}")
        if self.config.servers and not any(counts.values()):
            self.say(
                f"Warning: no server of {self.config.path} has tools in this database yet: syncing "
                "them in the background; searches find their tools once each is synced"
            )
        elif unsynced and not self.options.refresh:
            self.say(f"syncing in the background, never synced before: {', '.join(unsynced)}")
        return unsynced

    # Sessions

    async def _open(
        self, session_id: str | None, identity: str | None = None, *, announce: bool = False
    ) -> GatewaySession:
        """The session ``session_id`` of ``identity`` (``None``: no identities), from memory or
        read from the database. One not stored yet is read again at each use, in case another
        client or process has made it since. ``announce``: say a new session's id at once (the
        process's own, which the user needs to resume it)."""
        async with self._opening:
            cached = None
            if session_id is not None:
                cached = self.sessions.get((identity, session_id))
                if cached is not None:
                    self.sessions.move_to_end((identity, session_id))
                    if cached.stored:
                        return cached
            # Written first: a session evicted with entries still in the backlog reads them back.
            opened: GatewaySession = await self.library.run(
                self._written_first,
                GatewaySession.open,
                self.index,
                session_id,
                self.options.mode,
                self.scope,
                identity,
            )
            if cached is not None and not opened.stored:
                return cached
            opened.on_created = self._created
            self.sessions[(identity, opened.id)] = opened
            while len(self.sessions) > self.options.session_cache:
                self.sessions.popitem(last=False)
            if opened.stored:
                self.say(f"session {opened.id} (resumed)")
            elif announce:
                self.say(f"session {opened.id} (new)")
            return opened

    def _created(self, gateway_session: GatewaySession) -> None:
        if gateway_session is not self.default_session:
            self.say(f"session {gateway_session.id} (new)")

    def _identity(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The identity whose token the request carried, when sessions belong to identities."""
        if not self.options.identities:
            return None
        scope = getattr(ctx.request, "scope", None) or {}
        identity = scope.get(IDENTITY)
        if not isinstance(identity, str):  # the token check sets it before any request gets here
            raise MCPError(INVALID_PARAMS, "this request carries no identity")
        return identity

    async def session_of(self, ctx: ServerRequestContext[Any, Any]) -> GatewaySession:
        """The session of a request: ``?session=`` on HTTP, else the process's own."""
        request = ctx.request
        query: Mapping[str, str] = getattr(request, "query_params", None) or {}
        wanted = query.get("session")
        identity = self._identity(ctx)
        if wanted is None and self.options.per_client:
            gateway_session = await self._connection_session(ctx, identity)
        elif wanted is None:
            assert self.default_session is not None
            gateway_session = self.default_session
        else:
            try:
                gateway_session = await self._open(wanted, identity)
            except (StoreError, NotYourSession):
                raise  # the database failed, not the client's session id; or it is not theirs
            except ToolIndexError as exc:
                raise MCPError(INVALID_PARAMS, f"session {wanted!r}: {exc}") from exc
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._clients.setdefault(connection_of(ctx), set()).add(gateway_session.id)
            self._recent = weakref.ref(connection_of(ctx))
        return gateway_session

    async def _connection_session(
        self, ctx: ServerRequestContext[Any, Any], identity: str | None
    ) -> GatewaySession:
        """A new session of its own for each HTTP connection that names none. A handshake-era
        client is its ``Mcp-Session-Id``: the transport makes it up, unguessable, and refuses a
        request whose id it did not give. A 2026-07-28 client has no connection at all, so it
        must name its session."""
        headers: Mapping[str, str] = getattr(ctx.request, "headers", None) or {}
        connection = headers.get(MCP_SESSION_ID_HEADER)
        if connection is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(
                INVALID_PARAMS,
                "this gateway keeps a session per connection, and this request has none: name a "
                "session in the endpoint's query, as in /mcp?session=ID",
            )
        async with self._connecting:
            # The transport refuses an Mcp-Session-Id it did not give, or gave to another token.
            session_id = self._by_connection.get(connection_of(ctx))
            gateway_session = await self._open(session_id, identity)
            self._by_connection[connection_of(ctx)] = gateway_session.id
            return gateway_session

    # tools/list

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListToolsResult:
        try:
            gateway_session = await self.session_of(ctx)
        except NotYourSession as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        return await self._listing(gateway_session)

    async def _listing(self, gateway_session: GatewaySession) -> types.ListToolsResult:
        """The session's ``tools/list``: the two tools of the gateway, and with ``expose_active``
        its active tools that this gateway serves."""
        config, scope = self.config, self.scope
        search = types.Tool(
            name=SEARCH_TOOL_NAME,
            title="SearchTools",
            description=gateway_session.description,
            input_schema=SEARCH_PARAMETERS,
        )
        tools = [search] if self.direct.search else []
        tools.append(
            types.Tool(name=CALL_TOOL_NAME, description=CALL_DESCRIPTION, input_schema=CALL_PARAMETERS)
        )
        listed = [*self.direct.tools]
        if self.options.expose_active:
            listed += await self.library.run(gateway_session.active_tools)
        for tool in {tool.name: tool for tool in listed}.values():
            in_scope = scope.admits(tool.server_name, tool.mcp_tool_name)
            if in_scope and route(tool, config.servers) is not None:
                tools.append(self._listed_tool(tool))
        return types.ListToolsResult(tools=tools)

    def _listed_tool(self, tool: StoredTool) -> types.Tool:
        """An active tool as ``expose_active`` lists it (and ``call_tool`` describes it): the
        record, with what its server said of it beyond the record (``mcp_meta``: title,
        annotations, output schema, icons) as the catalog keeps it."""
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        fields: dict[str, Any] = {
            "name": tool.name,
            "title": tool.label,
            "description": tool.description,
            "inputSchema": {"type": "object", **schema},
        }
        meta = tool.mcp_meta or {}
        try:
            return types.Tool.model_validate({**fields, **meta})
        except ValidationError:  # what a server or a file said, kept only where it is the protocol's
            for key, value in meta.items():
                try:
                    types.Tool.model_validate({**fields, key: value})
                except ValidationError:
                    continue
                fields[key] = value
        return types.Tool.model_validate(fields)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        return {SEARCH_TOOL_NAME: SEARCH_PARAMETERS, CALL_TOOL_NAME: CALL_PARAMETERS}.get(name)

    # tools/call

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            gateway_session = await self.session_of(ctx)
        except NotYourSession as exc:
            return text_result(f"Refused: {exc}.", is_error=True)
        arguments = params.arguments
        if params.name == SEARCH_TOOL_NAME:
            return await self._search(ctx, gateway_session, arguments or {})
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
        if self.options.expose_active or params.name in self.direct.names:
            return await self._forward_for(ctx, params, gateway_session, params.name, arguments or {})
        return text_result(
            f"Unknown tool {params.name!r}: call search_tool_bm25 to find tools, then call_tool to call "
            "them.",
            is_error=True,
        )

    async def _search(
        self, ctx: ServerRequestContext[Any, Any], gateway_session: GatewaySession, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        if self.syncing:
            with anyio.move_on_after(SYNC_WAIT):
                await self._synced.wait()
        try:
            outcome = await self.library.run(self._written_first, gateway_session.search, arguments)
        except NotYourSession as exc:
            return text_result(f"Refused: {exc}.", is_error=True)
        if outcome.activated:
            self._later(gateway_session, gateway_session.pinning(outcome.activated))
            if self.options.expose_active:
                await self._notify(gateway_session.id)
        if outcome.structured is None:
            return text_result(outcome.text, is_error=outcome.is_error)
        answer = still_syncing(outcome.structured, self.syncing)
        return types.CallToolResult(
            content=[types.TextContent(text=compact_json(answer))], structured_content=answer, is_error=False
        )

    async def _forward_for(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        gateway_session: GatewaySession,
        name: str,
        arguments: dict[str, Any] | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
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
            return await self.forward(gateway_session, name, arguments, progress=_relay(ctx), caller=ctx)
        owner = (self._identity(ctx), gateway_session.id)
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
            rounds = self._rounds[token] = _Rounds(owner, ctx)
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
        rounds: _Rounds,
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
        ``caller``, the client's request, gets what the server asks during the call."""
        started = time.perf_counter()
        tool, active = await self.library.run(gateway_session.resolve, name)
        # The server and upstream name come from the record the model was shown (and its pin).
        located = None if tool is None else route(tool, self.config.servers)
        # The log of a call of an unknown name still says which server the name points to.
        guessed = split_catalog_name(name, self.config.servers) if tool is None else None
        server = located[0] if located else guessed[0] if guessed else None
        check = self._check(gateway_session, name, tool, active, located)
        if check.then == "pin":
            # Activated outside the gateway, or by a search whose pins are still in the backlog.
            try:
                await self.library.run(self._written_first, self._pin_missing, gateway_session, name)
            except NotYourSession as exc:
                check = _Check("not yours", f"Refused: {exc}.")
        elif check.then == "deactivate":
            await self.library.run(self._written_first, gateway_session.unpin_changed, name)
            if self.options.expose_active:
                await self._notify(gateway_session.id)
        if check.refused is not None:
            await self._log(gateway_session, name, server, started, True, check.refused)
            return text_result(check.message, is_error=True)
        assert tool is not None and located is not None
        if arguments is None:
            await self._log(gateway_session, name, server, started, False, "described")
            return text_result(_described(self._listed_tool(tool)), is_error=False)
        if not gateway_session.stored:
            try:
                # The call is logged, so the session is stored first (active at the start of a new one).
                await self.library.run(self._written_first, gateway_session.store)
            except NotYourSession as exc:
                return text_result(f"Refused: {exc}.", is_error=True)
        upstream = self.upstreams.upstream(located[0])
        try:
            result = await self.upstreams.call_upstream(
                upstream, located[1], arguments, progress=progress, caller=caller
            )
        except UpstreamError as exc:
            await self._log(gateway_session, name, server, started, True, "server failed")
            self.say(f"call of {name} failed: {exc.reported}")  # with what the model is not told
            return text_result(f"Calling {name} failed: {exc}.", is_error=True)
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call (or the gateway is stopping): the server was told, and
            # the client gets no answer; the log still says the call was made.
            await self._log(gateway_session, name, server, started, True, "cancelled")
            raise
        await self._log(gateway_session, name, server, started, result.is_error, "called")
        return result.model_copy(update={"meta": None})

    def _check(
        self,
        gateway_session: GatewaySession,
        name: str,
        tool: StoredTool | None,
        active: bool,
        located: tuple[str, str] | None,
    ) -> _Check:
        """Whether ``name`` can be called now, from what one read found (``tool``, ``active``) and
        the session's pins; it reads and writes nothing itself, and says what the caller must
        write first (pin the tool, or deactivate it)."""
        if tool is None:
            return _Check(
                "unknown",
                f"Unknown tool {name!r}: it is not in the catalog. Call search_tool_bm25 to find a tool, "
                "then call_tool with a name it activated.",
            )
        not_allowed = (
            self.config.tool_filter.refusal(tool.server_name, tool.mcp_tool_name)
            if tool.server_name in self.config.servers and tool.mcp_tool_name is not None
            else None
        )
        if not_allowed is not None:
            return _Check(
                "not allowed", f"{name!r} is not allowed by this gateway's tool filters: {not_allowed}."
            )
        if located is None or not self.scope.admits(tool.server_name, tool.mcp_tool_name):
            servers = ", ".join(self.config.servers) or "none"
            return _Check(
                "not served",
                f"{name!r} is not a tool of a server this gateway fronts (its servers: {servers}).",
            )
        if name in self.direct.names:
            return _Check()
        if not active:
            return _Check(
                "not active",
                f"{name!r} is not active in this session: call search_tool_bm25 first; it activates the "
                "tools it finds, which call_tool can then call.",
            )
        if name not in gateway_session.pins:
            return _Check(then="pin")
        if gateway_session.changed(name, tool):
            return _Check(
                "changed",
                f"Refused: {name!r} changed on server {located[0]!r} since it was activated (what it says "
                "of itself differs: its description, input schema or annotations), so it was deactivated. "
                "Call search_tool_bm25 again to find it, with what it now says, before calling it.",
                then="deactivate",
            )
        return _Check()

    async def _log(
        self,
        gateway_session: GatewaySession,
        name: str,
        server: str | None,
        started: float,
        is_error: bool,
        outcome: str,
    ) -> None:
        duration_ms = (time.perf_counter() - started) * 1000
        self._later(
            gateway_session, gateway_session.call_logging(name, server, duration_ms, is_error, outcome)
        )

    def _later(self, gateway_session: GatewaySession, pending: Pending) -> None:
        """Write a log entry after the answer is sent. Entries wait in a backlog that the worker
        writes in one transaction, as soon as it is free, and always before any later write of
        the gateway (``_written_first``), so the log keeps the order of the calls; only a gateway
        killed before the worker got to them loses them. A session not stored yet has no log:
        what it did was read-only (a listing, a description, a refusal), and is not kept."""
        if not gateway_session.stored:
            return
        self._backlog.append((gateway_session, pending))
        if not self._draining:
            self._draining = True
            self.upstreams.start_soon(self._drain)

    async def _drain(self) -> None:
        try:
            while self._backlog:
                await self.library.run(self._write_backlog)
        finally:
            self._draining = False

    def _write_backlog(self) -> None:
        """In the worker: write every entry waiting in the backlog."""
        writes = []
        while self._backlog:
            writes.append(self._backlog.popleft())
        if not writes:
            return
        try:
            write_pending(self.index, writes)
        except ToolIndexError as exc:
            self.say(f"could not log to the session: {exc}")

    def _written_first(self, work: Callable[..., T], *args: Any) -> T:
        """In the worker: ``work`` after the backlog is written, so its own log entries follow."""
        self._write_backlog()
        return work(*args)

    def _pin_missing(self, gateway_session: GatewaySession, name: str) -> None:
        if name not in gateway_session.pins:
            gateway_session.pin([name])

    # What upstream servers ask of the client, and their log messages

    async def sampling(
        self, server: str, caller: object | None, params: types.CreateMessageRequestParams
    ) -> SamplingAnswer:
        result_type = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        answer: SamplingAnswer = await self._ask(
            caller,
            types.CreateMessageRequest(params=params),
            result_type,
            types.ClientCapabilities(sampling=types.SamplingCapability()),
            "Sampling",
        )
        return answer

    async def elicitation(
        self, server: str, caller: object | None, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer: types.ElicitResult | types.ErrorData = await self._ask(
            caller,
            types.ElicitRequest(params=params),
            types.ElicitResult,
            types.ClientCapabilities(elicitation=types.ElicitationCapability()),
            "Elicitation",
        )
        return answer

    async def roots(self, server: str, caller: object | None) -> types.ListRootsResult | types.ErrorData:
        answer: types.ListRootsResult | types.ErrorData = await self._ask(
            caller,
            types.ListRootsRequest(),
            types.ListRootsResult,
            types.ClientCapabilities(roots=types.RootsCapability()),
            "List roots",
        )
        return answer

    async def _ask(
        self,
        caller: object | None,
        request: types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest,
        result_type: type[Any],
        needs: types.ClientCapabilities,
        what: str,
    ) -> Any:
        """Ask the client what an upstream asks: the client of the call in flight (on its
        request's stream), or outside any call the handshake-era client that made the latest
        request (none when sessions belong to identities). What that client did not declare, or
        cannot be asked, is the error the SDK answers for a capability a client lacks (invalid
        request), never a wait."""
        if isinstance(caller, _Rounds):
            if not caller.ctx.session.check_client_capability(needs):
                return types.ErrorData(
                    code=INVALID_REQUEST,
                    message=f"{what} not supported: the gateway's client did not declare it",
                )
            answer = await caller.ask(request)
            try:
                dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                return result_type.model_validate(dumped)
            except (AttributeError, ValidationError):
                return types.ErrorData(code=INVALID_PARAMS, message=f"{what}: the client's answer is not one")
        target: ServerRequestContext[Any, Any] | Connection
        if isinstance(caller, ServerRequestContext):
            target, connection, version = caller, connection_of(caller), caller.protocol_version
        else:
            # With identities, a request outside any call belongs to no one: never another's client.
            recent = self._recent() if self._recent is not None and not self.options.identities else None
            if recent is None:
                return types.ErrorData(
                    code=INVALID_REQUEST, message=f"{what} not supported: no client is calling a tool now"
                )
            target, connection, version = recent, recent, recent.protocol_version
        if not connection.check_capability(needs):
            return types.ErrorData(
                code=INVALID_REQUEST, message=f"{what} not supported: the gateway's client did not declare it"
            )
        if version in MODERN_PROTOCOL_VERSIONS:  # a 2026-07-28 client is asked in rounds, never outside
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{what} not supported: the gateway's client speaks {version}, which has no "
                "requests from a server outside a call",
            )
        try:
            if isinstance(target, ServerRequestContext):
                metadata = ServerMessageMetadata(related_request_id=target.request_id)
                return await target.session.send_request(request, result_type, metadata=metadata)
            return await connection.send_request(request, result_type=result_type)
        except MCPError as exc:  # the client's own answer, passed on as it came
            return exc.error
        except (NoBackChannelError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return types.ErrorData(code=INTERNAL_ERROR, message=f"{what}: the gateway's client is gone")

    async def log(
        self, server: str, caller: object | None, params: types.LoggingMessageNotificationParams
    ) -> None:
        """An upstream's log message goes to the client of the call in flight on that server
        (on 2026-07-28, only at the level that call asked for), or outside any call to every
        handshake-era client (to none when sessions belong to identities); ``logger`` names the
        server first. A client that set a level
        (logging/setLevel) gets nothing below it."""
        named = params.model_copy(
            update={"logger": server if params.logger is None else f"{server}/{params.logger}"}
        )
        notification = types.LoggingMessageNotification(params=named)
        if isinstance(caller, _Rounds):
            caller = caller.ctx
        if isinstance(caller, ServerRequestContext):
            connection = connection_of(caller)
            allowed = allowed_log_levels(caller.protocol_version, caller.meta)
            if params.level in allowed and _wants(connection, params.level):
                try:
                    await caller.session.send_notification(notification, related_request_id=caller.request_id)
                except (MCPError, RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                    # The call ended meanwhile, or its client went away.
                    self.say(f"a log message of server {server!r} was not passed on: {exc}")
            return
        if self.options.identities:
            return  # a message outside any call is for no one in particular: not for everyone
        dumped = named.model_dump(by_alias=True, mode="json", exclude_none=True)
        for connection in list(self._clients):
            if _wants(connection, params.level):
                await connection.notify("notifications/message", dumped)

    async def roots_changed(
        self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams
    ) -> None:
        await self.upstreams.roots_changed()

    # Change notifications

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        try:
            gateway_session = await self.session_of(ctx)
        except NotYourSession as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        key = gateway_session.id
        bus, handler, listening = self._buses.get(key) or (InMemorySubscriptionBus(), None, 0)
        handler = handler or ListenHandler(bus)
        self._buses[key] = (bus, handler, listening + 1)
        try:
            return await handler(ctx, params)
        finally:
            # A bus lives while someone listens on it: sessions named once leave nothing behind.
            bus, handler, listening = self._buses[key]
            if listening == 1:
                del self._buses[key]
            else:
                self._buses[key] = (bus, handler, listening - 1)

    async def _notify(self, session_id: str) -> None:
        """Tell the session's clients that its tools/list changed: handshake-era clients by a
        notification on their connection, 2026-07-28 clients on their listen streams."""
        for client, session_ids in list(self._clients.items()):
            if session_id not in session_ids:
                continue
            try:
                await client.send_tool_list_changed()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, MCPError, RuntimeError):
                self._clients.pop(client, None)
        if session_id in self._buses:
            await self._buses[session_id][0].publish(ToolsListChanged())

    # Re-syncing upstream servers

    async def _server_changed(self, server: str) -> None:
        """An upstream said its tools changed: sync it, so searches and pins see the change."""
        self._report(await sync_server(self.library, self.upstreams, server))
        await self._catalog_changed()

    async def _sync_in_background(self, servers: list[str]) -> None:
        """Sync ``servers`` while the gateway answers, each connection closed once its tools are
        written (a call opens it again), then tell the sessions their tools may have changed."""
        for result in await sync_servers(self.library, self.upstreams, servers, close=True):
            self._report(result)
        self._synced_now(servers)
        await self._catalog_changed()

    def _synced_now(self, servers: list[str]) -> None:
        """``servers`` were synced: searches stop waiting for them."""
        self.syncing = [server for server in self.syncing if server not in servers]
        if not self.syncing:
            self._synced.set()

    def _direct_tools(self) -> Direct:
        return direct_tools(self.index, self.config, self.scope, self.options.mode)

    async def _catalog_changed(self) -> None:
        """After a sync or a new config: the search tool's description of each session in memory
        says the new counts, and with ``expose_active`` its clients are told to list again."""
        direct = await self.library.run(self._direct_tools)
        redirected, self.direct = (
            direct.names != self.direct.names or direct.search != self.direct.search,
            direct,
        )
        for gateway_session in list(self.sessions.values()):
            try:
                await self.library.run(gateway_session.describe)
            except ToolIndexError as exc:  # a session deleted meanwhile keeps its description
                self.say(f"session {gateway_session.id}: {exc}")
        if self.options.expose_active or redirected:
            notified = {session_id for ids in list(self._clients.values()) for session_id in ids}
            for session_id in notified | set(self._buses):
                await self._notify(session_id)

    # The config file, watched

    async def _watch_config(self) -> None:
        """Poll the config file (size and modification time, then a digest of what it holds) and
        apply a new version without a restart; an unreadable or invalid one keeps the old."""
        assert self.reload_config is not None
        path = Path(self.config.path)
        seen = await anyio.to_thread.run_sync(_stat, path)
        known = await anyio.to_thread.run_sync(_digest, path)
        # One warning until the file reads as a config again: one still being written changes on
        # every poll, and fails each time in its own way.
        warned = False
        while True:
            await anyio.sleep(self.options.watch_interval)
            now = await anyio.to_thread.run_sync(_stat, path)
            if now == seen:
                continue
            seen = now
            digest = await anyio.to_thread.run_sync(_digest, path)
            if isinstance(digest, ConfigError):
                if not warned:
                    self.say(f"Warning: {digest}; serving its previous version")
                warned = True
                continue
            if digest == known:
                warned = False
                continue
            known = digest
            try:
                config = await anyio.to_thread.run_sync(self.reload_config)
            except ToolIndexError as exc:
                if not warned:
                    self.say(f"Warning: {exc}; the config is unchanged (serving its previous version)")
                warned = True
                continue
            warned = False
            try:
                await self.apply_config(config)
            except ToolIndexError as exc:  # the database failed meanwhile: the next edit tries again
                self.say(f"Warning: applying {path} failed: {exc}")

    async def apply_config(self, config: McpConfig) -> None:
        """Serve ``config`` from now on: its new servers synced and callable, removed ones out of
        scope (their tools leave searches and active lists), a changed entry's server restarted
        and synced again. Sessions are kept: those in memory are read again under the new scope."""
        for warning in config.warnings():
            self.say(f"Warning: {warning}")
        # Tools the old filters left out were never imported: new filters sync every server again.
        refiltered = config.tool_filter != self.config.tool_filter
        added, removed, changed = await self.upstreams.reconfigure(config)
        self.config = config
        self.scope = GatewayScope(frozenset(config.servers), config.tool_filter)
        async with self._opening:
            # Their handles hold the old scope and what it ruled out: read again when next used.
            self.sessions.clear()
        if self.default_session is not None:
            self.default_session = await self._open(self.default_session.id)
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (("added", added), ("removed", removed), ("changed", changed))
            if names
        ]
        if refiltered:
            parts.append("filters changed")
        self.say(f"config {config.path} reloaded: {'; '.join(parts) or 'nothing that serve uses changed'}")
        if refiltered:
            await self._sync_in_background(list(config.servers))
        elif added or changed:
            await self._sync_in_background([*added, *changed])
        else:
            await self._catalog_changed()

    async def _refresh_forever(self) -> None:
        assert self.options.refresh
        while True:
            # Servers no call has opened are started for the sync and stopped after it: a refresh
            # of many servers never keeps them all running.
            servers = list(self.config.servers)
            for result in await sync_servers(self.library, self.upstreams, servers, close=True):
                self._report(result)
            if self.syncing:
                self._synced_now(servers)
                await self._catalog_changed()
            await anyio.sleep(self.options.refresh)

    def _report(self, result: ServerSync) -> None:
        if result.report is None:
            self.say(f"sync {result.server}: {result.error}")
        else:
            counts = ", ".join(f"{key} {value}" for key, value in result.report.counts().items())
            self.say(f"sync {result.server}: {counts}")

    def say(self, line: str) -> None:
        """One line on stderr; an upstream's words in it (its errors) are third-party text, so
        control characters never reach a terminal."""
        shown = "".join(char if char.isprintable() else "\ufffd" for char in line)
        print(f"tool-index serve: {shown}", file=self.errlog, flush=True)


@dataclass(eq=False)
class _Ask:
    """A question of an upstream server to a 2026-07-28 client, and its answer once it came."""

    request: types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest
    sent: bool = False
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


class _Rounds:
    """A forwarded call of a 2026-07-28 client in rounds: that protocol has no requests from a
    server, so the upstream's questions go to the client as input-required results and come back
    in its retries, while the upstream call waits for them."""

    def __init__(self, owner: tuple[str | None, str], ctx: ServerRequestContext[Any, Any]) -> None:
        self.owner = owner
        """Who may continue the call: the identity and session that started it."""
        self.ctx = ctx
        """The client's request of the latest round (its log messages and progress go there)."""
        self.asks: dict[str, _Ask] = {}
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.result: types.CallToolResult | None = None
        self.failure: Exception | None = None
        """What the call raised (the database failed): the SDK answers it as an error."""
        self._count = 0
        self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def ask(
        self, request: types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest
    ) -> Any:
        """Put a question to the client in the next round; its answer when it comes."""
        self._count += 1
        key = f"q{self._count}"
        ask = self.asks[key] = _Ask(request)
        self.wake()
        try:
            await ask.answered.wait()
        finally:
            del self.asks[key]
        return ask.answer

    def answer(self, responses: Mapping[str, Any]) -> None:
        for key, response in responses.items():
            ask = self.asks.get(key)
            if ask is not None and ask.sent and not ask.answered.is_set():
                ask.answer = response
                ask.answered.set()

    async def next_round(self, token: str) -> types.CallToolResult | types.InputRequiredResult:
        """The call's result once it has one, or the questions asked since the last round."""
        while True:
            self._wake = anyio.Event()
            if self.done.is_set():
                if self.failure is not None:
                    raise self.failure
                return self.result or text_result("The call was cancelled.", is_error=True)
            unsent = {key: ask for key, ask in self.asks.items() if not ask.sent}
            if unsent:
                for ask in unsent.values():
                    ask.sent = True
                requests = {key: ask.request for key, ask in unsent.items()}
                return types.InputRequiredResult(input_requests=requests, request_state=token)
            await self._wake.wait()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        relay = _relay(self.ctx)
        # Between two rounds no request of the client waits for it: dropped.
        if relay is not None:
            with contextlib.suppress(
                MCPError, RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError
            ):
                await relay(progress, total, message)


@dataclass(frozen=True, slots=True)
class _Check:
    """What the check of a call found: ``refused`` names the outcome the log records (with the
    ``message`` the client gets) when the call cannot go on; ``then`` is the write that must come
    first (``pin`` an active tool no pin covers yet, ``deactivate`` one that changed)."""

    refused: str | None = None
    message: str = ""
    then: Literal["pin", "deactivate"] | None = None


def _described(tool: types.Tool) -> str:
    """``call_tool``'s answer without arguments: the tool as ``expose_active`` lists it."""
    described: dict[str, Any] = {"name": tool.name}
    if tool.title is not None:
        described["title"] = tool.title
    described["description"] = tool.description
    described["input_schema"] = tool.input_schema
    if tool.output_schema is not None:
        described["output_schema"] = tool.output_schema
    if tool.annotations is not None:
        described["annotations"] = tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
    if tool.icons is not None:
        described["icons"] = [
            icon.model_dump(by_alias=True, mode="json", exclude_none=True) for icon in tool.icons
        ]
    described["call"] = "call_tool with arguments"
    return json.dumps(described, ensure_ascii=False, separators=(",", ":"))


def _wants(connection: Connection, level: types.LoggingLevel) -> bool:
    """Whether a client wants a log message of ``level``: at or above the level it set, if any."""
    minimum = connection.state.get(LOG_LEVEL)
    return minimum not in LOG_LEVELS or LOG_LEVELS.index(level) >= LOG_LEVELS.index(minimum)
