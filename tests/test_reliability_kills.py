"""A killed import takes its workers with it and leaves no lock behind; a writer waiting for a
lock gives up with ``ConcurrentUpdate`` after a bounded time, on both backends."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from discovery import ConcurrentUpdate, ToolIndex
from discovery._catalog.workers import PARALLEL_MIN
from store._engine import BUSY_TIMEOUT_MS, IDLE_IN_TRANSACTION_MS, write_transaction
from tests.catalogs import generated_catalog

REPO = Path(__file__).resolve().parent.parent
SIGNALS = [signal.SIGKILL, signal.SIGTERM]


def wait_for(condition: Callable[[], bool], seconds: float = 120.0) -> bool:
    """Poll ``condition`` until it holds; a slow machine only makes this wait longer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def children_of(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def with_options(url: str, *settings: str) -> str:
    """``url`` with PostgreSQL settings added to its ``options`` (``-c name=value`` each)."""
    extra = "%20".join(f"-c{setting.replace('=', '%3D')}" for setting in settings)
    if "options=" in url:
        return url.replace("options=", f"options={extra}%20", 1)
    return f"{url}{'&' if '?' in url else '?'}options={extra}"


def short_wait(url: str) -> str:
    """``url`` whose writers wait a fraction of a second for a lock."""
    if url.startswith("sqlite"):
        return f"{url}?timeout=0.2"
    return with_options(url, "lock_timeout=200")


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("signal_number", SIGNALS, ids=["SIGKILL", "SIGTERM"])
def test_a_killed_import_takes_its_workers_and_its_lock_with_it(db_url: str, signal_number: int) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(generated_catalog(50, seed=1, servers=["base"]))
    count = PARALLEL_MIN + 5_000
    args = json.dumps({"count": count, "seed": 2, "server": "killed"})
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.workers", "import_batch", db_url, args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    assert wait_for(lambda: bool(children_of(process.pid))), "the import started no workers"
    workers = children_of(process.pid)
    process.send_signal(signal_number)
    process.communicate(timeout=120)
    assert wait_for(lambda: not any(alive(pid) for pid in workers)), "workers outlived the import"
    # No lock is left: a writer that waits only a fraction of a second gets through.
    with ToolIndex.open(short_wait(db_url)) as index:
        index.upsert_tools(generated_catalog(10, seed=3, servers=["after"]))
        assert len(index.tools(server="killed")) in (0, count)
        assert len(index.tools(server="after")) == 10


HOLD_LOCK_AND_FORK = textwrap.dedent(
    """
    import os, sys, time
    from discovery import ToolIndex
    from store._catalog import lock_catalog
    from store._engine import write_transaction

    index = ToolIndex.open(sys.argv[1])
    with write_transaction(index.store.engine) as connection:
        lock_catalog(connection)
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        print(child, flush=True)
        time.sleep(600)
    """
)


def test_a_forked_child_does_not_keep_its_parents_transaction_alive(db_url: str, tmp_path: Path) -> None:
    """The parent dies holding the catalog lock while its forked child lives on: the server
    still sees the parent's session end, so the lock goes with it."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite locks belong to processes: a child never holds its parent's")
    script = tmp_path / "hold.py"
    script.write_text(HOLD_LOCK_AND_FORK)
    process = subprocess.Popen(
        [sys.executable, str(script), db_url], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    child = int(process.stdout.readline())
    try:
        process.kill()
        process.wait(timeout=60)
        assert alive(child)
        with ToolIndex.open(with_options(db_url, "lock_timeout=5000")) as index:
            index.upsert_tools(generated_catalog(5, seed=4, servers=["after"]))
            assert len(index.tools(server="after")) == 5
    finally:
        os.kill(child, signal.SIGKILL)


@contextmanager
def catalog_locked(url: str) -> Iterator[None]:
    """Another process's writer holding the catalog: SQLite's write lock, PostgreSQL's row lock."""
    if url.startswith("sqlite"):
        connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    engine = create_engine(url)
    try:
        with engine.begin() as locked:
            locked.execute(text("SELECT generation FROM catalog_state WHERE id = 1 FOR UPDATE"))
            yield
    finally:
        engine.dispose()


def test_a_writer_waiting_for_a_lock_gives_up_with_concurrent_update(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(generated_catalog(5, seed=1, servers=["base"]))
    with (
        ToolIndex.open(short_wait(db_url)) as index,
        catalog_locked(db_url),
        pytest.raises(ConcurrentUpdate, match="stayed locked by another writer"),
    ):
        index.upsert_tools(generated_catalog(5, seed=2, servers=["blocked"]))
    with ToolIndex.open(db_url) as index:
        assert index.tools(server="blocked") == []
        assert len(index.tools(server="base")) == 5


def postgres_only(url: str) -> None:
    if not url.startswith("postgresql"):
        pytest.skip("PostgreSQL settings")


def test_postgres_connections_get_bounded_waits_unless_the_url_sets_them(db_url: str) -> None:
    postgres_only(db_url)

    def settings(url: str) -> tuple[str, str]:
        with ToolIndex.open(url) as index, index.store.engine.connect() as connection:
            row = connection.execute(
                text(
                    "SELECT current_setting('lock_timeout'), "
                    "current_setting('idle_in_transaction_session_timeout')"
                )
            ).one()
            return str(row[0]), str(row[1])

    assert settings(db_url) == (f"{BUSY_TIMEOUT_MS // 1000}s", f"{IDLE_IN_TRANSACTION_MS // 60_000}min")
    assert settings(with_options(db_url, "lock_timeout=1500"))[0] == "1500ms"


def test_postgres_ends_a_writer_left_idle_in_its_transaction(db_url: str) -> None:
    """A writer that stops mid-transaction loses it (and its locks); the caller hears
    ``ConcurrentUpdate`` and nothing of it was written."""
    postgres_only(db_url)
    with ToolIndex.open(with_options(db_url, "idle_in_transaction_session_timeout=300")) as index:
        with (
            pytest.raises(ConcurrentUpdate, match="nothing was written"),
            write_transaction(index.store.engine) as connection,
        ):
            connection.execute(text("UPDATE catalog_state SET generation = generation + 100"))
            time.sleep(1.0)
            connection.execute(text("SELECT 1"))
        assert index.stats()["generation"] < 100
