"""The store as one interface: a ``Store`` hands out read and write units, and nothing else of
the package is used by ``discovery``.

A unit is one transaction. ``with store.reading() as reader:`` reads one consistent snapshot
without taking a write lock; ``with store.writing() as writer:`` holds the write lock (SQLite:
``BEGIN IMMEDIATE``) and commits when the block ends without an error. Inside a unit the rows
are reached by concern::

    reader.catalog    tool rows, the catalog's generation and analyzer
    reader.index      group and term statistics, postings
    reader.sessions   sessions and their event logs
    reader.learning   the learned field: switch, credits and their sums
    reader.vectors    the semantic signal's setting and vectors
    reader.servers    what each synced MCP server is and which host's config synced it
    reader.audit      what ``verify`` checks: raw counts and cross-checks

A writer offers the same reads (in its own transaction) and the writes of each concern. Each
view is the class that holds its concern's queries, written once in its own module
(``_reads``: catalog and index, ``_catalog``, ``_sessions``, ``_learning``, ``_vectors``,
``_servers``, ``_audit``); a unit only puts them together on its connection. Driver
errors a person can act on leave a unit as the store errors of ``store.errors``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import URL, Connection, Engine

from store import _migrate as _migrate
from store._audit import AuditReads
from store._catalog import CatalogWrites
from store._engine import (
    APPLICATION,
    make_engine,
    read_transaction,
    sqlite_file,
    translated_errors,
    write_transaction,
)
from store._learning import LearningReads
from store._learning_writes import LearningWrites
from store._location import ENV_VAR, default_url
from store._reads import CatalogReads, IndexReads
from store._servers import ServerReads, ServerWrites
from store._sessions import SessionReads, SessionWrites
from store._urls import display_url, parse_url
from store._vectors import VectorReads, VectorWrites

_Unit = TypeVar("_Unit", bound="Reader")


class Store:
    """One database: its engine, its schema, and the units discovery reads and writes it in."""

    ENV_VAR = ENV_VAR
    """The environment variable naming the database when none is given."""

    def __init__(self, engine: Engine, application: str = APPLICATION) -> None:
        self.engine = engine
        self.application = application
        """Who opened the store (``tool-index search``, a host's own name): the sessions it makes
        record it, with the host name."""

    @classmethod
    def at(cls, url: str | URL | None = None, *, application: str = APPLICATION) -> Store:
        """A store on the database at ``url`` (``default_url()`` when ``None``); nothing is
        connected or created yet. ``application`` names who opens it: PostgreSQL connections
        carry ``application_name`` ``APPLICATION@HOST``."""
        return cls(make_engine(parse_url(default_url() if url is None else url), application), application)

    @staticmethod
    def default_url() -> str:
        """``TOOL_INDEX_DB`` if set, else a SQLite file in the user's data directory."""
        return default_url()

    @staticmethod
    def missing_file(url: str | URL | None = None) -> str | None:
        """The path of the SQLite file ``url`` names when that file does not exist yet; ``None``
        when it exists or ``url`` is not a SQLite file."""
        database = sqlite_file(parse_url(default_url() if url is None else url))
        return None if database is None or Path(database).expanduser().exists() else database

    @property
    def url(self) -> str:
        """The database URL with any password hidden."""
        return display_url(self.engine.url)

    def reading(self) -> AbstractContextManager[Reader]:
        """One read snapshot, without the write lock."""
        return _unit(read_transaction(self.engine), Reader)

    def writing(self) -> AbstractContextManager[Writer]:
        """One write transaction: committed when the block ends, rolled back on an error."""
        return _unit(write_transaction(self.engine), Writer)

    def translated_errors(self) -> AbstractContextManager[None]:
        """Driver errors raised in the block leave it as store errors (for work outside a unit)."""
        return translated_errors(self.engine)

    def is_empty(self) -> bool:
        """Whether the database holds no table at all (nothing of tool-index, nothing else)."""
        return _migrate.is_empty(self.engine)

    def ensure_schema(self, *, upgrade_if_old: bool) -> None:
        """Create the schema in an empty database, upgrade an older one (or refuse it), refuse a
        newer one or a foreign one."""
        _migrate.ensure_schema(self.engine, upgrade_if_old=upgrade_if_old)

    def schema_revision(self) -> str | None:
        """The schema revision the database is at (``None``: no tool-index schema)."""
        with read_transaction(self.engine) as connection:
            return _migrate.current_revision(connection)

    def pending_model_changes(self) -> list[str]:
        """Differences between the database's schema and the one this version defines."""
        return _migrate.pending_model_changes(self.engine)

    @staticmethod
    def head_revision() -> str:
        """The newest schema revision this version knows."""
        return _migrate.head_revision()

    @staticmethod
    def known_revisions() -> set[str]:
        """Every schema revision this version can upgrade from."""
        return _migrate.known_revisions()

    def close(self) -> None:
        self.engine.dispose()


@contextmanager
def _unit(transaction: AbstractContextManager[Connection], kind: type[_Unit]) -> Iterator[_Unit]:
    with transaction as connection:
        yield kind(connection)


class Reader:
    """The reads of one unit, by concern."""

    catalog: CatalogReads
    sessions: SessionReads
    learning: LearningReads
    vectors: VectorReads
    servers: ServerReads

    def __init__(self, connection: Connection) -> None:
        self.catalog = CatalogReads(connection)
        self.index = IndexReads(connection)
        self.sessions = SessionReads(connection)
        self.learning = LearningReads(connection)
        self.vectors = VectorReads(connection)
        self.servers = ServerReads(connection)
        self.audit = AuditReads(connection)


class Writer(Reader):
    """The reads and writes of one write unit, by concern."""

    catalog: CatalogWrites
    sessions: SessionWrites
    learning: LearningWrites
    vectors: VectorWrites
    servers: ServerWrites

    def __init__(self, connection: Connection) -> None:  # every view is its concern's writes view
        self.catalog = CatalogWrites(connection)
        self.index = IndexReads(connection)
        self.sessions = SessionWrites(connection)
        self.learning = LearningWrites(connection)
        self.vectors = VectorWrites(connection)
        self.servers = ServerWrites(connection)
        self.audit = AuditReads(connection)
