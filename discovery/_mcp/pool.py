"""The sessions a gateway serves, and whose they are: the session of each request (``?session=``
over HTTP, else the process's own or the connection's own), kept in memory by (identity, id),
and the clients each session has, for its change notifications and its upstreams' questions."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from discovery._index import ToolIndex
from discovery._mcp.options import GatewayOptions, Served
from discovery._mcp.sessions import GatewaySession
from discovery._mcp.writes import WriteQueue
from discovery.errors import StoreError, ToolIndexError
from store import SessionKey

Context = ServerRequestContext[Any, Any]

IDENTITY = "tool_index.identity"
"""The key of the ASGI scope where ``serve --tokens`` puts the identity whose token a request
carried, qualified by the gateway's realm (``discovery._mcp.serve``)."""


def connection_of(ctx: Context) -> Connection:
    """The client's connection a request came on (over HTTP, its ``Mcp-Session-Id``): the SDK
    gives each request a ``ServerSession`` of its own, over the connection's one object, which
    lives as long as the connection does and no longer."""
    connection: Connection = ctx.session._connection
    return connection


class SessionPool:
    """The sessions in memory, the most recently used kept (``options.session_cache``), and the
    handshake-era clients of each."""

    def __init__(
        self,
        index: ToolIndex,
        options: GatewayOptions,
        served: Served,
        writes: WriteQueue,
        say: Callable[[str], None],
    ) -> None:
        self.index = index
        self.options = options
        self.served = served
        self.writes = writes
        self._say = say
        self.sessions: OrderedDict[SessionKey, GatewaySession] = OrderedDict()
        """The sessions in memory by (identity, id), least recently used first."""
        self.default: GatewaySession | None = None
        """The process's own session (stdio; over HTTP, none)."""
        # Keyed by the connection's own object, so an entry goes when its connection does (the
        # transport ends idle connections): nothing here outlives the clients.
        self.by_connection: weakref.WeakKeyDictionary[Connection, str] = weakref.WeakKeyDictionary()
        self.clients: weakref.WeakKeyDictionary[Connection, set[SessionKey]] = weakref.WeakKeyDictionary()
        """The handshake-era client connections, and the sessions each has used."""
        self._recent: weakref.ref[Connection] | None = None
        self._opening = anyio.Lock()
        self._connecting = anyio.Lock()

    def recent(self) -> Connection | None:
        """The handshake-era client connection that made the latest request: what an upstream
        asks outside any call goes to it."""
        return self._recent() if self._recent is not None else None

    async def open(
        self, session_id: str | None, identity: str | None = None, *, announce: bool = False
    ) -> GatewaySession:
        """The session ``session_id`` of ``identity`` (``None``: the gateway's own, ``serve
        --identity``), from memory or read from the database. One not stored yet is read again
        at each use, in case another client or process has made it since. ``announce``: say a
        new session's id at once (the process's own, which the user needs to resume it)."""
        identity = self.options.identity if identity is None else identity
        async with self._opening:
            cached = None
            if session_id is not None:
                cached = self.sessions.get(SessionKey(identity, session_id))
                if cached is not None:
                    self.sessions.move_to_end(SessionKey(identity, session_id))
                    if cached.stored:
                        return cached
            # After the queued writes: a session evicted with entries still queued reads them back.
            opened: GatewaySession = await self.writes.run(
                GatewaySession.open,
                self.index,
                session_id,
                self.options.mode,
                self.served.scope,
                identity,
                self.options.opened_by,
            )
            if cached is not None and not opened.stored:
                return cached
            opened.on_created = self._created
            self.sessions[opened.key] = opened
            while len(self.sessions) > self.options.session_cache:
                self.sessions.popitem(last=False)
            if opened.stored:
                self._say(f"session {opened.id} (resumed)")
            elif announce:
                self._say(f"session {opened.id} (new)")
            return opened

    async def reopen(self) -> None:
        """After a new config: the sessions in memory hold the old scope and what it ruled out, so
        each is read again when next used; the process's own is read again now."""
        async with self._opening:
            self.sessions.clear()
        if self.default is not None:
            self.default = await self.open(self.default.id, self.default.identity)

    def _created(self, gateway_session: GatewaySession) -> None:
        if gateway_session is not self.default:
            self._say(f"session {gateway_session.id} (new)")

    def identity(self, ctx: Context) -> str:
        """Whose sessions the request's are: the identity whose token it carried (``serve
        --tokens``), else the gateway's own (``serve --identity``)."""
        if not self.options.identities:
            return self.options.identity
        scope = getattr(ctx.request, "scope", None) or {}
        identity = scope.get(IDENTITY)
        if not isinstance(identity, str):  # the token check sets it before any request gets here
            raise MCPError(INVALID_PARAMS, "this request carries no identity")
        return identity

    async def session_of(self, ctx: Context) -> GatewaySession:
        """The session of a request: ``?session=`` on HTTP, else the process's own."""
        request = ctx.request
        query: Mapping[str, str] = getattr(request, "query_params", None) or {}
        wanted = query.get("session")
        named = getattr(query, "getlist", lambda _: [wanted])("session")
        if len(named) > 1:
            raise MCPError(INVALID_PARAMS, f"the endpoint's query names {len(named)} sessions: name one")
        identity = self.identity(ctx)
        if wanted is None and self.options.per_client:
            gateway_session = await self._connection_session(ctx, identity)
        elif wanted is None:
            assert self.default is not None
            if not self.default.stored:  # another process may have made it since: read it again
                self.default = await self.open(self.default.id, self.default.identity)
            gateway_session = self.default
        else:
            try:
                gateway_session = await self.open(wanted, identity)
            except StoreError:
                raise  # the database failed, not the client's session id
            except ToolIndexError as exc:
                raise MCPError(INVALID_PARAMS, f"session {wanted!r}: {exc}") from exc
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.clients.setdefault(connection_of(ctx), set()).add(gateway_session.key)
            self._recent = weakref.ref(connection_of(ctx))
        return gateway_session

    async def _connection_session(self, ctx: Context, identity: str) -> GatewaySession:
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
            session_id = self.by_connection.get(connection_of(ctx))
            gateway_session = await self.open(session_id, identity)
            self.by_connection[connection_of(ctx)] = gateway_session.id
            return gateway_session
