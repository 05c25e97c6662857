"""The upstream servers of a config, as one pool: connected lazily and shared by every caller,
replaced server by server when the config changes, their change notifications coalesced into
re-syncs, and their tools listed and called by catalog name.

A Python host can call the MCP tools a session activated without running ``serve``::

    async with Upstreams.from_config("mcp.json") as upstreams:
        result = await upstreams.call("mcp__github__create_issue", {"title": "Bug"})
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
import anyio.abc
from mcp import Client, MCPError, types
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from discovery._mcp.config import McpConfig, ServerConfig, load_config
from discovery._mcp.connection import Upstream, UpstreamPeer
from discovery._mcp.failures import reason
from discovery._mcp.names import UnknownServer, catalog_name_splits
from discovery._mcp.tool_requests import call_tool, list_all_tools

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
        return await list_all_tools(upstream, await self._client(upstream))

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
        return await call_tool(
            upstream,
            client,
            tool,
            arguments,
            call_timeout=self.call_timeout,
            max_result_bytes=self.max_result_bytes,
            progress=progress,
            caller=caller,
        )

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
                logger.info("server %r: roots change not sent: %s", upstream.name, reason(exc))

    async def _client(self, upstream: Upstream) -> Client:
        if self._group is None:
            raise RuntimeError("use Upstreams in 'async with'")
        return await upstream.client(self._group)
