"""ToolIndex: the catalog in a database, searched with exact BM25+ — the library's façade.

It opens the database, owns its store and the per-process ranker, and hands both to what it
creates (sessions, diagnostics); the layers below never call back into it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from discovery._params import Query, analyzer_named, checked_identity, checked_search
from discovery._ranking.ranker import Ranker
from discovery._results import SearchDetails, SearchHit, match_details
from discovery._rules import LOCAL_IDENTITY, read_only_corpus
from discovery._text.analyzers import stored_version
from discovery.errors import (
    AnalyzerMismatch,
    AnalyzerOutdated,
    DatabaseMissing,
    ToolIndexError,
    ToolNotFound,
)
from store import Reader, ServerOrigin, Store, StoredServer, StoredTool

if TYPE_CHECKING:
    # Imported where used: opening an index and searching it never loads pydantic (the record
    # and settings models), which weighs on every cold start.
    from discovery._catalog.embedding import EmbedReport
    from discovery._catalog.models import ToolRecord
    from discovery._catalog.workers import Progress
    from discovery._catalog.writes import ImportReport
    from discovery._sessions.listing import RestoredSelection, SessionSummary
    from discovery._sessions.session import Session
    from discovery._sessions.teachers import LearnedSummary


class ToolIndex:
    """A persistent tool catalog and its search; open one per process and database."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.ranker = Ranker()

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        upgrade: bool = True,
        create: bool = True,
        analyzer: str | None = None,
        learning: bool | None = None,
        min_identities: int | None = None,
        application: str = "tool-index",
    ) -> ToolIndex:
        """Open the database at ``url`` (default: ``TOOL_INDEX_DB`` or the user data file).

        An empty database gets the schema; an older one is upgraded unless ``upgrade`` is false.
        With ``create=False``, a SQLite file that does not exist or an empty database raises
        ``DatabaseMissing`` instead, and nothing is created (no file, no directory, no table).

        ``analyzer`` names the analyzer a new index is built with (``reference`` when not
        given). A catalog that holds no tool yet takes it; one that holds tools indexed with
        another raises ``AnalyzerMismatch`` (``reindex`` changes it); an unknown name raises
        ``UnknownAnalyzer`` before anything is opened. A catalog whose terms were made by another
        version of its analyzer raises ``AnalyzerOutdated`` here when ``analyzer`` names it, and
        on its first search, explain or import otherwise, until ``reindex`` rebuilds it.

        ``learning`` turns learning from use on or off for the index (``set_learning``); when
        omitted, the index keeps what it has (a new index has it off). ``min_identities`` sets
        K, the identities that must teach a (term, tool) before it ranks for the others (2 for a
        new index).

        ``application`` names who opens it: PostgreSQL shows its connections with
        ``application_name`` ``APPLICATION@HOST`` (in ``pg_stat_activity``), unless the URL's
        ``application_name`` or ``PGAPPNAME`` names them.
        """
        if analyzer is not None:
            analyzer_named(analyzer)
        if not create:
            missing = Store.missing_file(url)
            if missing is not None:
                raise DatabaseMissing(missing)
        store = Store.at(url, application=application)
        try:
            with store.translated_errors():
                if not create and store.is_empty():
                    raise DatabaseMissing(store.url)
                store.ensure_schema(upgrade_if_old=upgrade)
                if analyzer is not None:
                    _choose_analyzer(store, analyzer)
            opened = cls(store)
            if learning is not None or min_identities is not None:
                opened.set_learning(learning, min_identities=min_identities)
        except BaseException:
            store.close()
            raise
        return opened

    @property
    def analyzer(self) -> str:
        """The name of the analyzer the catalog is indexed with (and searched with)."""
        with self.store.reading() as reader:
            return self.ranker.analyzer(reader).name

    def reindex(self, analyzer: str, *, progress: Progress | None = None) -> int:
        """Rebuild every posting and statistic with ``analyzer``, in one transaction, and make
        it the catalog's; returns the number of tools reindexed. Interrupted, it changes nothing.
        """
        rebuilt = reindexed(self.store, analyzer, progress)
        assert rebuilt is not None
        return rebuilt

    @property
    def learning(self) -> bool:
        """Whether the index ranks with what it learned from use (off for a new index)."""
        with self.store.reading() as reader:
            return self.ranker.learning_enabled(reader)

    @property
    def min_identities(self) -> int:
        """K: the distinct identities a (term, tool) needs to rank for others (2K if destructive)."""
        with self.store.reading() as reader:
            return reader.learning.state().min_identities

    def set_learning(self, enabled: bool | None, *, min_identities: int | None = None) -> bool:
        """Turn learning from use on or off and set K (``None``: leave it); whether either changed.

        On, the learned field is computed from every session's log and kept current by every
        call; off, searches rank exactly as without learning, and turning it on again restores
        it from the logs. K below 2 is an error: one identity's evidence would rank for others."""
        from discovery._sessions.teachers import configure

        return configure(self.store, self.ranker, enabled, min_identities)

    def learned(self, name: str, *, identity: str | None = None) -> LearnedSummary:
        """What tool ``name`` learned, term by term, and from whom (``identity``: whether it taught)."""
        from discovery._sessions.teachers import summary_of

        return summary_of(self.store, name, identity)

    def forget_learning(self, names: Sequence[str] | None = None, *, identity: str | None = None) -> int:
        """Forget for good what the tools ``names`` (all when neither is given) learned, or what
        ``identity`` taught: those calls never teach again. Returns how many credits went."""
        from discovery._sessions.teachers import forgotten

        return forgotten(self.store, names, identity)

    def embed(
        self,
        model: str,
        *,
        weight: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> EmbedReport:
        """Store a vector for every tool that has no current one, made by ``model`` (a directory
        holding an ONNX sentence-embedding model and its ``tokenizer.json``, or a Hugging Face
        model name, downloaded once into the local cache). From then on every search fuses its
        BM25+ score with the query's similarity to each tool (docs/semantic.md); ``weight`` (0 to
        1) sets the semantic part's share. Needs the ``semantic`` extra. Interrupted, it keeps the
        vectors written so far; run again, it goes on from there. ``progress(done, total)`` is
        called as tools are embedded."""
        from discovery._catalog.embedding import embed_catalog

        if weight is not None and not (isinstance(weight, int | float) and 0 <= weight <= 1):
            raise ToolIndexError(f"weight must be a number from 0 to 1, not {weight!r}")
        return embed_catalog(self.store, model, weight=weight, progress=progress)

    def embedding_off(self) -> int:
        """Remove every vector and the model setting: searches are lexical again, exactly as
        before ``embed``. Returns how many vectors were removed."""
        from discovery._catalog.embedding import embedding_off

        return embedding_off(self.store)

    @property
    def url(self) -> str:
        """The database URL with any password hidden."""
        return self.store.url

    def close(self) -> None:
        self.store.close()

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
        origin: ServerOrigin | None = None,
        take_over: bool = False,
        progress: Progress | None = None,
    ) -> ImportReport:
        """Add or update tools by name in one transaction; unchanged records are not rewritten.

        With ``replace``, tools the input does not name are removed: those of ``server`` when
        given, else every other tool of the catalog. With ``origin`` (what ``server`` is, and
        which host's config syncs it), the write is refused with ``ServerClaimed`` when the
        catalog holds another config's different server under that name, unless ``take_over``;
        else ``origin`` is recorded as the server's (``server_origins``).
        """
        from discovery._catalog.writes import write_tools

        # Read the caller's records before the write lock is taken: a slow iterable must not
        # hold it (PostgreSQL ends a transaction left idle too long).
        listed = list(records)
        return write_tools(
            self.store,
            listed,
            self.analyzer,
            replace=replace,
            server=server,
            origin=origin,
            take_over=take_over,
            progress=progress,
        )

    def remove_tools(self, names: Iterable[str], *, missing_ok: bool = True) -> list[str]:
        """Remove tools by name in one transaction; returns the names that were in the catalog.

        With ``missing_ok=False`` nothing is removed unless every name is in the catalog
        (``ToolNotFound`` names the others), checked in the same transaction as the removal.
        """
        from discovery._catalog.writes import remove_tools

        return remove_tools(self.store, names, missing_ok=missing_ok)

    def search(
        self, query: str, limit: int | None = None, *, mode: str = "all", identity: str = LOCAL_IDENTITY
    ) -> list[SearchHit]:
        """Read-only search of the whole catalog in ``mode``, nothing active, as ``identity`` sees it."""
        checked, limit = checked_search(query, limit)
        corpus = read_only_corpus(mode, checked_identity(identity))
        with self.store.reading() as reader:
            ranking = self.ranker.search(reader, checked, corpus, limit)
        return [SearchHit(name=hit.name, score=hit.score) for hit in ranking.hits]

    def search_details(
        self, query: str, limit: int | None = None, *, mode: str = "all", identity: str = LOCAL_IDENTITY
    ) -> SearchDetails:
        """The contract §6 details of a read-only search: ``search`` with each match's tool row."""
        checked, limit = checked_search(query, limit)
        with self.store.reading() as reader:
            return read_only_details(reader, self.ranker, checked, limit, mode, identity)

    def session(
        self, session_id: str | None = None, *, identity: str = LOCAL_IDENTITY, **settings: Any
    ) -> Session:
        """Create ``identity``'s session, or resume it by id (then the settings may be omitted).

        Ids are per identity: another identity's session of the same id is another session, and
        nothing here tells one identity what another named. ``identity`` is non-empty printable
        text (``"local"``, every session's that names none, by default).

        ``settings`` are ``SessionSettings``' fields (contract §5's, ``requested`` and
        ``answer``), checked by that model: an unknown or bad one is a ``ToolIndexError``
        naming it. Given for a session that exists, they must be its own.
        """
        from discovery._sessions.session import Session

        given = {key: value for key, value in settings.items() if value is not None}
        return Session.open(self.store, self.ranker, session_id, given or None, identity)

    def sessions(self) -> list[SessionSummary]:
        """Every stored session of every identity, with its sizes, numbers of searches and calls,
        and who opened it."""
        from discovery._sessions.listing import session_summaries

        return session_summaries(self.store)

    def session_record(self, session_id: str, *, identity: str = LOCAL_IDENTITY) -> dict[str, Any]:
        """``{"id", "identity", "settings", "active", "selected", "calls", …}`` with every logged
        event of ``identity``'s session ``session_id``."""
        from discovery._sessions.listing import session_record

        return session_record(self.store, session_id, identity)

    def import_session_file(
        self, path: Path, session_id: str, *, identity: str = LOCAL_IDENTITY, **settings: Any
    ) -> RestoredSelection:
        """Restore the selection in force in a host's JSONL session file into a session.

        Names the catalog does not have are reported and skipped, as on resume.
        """
        from discovery._sessions.listing import import_session_file

        given = {key: value for key, value in settings.items() if value is not None}
        return import_session_file(self.store, self.ranker, path, session_id, identity, given or None)

    def delete_session(self, session_id: str, *, identity: str = LOCAL_IDENTITY) -> None:
        from discovery._sessions.listing import delete_session

        delete_session(self.store, session_id, identity)

    def tool(self, name: str) -> StoredTool:
        with self.store.reading() as reader:
            found = reader.catalog.tools_by_names([name])
        if name not in found:
            raise ToolNotFound(f"no tool named {name!r} in the catalog")
        return found[name]

    def tools(self, *, server: str | None = None, source: str | None = None) -> list[StoredTool]:
        with self.store.reading() as reader:
            return reader.catalog.all_tools(server=server, source=source)

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        with self.store.reading() as reader:
            return reader.catalog.tools_by_names(names)

    def server_origins(self) -> dict[str, StoredServer]:
        """What each MCP server a sync recorded is, which host's config synced it, and when."""
        with self.store.reading() as reader:
            return reader.servers.all()

    def stats(self) -> dict[str, Any]:
        """Catalog size, terms, postings, average length, and counts per source and server."""
        from discovery._catalog.summary import index_summary

        with self.store.reading() as reader:
            return index_summary(reader, self.ranker.semantic_problem)


def reindexed(
    store: Store, analyzer: str, progress: Progress | None = None, *, if_outdated: bool = False
) -> int | None:
    """``ToolIndex.reindex``; with ``if_outdated``, only while the catalog is still another
    version of ``analyzer`` once the write lock is held (``None`` when another process has
    rebuilt it meanwhile)."""
    stored = analyzer_named(analyzer).stored
    from discovery._catalog.workers import collector_paused, prepared

    with collector_paused(), store.writing() as writer:
        made = writer.catalog.lock()  # the write lock, before the catalog is read
        if if_outdated and made == stored:
            return None
        records = [tool.as_record() for tool in writer.catalog.all_tools()]
        with closing(prepared(records, progress, analyzer)) as tools:
            writer.catalog.reindex(tools, stored)
        from discovery._sessions.learning import relearn_if_enabled

        # Learned terms are the analyzer's query terms: made again with the new one.
        relearn_if_enabled(writer, analyzer_named(analyzer))
    return len(records)


def _choose_analyzer(store: Store, analyzer: str) -> None:
    """Give a catalog without tools ``analyzer``; refuse a catalog of tools indexed otherwise
    (with another analyzer, or another version of this one)."""
    wanted = analyzer_named(analyzer).stored
    with store.reading() as reader:
        if reader.catalog.analyzer() == wanted:
            return
    with store.writing() as writer:
        stored = writer.catalog.lock()
        if stored == wanted:
            return
        if any(stats.doc_count for stats in writer.index.group_stats().values()):
            name, version = stored_version(stored)
            if name == analyzer:
                raise AnalyzerOutdated(stored, name, version, analyzer_named(analyzer).version)
            raise AnalyzerMismatch(store.url, name, analyzer)
        writer.catalog.reindex([], wanted)


def read_only_details(
    reader: Reader, ranker: Ranker, query: Query, limit: int, mode: str, identity: str = LOCAL_IDENTITY
) -> SearchDetails:
    """``ToolIndex.search_details`` in the caller's transaction, of a query checked already."""
    ranking = ranker.search(reader, query, read_only_corpus(mode, checked_identity(identity)), limit)
    tools = ranker.tools(reader, [hit.tool_id for hit in ranking.hits])
    return {
        "query": query.text,
        "limit": limit,
        "total_tools": ranking.total_tools,
        "activated_tools": [],
        "active_selected_tools": [],
        "tools": [match_details(tools[hit.tool_id], hit.score) for hit in ranking.hits],
    }
