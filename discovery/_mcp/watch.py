"""The catalog kept in step with the servers and the config: a server that says its tools changed
is synced again, servers never synced are synced in the background (searches wait a while for
them, ``Syncing``), ``--refresh`` syncs them all now and then, and a new version of the config
file is applied without a restart. After each, the tools listed directly are read again."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread

from discovery._files import read_regular
from discovery._mcp.config import ConfigError, McpConfig
from discovery._mcp.direct import Direct, direct_tools
from discovery._mcp.options import GatewayOptions, Served
from discovery._mcp.pool import SessionPool
from discovery._mcp.relay import Relay
from discovery._mcp.sync import Library, ServerSync, sync_server, sync_servers
from discovery._mcp.upstreams import Upstreams
from discovery.errors import ToolIndexError

SYNC_WAIT = 10.0
"""How long a search waits for the servers a gateway is syncing for the first time: a cold
gateway's first search finds their tools rather than none; past it, the answer says which are
still syncing and to search again."""


class Syncing:
    """The servers being synced for the first time, whose tools searches do not find yet."""

    def __init__(self) -> None:
        self.servers: list[str] = []
        self._done = anyio.Event()

    async def wait(self) -> None:
        """Wait until no server is syncing, or ``SYNC_WAIT`` has passed."""
        if self.servers:
            with anyio.move_on_after(SYNC_WAIT):
                await self._done.wait()

    def synced(self, servers: list[str]) -> None:
        """``servers`` were synced: searches stop waiting for them."""
        self.servers = [server for server in self.servers if server not in servers]
        if not self.servers:
            self._done.set()


class Watcher:
    """Syncs and config reloads, while the gateway answers."""

    def __init__(
        self,
        library: Library,
        options: GatewayOptions,
        served: Served,
        pool: SessionPool,
        relay: Relay,
        upstreams: Upstreams,
        syncing: Syncing,
        say: Callable[[str], None],
        reload_config: Callable[[], McpConfig] | None = None,
    ) -> None:
        self.library = library
        self.syncing = syncing
        self.options = options
        self.served = served
        self.pool = pool
        self.relay = relay
        self.upstreams = upstreams
        self._say = say
        self.reload_config = reload_config
        """Reads the config file again (its filters joined with the command line's); with it, the
        file is watched and a new version applied while the gateway runs."""

    async def server_changed(self, server: str) -> None:
        """An upstream said its tools changed: sync it, so searches and pins see the change."""
        await self._reported([await sync_server(self.library, self.upstreams, server)])
        await self._catalog_changed()

    async def sync_in_background(self, servers: list[str]) -> None:
        """Sync ``servers`` while the gateway answers, each connection closed once its tools are
        written (a call opens it again), then tell the sessions their tools may have changed."""
        await self._reported(await sync_servers(self.library, self.upstreams, servers, close=True))
        self.syncing.synced(servers)
        await self._catalog_changed()

    async def refresh_forever(self) -> None:
        assert self.options.refresh
        while True:
            # Servers no call has opened are started for the sync and stopped after it: a refresh
            # of many servers never keeps them all running.
            servers = list(self.served.config.servers)
            if await self._reported(await sync_servers(self.library, self.upstreams, servers, close=True)):
                await self._catalog_changed()
            if self.syncing.servers:
                self.syncing.synced(servers)
                await self._catalog_changed()
            await anyio.sleep(self.options.refresh)

    def direct_tools(self) -> Direct:
        """In the worker: the tools listed directly under the config and scope in force."""
        served = self.served
        return direct_tools(self.library.index, served.config, served.scope, self.options.mode)

    async def _catalog_changed(self) -> None:
        """After a sync or a new config: the tools listed directly are read again, the search
        tool's description of each session in memory says the new counts, and with
        ``expose_active`` (or when what is listed directly changed) clients are told to list again."""
        direct = await self.library.run(self.direct_tools)
        before, self.served.direct = self.served.direct, direct
        redirected = direct.names != before.names or direct.search != before.search
        for gateway_session in list(self.pool.sessions.values()):
            try:
                await self.library.run(gateway_session.describe)
            except ToolIndexError as exc:  # a session deleted meanwhile keeps its description
                self._say(f"session {gateway_session.id}: {exc}")
        if self.options.expose_active or redirected:
            await self.relay.notify_all()

    async def _reported(self, results: list[ServerSync]) -> bool:
        """Say what each sync did; a server refused leaves the scope (its name's tools in the
        catalog are another config's server's), one synced comes back. Whether the scope changed."""
        for result in results:
            self._report(result)
        refused = set(self.served.refused)
        refused |= {result.server for result in results if result.refused}
        refused -= {result.server for result in results if result.report is not None}
        if not self.served.set_refused(frozenset(refused)):
            return False
        await self.pool.reopen()
        return True

    def _report(self, result: ServerSync) -> None:
        if result.refused:
            self._say(
                f"Warning: sync {result.server}: refused: {result.error}; its tools are not offered here"
            )
        elif result.report is None:
            self._say(f"sync {result.server}: {result.error}")
        else:
            counts = ", ".join(f"{key} {value}" for key, value in result.report.counts().items())
            self._say(f"sync {result.server}: {counts}")

    # The config file, watched

    async def watch_config(self) -> None:
        """Poll the config file (size and modification time, then a digest of what it holds) and
        apply a new version without a restart; an unreadable or invalid one keeps the old."""
        assert self.reload_config is not None
        path = Path(self.served.config.path)
        seen = await anyio.to_thread.run_sync(_stat, path)
        known = await anyio.to_thread.run_sync(_digest, path)
        # One warning until the file reads as a config again: one still being written changes on
        # every poll, and fails each time in its own way.
        warned = False
        while True:
            await anyio.sleep(self.options.watch_interval)
            now = await anyio.to_thread.run_sync(_stat, path)
            if now == seen:
                continue
            seen = now
            digest = await anyio.to_thread.run_sync(_digest, path)
            if isinstance(digest, ConfigError):
                if not warned:
                    self._say(f"Warning: {digest}; serving its previous version")
                warned = True
                continue
            if digest == known:
                warned = False
                continue
            known = digest
            try:
                config = await anyio.to_thread.run_sync(self.reload_config)
            except ToolIndexError as exc:
                if not warned:
                    self._say(f"Warning: {exc}; the config is unchanged (serving its previous version)")
                warned = True
                continue
            warned = False
            try:
                await self.apply_config(config)
            except ToolIndexError as exc:  # the database failed meanwhile: the next edit tries again
                self._say(f"Warning: applying {path} failed: {exc}")

    async def apply_config(self, config: McpConfig) -> None:
        """Serve ``config`` from now on: its new servers synced and callable, removed ones out of
        scope (their tools leave searches and active lists), a changed entry's server restarted
        and synced again. Sessions are kept: those in memory are read again under the new scope."""
        for warning in config.warnings():
            self._say(f"Warning: {warning}")
        # Filters are this gateway's view: the catalog holds every tool, so new ones need no sync.
        refiltered = config.tool_filter != self.served.config.tool_filter
        added, removed, changed = await self.upstreams.reconfigure(config)
        self.served.apply(config)
        await self.pool.reopen()
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (("added", added), ("removed", removed), ("changed", changed))
            if names
        ]
        if refiltered:
            parts.append("filters changed")
        self._say(f"config {config.path} reloaded: {'; '.join(parts) or 'nothing that serve uses changed'}")
        if added or changed:
            await self.sync_in_background([*added, *changed])
        else:
            await self._catalog_changed()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _digest(path: Path) -> str | ConfigError:
    """A digest of what the config file holds, or why it cannot be read now (as while an editor
    replaces it, or when it is no regular file): read bounded, in a worker, never on the loop."""
    try:
        _, text = read_regular(path, ConfigError, what="config file")
    except ConfigError as exc:
        return exc
    return hashlib.sha256(text.encode()).hexdigest()
