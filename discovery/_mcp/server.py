"""The MCP server a gateway answers on: its handler table names each MCP method and what answers it.

The SDK's ``Server`` does the protocol (the handshake, ping, the transports, the validation of
each request's params); every other method goes where ``handler_table`` says. The way of a
request: the transport, the SDK, the table, then one room of the gateway — ``Listing`` for
tools/list, ``Calls`` for tools/call (a search, or a call checked, pinned and forwarded), the
``Relay`` for a client's log level and change notifications.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server import NotificationOptions, Server
from pydantic import BaseModel

from discovery._mcp.calls import Calls
from discovery._mcp.listing import Listing, input_schema
from discovery._mcp.pool import Context
from discovery._mcp.relay import Relay, set_level

INSTRUCTIONS = "Call search_tool_bm25 to find tools, then call_tool to call them."


@dataclass(frozen=True, slots=True)
class Method:
    """One line of the handler table: an MCP method, the model of its params, what answers it."""

    name: str
    params: type[BaseModel]
    answer: Callable[[Context, Any], Awaitable[Any]]
    notification: bool = False


def handler_table(listing: Listing, calls: Calls, relay: Relay) -> tuple[Method, ...]:
    """Every MCP method the gateway answers besides the handshake and ping, which the SDK answers."""
    return (
        Method("tools/list", types.PaginatedRequestParams, listing.list_tools),
        Method("tools/call", types.CallToolRequestParams, calls.call_tool),
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


def make_server(methods: tuple[Method, ...], *, expose_active: bool) -> GatewayServer:
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
            server.add_notification_handler(method.name, method.params, method.answer)
        else:
            server.add_request_handler(method.name, method.params, method.answer)
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tool-index")
    except PackageNotFoundError:
        return "0"
