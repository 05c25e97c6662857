"""Learning from use: which requests taught which tools, read from the session logs.

The rule. A session's log, read for learning, is runs of searches and runs of calls (other
events — the session's creation, ``set_active``, a gateway's pins — and failed searches are
passed over). A recorded call of tool T that did not fail credits T with every query term (the
index analyzer's query terms) of the run of searches just before the run of calls it belongs to:
an agent that searched "notify the team", then "slack message", then called two tools teaches
both requests to both. Calls before any search teach nothing. A (session, term, tool) counts
once, however often the session repeats it; a failed call, or one whose tool was forgotten
(``tool-index learned --forget``), teaches nothing.

The credits are stored (``store._learning``) as calls are recorded, in the transaction that logs
the call, and only while learning is on; turning it on computes them from the whole log, so
nothing is lost by switching, and ``verify`` recomputes them the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from discovery._params import MAX_KEY_BYTES, query_terms
from discovery._text.analyzers import Analyzer
from store import Event, LoggedEvent, Reader, Writer

CALL_EVENT = "tool_call"
"""The log's kind for a call of a catalog tool (recorded by a host or forwarded by the gateway)."""
SEARCH_EVENT = "search"
FORGOTTEN = "forgotten"
"""Set in a logged call's params when its tool's learning is forgotten: it then teaches nothing."""
RUN_KINDS = (SEARCH_EVENT, CALL_EVENT)
LOOKBACK_PAGE = 256
"""Log entries read at a time when looking back for the searches a call answers."""

Credit = tuple[str, str, str]
"""``(session id, term, tool name)``: one session's call of a tool, credited to one of the terms
of the searches it answers (what ``Writer.learning`` adds and removes)."""


def teaches(event: Event) -> bool:
    """Whether a logged call teaches: it ran (a gateway's refusals and descriptions do not), did
    not fail, and its learning was not forgotten."""
    params = event.params or {}
    return (
        bool(event.tool_name)
        and params.get("outcome", "called") == "called"
        and params.get("is_error") is not True
        and params.get(FORGOTTEN) is not True
    )


def searched_query(event: Event) -> str | None:
    """The query of a search that succeeded (as it was searched: trimmed), else ``None``."""
    if event.kind != SEARCH_EVENT or event.error is not None:
        return None
    query = (event.details or {}).get("query")
    return query if isinstance(query, str) else None


def request_terms(query: str, analyzer: Analyzer) -> set[str]:
    """The distinct query terms of a request that the learned field can hold."""
    return {term for term in query_terms(query, analyzer) if len(term.encode("utf-8")) <= MAX_KEY_BYTES}


def credits_of_log(session_id: str, logged: Iterable[LoggedEvent], analyzer: Analyzer) -> set[Credit]:
    """Every credit a session's log gives, by the rule (events in log order)."""
    found: set[Credit] = set()
    run: set[str] = set()
    after_calls = True
    for entry in logged:
        event = entry.event
        if event.kind == SEARCH_EVENT:
            query = searched_query(event)
            if query is None:
                continue
            if after_calls:
                run, after_calls = set(), False
            run |= request_terms(query, analyzer)
        elif event.kind == CALL_EVENT:
            after_calls = True
            if run and teaches(event):
                assert event.tool_name is not None
                found.update((session_id, term, event.tool_name) for term in run)
    return found


def last_search_run(reader: Reader, session_id: str, analyzer: Analyzer) -> set[str]:
    """The terms of the run of searches before the session's last run of calls (the run the
    calls just logged belong to), read back from the end of the log."""
    terms: set[str] = set()
    seen_search = False
    before = 1 << 62
    while True:
        page = reader.sessions.events_before(session_id, before, LOOKBACK_PAGE, RUN_KINDS)
        for entry in page:
            event = entry.event
            if event.kind == CALL_EVENT:
                if seen_search:
                    return terms
                continue
            query = searched_query(event)
            if query is not None:
                seen_search = True
                terms |= request_terms(query, analyzer)
        if len(page) < LOOKBACK_PAGE:
            return terms
        before = page[-1].seq


def learn_from_calls(writer: Writer, analyzer: Analyzer, session_id: str, tool_names: Sequence[str]) -> int:
    """Credit the calls of ``tool_names`` just logged in a session (those that teach), when
    learning is on; how many credits were new."""
    if not tool_names:
        return 0
    if not writer.learning.state_for_crediting().enabled:
        return 0
    terms = last_search_run(writer, session_id, analyzer)
    return writer.learning.add_credits(
        [(session_id, term, name) for name in dict.fromkeys(tool_names) for term in sorted(terms)]
    )


def credits_from_logs(reader: Reader, analyzer: Analyzer) -> set[Credit]:
    """Every credit of every session's log, by the rule."""
    found: set[Credit] = set()
    for session_id, logged in reader.sessions.events_of_kind(RUN_KINDS).items():
        found |= credits_of_log(session_id, logged, analyzer)
    return found


def relearn(writer: Writer, analyzer: Analyzer) -> int:
    """Compute the learned field from the logs and store it whole; how many credits it holds."""
    return writer.learning.replace_all(credits_from_logs(writer, analyzer))


def relearn_if_enabled(writer: Writer, analyzer: Analyzer) -> None:
    if writer.learning.locked_state().enabled:
        relearn(writer, analyzer)


def set_learning(writer: Writer, analyzer: Analyzer, enabled: bool) -> bool:
    """Turn learning on (computing the field from the logs) or off (dropping what was computed
    from them; the logs keep everything); whether the setting changed."""
    if writer.learning.locked_state().enabled == enabled:
        return False
    if enabled:
        relearn(writer, analyzer)
    else:
        writer.learning.remove_credits()
    writer.learning.set_enabled(enabled)
    return True


def forget(writer: Writer, tool_names: Sequence[str] | None) -> int:
    """Forget what ``tool_names`` (every tool when ``None``) learned: their logged calls are
    marked so that they never teach again, and their credits go; how many credits went."""
    writer.learning.locked_state()
    writer.sessions.flag_calls(tool_names, FORGOTTEN)
    return writer.learning.remove_credits(tool_names=tool_names)


@dataclass(frozen=True, slots=True)
class LearnedSummary:
    """What one tool learned: ``terms`` as ``(term, sessions that taught it)``, most taught
    first, and how many sessions taught it anything."""

    name: str
    enabled: bool
    terms: list[tuple[str, int]]
    sessions: int

    @classmethod
    def read(cls, reader: Reader, name: str) -> LearnedSummary:
        learned = reader.learning.learned_of(name)
        return cls(
            name=name,
            enabled=reader.learning.state().enabled,
            terms=[(item.term, item.sessions) for item in learned],
            sessions=reader.learning.teaching_sessions(name),
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "learning": "on" if self.enabled else "off",
            "sessions": self.sessions,
            "terms": [{"term": term, "sessions": count} for term, count in self.terms],
        }
