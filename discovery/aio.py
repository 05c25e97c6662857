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

The coroutine methods are the synchronous ones with the same parameters and answers, made by
``_in_thread`` rather than written out again, so the two faces cannot drift apart.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from discovery._index import ToolIndex
from discovery._rules import LOCAL_IDENTITY
from discovery._sessions.session import Session

if TYPE_CHECKING:
    from discovery._rules import EffectiveMode
    from discovery._sessions.search_tool import ToolResult

__all__ = ["AsyncSession", "AsyncToolIndex"]

Wrapped = TypeVar("Wrapped")
Params = ParamSpec("Params")
Result = TypeVar("Result")


class _Face(Generic[Wrapped]):
    """A coroutine face of one synchronous object, ``wrapped``."""

    def __init__(self, wrapped: Wrapped) -> None:
        self.wrapped = wrapped

    async def _read(self, attribute: Callable[[Wrapped], Result]) -> Result:
        """``attribute`` of the wrapped object (a property may read the database) in a worker."""
        return await asyncio.to_thread(attribute, self.wrapped)


def _in_thread(
    method: Callable[Concatenate[Wrapped, Params], Result],
) -> Callable[Concatenate[_Face[Wrapped], Params], Coroutine[Any, Any, Result]]:
    """``method`` of the wrapped object as a coroutine method of its face, run in a worker."""

    @functools.wraps(method)
    async def in_thread(face: _Face[Wrapped], /, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        return await asyncio.to_thread(method, face.wrapped, *args, **kwargs)

    return in_thread


class AsyncToolIndex(_Face[ToolIndex]):
    """``ToolIndex`` with coroutine methods; ``index`` is the synchronous one it wraps."""

    @classmethod
    async def open(
        cls, url: str | None = None, *, upgrade: bool = True, analyzer: str | None = None
    ) -> AsyncToolIndex:
        """``ToolIndex.open`` (which may create or upgrade the schema) in a worker thread."""
        return cls(await asyncio.to_thread(ToolIndex.open, url, upgrade=upgrade, analyzer=analyzer))

    @property
    def index(self) -> ToolIndex:
        return self.wrapped

    @property
    def url(self) -> str:
        return self.wrapped.url

    async def __aenter__(self) -> AsyncToolIndex:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def session(
        self, session_id: str | None = None, *, identity: str = LOCAL_IDENTITY, **settings: Any
    ) -> AsyncSession:
        """Create ``identity``'s session, or resume it by id, as ``ToolIndex.session`` does (the
        same identity and keyword settings, checked by ``SessionSettings``)."""
        session = await asyncio.to_thread(
            lambda: self.wrapped.session(session_id, identity=identity, **settings)
        )
        return AsyncSession(session)

    close = _in_thread(ToolIndex.close)
    upsert_tools = _in_thread(ToolIndex.upsert_tools)
    reindex = _in_thread(ToolIndex.reindex)
    remove_tools = _in_thread(ToolIndex.remove_tools)
    search = _in_thread(ToolIndex.search)
    search_details = _in_thread(ToolIndex.search_details)
    tool = _in_thread(ToolIndex.tool)
    tools = _in_thread(ToolIndex.tools)
    stats = _in_thread(ToolIndex.stats)
    session_record = _in_thread(ToolIndex.session_record)
    delete_session = _in_thread(ToolIndex.delete_session)


class AsyncSession(_Face[Session]):
    """A session with coroutine methods; ``session`` is the synchronous one it wraps."""

    @property
    def session(self) -> Session:
        return self.wrapped

    @property
    def id(self) -> str:
        return self.wrapped.id

    @property
    def identity(self) -> str:
        return self.wrapped.identity

    async def search(self, call_id: str, params: dict[str, Any]) -> ToolResult:
        """``session.search_tool.execute``: raises ``ToolCallError`` with contract §6's message."""
        return await self._read(lambda session: session.search_tool.execute(call_id, params))

    async def search_description(self) -> str:
        """The search tool's description, rendered from the session's current corpus."""
        return await self._read(lambda session: session.search_tool.description)

    async def active(self) -> list[str]:
        return await self._read(lambda session: session.active)

    async def selected(self) -> list[str]:
        return await self._read(lambda session: session.selected)

    async def effective_mode(self) -> EffectiveMode:
        return await self._read(lambda session: session.effective_mode)

    active_tools = _in_thread(Session.active_tools)
    set_active = _in_thread(Session.set_active)
    reset = _in_thread(Session.reset)
    preview = _in_thread(Session.preview)
