"""Running a ``Gateway`` over stdio (one client, the process that started it) or streamable HTTP
(any number of clients, each choosing its session with ``?session=ID``)."""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp, Receive, Scope, Send

from discovery.errors import ToolIndexError
from discovery.mcp.gateway import Gateway

LOOPBACK_NAMES = ("localhost",)
MCP_PATH = "/mcp"


class UnsafeBind(ToolIndexError):
    """Serving HTTP beyond the loopback interface without a bearer token."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Anything but loopback needs a token: the gateway calls tools with the user's credentials."""
    if not is_loopback(host) and not token:
        raise UnsafeBind(
            f"--host {host} serves beyond this machine: give --token SECRET (clients send "
            "'Authorization: Bearer SECRET'), or bind 127.0.0.1"
        )


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
    """The Starlette app of the gateway; loopback hosts get DNS-rebinding protection."""
    check_bind(host, token)
    app: ASGIApp = gateway.server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerToken(app, token) if token else app


async def serve_http(gateway: Gateway, host: str, port: int, token: str | None) -> None:
    import uvicorn

    app = http_app(gateway, host, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with gateway, anyio.create_task_group() as group:
        group.start_soon(_announce, gateway, server, host)
        await server.serve()
        group.cancel_scope.cancel()


async def _announce(gateway: Gateway, server: Any, host: str) -> None:
    """Say where the gateway listens once it does (with ``--port 0``, the port it was given)."""
    while not server.started:
        await anyio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    gateway.say(f"listening on http://{shown}:{port}{MCP_PATH}")
