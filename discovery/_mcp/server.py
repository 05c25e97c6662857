"""The MCP server a gateway answers on: its handler table names each MCP method and what answers it.

The SDK's ``Server`` does the protocol (the handshake, the transports, the validation of each
request's params); every method it hands on is in ``HANDLERS``, answered by the gateway's room for
it. A client's log level is the one thing answered here: it is the connection's own state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp import types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.connection import Connection
from pydantic import BaseModel

LOG_LEVEL = "tool_index.log_level"
"""The key of a client connection's state where the level it set (logging/setLevel) is kept."""
IDENTITY = "tool_index.identity"
"""The key of the ASGI scope where ``serve --tokens`` puts the identity whose token a request
carried (``discovery._mcp.serve``)."""
INSTRUCTIONS = "Call search_tool_bm25 to find tools, then call_tool to call them."

Context = ServerRequestContext[Any, Any]


class Handlers(Protocol):
    """What answers the gateway's MCP methods (``Gateway``)."""

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams
    ) -> types.ListToolsResult: ...
    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult: ...
    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult: ...
    async def roots_changed(self, ctx: Context, params: types.NotificationParams) -> None: ...
    def input_schema(self, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class Method:
    """One line of the handler table: an MCP method, the model of its params, what answers it."""

    name: str
    params: type[BaseModel]
    answer: Callable[[Context, Any], Awaitable[Any]]
    notification: bool = False


def handler_table(handlers: Handlers) -> tuple[Method, ...]:
    """Every MCP method the gateway answers besides the handshake and ping, which the SDK answers."""
    return (
        Method("tools/list", types.PaginatedRequestParams, handlers.list_tools),
        Method("tools/call", types.CallToolRequestParams, handlers.call_tool),
        Method("subscriptions/listen", types.SubscriptionsListenRequestParams, handlers.listen),
        Method("logging/setLevel", types.SetLevelRequestParams, set_level),
        Method("notifications/roots/list_changed", types.NotificationParams, handlers.roots_changed, True),
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


def make_server(handlers: Handlers, *, expose_active: bool) -> GatewayServer:
    """The server whose methods ``handlers`` answer. The methods are registered one by one (not
    as the constructor's arguments): those for logging and roots warn that they are deprecated
    in 2026-07-28, and handshake-era clients (most of them) still use both."""
    server = GatewayServer(
        NotificationOptions(tools_changed=expose_active),
        "tool-index",
        version=_version(),
        instructions=INSTRUCTIONS,
        get_tool_input_schema=handlers.input_schema,
    )
    for method in handler_table(handlers):
        if method.notification:
            server.add_notification_handler(method.name, method.params, method.answer)
        else:
            server.add_request_handler(method.name, method.params, method.answer)
    return server


def connection_of(ctx: Context) -> Connection:
    """The client's connection a request came on (over HTTP, its ``Mcp-Session-Id``): the SDK
    gives each request a ``ServerSession`` of its own, over the connection's one object, which
    lives as long as the connection does and no longer."""
    connection: Connection = ctx.session._connection
    return connection


async def set_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """The level below which the connection gets no log message (``discovery._mcp.relay``)."""
    connection_of(ctx).state[LOG_LEVEL] = params.level
    return types.EmptyResult()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tool-index")
    except PackageNotFoundError:
        return "0"
