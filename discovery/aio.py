"""An asyncio face of ``ToolIndex`` and its sessions that never blocks the event loop.

Every call runs the synchronous one in a worker thread (``asyncio.to_thread``). That is safe
because one index is built to be shared by threads: its engine hands each thread its own pooled
connection, every write is one transaction, and the ranker's caches admit one caller at a time.
So any number of tasks may search, import and change sessions at once; the loop keeps serving
the others while the database works or waits for another process's lock.

    from discovery.aio import AsyncToolIndex

    async with await AsyncToolIndex.open("sqlite:///tools.db") as index:
        session = await index.session("chat-1", discovery_mode="all")
        result = await session.search("call-1", {"query": "open a pull request"})
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from discovery._index import ImportReport, ToolIndex
from discovery._params import DEFAULT_LIMIT

if TYPE_CHECKING:
    from discovery._catalog.models import ToolRecord
    from discovery._results import SearchDetails, SearchHit
    from discovery._rules import EffectiveMode
    from discovery._sessions.search_tool import ToolResult
    from discovery._sessions.session import Session
    from store import StoredTool

__all__ = ["AsyncSession", "AsyncToolIndex"]


class AsyncToolIndex:
    """``ToolIndex`` with coroutine methods; ``index`` is the synchronous one it wraps."""

    def __init__(self, index: ToolIndex) -> None:
        self.index = index

    @classmethod
    async def open(
        cls, url: str | None = None, *, upgrade: bool = True, analyzer: str | None = None
    ) -> AsyncToolIndex:
        """``ToolIndex.open`` (which may create or upgrade the schema) in a worker thread."""
        return cls(await asyncio.to_thread(ToolIndex.open, url, upgrade=upgrade, analyzer=analyzer))

    @property
    def url(self) -> str:
        return self.index.url

    async def close(self) -> None:
        await asyncio.to_thread(self.index.close)

    async def __aenter__(self) -> AsyncToolIndex:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def upsert_tools(
        self,
        records: Iterable[Mapping[str, Any] | ToolRecord],
        *,
        replace: bool = False,
        server: str | None = None,
    ) -> ImportReport:
        return await asyncio.to_thread(self.index.upsert_tools, records, replace=replace, server=server)

    async def reindex(self, analyzer: str) -> int:
        return await asyncio.to_thread(self.index.reindex, analyzer)

    async def remove_tools(self, names: Iterable[str]) -> list[str]:
        return await asyncio.to_thread(self.index.remove_tools, list(names))

    async def search(self, query: str, limit: int | None = None, *, mode: str = "all") -> list[SearchHit]:
        return await asyncio.to_thread(self.index.search, query, limit, mode=mode)

    async def search_details(
        self, query: str, limit: int | None = None, *, mode: str = "all"
    ) -> SearchDetails:
        return await asyncio.to_thread(self.index.search_details, query, limit, mode=mode)

    async def tool(self, name: str) -> StoredTool:
        return await asyncio.to_thread(self.index.tool, name)

    async def tools(self, *, server: str | None = None, source: str | None = None) -> list[StoredTool]:
        return await asyncio.to_thread(self.index.tools, server=server, source=source)

    async def stats(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.index.stats)

    async def session(
        self,
        session_id: str | None = None,
        *,
        discovery_mode: str | None = None,
        mcp_discovery: bool | None = None,
        essential_override: Sequence[str] | None = None,
        default_servers: Sequence[str] | None = None,
        requested: Sequence[str] | None = None,
    ) -> AsyncSession:
        """Create a session, or resume it by id, as ``ToolIndex.session`` does."""
        session = await asyncio.to_thread(
            self.index.session,
            session_id,
            discovery_mode=discovery_mode,
            mcp_discovery=mcp_discovery,
            essential_override=essential_override,
            default_servers=default_servers,
            requested=requested,
        )
        return AsyncSession(session)

    async def session_record(self, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.index.session_record, session_id)

    async def delete_session(self, session_id: str) -> None:
        await asyncio.to_thread(self.index.delete_session, session_id)


class AsyncSession:
    """A session with coroutine methods; ``session`` is the synchronous one it wraps."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def id(self) -> str:
        return self.session.id

    async def search(self, call_id: str, params: dict[str, Any]) -> ToolResult:
        """``session.search_tool.execute``: raises ``ToolCallError`` with contract §6's message."""
        return await asyncio.to_thread(self.session.search_tool.execute, call_id, params)

    async def search_description(self) -> str:
        """The search tool's description, rendered from the session's current corpus."""
        return await asyncio.to_thread(lambda: self.session.search_tool.description)

    async def active(self) -> list[str]:
        return await asyncio.to_thread(lambda: self.session.active)

    async def selected(self) -> list[str]:
        return await asyncio.to_thread(lambda: self.session.selected)

    async def effective_mode(self) -> EffectiveMode:
        return await asyncio.to_thread(lambda: self.session.effective_mode)

    async def active_tools(self) -> list[StoredTool]:
        return await asyncio.to_thread(self.session.active_tools)

    async def set_active(self, names: Iterable[str]) -> list[str]:
        return await asyncio.to_thread(self.session.set_active, list(names))

    async def reset(self) -> list[str]:
        return await asyncio.to_thread(self.session.reset)

    async def preview(self, query: str, limit: int = DEFAULT_LIMIT) -> list[SearchHit]:
        return await asyncio.to_thread(self.session.preview, query, limit)
