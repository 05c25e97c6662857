"""Sessions (contract §5): essential tools, the corpus rules, activation and the session handle.

A session's state lives in the store; every method reads or changes it in one transaction, so
any number of processes can hold the same session and see each other's changes. A session works
on the index's store and ranker directly: nothing here calls back up into ``ToolIndex``.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from discovery._params import checked_id, checked_identity, checked_search
from discovery._ranking.ranker import Ranker
from discovery._results import SearchHit
from discovery._rules import (
    LOCAL_IDENTITY,
    SEARCH_TOOL_NAME,
    Corpus,
    EffectiveMode,
    kept_selection,
    session_corpus,
    session_named,
)
from discovery._sessions.answer import NameIndex
from discovery._sessions.learning import CALL_EVENT, call_params, learn_from_calls
from discovery._sessions.search_tool import SearchTool, ToolResult
from discovery._sessions.settings import AnswerStyle, SessionSettings, parsed_settings, stored_settings
from discovery._sessions.view import (
    CorpusOverview,
    Scope,
    SessionRules,
    SessionView,
    corpus_overview,
    opening_active,
    rules_of,
    view_of,
)
from discovery.errors import (
    DiscoveryDisabled,
    SessionNotFound,
    ToolCallError,
    ToolIndexError,
    ToolNotFound,
    UnknownToolNames,
)
from store import Event, Reader, SessionKey, SessionState, Store, StoredTool, Writer


def opener(store: Store) -> str:
    """What a session made now records as having opened it: who opened the store (the command,
    or the name a host gave ``ToolIndex.open``) and the host name."""
    return f"{store.application} on {socket.gethostname()}"


def no_session(key: SessionKey) -> SessionNotFound:
    return SessionNotFound(f"no {session_named(*key)} in the store")


class Session:
    """A handle on one stored session. Cheap: it holds only the key, the store and the ranker."""

    def __init__(
        self,
        store: Store,
        ranker: Ranker,
        session_id: str,
        scope: Scope | None = None,
        answer: AnswerStyle | None = None,
        *,
        identity: str = LOCAL_IDENTITY,
    ) -> None:
        self.store = store
        self.ranker = ranker
        self.id = session_id
        self.identity = identity
        """Whose session this is: ids are per identity (``discovery._rules.LOCAL_IDENTITY`` when
        it names none)."""
        self.key = SessionKey(identity, session_id)
        self.scope = scope
        self.answer = answer
        """How this handle's searches answer whatever the stored setting says (``None``: as it
        says): a host that answers richly serves sessions stored before the setting existed."""
        self._cached_view: tuple[tuple[int, dict[str, Any], list[str], list[str]], SessionView] | None = None
        self._cached_rules: tuple[int, dict[str, Any], SessionRules] | None = None
        self._cached_names: tuple[int, NameIndex] | None = None

    @classmethod
    def open(
        cls,
        store: Store,
        ranker: Ranker,
        session_id: str | None,
        settings: dict[str, Any] | None,
        identity: str = LOCAL_IDENTITY,
    ) -> Session:
        """Create ``identity``'s session, or resume it (settings, when given, must match the
        stored ones). Another identity's session of the same id is another session."""
        session_id = checked_id(session_id, "session id") if session_id is not None else uuid.uuid4().hex
        key = SessionKey(checked_identity(identity), session_id)
        wanted = parsed_settings(settings or {})
        # Resuming only reads, so it does not wait for another process's write (a long import).
        with store.reading() as reader:
            state = reader.sessions.load(key)
        if state is None:
            with store.writing() as writer:
                state, _ = created_or_locked(writer, ranker, key, wanted, opener(store))
        if settings is not None:
            check_settings(state, wanted)
        return cls(store, ranker, session_id, identity=key.identity)

    def as_new(self, settings: dict[str, Any] | None = None) -> tuple[list[str], CorpusOverview]:
        """What this session would be if it were created now with ``settings``, nothing stored:
        its active tools and the overview of its corpus (the search tool's description). A host
        answers from it the read-only requests of a session it has not created yet."""
        with self.store.reading() as reader:
            view = self._view_as_new(reader, settings)
            return view.live_active, corpus_overview(self.ranker, reader, view.corpus)

    def _view_as_new(self, reader: Reader, settings: dict[str, Any] | None) -> SessionView:
        wanted = parsed_settings(settings or {})
        catalog = reader.catalog.generation()
        self.ranker.sync(reader, catalog)
        active = opening_active(self.ranker, reader, wanted)
        stamp = datetime.now(UTC)
        state = SessionState(
            self.id, self.identity, wanted.model_dump(mode="json"), active, [], 0, stamp, stamp
        )
        return self.view_in(reader, state, catalog)

    def scoped(self, scope: Scope) -> Session:
        """A handle on the same session that searches and activates only what ``scope`` admits."""
        return Session(self.store, self.ranker, self.id, scope, self.answer, identity=self.identity)

    def answering(self, answer: AnswerStyle) -> Session:
        """A handle on the same session whose searches answer as ``answer`` says."""
        return Session(self.store, self.ranker, self.id, self.scope, answer, identity=self.identity)

    def answer_style(self) -> AnswerStyle:
        """How this handle's searches answer: its own ``answer``, else the session's setting."""
        return self.answer if self.answer is not None else self.settings.answer

    def name_index(self, reader: Reader, generation: int) -> NameIndex:
        """The catalog's tools by the names a model may know them by (kept until the catalog
        changes)."""
        cached = self._cached_names
        if cached is None or cached[0] != generation:
            cached = (generation, NameIndex.of(reader.catalog.tool_origins()))
            self._cached_names = cached
        return cached[1]

    def names_written(self, text: str) -> tuple[str, ...]:
        """The full names of the tools a model may mean by ``text``: those whose name, label or
        MCP name it is, as written."""
        with self.store.reading() as reader:
            return self.name_index(reader, reader.catalog.generation()).written(text)

    def overview_in(self, reader: Reader, corpus: Corpus) -> CorpusOverview:
        """``corpus_overview`` of ``corpus`` in the caller's transaction."""
        return corpus_overview(self.ranker, reader, corpus)

    def view(self) -> SessionView:
        with self.store.reading() as reader:
            return self._view(reader)

    def _view(self, reader: Reader) -> SessionView:
        state, generation = reader.sessions.load_with_generation(self.key)
        if state is None or generation is None:
            raise no_session(self.key)
        self.ranker.sync(reader, generation)
        # The view depends only on the lists, the settings and the catalog: reuse it while none
        # of them moved. A logged event that changes no list (a tool call a gateway forwarded)
        # moves only the event count, so the log can grow without the view being made again.
        key = (generation, state.settings, state.active, state.selected)
        cached = self._cached_view  # one read: another thread may replace it meanwhile
        if cached is None or cached[0] != key:
            cached = (key, self.view_in(reader, state, generation))
            self._cached_view = cached
        elif cached[1].state != state:
            cached = (key, dataclasses.replace(cached[1], state=state))
            self._cached_view = cached
        return cached[1]

    def view_in(self, reader: Reader, state: SessionState, generation: int) -> SessionView:
        """``state`` as seen in the caller's transaction, synced to catalog ``generation``.

        A session's settings rarely change (only when it is deleted and made anew), so what
        they amount to is kept until they or the catalog do; every search call starts here."""
        cached = self._cached_rules
        if cached is None or cached[0] != generation or cached[1] != state.settings:
            rules = rules_of(self.ranker, reader, state.id, state.settings, self.scope)
            cached = (generation, state.settings, rules)
            self._cached_rules = cached
        return view_of(self.ranker, reader, state, cached[2])

    @property
    def settings(self) -> SessionSettings:
        return self.view().settings

    @property
    def effective_mode(self) -> EffectiveMode:
        return self.view().mode

    @property
    def active(self) -> list[str]:
        """The active tools the host exposes, in order (tools gone from the catalog skipped)."""
        return self.view().live_active

    @property
    def selected(self) -> list[str]:
        """The tools discovery activated, in order (tools gone from the catalog skipped)."""
        return self.view().live_selected

    @property
    def total_tools(self) -> int:
        """The size of the corpus a search would rank now."""
        with self.store.reading() as reader:
            view = self._view(reader)
            return self.ranker.corpus_size(reader, view.corpus) if view.corpus.groups else 0

    @property
    def search_tool(self) -> SearchTool:
        return SearchTool(self)

    def lookup(
        self, names: Sequence[str], *, as_new: dict[str, Any] | None = None
    ) -> tuple[list[str], dict[str, StoredTool]]:
        """The active list and the catalog records of those of ``names`` that are catalog tools,
        from one snapshot: what a host checks before it calls a tool, in one read. With
        ``as_new``, the active list is that of the session created now with those settings
        (``as_new``), for a host that has not stored the session yet."""
        with self.store.reading() as reader:
            view = self._view(reader) if as_new is None else self._view_as_new(reader, as_new)
            return view.live_active, self.ranker.documents(reader, names)

    def active_tools(self) -> list[StoredTool]:
        """Full records of the active catalog tools, in active order, input schemas included."""
        with self.store.reading() as reader:
            view = self._view(reader)
            found = reader.catalog.tools_by_names(view.live_active)
        return [found[name] for name in view.live_active if name in found]

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        """Full records of the catalog tools among ``names``, by name."""
        with self.store.reading() as reader:
            return reader.catalog.tools_by_names(names)

    def corpus_tools(self) -> list[StoredTool]:
        """Full records of every tool a search could activate now (the corpus), in catalog order."""
        with self.store.reading() as reader:
            corpus = self._view(reader).corpus
            if not corpus.groups:
                return []
            return [
                tool
                for tool in reader.catalog.all_tools()
                if tool.grp in corpus.groups and tool.name not in corpus.excluded
            ]

    def set_active(self, names: Iterable[str]) -> list[str]:
        """Replace the active list; selected tools left out are unselected (contract §5).

        Returns the new active list. Names the catalog lacks are left out, as contract §5 says, and
        reported by an ``UnknownToolNames`` warning naming them.
        """
        requested = list(names)
        with self.store.writing() as writer:
            state = self._lock(writer)
            known = self.ranker.known_names(writer, requested) | {SEARCH_TOOL_NAME}
            active = [name for name in dict.fromkeys(requested) if name in known]
            selected = kept_selection(state.selected, active)
            event = Event(kind="set_active", params={"names": requested, "active": active})
            writer.sessions.record(state, event, active, selected)
        unknown = [name for name in dict.fromkeys(requested) if name not in known]
        if unknown:
            warnings.warn(UnknownToolNames(unknown), stacklevel=2)
        return active

    def reset(self) -> list[str]:
        """Back to a new session's state with the same settings; the selection is emptied."""
        with self.store.writing() as writer:
            state = self._lock(writer)
            active = opening_active(self.ranker, writer, stored_settings(state.id, state.settings))
            writer.sessions.record(state, Event(kind="reset", params={"active": active}), active, [])
        return active

    def restore_selection(self, names: Sequence[str], *, source: str) -> tuple[list[str], list[str]]:
        """Make ``names`` the selection (and active), as a resumed host session had it.

        Returns ``(restored, missing)``: names not in the catalog are reported and skipped.
        """
        with self.store.writing() as writer:
            state = self._lock(writer)
            known = self.ranker.known_names(writer, list(names))
            restored = [name for name in dict.fromkeys(names) if name in known]
            missing = [name for name in dict.fromkeys(names) if name not in known]
            settings = stored_settings(state.id, state.settings)
            opening = opening_active(self.ranker, writer, settings)
            active = [*opening, *(name for name in restored if name not in opening)]
            event = Event(
                kind="restore",
                params={"source": source, "names": list(names), "active": active, "selected": restored},
            )
            writer.sessions.record(state, event, active, restored)
        return restored, missing

    def record_call(self, name: str, *, ok: bool = True) -> None:
        """Say that the host called catalog tool ``name`` in this session (``ok=False``: the call
        failed). The call is logged; with learning on, a call that did not fail teaches the tool
        the request of this process' search that found it (``discovery._sessions.learning`` states
        the rule), in the same transaction. ``ToolNotFound`` when ``name`` is not a catalog tool."""
        if not isinstance(name, str):
            raise ToolIndexError(f"a tool name is text, not {type(name).__name__}")
        if not isinstance(ok, bool):
            raise ToolIndexError(f"ok is true or false, not {ok!r}")
        with self.store.writing() as writer:
            if not self.ranker.known_names(writer, [name]):
                raise ToolNotFound(f"no tool named {name!r} in the catalog")
            params = call_params(writer, self.store, self.key, name, {"tool": name, "is_error": not ok})
            event = Event(kind=CALL_EVENT, tool_name=name, params=params)
            if not writer.sessions.append(self.key, event):
                raise no_session(self.key)
            learn_from_calls(writer, self.ranker.analyzer(writer), self.key, [event])

    def _lock(self, writer: Writer) -> SessionState:
        state = writer.sessions.lock(self.key)
        if state is None:
            raise no_session(self.key)
        return state

    def preview(self, query: str, limit: int = 8) -> list[SearchHit]:
        """What a search would match now, without activating or logging anything.

        The session's own corpus and statistics, in one read snapshot; for hosts and UIs that
        want to show matches before committing to them. Query and limit are checked as a
        search call checks them.
        """
        checked, limit = checked_search(query, limit)
        with self.store.reading() as reader:
            view = self._view(reader)
            if not view.corpus.groups:
                raise DiscoveryDisabled()
            selected = frozenset(view.state.selected)
            ranking = self.ranker.search(reader, checked, view.corpus, limit, selected=selected)
        return [SearchHit(name=hit.name, score=hit.score) for hit in ranking.hits]

    def describe_corpus(self) -> tuple[list[tuple[str, int]], list[str], int]:
        """``(servers with counts, built-in names, corpus size)`` for the tool description."""
        with self.store.reading() as reader:
            view = self._view(reader)
            return corpus_overview(self.ranker, reader, view.corpus)

    def describe_catalog(self) -> tuple[list[tuple[str, int]], list[str], int]:
        """As ``describe_corpus``, for the whole catalog of the session's mode: what no search
        changes (only the essential and internal tools are left out), for a stable description."""
        with self.store.reading() as reader:
            view = self._view(reader)
            whole = session_corpus(view.mode, (), view.essentials, view.out_of_scope, view.state.identity)
            return corpus_overview(self.ranker, reader, whole)


def created_or_locked(
    writer: Writer, ranker: Ranker, key: SessionKey, wanted: SessionSettings, opened_by: str
) -> tuple[SessionState, bool]:
    """The session, locked, and whether this call created it (with ``wanted``; ``opened_by``
    says who did: ``opener``)."""
    state = writer.sessions.lock(key)  # made meanwhile by another caller?
    if state is not None:
        return state, False
    created = writer.sessions.create(
        key,
        wanted.model_dump(mode="json"),
        opening_active(ranker, writer, wanted),
        opened_by=opened_by,
    )
    if created is not None:
        return created, True
    # Made at this very moment by another caller, now committed: resume it.
    state = writer.sessions.lock(key)
    assert state is not None
    return state, False


def check_settings(state: SessionState, wanted: SessionSettings) -> None:
    """Settings given for an existing session must be its own."""
    kept = stored_settings(state.id, state.settings)
    if kept == wanted:
        return
    differ = [
        f"{key} is {getattr(kept, key)!r}, not {getattr(wanted, key)!r}"
        for key in SessionSettings.model_fields
        if getattr(kept, key) != getattr(wanted, key)
    ]
    raise ToolIndexError(
        f"session {state.id!r} exists with other settings ({'; '.join(differ)}); "
        "resume it without settings or delete it first"
    )


@dataclass(frozen=True, slots=True)
class OneSearch:
    """A search call made by ``search_once``: its outcome, the session as the call saw it, and
    whether the call created the session."""

    outcome: ToolResult | ToolCallError
    view: SessionView | None
    """``None`` when the call id was answered before (the logged answer is returned)."""
    created: bool


def search_once(
    store: Store,
    ranker: Ranker,
    session_id: str,
    settings: dict[str, Any] | None,
    call_id: str,
    params: dict[str, Any],
    identity: str = LOCAL_IDENTITY,
) -> OneSearch:
    """One search call of a host that holds no session handle between calls (the command line):
    ``identity``'s session is created with ``settings`` when new (checked against them when
    not), and the search runs, activates and is logged — all in one write transaction."""
    session_id = checked_id(session_id, "session id")
    key = SessionKey(checked_identity(identity), session_id)
    wanted = parsed_settings(settings or {})
    session = Session(store, ranker, session_id, identity=key.identity)
    tool = session.search_tool
    call_id, params = tool.checked(call_id, params)
    with store.writing() as writer:
        state, created = created_or_locked(writer, ranker, key, wanted, opener(store))
        if settings is not None and not created:
            check_settings(state, wanted)
        outcome, view = tool.execute_in(writer, call_id, params)
    return OneSearch(outcome, view, created)
