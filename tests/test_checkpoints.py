"""SQLite WAL checkpoints run on a background thread, not inside the write that fills the log."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

from sqlalchemy.engine import make_url

from discovery import ToolIndex
from store.checkpoints import FALLBACK_PAGES, Checkpointer
from store.engine import checkpointer_of
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
    with sqlite3.connect(copy) as connection:
        return int(connection.execute("SELECT count(*) FROM tools").fetchone()[0])


def test_pool_connections_leave_checkpoints_to_the_thread(sqlite_url: str) -> None:
    with ToolIndex.open(sqlite_url) as index, index.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == FALLBACK_PAGES
        assert FALLBACK_PAGES > 1_000  # above SQLite's default, so the thread gets there first


def test_a_write_is_copied_into_the_database_file_in_the_background(sqlite_url: str, tmp_path: Path) -> None:
    database = Path(make_url(sqlite_url).database or "")
    with ToolIndex.open(sqlite_url) as index:
        checkpointer = checkpointer_of(index.engine)
        assert isinstance(checkpointer, Checkpointer)
        assert not checkpointer.running, "reading and opening start no thread"
        index.search("anything")
        assert not checkpointer.running
        index.upsert_tools(generated_catalog(300))
        assert checkpointer.running
        # Far below the automatic threshold, so only the thread can have copied it over.
        assert wait_for(lambda: checkpointer.checkpoints >= 1)
        assert tool_count_of_main_file(database, tmp_path) == 300
    assert not checkpointer.running, "closing the index stops its thread"


def test_every_index_that_writes_has_its_own_thread_and_closing_stops_it(tmp_path: Path) -> None:
    urls = [f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db")]
    indexes = [ToolIndex.open(url) for url in urls]
    try:
        for index in indexes:
            index.upsert_tools(generated_catalog(20))
        checkpointers = [checkpointer_of(index.engine) for index in indexes]
        assert all(c is not None and c.running for c in checkpointers)
        assert checkpointers[0] is not checkpointers[1]
    finally:
        for index in indexes:
            index.close()
    assert not any(c is not None and c.running for c in checkpointers)


def test_other_databases_have_no_checkpointer(tmp_path: Path) -> None:
    with ToolIndex.open("sqlite://") as memory:
        memory.upsert_tools(generated_catalog(5))
        assert checkpointer_of(memory.engine) is None
