"""ToolIndex: the catalog in a database, searched with exact BM25+."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine

from discovery.corpus import DEFAULT_ESSENTIAL_NAMES, INTERNAL_NAMES, MODE_GROUPS
from discovery.errors import InvalidLimit, QueryWithoutTerms, ToolIndexError
from discovery.hits import SearchHit
from discovery.ids import checked_id
from discovery.ranking import Corpus, Ranker, Ranking
from discovery.resume import selection_from_file
from discovery.scoring import query_term_counts
from store import (
    GROUP_FIXED,
    GROUP_LOCAL,
    GROUP_MCP,
    SessionNotFound,
    StoredTool,
    ToolNotFound,
    WriteReport,
    catalog,
    display_url,
    make_engine,
    migrate,
    reads,
)
from store import sessions as store_sessions
from store.engine import default_url, read_transaction, translated_errors, write_transaction

if TYPE_CHECKING:
    # Imported where used: opening an index and searching it never loads pydantic (the record
    # and settings models), which is a third of a cold start.
    from discovery.models import ToolRecord
    from discovery.preparation import Progress
    from discovery.session import Session

DEFAULT_LIMIT = 8
"""Matches returned when a search names no limit [fixed]."""

"""Called with the number of records just prepared, so a caller can draw a progress bar."""


@dataclass(frozen=True, slots=True)
class ImportReport:
    """Names added, updated, unchanged and removed by one catalog write."""

    added: list[str]
    updated: list[str]
    unchanged: list[str]
    removed: list[str]

    @classmethod
    def of(cls, report: WriteReport) -> ImportReport:
        return cls(report.added, report.updated, report.unchanged, report.removed)

    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
        }


def validate_limit(limit: object) -> int:
    """A positive integer (booleans, floats and strings are not), as SPEC §6 requires."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidLimit()
    return limit


def read_only_corpus(mode: str) -> Corpus:
    """What a fresh session with default settings and nothing requested would search in ``mode``."""
    if mode not in MODE_GROUPS:
        raise ToolIndexError(f"unknown search mode {mode!r}: use 'all' or 'mcp-only'")
    return Corpus(MODE_GROUPS[mode], frozenset(DEFAULT_ESSENTIAL_NAMES) | INTERNAL_NAMES)


class ToolIndex:
    """A persistent tool catalog and its search; open one per process and database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ranker = Ranker()

    @classmethod
    def open(cls, url: str | None = None, *, upgrade: bool = True) -> ToolIndex:
        """Open the database at ``url`` (default: ``TOOL_INDEX_DB`` or the user data file).

        An empty database gets the schema; an older one is upgraded unless ``upgrade`` is false.
        """
        engine = make_engine(url or default_url())
        try:
            with translated_errors(engine):
                migrate.ensure_schema(engine, upgrade_if_old=upgrade)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    @property
    def url(self) -> str:
        """The database URL with any password hidden."""
        return display_url(self.engine.url)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> ToolIndex:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def upsert_tools(
        self,
        records: Iterable[Mapping[str, Any] | ToolRecord],
        *,
        replace: bool = False,
        server: str | None = None,
        progress: Progress | None = None,
    ) -> ImportReport:
        """Add or update tools by name in one transaction; unchanged records are not rewritten.

        With ``replace``, tools the input does not name are removed: those of ``server`` when
        given, else every other tool of the catalog.
        """
        scope = catalog.ReplaceScope(server) if replace else None
        from discovery.preparation import collector_paused, prepared

        # Records are prepared (in worker processes when many) while the first ones are written.
        with (
            collector_paused(),
            closing(prepared(records, progress)) as tools,
            write_transaction(self.engine) as connection,
        ):
            report = catalog.write_tools(connection, tools, replace=scope)
        return ImportReport.of(report)

    def remove_tools(self, names: Iterable[str]) -> list[str]:
        """Remove tools by name; returns the names that were in the catalog."""
        with write_transaction(self.engine) as connection:
            return catalog.write_tools(connection, [], remove=list(names)).removed

    def search(self, query: str, limit: int = DEFAULT_LIMIT, *, mode: str = "all") -> list[SearchHit]:
        """Read-only search of the whole catalog in ``mode`` with nothing active."""
        ranking = self.rank(query, read_only_corpus(mode), validate_limit(limit))
        return [SearchHit(name=hit.name, score=hit.score) for hit in ranking.hits]

    def search_details(self, query: str, limit: int = DEFAULT_LIMIT, *, mode: str = "all") -> dict[str, Any]:
        """The SPEC §6 details of a read-only search: ``search`` with each match's tool row."""
        from discovery.tool import checked_limit, checked_query, tool_details  # tool imports this module

        trimmed = checked_query({"query": query})
        limit = checked_limit({"limit": limit})
        terms = query_term_counts(trimmed)
        if not terms:
            raise QueryWithoutTerms()
        with read_transaction(self.engine) as connection:
            ranking = self._ranker.rank(connection, terms, read_only_corpus(mode), limit)
            tools = self._ranker.tools(connection, [hit.tool_id for hit in ranking.hits])
        return {
            "query": trimmed,
            "limit": limit,
            "total_tools": ranking.total_tools,
            "activated_tools": [],
            "active_selected_tools": [],
            "tools": [tool_details(tools[hit.tool_id], hit.score) for hit in ranking.hits],
        }

    def rank(self, query: str, corpus: Corpus, limit: int | None) -> Ranking:
        """Rank ``corpus`` for ``query`` (library internals and the session tool use this)."""
        terms = query_term_counts(query)
        if not terms:
            raise QueryWithoutTerms()
        with read_transaction(self.engine) as connection:
            return self._ranker.rank(connection, terms, corpus, limit)

    def corpus_size(self, connection: Connection, corpus: Corpus) -> int:
        return self._ranker.corpus_size(connection, corpus)

    def sync(self, connection: Connection, generation: int) -> None:
        """Tell the caches the catalog generation read in this transaction."""
        self._ranker.sync(connection, generation)

    def known_names(self, connection: Connection, names: Sequence[str]) -> set[str]:
        """Which of ``names`` are in the catalog, from a per-process cache keyed by generation."""
        return self._ranker.known_names(connection, names)

    def catalog_size(self, connection: Connection) -> int:
        return self._ranker.catalog_size(connection)

    def excluded_documents(self, connection: Connection, corpus: Corpus) -> list[StoredTool]:
        return self._ranker.excluded_documents(connection, corpus)

    def tools_in(self, connection: Connection, ids: Sequence[int]) -> dict[int, StoredTool]:
        """Tool rows by id inside the caller's transaction, from the per-process cache."""
        return self._ranker.tools(connection, ids)

    def rank_in(
        self, connection: Connection, terms: dict[str, int], corpus: Corpus, limit: int | None
    ) -> Ranking:
        """Rank inside the caller's transaction (a session search holds its session lock)."""
        return self._ranker.rank(connection, terms, corpus, limit)

    def session(
        self,
        session_id: str | None = None,
        *,
        discovery_mode: str | None = None,
        mcp_discovery: bool | None = None,
        essential_override: Sequence[str] | None = None,
        default_servers: Sequence[str] | None = None,
        requested: Sequence[str] | None = None,
    ) -> Session:
        """Create a session, or resume it by id (then the settings may be omitted)."""
        given = {
            "discovery_mode": discovery_mode,
            "mcp_discovery": mcp_discovery,
            "essential_override": essential_override,
            "default_servers": default_servers,
            "requested": requested,
        }
        settings = {key: value for key, value in given.items() if value is not None}
        from discovery.session import Session

        return Session.open(self, session_id, settings or None)

    def sessions(self) -> list[SessionSummary]:
        """Every stored session with its sizes and number of search calls."""
        with read_transaction(self.engine) as connection:
            counts = store_sessions.search_counts(connection)
            return [
                SessionSummary(
                    id=state.id,
                    settings=state.settings,
                    active=len(state.active),
                    selected=len(state.selected),
                    calls=counts.get(state.id, 0),
                    created_at=state.created_at.isoformat(),
                    updated_at=state.updated_at.isoformat(),
                )
                for state in store_sessions.all_sessions(connection)
            ]

    def session_record(self, session_id: str) -> dict[str, Any]:
        """``{"id", "settings", "active", "selected", "calls"}`` with every logged event."""
        session_id = checked_id(session_id, "session id")
        with read_transaction(self.engine) as connection:
            state = store_sessions.load(connection, session_id)
            if state is None:
                raise SessionNotFound(f"no session {session_id!r} in the store")
            logged = store_sessions.events(connection, session_id)
        return {
            "id": state.id,
            "settings": state.settings,
            "active": state.active,
            "selected": state.selected,
            "calls": [event_record(entry) for entry in logged],
        }

    def import_session_file(self, path: Path, session_id: str, **settings: Any) -> RestoredSelection:
        """Restore the selection in force in a host's JSONL session file into a session.

        Names the catalog does not have are reported and skipped, as on resume.
        """
        names = selection_from_file(path)
        session = self.session(session_id, **settings)
        restored, missing = session.restore_selection(names or [], source=str(path))
        return RestoredSelection(session_id, found=names is not None, restored=restored, missing=missing)

    def delete_session(self, session_id: str) -> None:
        session_id = checked_id(session_id, "session id")
        with write_transaction(self.engine) as connection:
            if not store_sessions.remove(connection, session_id):
                raise SessionNotFound(f"no session {session_id!r} in the store")

    def tool(self, name: str) -> StoredTool:
        with read_transaction(self.engine) as connection:
            found = reads.tools_by_names(connection, [name])
        if name not in found:
            raise ToolNotFound(f"no tool named {name!r} in the catalog")
        return found[name]

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        with read_transaction(self.engine) as connection:
            return reads.tools_by_names(connection, names)

    def tools_by_ids(self, ids: Sequence[int]) -> dict[int, StoredTool]:
        with read_transaction(self.engine) as connection:
            return reads.tools_by_ids(connection, ids)

    def tools(self, *, server: str | None = None, source: str | None = None) -> list[StoredTool]:
        with read_transaction(self.engine) as connection:
            return reads.all_tools(connection, server=server, source=source)

    def stats(self) -> dict[str, Any]:
        """Catalog size, terms, postings, average length, and counts per source and server."""
        with read_transaction(self.engine) as connection:
            return reads.catalog_summary(connection)


GROUP_NAMES = {GROUP_FIXED: "fixed", GROUP_LOCAL: "local", GROUP_MCP: "mcp"}


@dataclass(frozen=True, slots=True)
class RestoredSelection:
    """What ``import_session_file`` restored; ``found`` is false when the file had no selection."""

    session_id: str
    found: bool
    restored: list[str]
    missing: list[str]


@dataclass(frozen=True, slots=True)
class SessionSummary:
    id: str
    settings: dict[str, Any]
    active: int
    selected: int
    calls: int
    created_at: str
    updated_at: str


def event_record(entry: store_sessions.LoggedEvent) -> dict[str, Any]:
    """A logged event as JSON: searches under the tool's wire name, other changes by kind."""
    event = entry.event
    record: dict[str, Any] = {"seq": entry.seq, "kind": event.kind}
    if event.kind == "search":
        record.update(
            tool=event.tool_name,
            call_id=event.call_id,
            params=event.params,
            content=event.content,
            details=event.details,
            error=event.error,
        )
    else:
        record["params"] = event.params
    record["activated"] = list(event.activated)
    record["time"] = entry.created_at.isoformat()
    return record
