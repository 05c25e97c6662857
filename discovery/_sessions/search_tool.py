"""The ``search_tool_bm25`` tool of contract §6: its schema, description and ``execute``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from discovery._params import Query, checked_id, checked_params, checked_search
from discovery._ranking.ranker import Ranker
from discovery._results import SearchDetails, compact_json, match_details
from discovery._rules import SEARCH_TOOL_NAME, Corpus, activation_order, after_search, session_corpus
from discovery._sessions.answer import (
    Answer,
    NameIndex,
    SearchContext,
    activated_by,
    answer_query,
    listed_details,
    nothing_found,
    rich_content,
)
from discovery._sessions.description import render_description
from discovery._sessions.learning import FIRST_SEARCHES
from discovery._sessions.settings import AnswerStyle
from discovery._sessions.view import SessionView
from discovery.errors import DiscoveryDisabled, DiscoveryUnavailable, ToolCallError
from store import Event, LoggedEvent, Reader, SessionKey, SessionState, Store, Writer


class SearchingSession(Protocol):
    """What the tool needs of the session that hands itself to it (``Session``): the tool only
    calls it back, so it names the calls rather than importing the session's module."""

    @property
    def store(self) -> Store: ...
    @property
    def ranker(self) -> Ranker: ...
    @property
    def id(self) -> str: ...
    @property
    def key(self) -> SessionKey: ...
    def describe_corpus(self) -> tuple[list[tuple[str, int]], list[str], int]: ...
    def describe_catalog(self) -> tuple[list[tuple[str, int]], list[str], int]: ...
    def view_in(self, reader: Reader, state: SessionState, generation: int) -> SessionView: ...
    @property
    def answer(self) -> AnswerStyle | None: ...
    def answer_style(self) -> AnswerStyle: ...
    def name_index(self, reader: Reader, generation: int) -> NameIndex: ...
    def overview_in(self, reader: Reader, corpus: Corpus) -> tuple[list[tuple[str, int]], list[str], int]: ...


LABEL = "SearchTools"
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "tool search query"},
        "limit": {"type": "integer", "minimum": 1, "description": "max matches"},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the model sees (``content``) and what hosts and UIs get (``details``)."""

    content: str
    details: SearchDetails
    query: Query | None = field(default=None, compare=False, repr=False)
    """The query as this call checked it, for a caller that goes on with it (the command line
    flags weak matches) without checking it again; ``None`` for an answer replayed from the log."""

    @property
    def structured(self) -> dict[str, Any]:
        """The content as data: an MCP result's ``structuredContent``, which must equal its text."""
        value: dict[str, Any] = json.loads(self.content)
        return value


class SearchTool:
    """``search_tool_bm25`` bound to one session."""

    name = SEARCH_TOOL_NAME
    label = LABEL
    parameters = PARAMETERS

    def __init__(self, session: SearchingSession) -> None:
        self.session = session

    @property
    def description(self) -> str:
        """Rendered from the session's current corpus (contract §6): its counts shrink as searches
        activate tools."""
        return render_description(*self.session.describe_corpus(), rich=self.session.answer_style() == "rich")

    @property
    def stable_description(self) -> str:
        """contract §6's description with the counts of the whole catalog in the session's mode.

        No search changes it (only a catalog write does), so a host that caches its tool
        definitions (a provider's prompt cache) keeps its cache across calls.
        """
        return render_description(
            *self.session.describe_catalog(), rich=self.session.answer_style() == "rich"
        )

    def execute(self, call_id: str, params: dict[str, Any]) -> ToolResult:
        """Run one search call: rank, activate, persist and log, all before returning.

        Raises ``ToolCallError`` with the exact message of contract §6; failed calls are logged
        too. A call id the session has already answered returns the logged answer; an empty
        one is never matched. A call id the store cannot keep is a ``ToolIndexError``.
        """
        call_id, params = self.checked(call_id, params)
        with self.session.store.writing() as writer:
            outcome, _ = self.execute_in(writer, call_id, params)
        if isinstance(outcome, ToolCallError):
            raise outcome
        return outcome

    def checked(self, call_id: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """What ``execute`` checks before anything is read: a call id and params the store can keep."""
        call_id = checked_id(call_id, "call id", blank=True)
        checked_params(params)
        return call_id, params

    def execute_in(
        self, writer: Writer, call_id: str, params: dict[str, Any]
    ) -> tuple[ToolResult | ToolCallError, SessionView | None]:
        """``execute`` in the caller's write transaction: the outcome (a failed call's error is
        logged, then returned) and the session as the call saw it (``None`` for a call id
        answered before)."""
        session = self.session
        state, generation, done = writer.sessions.lock_for_call(session.key, call_id)
        if state is None:
            raise DiscoveryUnavailable()
        if done is not None:
            try:
                return _replayed(done, params), None
            except ToolCallError as error:
                return error, None
        session.ranker.sync(writer, generation)
        view = session.view_in(writer, state, generation)
        outcome: ToolResult | ToolCallError
        try:
            outcome = self._search(writer, view, params, generation)
        except ToolCallError as error:
            outcome = error
        recorded = writer.sessions.record(state, *_logged(view, call_id, params, outcome))
        if not isinstance(outcome, ToolCallError):
            FIRST_SEARCHES.note(session.store, session.key, recorded.event_count)
        return outcome, view

    def _search(self, reader: Reader, view: SessionView, params: Any, generation: int) -> ToolResult:
        if view.mode == "off":
            raise DiscoveryDisabled()
        fields = params if isinstance(params, dict) else {}
        checked_types(fields)
        query, limit = checked_search(fields.get("query"), fields.get("limit"))
        if (self.session.answer or view.settings.answer) == "rich":
            return self._rich_search(reader, view, query, limit, generation)
        ranker = self.session.ranker
        ranking = ranker.search(reader, query, view.corpus, limit, selected=frozenset(view.state.selected))
        matches = ranking.hits
        activated = activation_order([hit.name for hit in matches])
        active_selected = [*view.live_selected, *(n for n in activated if n not in view.live_selected)]
        tools = ranker.tools(reader, [hit.tool_id for hit in matches])
        content = compact_json(
            {
                "query": query.text,
                "activated_tools": activated,
                "match_count": len(matches),
                "total_tools": ranking.total_tools,
            }
        )
        details: SearchDetails = {
            "query": query.text,
            "limit": limit,
            "total_tools": ranking.total_tools,
            "activated_tools": activated,
            "active_selected_tools": active_selected,
            "tools": [match_details(tools[hit.tool_id], hit.score) for hit in matches],
        }
        return ToolResult(content=content, details=details, query=query)

    def _rich_search(
        self, reader: Reader, view: SessionView, query: Query, limit: int, generation: int
    ) -> ToolResult:
        """The answer of ``discovery._sessions.answer``: ranked over the mode's whole corpus,
        active and out-of-scope tools in, so it names the same tools whatever is active."""
        session = self.session
        viewer = view.state.identity
        whole = session_corpus(view.mode, (), view.essentials, view.out_of_scope - view.reported, viewer)
        scoped = session_corpus(view.mode, (), view.essentials, view.out_of_scope, viewer)
        active = frozenset(view.live_active)
        names = session.name_index(reader, generation)
        context = SearchContext(reader, session.ranker, whole, active, view.out_of_scope, names)
        answer = answer_query(context, query, limit)
        activated = activated_by(answer, active)
        if answer.note is None:
            answer.note = _note(answer, lambda: session.overview_in(reader, scoped))
        total = session.ranker.corpus_size(reader, scoped)
        content = compact_json(rich_content(answer, activated, active, total))
        details: SearchDetails = {
            "query": query.text,
            "limit": limit,
            "total_tools": total,
            "activated_tools": activated,
            "active_selected_tools": [
                *view.live_selected,
                *(n for n in activated if n not in view.live_selected),
            ],
            "tools": listed_details(answer),
        }
        return ToolResult(content=content, details=details, query=query)


def _note(answer: Answer, overview: Callable[[], tuple[list[tuple[str, int]], list[str], int]]) -> str | None:
    """What an answer that lists no tool tells the model (``None`` when it lists one)."""
    if answer.listed:
        return None
    if answer.unavailable:
        return (
            "The matching tools are not available here (left out by this host's filters); "
            "none was activated in their place."
        )
    if answer.unknown:
        return "No tool has these names; nothing was activated. Search with words to find the names."
    servers, builtins, _ = overview()
    return nothing_found(servers, builtins)


def _logged(
    view: SessionView, call_id: str, params: Any, outcome: ToolResult | ToolCallError
) -> tuple[Event, list[str], list[str]]:
    """The log entry of a call and the lists it leaves behind."""
    state = view.state
    logged_params = params_logged(params)
    if isinstance(outcome, ToolCallError):
        event = Event(
            kind="search",
            tool_name=SEARCH_TOOL_NAME,
            call_id=call_id,
            params=logged_params,
            error=str(outcome),
        )
        return event, state.active, state.selected
    activated = outcome.details["activated_tools"]
    event = Event(
        kind="search",
        tool_name=SEARCH_TOOL_NAME,
        call_id=call_id,
        params=logged_params,
        content=outcome.content,
        details=outcome.details,
        activated=tuple(activated),
    )
    active, selected = after_search(state.active, state.selected, activated)
    return event, active, selected


def params_logged(params: Any) -> dict[str, Any]:
    """What the log keeps of a call's params: an object as it is, anything else wrapped."""
    return params if isinstance(params, dict) else {"value": params}


def _replayed(done: LoggedEvent, params: Any) -> ToolResult:
    # The log holds the params as the store could keep them; the retry is compared in that form.
    if not done.event.same_params(params_logged(params)):
        raise ToolCallError(f"call id {done.event.call_id!r} was already used with other parameters")
    if done.event.error is not None:
        raise ToolCallError(done.event.error)
    assert done.event.content is not None and done.event.details is not None
    return ToolResult(content=done.event.content, details=cast(SearchDetails, done.event.details))


def checked_types(fields: dict[Any, Any]) -> None:
    """What the schema says beyond contract §6's checks: no other properties (it declares
    ``additionalProperties: false``)."""
    extra = [key for key in fields if key not in PARAMETERS["properties"]]
    if extra:
        listed = ", ".join(json.dumps(key) if isinstance(key, str) else repr(key) for key in extra)
        raise ToolCallError(f"Unknown parameter {listed}: search_tool_bm25 takes only query and limit.")
