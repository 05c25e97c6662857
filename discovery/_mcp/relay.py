"""What passes between the upstream servers and the gateway's clients besides calls: what a server
asks (sampling, elicitation, roots) and its log messages, to the client of the call in flight;
the client's log level; and the change notifications of a session's tools/list.

The relay is the upstreams' peer (``discovery._mcp.connection.UpstreamPeer``): a server's request
comes with the caller of the call in flight on it (a client's request, a call in rounds, or none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import anyio
from mcp import MCPError, types
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from discovery._mcp.connection import SamplingAnswer
from discovery._mcp.options import GatewayOptions
from discovery._mcp.pool import Context, SessionPool, connection_of
from discovery._mcp.rounds import Question, Rounds
from store import SessionKey

LOG_LEVEL = "tool_index.log_level"
"""The key of a client connection's state where the level it set (logging/setLevel) is kept."""
LOG_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
"""Log levels from the least severe up."""


async def set_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """The level below which the connection gets no log message: the connection's own state."""
    connection_of(ctx).state[LOG_LEVEL] = params.level
    return types.EmptyResult()


class Relay:
    """Upstreams' questions and log messages to the clients, and the clients' change notifications."""

    def __init__(self, options: GatewayOptions, pool: SessionPool, say: Callable[[str], None]) -> None:
        self.options = options
        self.pool = pool
        self._say = say
        self.buses: dict[SessionKey, tuple[InMemorySubscriptionBus, ListenHandler, int]] = {}
        """The listen streams of 2026-07-28 clients, by session, while someone listens."""

    # What upstream servers ask of the client

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
        request: Question,
        result_type: type[Any],
        needs: types.ClientCapabilities,
        what: str,
    ) -> Any:
        """Ask the client what an upstream asks: the client of the call in flight (on its
        request's stream), or outside any call the handshake-era client that made the latest
        request (none when sessions belong to identities). What that client did not declare, or
        cannot be asked, is the error the SDK answers for a capability a client lacks (invalid
        request), never a wait."""
        if isinstance(caller, Rounds):
            return await _ask_in_rounds(caller, request, result_type, needs, what)
        target: ServerRequestContext[Any, Any] | Connection
        if isinstance(caller, ServerRequestContext):
            target, connection, version = caller, connection_of(caller), caller.protocol_version
        else:
            # With identities, a request outside any call belongs to no one: never another's client.
            recent = None if self.options.identities else self.pool.recent()
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

    # Log messages

    async def log(
        self, server: str, caller: object | None, params: types.LoggingMessageNotificationParams
    ) -> None:
        """An upstream's log message goes to the client of the call in flight on that server
        (on 2026-07-28, only at the level that call asked for), or outside any call to every
        handshake-era client (to none when sessions belong to identities); ``logger`` names the
        server first. A client that set a level (logging/setLevel) gets nothing below it."""
        named = params.model_copy(
            update={"logger": server if params.logger is None else f"{server}/{params.logger}"}
        )
        notification = types.LoggingMessageNotification(params=named)
        if isinstance(caller, Rounds):
            caller = caller.ctx
        if isinstance(caller, ServerRequestContext):
            connection = connection_of(caller)
            allowed = allowed_log_levels(caller.protocol_version, caller.meta)
            if params.level in allowed and _wants(connection, params.level):
                try:
                    await caller.session.send_notification(notification, related_request_id=caller.request_id)
                except (MCPError, RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                    # The call ended meanwhile, or its client went away.
                    self._say(f"a log message of server {server!r} was not passed on: {exc}")
            return
        if self.options.identities:
            return  # a message outside any call is for no one in particular: not for everyone
        dumped = named.model_dump(by_alias=True, mode="json", exclude_none=True)
        for connection in list(self.pool.clients):
            if _wants(connection, params.level):
                await connection.notify("notifications/message", dumped)

    # Change notifications

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        gateway_session = await self.pool.session_of(ctx)
        key = gateway_session.key
        bus, handler, listening = self.buses.get(key) or (InMemorySubscriptionBus(), None, 0)
        handler = handler or ListenHandler(bus)
        self.buses[key] = (bus, handler, listening + 1)
        try:
            return await handler(ctx, params)
        finally:
            # A bus lives while someone listens on it: sessions named once leave nothing behind.
            bus, handler, listening = self.buses[key]
            if listening == 1:
                del self.buses[key]
            else:
                self.buses[key] = (bus, handler, listening - 1)

    async def notify(self, session: SessionKey) -> None:
        """Tell the session's clients that its tools/list changed: handshake-era clients by a
        notification on their connection, 2026-07-28 clients on their listen streams."""
        for client, sessions in list(self.pool.clients.items()):
            if session not in sessions:
                continue
            try:
                await client.send_tool_list_changed()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, MCPError, RuntimeError):
                self.pool.clients.pop(client, None)
        if session in self.buses:
            await self.buses[session][0].publish(ToolsListChanged())

    async def notify_all(self) -> None:
        """Tell every session with a client that its tools/list may have changed."""
        notified = {session for keys in list(self.pool.clients.values()) for session in keys}
        for session in notified | set(self.buses):
            await self.notify(session)


async def _ask_in_rounds(
    rounds: Rounds, request: Question, result_type: type[Any], needs: types.ClientCapabilities, what: str
) -> Any:
    """What an upstream asks during a call in rounds: asked in the call's next round."""
    if not rounds.ctx.session.check_client_capability(needs):
        return types.ErrorData(
            code=INVALID_REQUEST, message=f"{what} not supported: the gateway's client did not declare it"
        )
    answer = await rounds.ask(request)
    try:
        dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        return result_type.model_validate(dumped)
    except (AttributeError, ValidationError):
        return types.ErrorData(code=INVALID_PARAMS, message=f"{what}: the client's answer is not one")


def _wants(connection: Connection, level: types.LoggingLevel) -> bool:
    """Whether a client wants a log message of ``level``: at or above the level it set, if any."""
    minimum = connection.state.get(LOG_LEVEL)
    return minimum not in LOG_LEVELS or LOG_LEVELS.index(level) >= LOG_LEVELS.index(minimum)
