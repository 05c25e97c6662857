"""Named database fixtures. Every test that takes ``db_url`` or ``index`` runs on SQLite and,
when ``TOOL_INDEX_TEST_PG`` names a PostgreSQL server URL, on PostgreSQL too (each test in a
schema of its own, dropped afterwards)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from discovery import ToolIndex

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "conformance"
DATA = SHARED / "data"
PG_ENV = "TOOL_INDEX_TEST_PG"

BACKENDS = ["sqlite", "postgresql"]


def shared_json(relative: str) -> Any:
    """A file of ../shared, or a clean skip on a clone that does not have it."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is not present (conformance data lives beside the repository)")
    return json.loads(path.read_text(encoding="utf-8"))


def shared_path(relative: str) -> Path:
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is not present (shared data lives beside the repository)")
    return path


@contextmanager
def scratch_database(backend: str, directory: Path, name: str | None = None) -> Iterator[str]:
    """An empty database: a SQLite file in ``directory``, or a fresh schema on the PostgreSQL test
    server (dropped afterwards); skips when no server is configured."""
    if backend == "sqlite":
        yield f"sqlite:///{directory / (name or f'{uuid.uuid4().hex[:12]}.db')}"
        return
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(f"set {PG_ENV} to a PostgreSQL URL to run the PostgreSQL backend")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in server else "?"
    try:
        yield f"{server}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend."""
    with scratch_database(request.param, tmp_path, "tools.db") as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file, for tests about SQLite itself (WAL, files, crashes)."""
    return f"sqlite:///{tmp_path / 'tools.db'}"


@pytest.fixture
def index(db_url: str) -> Iterator[ToolIndex]:
    """An open, empty index on each backend."""
    opened = ToolIndex.open(db_url)
    try:
        yield opened
    finally:
        opened.close()
