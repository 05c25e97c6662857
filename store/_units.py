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
    reader.audit      what ``verify`` checks: raw counts and cross-checks

A writer offers the same reads (in its own transaction) and the writes of each concern. Driver
errors a person can act on leave a unit as the store errors of ``store.errors``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import URL, Connection, Engine

from store import _audit as _audit
from store import _catalog as _catalog
from store import _first_answers as _first_answers
from store import _learning as _learning
from store import _migrate as _migrate
from store import _reads as _reads
from store import _sessions as _sessions
from store import _vectors as _vectors
from store._audit import AuditedTool, StoredPosting, TermStatMismatch
from store._engine import (
    make_engine,
    read_transaction,
    sqlite_file,
    translated_errors,
    write_transaction,
)
from store._learning import (
    Credit,
    LearnedChange,
    LearnedTerm,
    LearnedTool,
    LearningState,
    StoredLearnedPostings,
)
from store._location import ENV_VAR, default_url
from store._postings import PostingBlock
from store._records import GroupStats, IndexedBatch, StoredTool, TermStats, WriteReport
from store._sessions import Event, LoggedEvent, SessionState
from store._urls import display_url, parse_url
from store._vectors import EmbeddingState, StoredVectors, VectorCounts, VectorRow

_Unit = TypeVar("_Unit", bound="Reader")


class Store:
    """One database: its engine, its schema, and the units discovery reads and writes it in."""

    ENV_VAR = ENV_VAR
    """The environment variable naming the database when none is given."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def at(cls, url: str | URL | None = None) -> Store:
        """A store on the database at ``url`` (``default_url()`` when ``None``); nothing is
        connected or created yet."""
        return cls(make_engine(parse_url(default_url() if url is None else url)))

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


class CatalogReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def generation(self) -> int:
        """The catalog's generation: bumped by every change of tools, statistics or vectors."""
        return _reads.generation(self._connection)

    def analyzer(self) -> str:
        """The stored name (and version) of the analyzer the catalog is indexed with."""
        return _reads.analyzer(self._connection)

    def tools_by_ids(self, ids: Sequence[int]) -> dict[int, StoredTool]:
        return _reads.tools_by_ids(self._connection, ids)

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        return _reads.tools_by_names(self._connection, names)

    def names_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        return _reads.names_by_ids(self._connection, ids)

    def all_tools(self, *, server: str | None = None, source: str | None = None) -> list[StoredTool]:
        return _reads.all_tools(self._connection, server=server, source=source)

    def summary(self) -> dict[str, Any]:
        """Sizes and counts per source and server (``stats``)."""
        return _reads.catalog_summary(self._connection)

    def opening_candidates(
        self, *, everything: bool, servers: Sequence[str], names: Sequence[str]
    ) -> list[tuple[str, int, str]]:
        """``(name, group, load mode)`` of the tools a new session may start with, in catalog order."""
        return _reads.opening_candidates(
            self._connection, everything=everything, servers=servers, names=names
        )

    def group_members(self, grp: int) -> list[tuple[str, str | None]]:
        return _reads.group_members(self._connection, grp)

    def tool_origins(self) -> list[tuple[str, str | None, str | None]]:
        """``(name, server, tool name on that server)`` of every tool."""
        return _reads.tool_origins(self._connection)

    def servers(self) -> set[str]:
        """The servers the catalog holds tools of."""
        return _reads.server_names(self._connection)

    def group_server_counts(self, grp: int) -> dict[str | None, int]:
        return _reads.group_server_counts(self._connection, grp)


class CatalogWrites(CatalogReads):
    def lock(self) -> str:
        """Take the catalog's write lock (no reindex or import meanwhile); the stored analyzer."""
        return _catalog.stored_analyzer(self._connection)

    def write_tools(
        self,
        batches: Iterable[IndexedBatch],
        *,
        remove: Iterable[str] = (),
        replace: bool = False,
        server: str | None = None,
    ) -> WriteReport:
        """Upsert the indexed tools of ``batches``, remove ``remove`` (and, with ``replace``, the
        tools of ``server``, or of the catalog, the batches do not name), keeping every statistic
        exact."""
        return _catalog.write_tools(self._connection, batches, remove=remove, replace=replace, server=server)

    def reindex(self, batches: Iterable[IndexedBatch], analyzer: str) -> int:
        """Replace every posting and statistic with those of ``batches``, indexed by ``analyzer``."""
        return _catalog.reindex_tools(self._connection, batches, analyzer)


class IndexReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def group_stats(self) -> dict[int, GroupStats]:
        return _reads.group_stats(self._connection)

    def term_stats(self, terms: Sequence[str]) -> dict[str, tuple[int, dict[int, TermStats]]]:
        """``{term: (term id, {group: statistics})}`` of the terms the catalog holds."""
        return _reads.term_stats(self._connection, terms)

    def posting_blocks(self, term_id: int) -> list[tuple[int, PostingBlock]]:
        """``(group, block)`` of a term's postings, blocks in tool-id order within each group."""
        return _reads.posting_blocks(self._connection, term_id)

    def forward_postings(self, tool_ids: Sequence[int]) -> np.ndarray:
        """Every posting of the tools ``tool_ids``, as rows of the change layout."""
        return _reads.forward_postings(self._connection, tool_ids)

    def term_ids_of_tools(self, tool_ids: Sequence[int]) -> dict[int, frozenset[int]]:
        return _reads.term_ids_of_tools(self._connection, tool_ids)

    def postings_of_tools(self, tool_ids: Sequence[int]) -> dict[int, list[StoredPosting]]:
        """Each tool's postings with their term texts, as stored."""
        return _audit.postings_of_tools(self._connection, tool_ids)


class SessionReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def load(self, session_id: str) -> SessionState | None:
        return _sessions.load(self._connection, session_id)

    def load_with_generation(self, session_id: str) -> tuple[SessionState | None, int | None]:
        """The session and the catalog's generation, read together."""
        return _sessions.load_with_generation(self._connection, session_id)

    def all(self, *, readable_only: bool = False) -> list[SessionState]:
        return _sessions.all_sessions(self._connection, readable_only=readable_only)

    def events(self, session_id: str) -> list[LoggedEvent]:
        return _sessions.events(self._connection, session_id)

    def first_of_kind(self, session_id: str, kind: str) -> LoggedEvent | None:
        return _sessions.first_of_kind(self._connection, session_id, kind)

    def events_before(self, session_id: str, seq: int, count: int, kinds: Sequence[str]) -> list[LoggedEvent]:
        """Up to ``count`` events of ``kinds`` logged before ``seq``, newest first."""
        return _sessions.events_before(self._connection, session_id, seq, count, kinds)

    def events_of_kind(self, kinds: Sequence[str]) -> dict[str, list[LoggedEvent]]:
        """Every session's events of ``kinds``, in log order, by session id."""
        return _sessions.events_of_kind(self._connection, kinds)

    def search_counts(self) -> dict[str, int]:
        return _sessions.search_counts(self._connection)

    def stored_settings(self) -> list[tuple[str, Any]]:
        """``(session id, settings as stored)`` of every session whose row can be read."""
        return _sessions.stored_settings(self._connection)

    def unreadable(self) -> list[str]:
        """One line for each session row that cannot be read."""
        return _sessions.unreadable_sessions(self._connection)


class SessionWrites(SessionReads):
    def lock(self, session_id: str) -> SessionState | None:
        """The session, locked against other writers until the unit ends."""
        return _sessions.lock(self._connection, session_id)

    def lock_for_call(
        self, session_id: str, call_id: str
    ) -> tuple[SessionState | None, int, LoggedEvent | None]:
        """The locked session, the catalog's generation and the search already logged for
        ``call_id`` (a retried call), read together."""
        return _sessions.lock_for_call(self._connection, session_id, call_id)

    def create(self, session_id: str, settings: dict[str, Any], active: list[str]) -> SessionState | None:
        """The new session, or ``None`` when another caller created it first."""
        return _sessions.create(self._connection, session_id, settings, active)

    def record(
        self, state: SessionState, event: Event, active: list[str], selected: list[str]
    ) -> SessionState:
        """Log ``event`` and store the lists it leaves."""
        return _sessions.record(self._connection, state, event, active, selected)

    def append(self, session_id: str, *logged: Event) -> bool:
        """Log events that change no list; false when there is no such session."""
        return _sessions.append(self._connection, session_id, *logged)

    def remove(self, session_id: str) -> bool:
        return _sessions.remove(self._connection, session_id)

    def flag_calls(self, tool_names: Sequence[str] | None, flag: str) -> int:
        """Mark the logged calls of ``tool_names`` (all when ``None``) with ``flag``."""
        return _sessions.flag_calls(self._connection, tool_names, flag)


class LearningReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def state(self) -> LearningState:
        return _learning.state(self._connection)

    def with_catalog_generation(self) -> tuple[int, LearningState]:
        return _learning.with_catalog_generation(self._connection)

    def changes_since(self, generation: int) -> list[LearnedChange]:
        """The ``(term, tool)`` sums changed after learned ``generation``, as they are now."""
        return _learning.changes_since(self._connection, generation)

    def credits(self) -> set[Credit]:
        return _learning.credits(self._connection)

    def sums(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        return _learning.sums(self._connection)

    def postings(self, terms: Sequence[str]) -> dict[str, StoredLearnedPostings]:
        return _learning.postings(self._connection, terms)

    def learned_tools(self) -> dict[str, LearnedTool]:
        return _learning.learned_tools(self._connection)

    def lengths(self, tool_names: Sequence[str]) -> dict[str, int]:
        return _learning.lengths(self._connection, tool_names)

    def learned_of(self, tool_name: str) -> list[LearnedTerm]:
        return _learning.learned_of(self._connection, tool_name)

    def teaching_sessions(self, tool_name: str) -> int:
        return _learning.teaching_sessions(self._connection, tool_name)

    def summary(self) -> tuple[int, int, int]:
        """``(tools, terms, sessions)`` the learned field holds."""
        return _learning.summary(self._connection)


class LearningWrites(LearningReads):
    def locked_state(self) -> LearningState:
        """The switch, locked for update until the unit ends."""
        return _learning.state(self._connection, lock="update")

    def state_for_crediting(self) -> LearningState:
        """The switch, read by a writer that credits calls when it is on: locked for update then
        (two writers holding it shared could not both upgrade), shared otherwise. SQLite's writer
        already holds the whole database, so one plain read is enough there."""
        state = _learning.state(self._connection)
        if self._connection.dialect.name == "sqlite":
            return state
        return _learning.state(self._connection, lock="update" if state.enabled else "share")

    def set_enabled(self, enabled: bool) -> None:
        _learning.set_enabled(self._connection, enabled)

    def add_credits(self, credits: Iterable[Credit]) -> int:
        return _learning.add_credits(self._connection, credits)

    def remove_credits(
        self, *, tool_names: Sequence[str] | None = None, session_id: str | None = None
    ) -> int:
        return _learning.remove_credits(self._connection, tool_names=tool_names, session_id=session_id)

    def replace_all(self, credits: Iterable[Credit]) -> int:
        return _learning.replace_all(self._connection, credits)


class VectorReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def state(self) -> EmbeddingState:
        return _vectors.state(self._connection)

    def counts(self) -> VectorCounts:
        return _vectors.counts(self._connection)

    def current(self, dimensions: int) -> StoredVectors:
        """Every current vector (of the catalog's tools, made from their present text)."""
        return _vectors.current(self._connection, dimensions)

    def missing(self, after: str = "", limit: int | None = None) -> list[tuple[str, str]]:
        """``(name, content hash)`` of tools with no current vector, by name after ``after``."""
        return _vectors.missing(self._connection, after, limit)

    def missing_of(self, names: Sequence[str]) -> list[tuple[str, str]]:
        return _vectors.missing_of(self._connection, names)

    def of_tools(self, names: Sequence[str]) -> dict[str, tuple[str, float, bytes]]:
        return _vectors.of_tools(self._connection, names)


class VectorWrites(VectorReads):
    def set_state(self, setting: EmbeddingState) -> None:
        _vectors.set_state(self._connection, setting)

    def clear(self) -> int:
        return _vectors.clear(self._connection)

    def write(self, rows: Sequence[VectorRow]) -> None:
        _vectors.write(self._connection, rows)

    def drop(self, names: Sequence[str]) -> None:
        _vectors.drop(self._connection, names)

    def drop_orphans(self) -> None:
        _vectors.drop_orphans(self._connection)


class AuditReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def catalog_postings(self) -> np.ndarray:
        return _audit.catalog_postings(self._connection)

    def tool_batches(
        self, *, batch_size: int, indexed: np.ndarray | None = None
    ) -> Iterator[list[AuditedTool]]:
        return _audit.tool_batches(self._connection, batch_size=batch_size, indexed=indexed)

    def row_count(self, table: str) -> int:
        return _audit.row_count(self._connection, table)

    def group_totals(self) -> dict[int, GroupStats]:
        return _audit.group_totals(self._connection)

    def stored_group_stats(self) -> dict[int, GroupStats]:
        return _audit.stored_group_stats(self._connection)

    def term_stat_mismatches(
        self, *, limit: int, indexed: np.ndarray | None = None
    ) -> list[TermStatMismatch]:
        return _audit.term_stat_mismatches(self._connection, limit=limit, indexed=indexed)

    def orphan_terms(self, *, limit: int, indexed: np.ndarray | None = None) -> list[tuple[int, str]]:
        return _audit.orphan_terms(self._connection, limit=limit, indexed=indexed)

    def unreadable_tool_values(self) -> list[str]:
        return _audit.unreadable_tool_values(self._connection)

    def block_size_mismatches(self, *, limit: int) -> list[tuple[int, int, int, int]]:
        return _audit.block_size_mismatches(self._connection, limit=limit)

    def unknown_block_layouts(self, *, limit: int) -> list[tuple[int, int, int]]:
        return _audit.unknown_block_layouts(self._connection, limit=limit)


class FirstAnswerReads:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def stamp(self, session_id: str | None) -> str | None:
        """The stamp of the catalog and of the session ``session_id`` (``None``: a new one) now;
        ``None`` where first answers are not kept (a database other than SQLite)."""
        return _first_answers.stamp(self._connection, session_id)

    def kept(self, key: str) -> tuple[str, str] | None:
        """``(stamp, answer)`` kept under ``key``."""
        return _first_answers.kept(self._connection, key)


class FirstAnswerWrites(FirstAnswerReads):
    def keep(self, key: str, stamp: str, answer: str) -> None:
        _first_answers.keep(self._connection, key, stamp, answer)


class Reader:
    """The reads of one unit, by concern."""

    catalog: CatalogReads
    sessions: SessionReads
    learning: LearningReads
    vectors: VectorReads
    first_answers: FirstAnswerReads

    def __init__(self, connection: Connection) -> None:
        self.catalog = CatalogReads(connection)
        self.index = IndexReads(connection)
        self.sessions = SessionReads(connection)
        self.learning = LearningReads(connection)
        self.vectors = VectorReads(connection)
        self.audit = AuditReads(connection)
        self.first_answers = FirstAnswerReads(connection)


class Writer(Reader):
    """The reads and writes of one write unit, by concern."""

    catalog: CatalogWrites
    sessions: SessionWrites
    learning: LearningWrites
    vectors: VectorWrites
    first_answers: FirstAnswerWrites

    def __init__(self, connection: Connection) -> None:  # every view is its concern's writes view
        self.catalog = CatalogWrites(connection)
        self.index = IndexReads(connection)
        self.sessions = SessionWrites(connection)
        self.learning = LearningWrites(connection)
        self.vectors = VectorWrites(connection)
        self.audit = AuditReads(connection)
        self.first_answers = FirstAnswerWrites(connection)
