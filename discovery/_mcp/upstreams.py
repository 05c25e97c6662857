"""Connections to the upstream MCP servers of a config: opened when first needed, kept, and
opened again after the server went away; every operation bounded by a timeout.

A Python host can call the MCP tools a session activated without running ``serve``::

    async with Upstreams.from_config("mcp.json") as upstreams:
        result = await upstreams.call("mcp__github__create_issue", {"title": "Bug"})
"""

from __future__ import annotations

import codecs
import logging
import os
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import anyio
import anyio.abc
import httpx2
from mcp import Client, MCPError, StdioServerParameters, types
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from discovery._mcp.config import HttpServer, McpConfig, ServerConfig, StdioServer, load_config
from discovery.errors import ToolIndexError

if TYPE_CHECKING:
    from store import StoredTool

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds an upstream may take to start (counted from its own start) or to list its tools (every
page)."""
DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds one tool call may take: tools that build, search or wait on a person take minutes,
which says nothing about a server that does not start."""
DEFAULT_MAX_STARTING = 8
"""stdio servers started at once: each is a process that loads its runtime, and a config of
dozens started together would make them all slow enough to time out."""
DEFAULT_MAX_RESULT_BYTES = 10 * 1024 * 1024
"""Largest tool call result forwarded, in bytes of its JSON (content, structured content and the
rest): a model cannot use more, and a gateway holding many such answers runs out of memory."""
MAX_PAGES = 1000
"""tools/list pages read from one server before it counts as a server that never ends its list."""
MCP_PREFIX = "mcp__"


CALLER: ContextVar[object | None] = ContextVar("tool_index_upstream_caller", default=None)
"""Who a tool call is made for (the gateway's request), while the call runs: what an upstream asks
during it (a 2026-07-28 server's input requests, answered in the caller's own task) goes to them."""

SamplingAnswer = types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData


OWN_SETTINGS = ("TOOL_INDEX_", "PG")
"""Prefixes of what the gateway keeps from upstreams: its own settings (``TOOL_INDEX_DB``, its
bearer token) and every libpq variable (``PGPASSWORD``, ``PGPASSFILE``, ``PGSERVICE``, ``PGUSER``,
...), which say how to reach the catalog's database and with which credentials. A server that
needs one of them gets it from its entry's ``env``, where the config's author chose to give it."""


def upstream_environment(entry: Mapping[str, str]) -> dict[str, str]:
    """What a stdio upstream starts with: the gateway's whole environment, less its own settings and
    the database's, with the entry's ``env`` on top. The client chose the gateway's environment; an
    upstream sees it as if the client had started that server itself. The SDK's default would keep
    only a handful of variables (``HOME``, ``PATH``, ...), and lose what a machine needs to reach a
    network (proxies, a company's CA certificates): ``npx`` then hangs fetching its package until
    the start times out."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(OWN_SETTINGS)}
    return {**inherited, **entry}


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


class UpstreamError(ToolIndexError):
    """An upstream server could not be reached, failed, timed out or answered garbage; the
    message names the server. It is what the model is told, so it holds no local path;
    ``reported`` adds what only the gateway's operator sees (``detail``: paths, the server's own
    last words on stderr)."""

    def __init__(self, server: str, what: str, detail: str = "") -> None:
        super().__init__(f"server {server!r}: {what}")
        self.server = server
        self.what = what
        self.detail = detail

    @property
    def reported(self) -> str:
        return f"{self}{self.detail}"


STDERR_TAIL_BYTES = 4096
"""How much of a stdio server's latest stderr is kept, to say why it failed to start."""
STDERR_TAIL_LINES = 5
"""How many of its last lines a failed start is reported with (npm's 404 takes three or four)."""
STDERR_EOF_WAIT = 2.0
"""Seconds a failed start waits for the rest of the stopped server's stderr."""


class _StderrTail:
    """A stdio server's stderr, through a pipe: copied to the upstream log as it comes, by a
    thread of its own (a server writing much never waits on the event loop), and its last bytes
    kept, so a server that fails to start is reported in its own words (npm's 404, the last line
    of a traceback)."""

    def __init__(self, errlog: TextIO) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w")
        self._errlog = errlog
        self._tail = b""
        self._reader = threading.Thread(target=self._copy, args=(read,), name="upstream-stderr", daemon=True)
        self._reader.start()

    def _copy(self, read: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with open(read, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                self._tail = (self._tail + chunk)[-STDERR_TAIL_BYTES:]
                try:
                    self._errlog.write(decoder.decode(chunk))
                    self._errlog.flush()
                except (OSError, ValueError):  # a full disk or a closed log never stops the copy
                    pass

    def spawned(self) -> None:
        """The process holds its own copy of the pipe's end now: ours is closed, so the reader
        sees the end of the stream once the process (and whatever it started) has gone."""
        self.writer.close()

    async def last_lines(self) -> str:
        """`` (its stderr ended: A | B)`` with its last non-blank lines, once they are all read
        (or ``STDERR_EOF_WAIT`` has passed); empty when it wrote nothing."""
        self.spawned()
        await anyio.to_thread.run_sync(self._reader.join, STDERR_EOF_WAIT)
        text = self._tail.decode("utf-8", errors="replace")
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        shown = [
            "".join(char if char.isprintable() else "\ufffd" for char in line)[:300]
            for line in lines[-STDERR_TAIL_LINES:]
        ]
        return f" (its stderr ended: {' | '.join(shown)})" if shown else ""


_ORPHAN_GUARD = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "if os.getppid()!=int(sys.argv[1]):os._exit(1)\n"  # the gateway died before the line above
    "try:os.execvp(sys.argv[2],sys.argv[2:])\n"
    "except OSError as e:sys.stderr.write(f'cannot start: {e.strerror}\\n');os._exit(127)\n"
)
"""What a stdio server is started through on Linux: the kernel kills it when the gateway's
thread that started it ends, however the gateway ends (``kill -9`` included), then it becomes the
server's own program (the same process). A gateway in front of a gateway ends the same way, so a
chain never outlives its first link. The servers' own children end when their stdin closes, or
with their process group when the gateway stops them."""


def _launch(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that start a server, guarded against outliving the gateway."""
    if not sys.platform.startswith("linux"):
        return command, args
    return sys.executable, ["-S", "-E", "-c", _ORPHAN_GUARD, str(os.getpid()), command, *args]


def _found(command: str, env: Mapping[str, str], cwd: str | None) -> bool:
    """Whether ``command`` names a program that can run, looked up as the process start would: in
    the server's ``PATH``, or relative to its working directory when it holds a ``/``."""
    if os.sep in command:
        path = Path(cwd or ".") / command
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(command, path=env.get("PATH", os.defpath)) is not None


class UnknownServer(ToolIndexError):
    """A tool name whose server is not in the config."""


def catalog_name(server: str, tool: str) -> str:
    """The name an upstream tool has in the catalog (as an import of its tools/list gives it)."""
    return f"{MCP_PREFIX}{server}__{tool}"


def split_catalog_name(name: str, servers: list[str] | dict[str, Any]) -> tuple[str, str] | None:
    """``(server, tool)`` of a catalog name, for one of ``servers`` (longest name first, as a
    server name may itself contain ``__``). A name two servers could give (server ``a``'s tool
    ``b__c`` and server ``a__b``'s ``c``) splits by the longer server name: only a record says
    which it is (``route``)."""
    splits = catalog_name_splits(name, servers)
    return splits[0] if splits else None


def catalog_name_splits(name: str, servers: list[str] | dict[str, Any]) -> list[tuple[str, str]]:
    """Every ``(server, tool)`` of ``servers`` whose catalog name is ``name``, longest server first."""
    if not name.startswith(MCP_PREFIX):
        return []
    rest = name[len(MCP_PREFIX) :]
    return [
        (server, rest[len(server) + 2 :])
        for server in sorted(servers, key=len, reverse=True)
        if rest.startswith(server + "__") and len(rest) > len(server) + 2
    ]


def route(tool: StoredTool, servers: list[str] | dict[str, Any]) -> tuple[str, str] | None:
    """``(server, upstream tool)`` a catalog record is called on: the server and MCP tool name the
    record itself holds (and its pin covers), never a guess from its name. A record without them
    (imported as a tool record) is routed by its name only when exactly one of ``servers`` gives
    that name. ``None``: not a tool of one of ``servers``."""
    if tool.server_name is not None and tool.mcp_tool_name is not None:
        named = (tool.server_name, tool.mcp_tool_name)
        served = tool.server_name in servers and tool.name == catalog_name(*named)
        return named if served else None
    splits = catalog_name_splits(tool.name, servers)
    if tool.server_name is not None:
        splits = [split for split in splits if split[0] == tool.server_name]
    return splits[0] if len(splits) == 1 else None


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
        self._stderr: _StderrTail | None = None
        self.calls = 0
        """Tool calls made on this server: a sync that opened the connection closes it after
        itself only when no call has used it meanwhile (closing would fail the call)."""
        self._peer = peer
        self.callers: dict[object, object] = {}
        """Who each call in flight on this server is made for, the most recent last."""

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
                raise UpstreamError(self.name, _reason(exc), await self._last_words()) from exc
            logger.info("server %r: connection ended: %s", self.name, _reason(exc))
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
        if isinstance(config, StdioServer):
            self._stderr = None
            if config.cwd is not None and not Path(config.cwd).is_dir():
                # Checked first: starting in a missing directory fails as if the command were missing.
                what = "is not a directory" if Path(config.cwd).exists() else "not found"
                raise UpstreamError(self.name, f"cannot start: working directory {what}", f" ({config.cwd})")
            env = upstream_environment(config.env)
            if not _found(config.command, env, config.cwd):
                raise UpstreamError(self.name, "cannot start: command not found", f" ({config.command})")
            command, args = _launch(config.command, list(config.args))
            parameters = StdioServerParameters(command=command, args=args, env=env, cwd=config.cwd)
            self._stderr = stderr = _StderrTail(self._errlog)
            inner = _spawned(stdio_client(parameters, errlog=stderr.writer), stderr)
        else:
            assert isinstance(config, HttpServer)
            http = await stack.enter_async_context(_http_client(config))
            inner = streamable_http_client(config.url, http_client=http)
        return _watched(inner, closed)

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
            logger.info("server %r: no change notifications: %s", self.name, _reason(exc))
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
async def _spawned(inner: Any, stderr: _StderrTail) -> AsyncIterator[tuple[Any, Any]]:
    """``inner``'s streams, with our end of the stderr pipe closed once the process holds its own."""
    try:
        async with inner as streams:
            stderr.spawned()
            yield streams
    finally:
        stderr.spawned()


@asynccontextmanager
async def _watched(inner: Any, closed: anyio.Event) -> AsyncIterator[tuple[Any, Any]]:
    async with inner as (read_stream, write_stream):
        yield _WatchedStream(read_stream, closed), write_stream


def _http_client(config: HttpServer) -> httpx2.AsyncClient:
    return create_mcp_http_client(headers=dict(config.headers) or None)


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


SERVER_FAILURES: tuple[type[BaseException], ...] = (
    MCPError,
    OSError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx2.HTTPError,
    ValidationError,
)
"""What a server or its transport raises: a connection that failed or closed, a process that
could not start, an answer that is not the protocol's."""


def from_server(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's failure (every error of a group is): anything else raised
    in a call is the gateway's own error, and is never reported as the server's."""
    if isinstance(exc, BaseExceptionGroup):
        return all(from_server(inner) for inner in exc.exceptions)
    return isinstance(exc, SERVER_FAILURES)


def _reason(exc: BaseException) -> str:
    """What went wrong, in one line, from the innermost exception of a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, UpstreamError):
        return exc.what
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: command not found ({exc.filename or exc})"
    if isinstance(exc, OSError):
        return f"cannot start: {exc.strerror or exc}"
    if isinstance(exc, MCPError):
        return f"connection failed: {exc}"
    # httpx2's own texts may quote the URL, which may carry a key: say what happened without them.
    if isinstance(exc, httpx2.ConnectError):
        return "cannot connect to its url"
    if isinstance(exc, httpx2.TimeoutException):
        return "its url did not answer in time"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"its url answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP error: {type(exc).__name__}"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


class Upstreams:
    """The upstream servers of a config, connected lazily and shared by every caller."""

    def __init__(
        self,
        config: McpConfig,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        errlog: TextIO | None = None,
        on_tools_changed: Callable[[str], Coroutine[Any, Any, None]] | None = None,
        max_starting: int = DEFAULT_MAX_STARTING,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        peer: UpstreamPeer | None = None,
    ) -> None:
        self.config = config
        self.peer = peer
        self.timeout = timeout
        self.call_timeout = call_timeout
        self.max_starting = max_starting
        self.max_result_bytes = max_result_bytes
        self._errlog = errlog if errlog is not None else sys.stderr
        self._on_tools_changed = on_tools_changed
        self._starting = anyio.Semaphore(max_starting)
        self.servers = {name: self._upstream(server) for name, server in config.servers.items()}
        self._stack: AsyncExitStack | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._syncing: set[str] = set()
        self._queued: set[str] = set()

    def _upstream(self, server: ServerConfig) -> Upstream:
        return Upstream(
            server,
            timeout=self.timeout,
            errlog=self._errlog,
            on_tools_changed=self._tools_changed,
            starting=self._starting,
            peer=self.peer,
        )

    async def reconfigure(self, config: McpConfig) -> tuple[list[str], list[str], list[str]]:
        """Use ``config`` from now on: ``(added, removed, changed)`` server names. A removed or
        changed server's connection is closed (its process ended); a changed one is started
        anew, with its new entry, when next needed."""
        old = self.config.servers
        added = [name for name in config.servers if name not in old]
        removed = [name for name in old if name not in config.servers]
        changed = [name for name in config.servers if name in old and config.servers[name] != old[name]]
        for name in [*removed, *changed]:
            await self.servers.pop(name).close()
        for name in [*added, *changed]:
            self.servers[name] = self._upstream(config.servers[name])
        self.config = config
        return added, removed, changed

    @classmethod
    def from_config(cls, path: str | Path, **options: Any) -> Upstreams:
        """The servers of the config file at ``path`` (``${VAR}`` expanded from the environment)."""
        return cls(load_config(path), **options)

    async def __aenter__(self) -> Upstreams:
        self._stack = AsyncExitStack()
        self._group = await self._stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for upstream in self.servers.values():
            await upstream.close()
        assert self._stack is not None and self._group is not None
        # What runs in the background (re-syncs, a config watch) ends with the pool, not after it.
        self._group.cancel_scope.cancel()
        await self._stack.__aexit__(exc_type, exc, tb)
        self._stack = self._group = None

    def _tools_changed(self, server: str) -> None:
        # Called while the connection reads its messages: the handler runs in its own task, so it
        # can ask that same server for its tools. A server may say its list changed many times in
        # a row: one re-sync runs at a time and at most one more waits, since a re-sync that starts
        # after the last notification sees every change before it.
        if self._on_tools_changed is None or self._group is None:
            return
        if server in self._syncing:
            self._queued.add(server)
            return
        self._syncing.add(server)
        self._group.start_soon(self._resync, server, self._on_tools_changed)

    async def _resync(self, server: str, handler: Callable[[str], Coroutine[Any, Any, None]]) -> None:
        try:
            while True:
                self._queued.discard(server)
                await handler(server)
                if server not in self._queued:
                    return
        finally:
            self._syncing.discard(server)

    def start_soon(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work`` in the pool's task group (ended with the pool)."""
        if self._group is None:
            raise RuntimeError("use Upstreams in 'async with'")
        self._group.start_soon(work)

    def upstream(self, server: str) -> Upstream:
        if server not in self.servers:
            raise UnknownServer(f"no server named {server!r} in {self.config.path}")
        return self.servers[server]

    def locate(self, name: str) -> tuple[Upstream, str]:
        """The upstream and upstream tool name of a catalog tool name; a name that two servers
        could give is refused rather than guessed."""
        found = catalog_name_splits(name, self.servers)
        if not found:
            raise UnknownServer(f"{name!r} is not a tool of a server in {self.config.path}")
        if len(found) > 1:
            which = " or ".join(f"server {server!r}'s tool {tool!r}" for server, tool in found)
            raise UnknownServer(
                f"{name!r} could be {which}: call call_upstream(upstreams.upstream(SERVER), TOOL, arguments)"
            )
        return self.servers[found[0][0]], found[0][1]

    async def list_tools(self, server: str) -> list[types.Tool]:
        """Every tool of ``server``, through every page of tools/list, all within the timeout: a
        server that answers each page in time but never finishes its list is not waited for."""
        upstream = self.upstream(server)
        client = await self._client(upstream)
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self.timeout):
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        return tools
        except TimeoutError:
            raise UpstreamError(
                server, f"tools/list (all its pages) took longer than {self.timeout:g} s"
            ) from None
        except Exception as exc:
            if not from_server(exc):
                raise
            upstream.mark_broken()
            raise UpstreamError(server, f"tools/list failed: {_reason(exc)}") from exc
        raise UpstreamError(server, f"tools/list did not end after {MAX_PAGES} pages")

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressFnT | None = None,
        caller: object | None = None,
    ) -> types.CallToolResult:
        """Call the tool that the catalog names ``name`` on its server, and return its result as
        it came (an ``isError`` result included); a server that cannot answer within
        ``call_timeout``, or answers more than ``max_result_bytes``, is an ``UpstreamError``.
        ``progress`` gets the server's progress notifications of the call; what the server asks
        during it goes to the peer with ``caller``. A call cancelled by the caller (its task's
        scope) is cancelled on the server too, whose connection stays open."""
        upstream, tool = self.locate(name)
        return await self.call_upstream(upstream, tool, arguments, progress=progress, caller=caller)

    async def call_upstream(
        self,
        upstream: Upstream,
        tool: str,
        arguments: dict[str, Any] | None,
        *,
        progress: ProgressFnT | None = None,
        caller: object | None = None,
    ) -> types.CallToolResult:
        upstream.calls += 1
        client = await self._client(upstream)
        key = object()
        if caller is not None:
            upstream.callers[key] = caller
        # Set only now: the connection's own tasks, started by the first call, never see it.
        token = CALLER.set(caller)
        try:
            # Cancelled here (the caller's scope, or the call timeout below), the SDK tells the
            # server with notifications/cancelled before the cancellation goes on.
            with anyio.fail_after(self.call_timeout):
                result = await client.call_tool(
                    tool, arguments, read_timeout_seconds=self.call_timeout, progress_callback=progress
                )
        except TimeoutError:
            if await self._answers(client):
                raise UpstreamError(
                    upstream.name,
                    f"{tool} did not answer within {self.call_timeout:g} s; the call was cancelled on the "
                    "server",
                ) from None
            upstream.reset(client)
            raise UpstreamError(
                upstream.name,
                f"{tool} did not answer within {self.call_timeout:g} s, nor the server to tools/list "
                "afterwards; the server is restarted on the next call",
            ) from None
        except MCPError as exc:
            if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                upstream.mark_broken()
                raise UpstreamError(
                    upstream.name,
                    f"the call of {tool} failed ({_reason(exc)}); the server is restarted on the next call",
                ) from exc
            # An error answer (the server's, or the client's to what the server asked): the
            # connection is sound.
            said = " ".join(exc.message.split())[:300]
            raise UpstreamError(
                upstream.name, f"the call of {tool} failed: error {exc.code}: {said}"
            ) from exc
        except Exception as exc:
            if not from_server(exc):
                raise  # the gateway's own error: the server and its connection are not to blame
            upstream.mark_broken()
            raise UpstreamError(
                upstream.name,
                f"the call of {tool} failed ({_reason(exc)}); the server is restarted on the next call",
            ) from exc
        finally:
            CALLER.reset(token)
            upstream.callers.pop(key, None)
        size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
        if size > self.max_result_bytes:
            upstream.reset(client)
            raise UpstreamError(
                upstream.name,
                f"the result of {tool} was too large ({size} bytes, more than the limit of "
                f"{self.max_result_bytes}) and was not forwarded; the server is restarted on the next call",
            )
        return result

    async def _answers(self, client: Client) -> bool:
        """Whether a server whose call timed out (and was cancelled) still answers: its
        connection, and what the server holds for its other callers, is kept only then. A server
        that no longer reads its input would time every later call out."""
        try:
            with anyio.fail_after(self.timeout):
                await client.list_tools()
        except (
            TimeoutError,
            MCPError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ValidationError,
        ):
            return False
        return True

    async def roots_changed(self) -> None:
        """Tell every open handshake-era connection that the client's roots changed (the
        connections said they can list roots, and their list may change). 2026-07-28 has no
        such notification: servers ask for the roots in each call that needs them."""
        for upstream in list(self.servers.values()):
            client = upstream.live
            if client is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                continue
            try:
                await client.session.send_notification(types.RootsListChangedNotification())
            except (MCPError, RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                # A connection that just ended is opened again when next needed.
                logger.info("server %r: roots change not sent: %s", upstream.name, _reason(exc))

    async def _client(self, upstream: Upstream) -> Client:
        if self._group is None:
            raise RuntimeError("use Upstreams in 'async with'")
        return await upstream.client(self._group)
