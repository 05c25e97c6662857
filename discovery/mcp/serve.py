"""Running a ``Gateway`` over stdio (one client, the process that started it) or streamable HTTP
(any number of clients, each choosing its session with ``?session=ID``, or else given one of its
own for its connection)."""

from __future__ import annotations

import hmac
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from discovery.errors import ToolIndexError
from discovery.mcp.gateway import Gateway

PROTECTED_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The hosts served without a token, spelled exactly so. Other spellings of loopback (127.0.0.2,
127.1, ::ffff:127.0.0.1, LOCALHOST.) need one too: anything a browser page can reach is guarded
by the token or by Host and Origin checks, and only these names are sure to get the checks."""
REBINDING_GUARD = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)
"""Host and Origin checks of a tokenless gateway: a page on another site that rebinds its name
to 127.0.0.1 sends its own name as Host, and is refused (421)."""
MCP_PATH = "/mcp"


class UnsafeBind(ToolIndexError):
    """Serving HTTP without a bearer token on a host other than 127.0.0.1, localhost or ::1."""


def check_bind(host: str, token: str | None) -> None:
    """Only the protected loopback names go without a token: the gateway calls tools with the
    user's credentials."""
    if host not in PROTECTED_HOSTS and not token:
        raise UnsafeBind(
            f"--host {host} is not 127.0.0.1, localhost or ::1, the hosts served without a token: "
            "give --token SECRET (clients send 'Authorization: Bearer SECRET'), or bind 127.0.0.1"
        )


class CannotListen(ToolIndexError):
    """The HTTP server could not bind its host and port (in use, or not an address of this machine)."""


async def serve_stdio(gateway: Gateway) -> None:
    async with gateway, stdio_server() as (read_stream, write_stream):
        await gateway.server.run(read_stream, write_stream, gateway.initialization_options())


class BearerToken:
    """Refuses every HTTP request without ``Authorization: Bearer <token>`` (compared in constant time)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                return
        await self.app(scope, receive, send)


def http_app(gateway: Gateway, host: str, token: str | None) -> Any:
    """The Starlette app of the gateway; without a token, it checks Host and Origin."""
    check_bind(host, token)
    # Given explicitly, so the checks do not hang on the SDK's own list of hosts it protects.
    guard = None if token else REBINDING_GUARD
    app: ASGIApp = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=guard
    )
    return BearerToken(app, token) if token else app


async def serve_http(gateway: Gateway, host: str, port: int, token: str | None) -> None:
    import uvicorn

    app = http_app(gateway, host, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    unbound = False
    async with gateway, anyio.create_task_group() as group:
        group.start_soon(_announce, gateway, server, host)
        try:
            await server.serve()
        except SystemExit:
            # uvicorn exits when it cannot listen, once it has logged why: one error line, not a traceback.
            if server.started:
                raise
            unbound = True
        group.cancel_scope.cancel()
    if unbound:
        raise CannotListen(f"cannot listen on {host} port {port}")


async def _announce(gateway: Gateway, server: Any, host: str) -> None:
    """Say where the gateway listens once it does (with ``--port 0``, the port it was given)."""
    while not server.started:
        await anyio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    gateway.say(f"listening on http://{shown}:{port}{MCP_PATH}")
