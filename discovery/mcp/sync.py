"""``sync``: each configured server's live tools/list into the catalog, as an import of that
list with ``--server NAME --replace`` would write it (one transaction per server)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import types

from discovery.errors import ToolIndexError
from discovery.index import ImportReport, ToolIndex
from discovery.mcp.upstreams import UpstreamError, Upstreams

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
    not_allowed: int = 0
    """Tools the server listed that the config's filters do not allow, so not imported."""


def tools_list_text(tools: list[types.Tool]) -> str:
    """The tools/list result a server gave, as the JSON an import of its file would read."""
    listed = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]
    return json.dumps({"tools": listed}, ensure_ascii=False)


def write_server_tools(index: ToolIndex, server: str, tools: list[types.Tool]) -> ImportReport:
    """Upsert ``server``'s tools and remove those it no longer has, in one transaction: the path of
    ``tool-index import FILE --server NAME --replace``."""
    from discovery.catalog.formats import parse_catalog

    parsed = parse_catalog(tools_list_text(tools), where=f"server {server!r} tools/list", server=server)
    return index.upsert_tools(parsed.records, replace=True, server=server)


async def sync_server(library: Library, upstreams: Upstreams, server: str) -> ServerSync:
    """Sync one server: the tools the config's filters allow replace the ones it had."""
    tool_filter = upstreams.config.tool_filter
    try:
        listed = await upstreams.list_tools(server)
        tools = [tool for tool in listed if tool_filter.allows(server, tool.name)]
        report = await library.run(write_server_tools, library.index, server, tools)
    except (UpstreamError, ToolIndexError) as exc:
        return ServerSync(server, error=str(exc))
    return ServerSync(server, report=report, not_allowed=len(listed) - len(tools))


async def sync_servers(library: Library, upstreams: Upstreams, servers: list[str]) -> list[ServerSync]:
    """Sync ``servers`` concurrently; a failing server does not stop the others."""
    results: dict[str, ServerSync] = {}

    async def one(server: str) -> None:
        results[server] = await sync_server(library, upstreams, server)

    async with anyio.create_task_group() as group:
        for server in servers:
            group.start_soon(one, server)
    return [results[server] for server in servers]
