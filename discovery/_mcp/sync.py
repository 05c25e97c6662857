"""``sync``: each configured server's live tools/list into the catalog, as an import of that
list with ``--server NAME --replace`` would write it (one transaction per server).

A sync stores every tool its server lists, whatever the config's filters say: the catalog may be
shared by many hosts, and filters shape what one host's gateway offers (its scope), never what
the others find. A report counts the tools the filters leave out of this config's view.

Each write records what the server is and which host's config synced it (``origins``): a server
of this config that the catalog holds as another config's different server is refused, and the
other servers sync on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import types

from discovery._catalog.writes import ImportReport
from discovery._index import ToolIndex
from discovery._mcp.config import StdioServer
from discovery._mcp.failures import UpstreamError
from discovery._mcp.health import DatabaseHealth, is_outage
from discovery._mcp.origins import server_origin
from discovery._mcp.upstreams import Upstreams
from discovery.errors import ServerClaimed, StoreError, ToolIndexError
from store import ServerOrigin

T = TypeVar("T")


class Library:
    """Runs the synchronous library in one worker thread, one call at a time, so the event loop
    never waits on the database and the index is never used by two threads at once. With
    ``health``, every run tells it whether the database could be used."""

    def __init__(self, index: ToolIndex, health: DatabaseHealth | None = None) -> None:
        self.index = index
        self.health = health
        self._limiter = anyio.CapacityLimiter(1)

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        try:
            done = await anyio.to_thread.run_sync(work, *args, limiter=self._limiter)
        except StoreError as exc:
            if self.health is not None and is_outage(exc):
                self.health.failed(exc)
            raise
        if self.health is not None:
            self.health.answered()
        return done


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


@dataclass(frozen=True, slots=True)
class ServerSync:
    """What syncing one server did: its report, or the error that left its tools as they were."""

    server: str
    report: ImportReport | None = None
    error: str | None = None
    not_offered: int = 0
    """Tools stored that this config's filters leave out: its gateway does not offer them."""
    refused: bool = False
    """The catalog holds another config's different server under this name (``ServerClaimed``)."""


def write_server_tools(
    index: ToolIndex, origin: ServerOrigin, tools: list[types.Tool], take_over: bool = False
) -> ImportReport:
    """Upsert the tools of ``origin``'s server and remove those it no longer has, in one
    transaction: the path of ``tool-index import FILE --server NAME --replace`` for a file holding
    this tools/list result, with the server's origin checked and recorded. Each tool goes as its
    wire form, the JSON object a file would hold. A tool whose catalog name is another server's
    tool (``ServerNameCollision``), or a name the catalog holds as another config's different
    server (``ServerClaimed``, unless ``take_over``), refuses the whole write: the catalog stays as
    it was."""
    from discovery._catalog.formats import listed_tools

    server = origin.name
    listed = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]
    parsed = listed_tools(listed, where=f"server {server!r} tools/list", server=server)
    return index.upsert_tools(parsed.records, replace=True, server=server, origin=origin, take_over=take_over)


async def sync_server(
    library: Library, upstreams: Upstreams, server: str, *, take_over: bool = False
) -> ServerSync:
    """Sync one server: every tool it lists replaces the ones it had."""
    config = upstreams.config
    origin = server_origin(config.servers[server], config.path)
    try:
        listed = await upstreams.list_tools(server)
        report = await library.run(write_server_tools, library.index, origin, listed, take_over)
    except StoreError:
        raise  # a database error is not this server's failure: it ends the sync
    except UpstreamError as exc:  # told to whoever runs the sync: paths and the server's stderr too
        return ServerSync(server, error=exc.reported)
    except ServerClaimed as exc:
        return ServerSync(server, error=str(exc), refused=True)
    except ToolIndexError as exc:  # its list's
        return ServerSync(server, error=str(exc))
    not_offered = sum(1 for tool in listed if not config.tool_filter.allows(server, tool.name))
    return ServerSync(server, report=report, not_offered=not_offered)


async def sync_servers(
    library: Library,
    upstreams: Upstreams,
    servers: list[str],
    *,
    close: bool = False,
    take_over: Collection[str] = (),
) -> list[ServerSync]:
    """Sync ``servers`` concurrently; a failing server does not stop the others; those named in
    ``take_over`` replace another config's server of their name. With ``close``,
    each connection the sync opened is closed once its server is synced (one that was open
    before, or that a call uses meanwhile, stays open), and at most ``upstreams.max_starting``
    stdio servers run at once (each is a process); otherwise only their starts are limited."""
    results: dict[str, ServerSync] = {}
    running = anyio.Semaphore(upstreams.max_starting)

    async def one(server: str) -> None:
        upstream = upstreams.upstream(server)
        if not close:
            results[server] = await sync_server(library, upstreams, server, take_over=server in take_over)
            return
        opened_here = not upstream.connected
        async with running if isinstance(upstream.config, StdioServer) and opened_here else _nothing():
            calls = upstream.calls
            try:
                results[server] = await sync_server(library, upstreams, server, take_over=server in take_over)
            finally:
                if opened_here and upstream.calls == calls:  # else a call uses the connection
                    await upstream.close(wait=True)

    async with anyio.create_task_group() as group:
        for server in servers:
            group.start_soon(one, server)
    return [results[server] for server in servers]
