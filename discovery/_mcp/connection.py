"""One upstream server and its connection: opened when first needed (a stdio server started, an
HTTP server reached), kept, opened again after the server went away, and closed on demand. What
the server asks of its client during the connection (sampling, elicitation, roots, its log) goes
to the peer, for the caller of the call in flight."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Protocol, TextIO

import anyio
import anyio.abc
import httpx2
from mcp import Client, MCPError, types
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from discovery._mcp.config import HttpServer, ServerConfig, StdioServer
from discovery._mcp.failures import UpstreamError, reason
from discovery._mcp.launch import StderrTail, stdio_transport
from discovery._mcp.lineage import HEADER, LOOP, leads_back

logger = logging.getLogger(__name__)


CALLER: ContextVar[object | None] = ContextVar("tool_index_upstream_caller", default=None)
"""Who a tool call is made for (the gateway's request), while the call runs: what an upstream asks
during it (a 2026-07-28 server's input requests, answered in the caller's own task) goes to them."""

SamplingAnswer = types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData


class UpstreamPeer(Protocol):
    """Whoever answers what upstream servers ask of their client (sampling, elicitation, roots)
    and hears their log messages: the gateway, which passes them on to its own client.
    ``caller`` is who the call in flight on that server was made for (``call_upstream``'s
    ``caller``), or ``None`` when the server asks outside any call."""

    async def sampling(
        self, server: str, caller: object | None, params: types.CreateMessageRequestParams
    ) -> SamplingAnswer: ...

    async def elicitation(
        self, server: str, caller: object | None, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData: ...

    async def roots(self, server: str, caller: object | None) -> types.ListRootsResult | types.ErrorData: ...

    async def log(
        self, server: str, caller: object | None, params: types.LoggingMessageNotificationParams
    ) -> None: ...


class _WatchedStream:
    """A transport's read stream that sets ``closed`` when the server's side ends, so a
    connection that died while idle is opened again before the next call instead of failing it."""

    def __init__(self, stream: Any, closed: anyio.Event) -> None:
        self._stream = stream
        self._closed = closed

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._closed.set()
            raise
        return item

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._closed.set()
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class Upstream:
    """One configured server and, once needed, its live connection."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        timeout: float,
        errlog: TextIO,
        on_tools_changed: Callable[[str], None] | None,
        starting: anyio.Semaphore | None = None,
        peer: UpstreamPeer | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.timeout = timeout
        self._starting = starting
        self._errlog = errlog
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._closed = anyio.Event()
        self._stop = anyio.Event()
        self._lock = anyio.Lock()
        self._ended = anyio.Event()
        self._ended.set()
        self.last_error: str | None = None
        self._stderr: StderrTail | None = None
        self.calls = 0
        """Tool calls made on this server: a sync that opened the connection closes it after
        itself only when no call has used it meanwhile (closing would fail the call)."""
        self._peer = peer
        self.callers: dict[object, object] = {}
        """Who each call in flight on this server is made for, the most recent last."""
        self.looped = False
        """The server's HTTP answers named this gateway (``discovery._mcp.lineage``): it is this
        gateway, or leads back to it, and is never connected again."""

    def caller(self) -> object | None:
        """Who a request of the server is for: the caller of the call whose task asks (a
        2026-07-28 server's input requests), else of the most recent call in flight (a
        handshake-era request carries nothing that names its call), else ``None``."""
        caller = CALLER.get()
        if caller is None and self.callers:
            caller = next(reversed(self.callers.values()))
        return caller

    @property
    def live(self) -> Client | None:
        """The connection when it is open, without opening one."""
        return self._client if self.connected else None

    @property
    def connected(self) -> bool:
        return self._client is not None and not self._closed.is_set()

    async def client(self, task_group: anyio.abc.TaskGroup) -> Client:
        """The live connection, opened (again) when there is none."""
        async with self._lock:
            if self._client is not None and not self._closed.is_set():
                return self._client
            await self._disconnect()
            if self.looped:
                raise UpstreamError(self.name, LOOP)
            self._closed, self._stop, self._ended = anyio.Event(), anyio.Event(), anyio.Event()
            try:
                async with _held(self._starting if isinstance(self.config, StdioServer) else None):
                    # The timeout starts once the server does, not while it waits for its turn.
                    with anyio.fail_after(self.timeout):
                        self._client = await task_group.start(
                            self._run, self._closed, self._stop, self._ended
                        )
            except TimeoutError:
                self.last_error = f"did not start within {self.timeout:g} s"
                raise UpstreamError(self.name, self.last_error, await self._last_words()) from None
            except UpstreamError as exc:
                self.last_error = exc.what
                raise
            if self.looped:  # its answer to the handshake named this gateway
                await self._disconnect()
                self.last_error = LOOP
                raise UpstreamError(self.name, LOOP)
            self.last_error = None
            return self._client

    async def _run(
        self,
        closed: anyio.Event,
        stop: anyio.Event,
        ended: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[Client],
    ) -> None:
        """Hold one connection open until ``stop``, or until the server's side ends; ``ended`` is
        set once the connection is closed (a stdio server's process has exited or been killed)."""
        started = False
        # This task reads the server's messages and answers its requests: they belong to no call
        # in it, whichever call opened the connection.
        CALLER.set(None)
        try:
            async with AsyncExitStack() as stack:
                client = Client(
                    await self._transport(stack, closed),
                    read_timeout_seconds=self.timeout,
                    message_handler=self._message,
                    cache=None,  # a re-sync must see the server's list, never a cached copy
                    **self._callbacks(),
                )
                await stack.enter_async_context(client)
                watchers = await stack.enter_async_context(anyio.create_task_group())
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    # Listening before the first call: a change that call makes is not missed.
                    await watchers.start(self._listen, client)
                task_status.started(client)
                started = True
                await _first(closed.wait, stop.wait)
                watchers.cancel_scope.cancel()
        except Exception as exc:
            closed.set()
            if isinstance(exc, UpstreamError):
                raise
            if not started:
                raise UpstreamError(self.name, reason(exc), await self._last_words()) from exc
            logger.info("server %r: connection ended: %s", self.name, reason(exc))
        finally:
            closed.set()
            ended.set()

    async def _last_words(self) -> str:
        """The last lines of the stderr of the server that just failed to start (stdio only)."""
        return "" if self._stderr is None else await self._stderr.last_lines()

    def _callbacks(self) -> dict[str, Any]:
        """Every connection says it can sample, elicit and list roots: some servers list tools
        only to a client that can (server-everything's sampling and elicitation tools), and
        ``sync`` must see the tools ``serve`` serves. Whether the client behind can is known only
        when a server asks (one connection serves every client of a gateway), and without a
        peer (``sync``, a Python host) the answer is the SDK's error for a missing capability.
        With a peer, 2026-07-28 servers are asked for their log messages of every level."""
        callbacks: dict[str, Any] = {
            "sampling_callback": self._sampling,
            "elicitation_callback": self._elicitation,
            "list_roots_callback": self._roots,
        }
        if self._peer is not None:
            callbacks.update(logging_callback=self._log, log_level="debug")
        return callbacks

    async def _sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> SamplingAnswer:
        if self._peer is None:
            return _unsupported("Sampling")
        return await self._peer.sampling(self.name, self.caller(), params)

    async def _elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if self._peer is None:
            return _unsupported("Elicitation")
        return await self._peer.elicitation(self.name, self.caller(), params)

    async def _roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        if self._peer is None:
            return _unsupported("List roots")
        return await self._peer.roots(self.name, self.caller())

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        assert self._peer is not None
        await self._peer.log(self.name, self.caller(), params)

    async def _transport(self, stack: AsyncExitStack, closed: anyio.Event) -> Any:
        config = self.config
        inner: Any
        if isinstance(config, StdioServer):
            self._stderr = None
            inner, self._stderr = stdio_transport(self.name, config, self._errlog)
        else:
            assert isinstance(config, HttpServer)
            http = await stack.enter_async_context(_http_client(config, self._answered))
            inner = streamable_http_client(config.url, http_client=http)
        return _watched(inner, closed)

    async def _answered(self, response: httpx2.Response) -> None:
        """Each HTTP answer of the server: does it name this gateway?"""
        if leads_back(response.headers.get(HEADER)):
            self.looped = True
            self._closed.set()

    async def _listen(self, client: Client, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """On 2026-07-28 connections, change notifications come only on a listen stream."""
        listening = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                listening = True
                async for _ in subscription:
                    pass  # each event also reaches ``_message``, which re-syncs
        except (ListenNotSupportedError, MCPError, RuntimeError, TimeoutError) as exc:
            logger.info("server %r: no change notifications: %s", self.name, reason(exc))
            if not listening:
                task_status.started()

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._on_tools_changed is not None:
            self._on_tools_changed(self.name)

    async def _disconnect(self) -> None:
        self._stop.set()
        self._client = None

    def mark_broken(self) -> None:
        """The connection failed under a call: the next one opens a new connection."""
        self._closed.set()

    def reset(self, client: Client) -> None:
        """Close ``client``'s connection (its process too) so that the next call starts the server
        again: after a call that timed out or answered too much, the server may still be busy with
        it or in a bad state. A connection opened since (by another caller) is left alone."""
        if self._client is client:
            self._closed.set()

    async def close(self, *, wait: bool = False) -> None:
        """Close the connection; with ``wait``, return once it is closed (its process gone)."""
        async with self._lock:
            await self._disconnect()
            if wait:
                with anyio.move_on_after(self.timeout):
                    await self._ended.wait()


@asynccontextmanager
async def _held(semaphore: anyio.Semaphore | None) -> AsyncIterator[None]:
    if semaphore is None:
        yield
    else:
        async with semaphore:
            yield


@asynccontextmanager
async def _watched(inner: Any, closed: anyio.Event) -> AsyncIterator[tuple[Any, Any]]:
    async with inner as (read_stream, write_stream):
        yield _WatchedStream(read_stream, closed), write_stream


def _http_client(
    config: HttpServer, answered: Callable[[httpx2.Response], Awaitable[None]]
) -> httpx2.AsyncClient:
    """A client of the server's URL, ``answered`` hearing each of its answers."""
    http = create_mcp_http_client(headers=dict(config.headers) or None)
    http.event_hooks = {**http.event_hooks, "response": [*http.event_hooks["response"], answered]}
    return http


async def _first(*waits: Callable[[], Awaitable[Any]]) -> None:
    """Return as soon as any of ``waits`` does."""
    async with anyio.create_task_group() as group:

        async def run(wait: Callable[[], Awaitable[Any]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(run, wait)


def _unsupported(what: str) -> types.ErrorData:
    return types.ErrorData(code=INVALID_REQUEST, message=f"{what} not supported: no client is connected")
