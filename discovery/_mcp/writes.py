"""The gateway's writes, in the order they were asked for: one queue in front of the library's worker.

A call's log entry and a search's pins are written after the client has its answer, so a burst
of calls costs one commit; a write the gateway waits for (a session stored, a search) is run
after every entry asked for before it, in the same transaction where it can be, so the log
keeps the order of the calls. As datasette's ``execute_write_fn``: one writer, in order. An
entry is taken off the queue only once its transaction has committed: a write that fails (the
database busy or unavailable) leaves every entry where it was, and the queue tries again after
a pause that doubles, never dropping one; only a gateway killed before its last try loses them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from discovery._mcp.health import is_outage
from discovery._mcp.sessions import GatewaySession, Pending, write_pending_in
from discovery._mcp.sync import Library
from discovery.errors import StoreError
from store import Writer

T = TypeVar("T")

FIRST_PAUSE = 0.1
"""Seconds before a failed write of the queue is tried again; each failure doubles it ..."""
LONGEST_PAUSE = 10.0
"""... up to this."""
LAST_TRIES = 3
"""Tries of what is still queued when the gateway stops."""


class WriteQueue:
    """The log entries waiting to be written, and the writes that must follow them."""

    def __init__(self, library: Library, say: Callable[[str], None]) -> None:
        self.library = library
        self._say = say
        self._waiting: deque[tuple[GatewaySession, Pending]] = deque()
        self._queued = anyio.Event()

    def __len__(self) -> int:
        return len(self._waiting)

    def later(self, gateway_session: GatewaySession, pending: Pending) -> None:
        """Write an entry once the worker is free (``drain``). A session not stored yet has no
        log: what it did was read-only (a listing, a description, a refusal), and is not kept."""
        if not gateway_session.stored:
            return
        self._waiting.append((gateway_session, pending))
        self._queued.set()

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` in the worker, once every entry queued before it is written."""
        return await self.library.run(self._after_queue, work, *args)

    async def write(self, work: Callable[[Writer], T]) -> T:
        """``work(writer)`` in the worker, in one transaction with every entry queued before it."""
        return await self.library.run(self._with_queue, work)

    async def close(self) -> None:
        """Write what is still queued, as the gateway stops; say what could not be."""
        for attempt in range(LAST_TRIES):
            try:
                await self.library.run(self._after_queue, _nothing)
                return
            except StoreError as exc:
                if attempt == LAST_TRIES - 1:
                    self._say(
                        f"could not log to the sessions: {exc}; {len(self._waiting)} entries not written"
                    )
                    return
                await anyio.sleep(FIRST_PAUSE * 2**attempt)

    async def drain(self) -> None:
        """Write the queue as entries come, for as long as the gateway serves (a task of its own).
        A failure is said once until a write succeeds again; an outage of the database not even
        once here, the database health saying it."""
        pause = FIRST_PAUSE
        while True:
            await self._queued.wait()
            self._queued = anyio.Event()
            while self._waiting:
                try:
                    await self.library.run(self._after_queue, _nothing)
                    pause = FIRST_PAUSE
                except StoreError as exc:
                    said_elsewhere = self.library.health is not None and is_outage(exc)
                    if pause == FIRST_PAUSE and not said_elsewhere:  # the first failure in a row
                        self._say(f"could not log to the sessions now ({exc}); trying again until it can")
                    await anyio.sleep(pause)
                    pause = min(pause * 2, LONGEST_PAUSE)

    def _after_queue(self, work: Callable[..., T], *args: Any) -> T:
        """In the worker: the queue written (in a transaction of its own), then ``work``."""
        if self._waiting:
            self._with_queue(_nothing_in)
        return work(*args)

    def _with_queue(self, work: Callable[[Writer], T]) -> T:
        """In the worker: the queued entries and ``work`` in one transaction. The entries leave
        the queue only once it has committed; an entry of a session deleted meanwhile has no log
        to go to (said, and taken off with the others)."""
        taken = list(self._waiting)
        store = self.library.index.store
        gone: list[str] = []
        with store.writing() as writer:
            gone = write_pending_in(writer, self.library.index, taken)
            result = work(writer)
        for _ in taken:
            self._waiting.popleft()
        if gone:
            shown = ", ".join(repr(session_id) for session_id in gone)
            self._say(
                f"could not log to the session: session {shown} was deleted while the gateway served it"
            )
        return result


def _nothing() -> None:
    return None


def _nothing_in(writer: Writer) -> None:
    return None
