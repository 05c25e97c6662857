"""The MCP server a gateway answers on: its handler table names each MCP method and what answers it.

The SDK's ``Server`` does the protocol (the handshake, ping, the transports, the validation of
each request's params); every other method goes where ``handler_table`` says. The way of a
request: the transport, the SDK, the table, then one room of the gateway — ``Listing`` for
tools/list, ``Calls`` for tools/call (a search, or a call checked, pinned and forwarded), the
``Relay`` for a client's log level and change notifications. A request the database fails is
answered with what failed and to retry (``guarded``), never the SDK's bare internal error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp import MCPError, types
from mcp.server import NotificationOptions, Server
from mcp_types import INTERNAL_ERROR
from pydantic import BaseModel

from discovery._mcp.calls import Calls
from discovery._mcp.health import DatabaseHealth, told_to_client
from discovery._mcp.listing import Listing, input_schema
from discovery._mcp.pool import Context
from discovery._mcp.relay import Relay, set_level
from discovery._mcp.rounds import text_result
from discovery.errors import StoreError

INSTRUCTIONS = "Call search_tool_bm25 to find tools, then call_tool to call them."


@dataclass(frozen=True, slots=True)
class Method:
    """One line of the handler table: an MCP method, the model of its params, what answers it."""

    name: str
    params: type[BaseModel]
    answer: Callable[[Context, Any], Awaitable[Any]]
    notification: bool = False
    failure_as_result: bool = False
    """A failure of the database is an ``isError`` result the model reads (tools/call), not a
    JSON-RPC error."""


def handler_table(listing: Listing, calls: Calls, relay: Relay) -> tuple[Method, ...]:
    """Every MCP method the gateway answers besides the handshake and ping, which the SDK answers."""
    return (
        Method("tools/list", types.PaginatedRequestParams, listing.list_tools),
        Method("tools/call", types.CallToolRequestParams, calls.call_tool, failure_as_result=True),
        Method("subscriptions/listen", types.SubscriptionsListenRequestParams, relay.listen),
        Method("logging/setLevel", types.SetLevelRequestParams, set_level),
        Method("notifications/roots/list_changed", types.NotificationParams, calls.roots_changed, True),
    )


class GatewayServer(Server[Any]):
    """A ``Server`` whose capabilities say whether its tools/list changes, on every transport:
    the HTTP session manager asks for the initialization options itself, with no arguments."""

    def __init__(self, notification_options: NotificationOptions, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notification_options = notification_options

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        return super().create_initialization_options(
            notification_options or self.notification_options, experimental_capabilities, extensions
        )


def guarded(method: Method, health: DatabaseHealth) -> Callable[[Context, Any], Awaitable[Any]]:
    """``method``'s answer, with a failure of the database told to ``health`` (the outage's one
    line on stderr) and answered as what failed and to retry."""

    async def answer(ctx: Context, params: Any) -> Any:
        try:
            return await method.answer(ctx, params)
        except StoreError as exc:
            health.failed(exc)
            if method.failure_as_result:
                return text_result(told_to_client(exc), is_error=True)
            if method.notification:
                return None
            raise MCPError(INTERNAL_ERROR, told_to_client(exc)) from exc

    return answer


def make_server(methods: tuple[Method, ...], *, expose_active: bool, health: DatabaseHealth) -> GatewayServer:
    """The server that answers ``methods``. They are registered one by one, not as the
    constructor's arguments: those for logging and roots warn that they are deprecated in
    2026-07-28, and handshake-era clients (most of them) still use both."""
    server = GatewayServer(
        NotificationOptions(tools_changed=expose_active),
        "tool-index",
        version=_version(),
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
    )
    for method in methods:
        if method.notification:
            server.add_notification_handler(method.name, method.params, guarded(method, health))
        else:
            server.add_request_handler(method.name, method.params, guarded(method, health))
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tool-index")
    except PackageNotFoundError:
        return "0"
