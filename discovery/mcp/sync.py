"""``sync``: each configured server's live tools/list into the catalog, as an import of that
list with ``--server NAME --replace`` would write it (one transaction per server)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import types

from discovery.errors import ToolIndexError
from discovery.index import ImportReport, ToolIndex
from discovery.mcp.upstreams import Upstreams
from store.errors import StoreError

T = TypeVar("T")


class Library:
    """Runs the synchronous library in one worker thread, one call at a time, so the event loop
    never waits on the database and the index is never used by two threads at once."""

    def __init__(self, index: ToolIndex) -> None:
        self.index = index
        self._limiter = anyio.CapacityLimiter(1)

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(work, *args, limiter=self._limiter)


@dataclass(frozen=True, slots=True)
class ServerSync:
    """What syncing one server did: its report, or the error that left its tools as they were."""

    server: str
    report: ImportReport | None = None
    error: str | None = None


def write_server_tools(index: ToolIndex, server: str, tools: list[types.Tool]) -> ImportReport:
    """Upsert ``server``'s tools and remove those it no longer has, in one transaction: the path of
    ``tool-index import FILE --server NAME --replace`` for a file holding this tools/list result.
    Each tool goes as its wire form, the JSON object a file would hold. A tool whose catalog name
    is another server's tool refuses the whole write (``ServerNameCollision``): the catalog stays
    as it was."""
    from discovery.catalog.formats import listed_tools

    listed = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]
    parsed = listed_tools(listed, where=f"server {server!r} tools/list", server=server)
    return index.upsert_tools(parsed.records, replace=True, server=server)


async def sync_server(library: Library, upstreams: Upstreams, server: str) -> ServerSync:
    try:
        tools = await upstreams.list_tools(server)
        report = await library.run(write_server_tools, library.index, server, tools)
    except StoreError:
        raise  # a database error is not this server's failure: it ends the sync
    except ToolIndexError as exc:  # the server's (an ``UpstreamError``) or its list's
        return ServerSync(server, error=str(exc))
    return ServerSync(server, report=report)


async def sync_servers(library: Library, upstreams: Upstreams, servers: list[str]) -> list[ServerSync]:
    """Sync ``servers`` concurrently; a failing server does not stop the others."""
    results: dict[str, ServerSync] = {}

    async def one(server: str) -> None:
        results[server] = await sync_server(library, upstreams, server)

    async with anyio.create_task_group() as group:
        for server in servers:
            group.start_soon(one, server)
    return [results[server] for server in servers]
