"""``tool-index serve``: the ``Gateway`` its options describe, run over stdio (one client, the
process that started it) or streamable HTTP (any number of clients, each choosing its session
with ``?session=ID``, or else given one of its own for its connection)."""

from __future__ import annotations

import contextlib
import hmac
import io
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.stdio import stdio_server

from discovery._files import load_json, read_regular
from discovery._index import ToolIndex
from discovery._mcp.background import first_error
from discovery._mcp.config import McpConfig
from discovery._mcp.gateway import Gateway
from discovery._mcp.lineage import Advertise
from discovery._mcp.options import ServeOptions, qualified
from discovery._mcp.pool import IDENTITY
from discovery.errors import ToolIndexError

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

PROTECTED_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The hosts served without a token, spelled exactly so. Other spellings of loopback (127.0.0.2,
127.1, ::ffff:127.0.0.1, LOCALHOST.) need one too: anything a browser page can reach is guarded
by the token or by Host and Origin checks, and only these names are sure to get the checks."""


def rebinding_guard() -> TransportSecuritySettings:
    """Host and Origin checks of a tokenless gateway: a page on another site that rebinds its name
    to 127.0.0.1 sends its own name as Host, and is refused (421)."""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


MCP_PATH = "/mcp"
GRACEFUL_SHUTDOWN = 5
"""Seconds a stopping HTTP gateway waits for requests still open (a client's listen stream stays
open for as long as it is connected) before it cancels them and writes its log."""


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


class TokensError(ToolIndexError):
    """A ``--tokens`` file that cannot be used; the message never quotes a secret."""


IDENTITY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
"""An identity's name is logged with the sessions it makes: short, printable, no spaces."""
SINGLE_IDENTITY = "token"
"""The one identity of ``--token SECRET``: everyone who has the token is the same user."""


def load_tokens(path: str | Path) -> dict[str, str]:
    """``{"identity": "secret", ...}`` from a JSON file, read within the input size limit."""
    where, text = read_regular(path, TokensError, what="tokens file")
    document = load_json(text, where, TokensError)
    if not isinstance(document, dict) or not document:
        raise TokensError(
            f'{where}: expected a JSON object of identities and their secrets: {{"alice": "..."}}'
        )
    seen: dict[str, str] = {}
    for identity, secret in document.items():
        if not IDENTITY_NAME.fullmatch(identity):
            raise TokensError(
                f"{where}: identity {identity[:64]!r}: a name is 1 to 64 letters, digits, '_', '.', '@' "
                "and '-', starting with a letter or digit"
            )
        if not isinstance(secret, str) or not secret.strip() or not secret.isprintable():
            raise TokensError(
                f"{where}: identity {identity!r}: its secret must be a non-empty printable string"
            )
        if secret in seen:
            raise TokensError(f"{where}: identities {seen[secret]!r} and {identity!r} have the same secret")
        seen[secret] = identity
    return dict(document)


class CannotListen(ToolIndexError):
    """The HTTP server could not bind its host and port (in use, or not an address of this machine)."""


async def serve_gateway(
    options: ServeOptions,
    index: ToolIndex,
    config: McpConfig,
    tokens: Mapping[str, str] | None,
    upstream_errlog: TextIO,
    reload_config: Callable[[], McpConfig],
) -> None:
    """``tool-index serve``: the gateway ``options`` describe, in front of ``config``'s servers,
    served on their transport until its clients have gone."""
    gateway_options = options.gateway(tokens if options.tokens_path is not None else None)
    realm = options.realm_name()
    if tokens is not None and realm is not None:
        tokens = {qualified(name, realm): secret for name, secret in tokens.items()}
    gateway = Gateway(
        index,
        config,
        gateway_options,
        errlog=sys.stderr,
        upstream_errlog=upstream_errlog,
        reload_config=reload_config,
    )
    if options.transport == "stdio":
        await serve_stdio(gateway)
    else:
        await serve_http(gateway, options.host, options.port, tokens)


async def serve_stdio(gateway: Gateway) -> None:
    """Serve the one client on stdin and stdout until it has gone: its stdin closed, or one of
    ``STOPPING`` received (a client stopping its server, a user's Ctrl-C, a hangup), which end the
    process as the client's leaving does, what it answered logged."""
    try:
        # The SDK's transport ends when the client closes its stdin; after a signal the client's
        # stdin may stay open and silent, so the transport is cancelled once the gateway has left.
        # The signals are watched while the gateway leaves too: a client that closes stdin and
        # then signals its server ends it as either alone would, what it answered logged.
        serving = anyio.CancelScope()
        with anyio.CancelScope() as transport:
            async with stdio_server(stdin=_client_lines()) as (read_stream, write_stream):
                async with anyio.create_task_group() as watching:
                    async with gateway:
                        # Watched once the gateway has started (a signal before ends the process
                        # at once: nothing was answered), and until it has left.
                        watching.start_soon(_stop_on_signal, serving)
                        with serving:
                            await gateway.server.run(
                                read_stream, write_stream, gateway.initialization_options()
                            )
                    watching.cancel_scope.cancel()
                if serving.cancel_called:
                    transport.cancel()
    except BaseExceptionGroup as group:
        raise first_error(group) from None


class _ClientLines(anyio.AsyncFile[str]):
    """The client's stdin for ``stdio_server``, a line at a time, each read by a daemon thread.

    anyio reads a file in worker threads that a cancellation waits for and the process's exit
    joins: a client that stops the gateway with a signal, its stdin open and silent, would keep
    the process alive until it closed that stdin. A daemon thread's read is left behind instead.
    (Given its stdin, the SDK leaves descriptor 0 as it is: the upstreams the gateway starts get
    pipes of their own, never that descriptor.)"""

    async def readline(self) -> str:
        finished = anyio.Event()
        outcome: list[str | BaseException] = []
        token = anyio.lowlevel.current_token()

        def read() -> None:
            try:
                outcome.append(self.wrapped.readline())
            except (OSError, ValueError) as exc:  # a failing or closed descriptor: the reader's
                outcome.append(exc)
            finally:
                with contextlib.suppress(RuntimeError):  # the event loop has ended meanwhile
                    anyio.from_thread.run_sync(finished.set, token=token)

        threading.Thread(target=read, name="tool-index stdin", daemon=True).start()
        await finished.wait()
        line = outcome[0] if outcome else ""  # a read that failed otherwise ends the input
        if isinstance(line, BaseException):
            raise line
        return line


def _client_lines() -> anyio.AsyncFile[str] | None:
    """Descriptor 0 as UTF-8 lines (a malformed byte replaced, as the SDK does); ``None`` (the
    SDK's own reading) when the process has no descriptor 0."""
    try:
        duplicate = os.dup(0)
    except OSError:
        return None
    return _ClientLines(io.TextIOWrapper(os.fdopen(duplicate, "rb"), encoding="utf-8", errors="replace"))


STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that end ``serve`` as its client's leaving does, what it answered logged: a user's
Ctrl-C, a client stopping its server, and the hangup of the terminal or session it ran in
(whose default action would end the process before its log is written)."""


async def _stop_on_signal(serving: anyio.CancelScope) -> None:
    """Cancel ``serving`` at the first of ``STOPPING`` (a second one is not caught)."""
    try:
        receiver = anyio.open_signal_receiver(*STOPPING)
    except NotImplementedError:  # no signal handlers on this platform's event loop
        return
    with receiver as signals:
        async for _ in signals:
            serving.cancel()
            return


class BearerToken:
    """Refuses every HTTP request without ``Authorization: Bearer <token>`` of one of the
    identities (each compared in constant time), and tells the app whose token it was: the
    gateway (``IDENTITY``) and the SDK's transport, which then refuses a connection's
    ``Mcp-Session-Id`` to any other identity."""

    def __init__(self, app: ASGIApp, tokens: Mapping[str, str]) -> None:
        self.app = app
        self.expected = [(identity, f"Bearer {secret}".encode()) for identity, secret in tokens.items()]

    def identity(self, given: bytes) -> str | None:
        found = None
        for identity, expected in self.expected:  # every one compared, so the time says nothing
            if hmac.compare_digest(given, expected):
                found = identity
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            identity = self.identity(given)
            if identity is not None:
                from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
                from mcp.server.auth.provider import AccessToken

                scope[IDENTITY] = identity
                scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=identity, scopes=[]))
            else:
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


def http_app(gateway: Gateway, host: str, tokens: Mapping[str, str] | None) -> Any:
    """The Starlette app of the gateway; without tokens, it checks Host and Origin."""
    check_bind(host, "yes" if tokens else None)
    # Given explicitly, so the checks do not hang on the SDK's own list of hosts it protects.
    guard = None if tokens else rebinding_guard()
    app: ASGIApp = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=guard
    )
    # Outermost, so a refusal (401) names this gateway too: a gateway in front learns it all the same.
    return Advertise(BearerToken(app, tokens) if tokens else app)


async def serve_http(gateway: Gateway, host: str, port: int, tokens: Mapping[str, str] | None) -> None:
    import uvicorn

    app = http_app(gateway, host, tokens)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
    )

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn's own handlers raise the signal again once it has stopped, which ends the
            # process before the gateway has written its log: ``_exit_on_signal`` stops it instead.
            yield

    server = Server(config)
    unbound = False
    async with gateway, anyio.create_task_group() as group:
        group.start_soon(_announce, gateway, server, host)
        group.start_soon(_exit_on_signal, server)
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


async def _exit_on_signal(server: Any) -> None:
    """Stop serving HTTP at any of ``STOPPING``, as stdio does: the server stops, the gateway is
    left (its log written, every answered call in it), and the process exits 0. A second signal
    stops waiting for the clients' open requests."""
    try:
        receiver = anyio.open_signal_receiver(*STOPPING)
    except NotImplementedError:  # no signal handlers on this platform's event loop
        return
    with receiver as signals:
        async for _ in signals:
            if server.should_exit:
                server.force_exit = True
                return
            server.should_exit = True


async def _announce(gateway: Gateway, server: Any, host: str) -> None:
    """Say where the gateway listens once it does (with ``--port 0``, the port it was given)."""
    while not server.started:
        await anyio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    gateway.say(f"listening on http://{shown}:{port}{MCP_PATH}")
