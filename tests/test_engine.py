"""Engines: URLs and defaults, SQLite settings, and files that cannot be used as they are."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from platformdirs import user_data_dir
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url

import store
import store._engine
from discovery import ToolIndex
from discovery._diagnostics.verify import verify
from discovery.cli._main import main
from store._engine import BUSY_TIMEOUT_MS, make_engine
from store._urls import parse_url
from tests.catalogs import generated_catalog

TOOL = {"name": "mcp__files__read_text", "server_name": "files", "description": "Read a text file"}
OTHER = {"name": "mcp__files__write_text", "server_name": "files", "description": "Write a text file"}


def database_path(sqlite_url: str) -> Path:
    return Path(make_url(sqlite_url).database or "")


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout_and_foreign_keys(sqlite_url: str) -> None:
    with ToolIndex.open(sqlite_url) as index, index.store.engine.connect() as connection:
        pragma = connection.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar_one() == "wal"
        assert pragma("PRAGMA busy_timeout").scalar_one() == BUSY_TIMEOUT_MS
        assert BUSY_TIMEOUT_MS >= 5_000
        assert pragma("PRAGMA foreign_keys").scalar_one() == 1


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    garbage = b"these are notes, not a database\n" * 64 + bytes(range(256))
    path.write_bytes(garbage)
    with pytest.raises(store.errors.DatabaseUnavailable) as caught:
        ToolIndex.open(f"sqlite:///{path}")
    assert str(caught.value) == (
        f"sqlite:///{path} is not a usable SQLite database (file is not a database); "
        "point --db at another file"
    )
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


@pytest.fixture
def filled(sqlite_url: str) -> Path:
    """A SQLite database holding one tool and one session, closed (so its WAL is checkpointed
    into the file)."""
    with ToolIndex.open(sqlite_url) as index:
        index.upsert_tools([TOOL])
        index.session("chat-1", discovery_mode="all")
    return database_path(sqlite_url)


def assert_refuses_writes_and_reads(url: str, path: Path) -> None:
    before = path.read_bytes()
    with ToolIndex.open(url) as index:
        with pytest.raises(store.errors.ReadOnlyDatabase) as caught:
            index.upsert_tools([OTHER])
        assert str(caught.value).endswith(
            "is read-only (attempt to write a readonly database); use a writable file or server for changes"
        )
        assert [hit.name for hit in index.search("text file")] == [TOOL["name"]]
        assert [tool.name for tool in index.tools()] == [TOOL["name"]]
    assert path.read_bytes() == before


def test_a_database_opened_read_only_refuses_writes_and_still_reads(filled: Path) -> None:
    assert_refuses_writes_and_reads(f"sqlite:///file:{filled}?mode=ro&uri=true", filled)


def test_a_read_only_file_refuses_writes_and_still_reads(filled: Path) -> None:
    filled.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        if os.access(filled, os.W_OK):
            pytest.skip("file modes do not stop this user (root) from writing; see the mode=ro test")
        assert_refuses_writes_and_reads(f"sqlite:///{filled}", filled)
    finally:
        filled.chmod(stat.S_IRUSR | stat.S_IWUSR)


HOLD_THE_WRITE_LOCK = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
connection.execute("ROLLBACK")
"""


def test_a_writer_that_keeps_the_lock_past_the_busy_timeout(filled: Path, tmp_path: Path) -> None:
    """Another process holds SQLite's write lock for longer than a writer waits: the write is
    refused with one clear error and changes nothing; reads go on; the same write succeeds once
    the lock is free."""
    url = f"sqlite:///{filled}?timeout=0.2"  # how long a writer waits, as a user sets it
    catalog = tmp_path / "other.jsonl"
    catalog.write_text(json.dumps(OTHER) + "\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_WRITE_LOCK, str(filled)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        message = f"{url} stayed locked by another writer: database is locked"
        with ToolIndex.open(url) as index:
            started = time.monotonic()
            with pytest.raises(store.errors.ConcurrentUpdate) as caught:
                index.upsert_tools([OTHER])
            assert time.monotonic() - started < store._engine.BUSY_TIMEOUT_MS / 1000 / 2  # the URL's wait
            assert str(caught.value) == message
            with pytest.raises(store.errors.ConcurrentUpdate):
                index.session("chat-2")
            with pytest.raises(store.errors.ConcurrentUpdate):
                index.session("chat-1").search_tool.execute("call-1", {"query": "text file"})
            assert [hit.name for hit in index.search("text file")] == [TOOL["name"]]
            resumed = index.session("chat-1", discovery_mode="all")
            assert resumed.selected == [] and resumed.preview("text file")[0].name == TOOL["name"]
        result = CliRunner().invoke(main, ["--db", url, "import", str(catalog)])
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message}\n")
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    with ToolIndex.open(url) as index:
        assert [tool.name for tool in index.tools()] == [TOOL["name"]]
        assert [summary.id for summary in index.sessions()] == ["chat-1"]
        assert [call["kind"] for call in index.session_record("chat-1")["calls"]] == ["create"]
        assert index.upsert_tools([OTHER]).added == [OTHER["name"]]


@pytest.fixture
def capped_sqlite_files() -> Iterator[Callable[[int], None]]:
    """``cap(pages)``: every SQLite connection opened from then on holds its database to that
    many pages (``max_page_count``), as a full disk would."""
    limit: list[int] = []

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        if limit and isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.execute(f"PRAGMA max_page_count = {limit[0]}")

    event.listen(Engine, "connect", on_connect)
    try:
        yield limit.append
    finally:
        event.remove(Engine, "connect", on_connect)


def test_a_write_that_does_not_fit_is_refused_whole(
    filled: Path, tmp_path: Path, capped_sqlite_files: Callable[[int], None]
) -> None:
    url = f"sqlite:///{filled}"
    capped_sqlite_files(filled.stat().st_size // 4096 + 8)
    catalog = tmp_path / "big.jsonl"
    catalog.write_text("".join(json.dumps(tool) + "\n" for tool in generated_catalog(2_000)))
    message = (
        f"{url} has no room for this write (database or disk is full); nothing was written: "
        "free some space and try again"
    )
    with ToolIndex.open(url) as index:
        with pytest.raises(store.errors.StorageFull) as caught:
            index.upsert_tools(generated_catalog(2_000))
        assert str(caught.value) == message
        assert [tool.name for tool in index.tools()] == [TOOL["name"]]
        assert verify(index).problems == []
    result = CliRunner().invoke(main, ["--db", url, "import", str(catalog)])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message}\n")


def test_a_disk_error_is_one_clear_error(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        with (
            pytest.raises(store.errors.DatabaseUnavailable) as caught,
            store._engine.translated_errors(engine),
        ):
            raise coded(sqlite3.OperationalError("disk I/O error"), "SQLITE_IOERR_READ")
        assert str(caught.value) == (
            f"{sqlite_url} could not be read or written (disk I/O error); check the disk and the file system"
        )
    finally:
        engine.dispose()


def test_default_url_is_tool_index_db_when_set(monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    monkeypatch.setenv("TOOL_INDEX_DB", sqlite_url)
    assert store.default_url() == sqlite_url
    with ToolIndex.open() as index:
        assert index.url == sqlite_url
    assert database_path(sqlite_url).exists()


def test_default_url_is_a_file_in_the_user_data_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOL_INDEX_DB", raising=False)
    expected = Path(user_data_dir("tool-index", appauthor=False)) / "tool-index.db"
    assert store.default_url() == f"sqlite:///{expected}"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("tools.db", "sqlite:///tools.db"),
        ("/var/lib/tool-index/tools.db", "sqlite:////var/lib/tool-index/tools.db"),
        ("sqlite:///tools.db", "sqlite:///tools.db"),
        ("sqlite://", "sqlite://"),
        ("postgresql://me@db.example/tools", "postgresql+psycopg://me@db.example/tools"),
        ("postgres://me@db.example:5433/tools", "postgresql+psycopg://me@db.example:5433/tools"),
        ("postgresql+psycopg://me@db.example/tools", "postgresql+psycopg://me@db.example/tools"),
    ],
)
def test_parse_url(given: str, expected: str) -> None:
    parsed = parse_url(given)
    assert parsed.render_as_string(hide_password=False) == expected
    assert parse_url(parsed) is parsed


def test_a_url_without_a_driver_is_one_clear_error() -> None:
    with pytest.raises(store.errors.DatabaseUnavailable) as caught:
        ToolIndex.open("nosuchdb://me@db.example/tools")
    assert str(caught.value) == (
        "no driver for nosuchdb://me@db.example/tools: use sqlite:///PATH or postgresql+psycopg://…"
    )


def coded(error: sqlite3.Error, name: str) -> sqlite3.Error:
    """``error`` as SQLite raises it: with its result code's name, which is what classifies it."""
    error.sqlite_errorname = name
    return error


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("SQLITE_READONLY", "read-only"),
        ("SQLITE_READONLY_DIRECTORY", "read-only"),
        ("SQLITE_FULL", "full"),
        ("SQLITE_IOERR_WRITE", "io"),
        ("SQLITE_BUSY_SNAPSHOT", "busy"),
        ("SQLITE_LOCKED", "busy"),
        ("SQLITE_NOTADB", "not-a-database"),
        ("SQLITE_CORRUPT", "not-a-database"),
        ("SQLITE_CANTOPEN", "not-a-database"),
        ("SQLITE_CONSTRAINT_UNIQUE", None),
    ],
)
def test_sqlite_errors_are_told_apart_by_their_code_not_their_words(name: str, kind: str | None) -> None:
    assert store._engine.error_kind(coded(sqlite3.OperationalError("connection locked busy"), name)) == kind


def test_an_uncoded_error_is_left_alone_whatever_it_says() -> None:
    assert store._engine.error_kind(sqlite3.OperationalError("database is locked; no connection")) is None
