"""SQLite WAL checkpoints run on a background thread, not inside the write that fills the log."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import threading
import time
import traceback
from contextlib import closing
from pathlib import Path

from sqlalchemy.engine import make_url

from discovery import ToolIndex
from store._checkpoints import FALLBACK_PAGES, Checkpointer
from store._engine import checkpointer_of
from tests.catalogs import generated_catalog


def wait_for(condition: object, seconds: float = 60.0) -> bool:
    """Poll ``condition`` (a callable) until it holds; a slow machine only makes this wait longer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def tool_count_of_main_file(database: Path, scratch: Path) -> int:
    """The tools the database file holds on its own, without its ``-wal`` log."""
    copy = scratch / "main-file-only.db"
    shutil.copyfile(database, copy)
    with closing(sqlite3.connect(copy)) as connection:
        return int(connection.execute("SELECT count(*) FROM tools").fetchone()[0])


def main_file_holds(database: Path, scratch: Path, tools: int) -> bool:
    """Whether the database file on its own holds ``tools`` tools. A write made of several
    commits may wake the thread more than once, so a checkpoint can still be copying pages while
    the file is copied here: a copy torn that way is not there yet."""
    try:
        return tool_count_of_main_file(database, scratch) == tools
    except sqlite3.DatabaseError:
        return False


def test_pool_connections_leave_checkpoints_to_the_thread(sqlite_url: str) -> None:
    with ToolIndex.open(sqlite_url) as index, index.store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == FALLBACK_PAGES
        assert FALLBACK_PAGES > 1_000  # above SQLite's default, so the thread gets there first


def test_a_write_is_copied_into_the_database_file_in_the_background(sqlite_url: str, tmp_path: Path) -> None:
    database = Path(make_url(sqlite_url).database or "")
    with ToolIndex.open(sqlite_url) as index:
        checkpointer = checkpointer_of(index.store.engine)
        assert isinstance(checkpointer, Checkpointer)
        assert not checkpointer.running, "reading and opening start no thread"
        index.search("anything")
        assert not checkpointer.running
        index.upsert_tools(generated_catalog(300))
        assert checkpointer.running
        # Far below the automatic threshold, so only the thread can have copied it over.
        assert wait_for(lambda: checkpointer.checkpoints >= 1)
        assert wait_for(lambda: main_file_holds(database, tmp_path, 300))
    assert not checkpointer.running, "closing the index stops its thread"


def test_every_index_that_writes_has_its_own_thread_and_closing_stops_it(tmp_path: Path) -> None:
    urls = [f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db")]
    indexes = [ToolIndex.open(url) for url in urls]
    try:
        for index in indexes:
            index.upsert_tools(generated_catalog(20))
        checkpointers = [checkpointer_of(index.store.engine) for index in indexes]
        assert all(c is not None and c.running for c in checkpointers)
        assert checkpointers[0] is not checkpointers[1]
    finally:
        for index in indexes:
            index.close()
    assert not any(c is not None and c.running for c in checkpointers)


def test_a_forked_child_checkpoints_its_own_writes(sqlite_url: str, tmp_path: Path) -> None:
    """The parent's thread does not survive a fork: the child's first write starts one of its
    own, which copies the child's writes over and stops when the child closes the index."""
    database = Path(make_url(sqlite_url).database or "")
    with ToolIndex.open(sqlite_url) as index:
        index.upsert_tools(generated_catalog(20))
        checkpointer = checkpointer_of(index.store.engine)
        assert checkpointer is not None and checkpointer.running
        failure = tmp_path / "child-failure"
        pid = os.fork()
        if pid == 0:  # the child: every check is an exit status, an exception its traceback
            status = 1
            try:
                before = checkpointer.checkpoints
                index.upsert_tools(generated_catalog(300))
                checks = [
                    checkpointer.running,
                    wait_for(lambda: checkpointer.checkpoints > before),
                    wait_for(lambda: main_file_holds(database, tmp_path, 300)),
                ]
                index.close()
                checks.append(not checkpointer.running)
                status = 0 if all(checks) else 10 + sum(2**i for i, ok in enumerate(checks) if not ok)
            except BaseException:
                failure.write_text(traceback.format_exc(), encoding="utf-8")
                raise
            finally:
                os._exit(status)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        assert status == 0, failure.read_text(encoding="utf-8") if failure.exists() else status
        assert checkpointer.running, "the child's close leaves the parent's thread running"
        assert len(index.tools()) == 300


def test_other_databases_have_no_checkpointer(tmp_path: Path) -> None:
    with ToolIndex.open("sqlite://") as memory:
        memory.upsert_tools(generated_catalog(5))
        assert checkpointer_of(memory.store.engine) is None


def test_closing_never_waits_forever_whenever_it_comes(tmp_path: Path) -> None:
    # ``close`` may land at any point of the thread's loop: waiting for a write, batching, or
    # between a checkpoint and the next wait. Without a batching pause the windows are short,
    # so many rounds with random timing reach each of them.
    database = tmp_path / "race.db"
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("CREATE TABLE t (x)")
    rng = random.Random(5)
    for _ in range(300):
        checkpointer = Checkpointer(str(database), batch_seconds=0)
        for _ in range(rng.randint(1, 3)):
            checkpointer.wrote()
            time.sleep(rng.choice([0, 0, 0.0001, 0.001]))
        closing = threading.Thread(target=checkpointer.close, daemon=True)
        closing.start()
        closing.join(timeout=30)
        assert not closing.is_alive(), "close() hung waiting for the checkpoint thread"
        assert not checkpointer.running


class ClosedMidCheckpoint(Checkpointer):
    """Closed by another thread while its first checkpoint runs."""

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        if self.checkpoints == 0:
            closing = threading.Thread(target=self.close, daemon=True)
            closing.start()
            self.closer = closing
            assert wait_for(lambda: self._stop.is_set(), 30)
        super()._checkpoint(connection)


def test_a_close_during_a_checkpoint_ends_the_thread_after_it(tmp_path: Path) -> None:
    database = tmp_path / "mid.db"
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
    checkpointer = ClosedMidCheckpoint(str(database), batch_seconds=0)
    checkpointer.wrote()
    assert wait_for(lambda: hasattr(checkpointer, "closer"), 30)
    checkpointer.closer.join(timeout=30)
    assert not checkpointer.closer.is_alive(), "close() hung waiting for the checkpoint thread"
    assert checkpointer.checkpoints == 1 and not checkpointer.running
