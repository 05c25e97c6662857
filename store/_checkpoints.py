"""SQLite WAL checkpoints on a background thread, so that no write waits for one.

In WAL mode SQLite appends every commit to the ``-wal`` file and, by default, the commit that
takes the file past 1,000 pages also copies them back into the database and syncs it to disk
before returning, so on a busy session an occasional call took many times longer than the
others. SQLite's documentation suggests the remedy: turn the automatic checkpoint down and run
checkpoints from another thread. Each engine that writes gets one daemon thread with its own
connection; a committed write wakes it, it waits ``BATCH_SECONDS`` for more writes to join the
same checkpoint, and runs a ``PASSIVE`` checkpoint (which never blocks readers or writers).
Pool connections keep a high automatic threshold (``FALLBACK_PAGES``) as a safety net, and the
last connection to close checkpoints what is left, as SQLite always does.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref

BATCH_SECONDS = 0.25
"""How long a checkpoint waits after a write for more writes to share it."""
FALLBACK_PAGES = 10_000
"""The automatic checkpoint threshold of pool connections, should this thread fall behind."""
_THREAD_NAME = "tool-index-checkpoint"


class Checkpointer:
    """Checkpoints one SQLite database file in the background of the writes made to it."""

    def __init__(self, database: str, batch_seconds: float = BATCH_SECONDS) -> None:
        self._database = database
        self._batch_seconds = batch_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_sqlite = threading.Lock()
        """Held while the thread is inside SQLite, and by ``fork()`` (see ``_pause_for_fork``)."""
        self._thread: threading.Thread | None = None
        self.checkpoints = 0
        """Checkpoints run so far (for tests and diagnostics)."""
        _LIVE.add(self)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wrote(self) -> None:
        """A write was committed: checkpoint soon. Starts the thread on the first write (and
        again in a forked child, where the parent's thread does not exist)."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            with self._lock:
                if self._stop.is_set():
                    return
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name=_THREAD_NAME, daemon=True)
                    self._thread.start()
        self._wake.set()

    def forget_thread(self) -> None:
        """In a forked child, where the parent's thread does not run: start afresh, with
        primitives no thread of the parent can have left held."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_sqlite = threading.Lock()
        self._thread = None

    def close(self) -> None:
        """Stop the thread after any checkpoint it is running; later writes checkpoint the usual way."""
        with self._lock:
            self._stop.set()
            self._wake.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                # Clear before looking at ``_stop``: ``close`` sets it before waking us, so a
                # close that comes after this look leaves the wake set for the next round.
                self._wake.clear()
                if self._stop.wait(self._batch_seconds):
                    return
                with self._in_sqlite:
                    if connection is None:
                        connection = _connect(self._database)
                    self._checkpoint(connection)
        except sqlite3.Error:
            return  # the file cannot be opened: writes fall back to automatic checkpoints
        finally:
            if connection is not None:
                with self._in_sqlite:
                    connection.close()

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.Error):  # busy or gone: the next write retries
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1


def _connect(database: str) -> sqlite3.Connection:
    connection = sqlite3.connect(database, timeout=0, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    return connection


_LIVE: weakref.WeakSet[Checkpointer] = weakref.WeakSet()


def _pause_for_fork() -> None:
    """Before ``fork()``: wait until no checkpoint thread is inside SQLite, and keep it out.

    A child gets a copy of the parent's memory with only the forking thread running; a mutex
    that another thread held inside SQLite at that instant (its allocator's, say) stays locked
    in the child forever, and the child's first connection hangs on it."""
    for checkpointer in list(_LIVE):
        checkpointer._in_sqlite.acquire()


def _resume_after_fork() -> None:
    for checkpointer in list(_LIVE):
        if checkpointer._in_sqlite.locked():
            checkpointer._in_sqlite.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_pause_for_fork, after_in_parent=_resume_after_fork, after_in_child=_resume_after_fork
    )
