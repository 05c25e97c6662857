"""``serve``: one MCP server in front of a config's servers.

``Gateway`` makes the rooms a request goes through and holds them while it serves (``async
with``): the server and its handler table (``discovery._mcp.server``), the session pool and
identities (``pool``), ``tools/list`` (``listing``), ``tools/call`` (``calls``: a search, or a call
checked, pinned and forwarded), the relay between servers and clients (``relay``, ``rounds``), the
ordered queue of the log's writes (``writes``), and the syncs and config reloads (``watch``). It
answers from the persisted index at once: upstream servers are connected when a call needs them.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TextIO

import anyio

from discovery._index import ToolIndex
from discovery._mcp.background import supervised
from discovery._mcp.calls import Calls
from discovery._mcp.config import McpConfig
from discovery._mcp.health import DatabaseHealth
from discovery._mcp.listing import Listing
from discovery._mcp.options import GatewayOptions, Served
from discovery._mcp.origins import server_origin
from discovery._mcp.pool import SessionPool
from discovery._mcp.relay import Relay
from discovery._mcp.server import handler_table, make_server
from discovery._mcp.sync import Library
from discovery._mcp.upstreams import Upstreams
from discovery._mcp.watch import Syncing, Watcher
from discovery._mcp.writes import WriteQueue


class Gateway:
    """The MCP server, its upstream pool and the sessions it serves; use in ``async with``."""

    def __init__(
        self,
        index: ToolIndex,
        config: McpConfig,
        options: GatewayOptions,
        *,
        errlog: TextIO | None = None,
        upstream_errlog: TextIO | None = None,
        reload_config: Callable[[], McpConfig] | None = None,
    ) -> None:
        self.index = index
        self.options = options
        self.errlog = errlog if errlog is not None else sys.stderr
        self.served = Served(config)
        self.health = DatabaseHealth(self.say)
        """Whether the database answers: an outage is said once, and each request told to retry."""
        self.library = Library(index, self.health)
        self.writes = WriteQueue(self.library, self.say)
        self.pool = SessionPool(index, options, self.served, self.writes, self.say)
        self.relay = Relay(options, self.pool, self.say)
        self.upstreams = Upstreams(
            config,
            timeout=options.timeout,
            errlog=upstream_errlog,
            on_tools_changed=self._server_changed,
            max_starting=options.max_starting,
            max_result_bytes=options.max_result_bytes,
            call_timeout=options.call_timeout,
            peer=self.relay,
        )
        self.syncing = Syncing()
        """The servers synced for the first time, which searches wait a while for."""
        self.listing = Listing(self.library, options, self.served, self.pool)
        self.calls = Calls(
            options, self.served, self.pool, self.writes, self.relay, self.upstreams, self.syncing, self.say
        )
        self.watcher = Watcher(
            self.library,
            options,
            self.served,
            self.pool,
            self.relay,
            self.upstreams,
            self.syncing,
            self.say,
            reload_config,
        )
        self.server = make_server(
            handler_table(self.listing, self.calls, self.relay),
            expose_active=options.expose_active,
            health=self.health,
        )
        """The server the clients talk to; this gateway answers its requests once entered."""

    @property
    def config(self) -> McpConfig:
        return self.served.config

    async def __aenter__(self) -> Gateway:
        await self.upstreams.__aenter__()
        try:
            refused, changed = await self.library.run(self._check_origins)
            self.served.set_refused(refused)
            if self.options.adopt:
                await self.library.run(self._adopt_identities)
            unsynced = await self.library.run(self._say_what_is_served)
            unsynced += [server for server in changed if server not in unsynced]
            self.syncing.servers = list(unsynced)
            self.served.direct = await self.library.run(self.watcher.direct_tools)
            if not self.options.per_client:
                self.pool.default = await self.pool.open(self.options.session_id, announce=True)
        except BaseException:
            await self.upstreams.__aexit__(None, None, None)
            raise
        self._background("the log's writer", self.writes.drain)
        if self.options.refresh:
            self._background("the refresh", self.watcher.refresh_forever)
        elif unsynced:
            self._background("the first sync", partial(self.watcher.sync_in_background, unsynced))
        if self.watcher.reload_config is not None:
            self._background("the config watch", self.watcher.watch_config)
        return self

    def _background(self, what: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` beside the requests for as long as the gateway serves, started again
        when it fails (``discovery._mcp.background``)."""
        self.upstreams.start_soon(partial(supervised, what, work, self.say, self.errlog))

    async def __aexit__(self, *exc: object) -> None:
        try:
            with anyio.CancelScope(shield=True):  # what was answered is logged, even on the way out
                await self.writes.close()
        finally:
            await self.upstreams.__aexit__(None, None, None)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()

    async def _server_changed(self, server: str) -> None:
        await supervised(
            f"the re-sync of {server}", partial(self.watcher.server_changed, server), self.say, self.errlog
        )

    def _check_origins(self) -> tuple[frozenset[str], list[str]]:
        """In the worker: the servers of the config whose recorded fingerprint is not theirs, all
        synced again in the background. Those another config synced are out of scope until their
        sync says they list the catalog's tools (else it is refused, and they stay out: the
        catalog's tools of that name are another server's); those this config changed since its
        sync (a new version) stay in scope."""
        config = self.served.config
        stored = self.index.server_origins()
        foreign: set[str] = set()
        changed: list[str] = []
        for name, server in config.servers.items():
            held = stored.get(name)
            origin = server_origin(server, config.path)
            if held is None or held.origin.fingerprint == origin.fingerprint:
                continue
            changed.append(name)
            if not origin.same_config(held.origin):
                foreign.add(name)
        if changed:
            shown = ", ".join(changed)
            self.say(f"not the servers the catalog recorded under their names, synced again: {shown}")
        return frozenset(foreign), changed

    def _adopt_identities(self) -> None:
        """In the worker: the sessions of the tokens file's names made before identities had
        realms (their ``owner`` entries, migrated) become this realm's identities' (said once)."""
        from discovery._sessions.listing import adopt_identities

        moved = adopt_identities(self.index.store, dict(self.options.adopt))
        qualified = dict(self.options.adopt)
        adopted = [f"{count} of {name} as {qualified[name]}" for name, (count, _) in moved.items() if count]
        kept = [f"{count} of {name}" for name, (_, count) in moved.items() if count]
        if adopted:
            self.say(f"adopted sessions made before realms: {', '.join(adopted)}")
        if kept:
            self.say(
                f"Warning: sessions made before realms left as they were, their ids taken in this "
                f"realm: {', '.join(kept)}"
            )

    def _say_what_is_served(self) -> list[str]:
        """In the worker: the database and how many tools in scope each server has, so that a
        gateway in front of servers never synced says so instead of finding nothing. Returns
        the servers the catalog has no tool of (never synced), which are synced in the
        background while the gateway already answers."""
        config, scope = self.served.config, self.served.scope
        self.say(f"database {self.index.url} (analyzer {self.index.analyzer})")
        unsynced = [server for server in config.servers if not self.index.tools(server=server)]
        counts = {
            server: sum(
                1
                for tool in self.index.tools(server=server)
                if scope.admits(tool.server_name, tool.mcp_tool_name)
            )
            for server in config.servers
        }
        shown = ", ".join(f"{server} {count} tools" for server, count in counts.items()) or "none"
        self.say(f"servers of {config.path}: {shown}")
        if config.servers and not any(counts.values()):
            self.say(
                f"Warning: no server of {config.path} has tools in this database yet: syncing "
                "them in the background; searches find their tools once each is synced"
            )
        elif unsynced and not self.options.refresh:
            self.say(f"syncing in the background, never synced before: {', '.join(unsynced)}")
        return unsynced

    def say(self, line: str) -> None:
        """One line on stderr; an upstream's words in it (its errors) are third-party text, so
        control characters never reach a terminal."""
        shown = "".join(char if char.isprintable() else "\ufffd" for char in line)
        print(f"tool-index serve: {shown}", file=self.errlog, flush=True)
