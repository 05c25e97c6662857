"""Learning from use: which requests taught which tools, read from the session logs.

The rule. A session's log, read for learning, is runs of searches and runs of calls (other
events — the session's creation, ``set_active``, a gateway's pins — and failed searches are
passed over). A recorded call of tool T that did not fail credits T with every query term (the
index analyzer's query terms) of the run of searches just before the run of calls it belongs to:
an agent that searched "notify the team", then "slack message", then called two tools teaches
both requests to both. Calls before any search teach nothing. A (session, term, tool) counts
once, however often the session repeats it; a failed call, or one whose tool was forgotten
(``tool-index learned --forget``), teaches nothing.

The credits are stored (``store.learning``) as calls are recorded, in the transaction that logs
the call, and only while learning is on; turning it on computes them from the whole log, so
nothing is lost by switching, and ``verify`` recomputes them the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from discovery.params import query_terms
from discovery.text.analyzers import Analyzer
from store import MAX_KEY_BYTES
from store import learning as stored_learning
from store import sessions as stored_sessions

CALL_EVENT = "tool_call"
"""The log's kind for a call of a catalog tool (recorded by a host or forwarded by the gateway)."""
SEARCH_EVENT = "search"
FORGOTTEN = "forgotten"
"""Set in a logged call's params when its tool's learning is forgotten: it then teaches nothing."""
RUN_KINDS = (SEARCH_EVENT, CALL_EVENT)
LOOKBACK_PAGE = 256
"""Log entries read at a time when looking back for the searches a call answers."""

Credit = stored_learning.Credit


def teaches(event: stored_sessions.Event) -> bool:
    """Whether a logged call teaches: it ran (a gateway's refusals and descriptions do not), did
    not fail, and its learning was not forgotten."""
    params = event.params or {}
    return (
        bool(event.tool_name)
        and params.get("outcome", "called") == "called"
        and params.get("is_error") is not True
        and params.get(FORGOTTEN) is not True
    )


def searched_query(event: stored_sessions.Event) -> str | None:
    """The query of a search that succeeded (as it was searched: trimmed), else ``None``."""
    if event.kind != SEARCH_EVENT or event.error is not None:
        return None
    query = (event.details or {}).get("query")
    return query if isinstance(query, str) else None


def request_terms(query: str, analyzer: Analyzer) -> set[str]:
    """The distinct query terms of a request that the learned field can hold."""
    return {term for term in query_terms(query, analyzer) if len(term.encode("utf-8")) <= MAX_KEY_BYTES}


def credits_of_log(
    session_id: str, logged: Iterable[stored_sessions.LoggedEvent], analyzer: Analyzer
) -> set[Credit]:
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


def last_search_run(connection: Connection, session_id: str, analyzer: Analyzer) -> set[str]:
    """The terms of the run of searches before the session's last run of calls (the run the
    calls just logged belong to), read back from the end of the log."""
    terms: set[str] = set()
    seen_search = False
    before = 1 << 62
    while True:
        page = stored_sessions.events_before(connection, session_id, before, LOOKBACK_PAGE, RUN_KINDS)
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


def learn_from_calls(
    connection: Connection, analyzer: Analyzer, session_id: str, tool_names: Sequence[str]
) -> int:
    """Credit the calls of ``tool_names`` just logged in a session (those that teach), when
    learning is on; how many credits were new."""
    if not tool_names:
        return 0
    # Crediting bumps the learned generation: take the row for update from the start (two writers
    # holding it shared could not both upgrade); only a writer that will not credit shares it.
    # SQLite's writer already holds the database: one plain read is enough there.
    enabled = stored_learning.state(connection).enabled
    if connection.dialect.name != "sqlite":
        enabled = stored_learning.state(connection, lock="update" if enabled else "share").enabled
    if not enabled:
        return 0
    terms = last_search_run(connection, session_id, analyzer)
    return stored_learning.add_credits(
        connection, [(session_id, term, name) for name in dict.fromkeys(tool_names) for term in sorted(terms)]
    )


def credits_from_logs(connection: Connection, analyzer: Analyzer) -> set[Credit]:
    """Every credit of every session's log, by the rule."""
    found: set[Credit] = set()
    for session_id, logged in stored_sessions.events_of_kind(connection, RUN_KINDS).items():
        found |= credits_of_log(session_id, logged, analyzer)
    return found


def relearn(connection: Connection, analyzer: Analyzer) -> int:
    """Compute the learned field from the logs and store it whole; how many credits it holds."""
    return stored_learning.replace_all(connection, credits_from_logs(connection, analyzer))


def relearn_if_enabled(connection: Connection, analyzer: Analyzer) -> None:
    if stored_learning.state(connection, lock="update").enabled:
        relearn(connection, analyzer)


def set_learning(connection: Connection, analyzer: Analyzer, enabled: bool) -> bool:
    """Turn learning on (computing the field from the logs) or off (dropping what was computed
    from them; the logs keep everything); whether the setting changed."""
    if stored_learning.state(connection, lock="update").enabled == enabled:
        return False
    if enabled:
        relearn(connection, analyzer)
    else:
        stored_learning.remove_credits(connection)
    stored_learning.set_enabled(connection, enabled)
    return True


def forget(connection: Connection, tool_names: Sequence[str] | None) -> int:
    """Forget what ``tool_names`` (every tool when ``None``) learned: their logged calls are
    marked so that they never teach again, and their credits go; how many credits went."""
    stored_learning.state(connection, lock="update")
    stored_sessions.flag_calls(connection, tool_names, FORGOTTEN)
    return stored_learning.remove_credits(connection, tool_names=tool_names)


@dataclass(frozen=True, slots=True)
class LearnedSummary:
    """What one tool learned: ``terms`` as ``(term, sessions that taught it)``, most taught
    first, and how many sessions taught it anything."""

    name: str
    enabled: bool
    terms: list[tuple[str, int]]
    sessions: int

    @classmethod
    def read(cls, connection: Connection, name: str) -> LearnedSummary:
        learned = stored_learning.learned_of(connection, name)
        return cls(
            name=name,
            enabled=stored_learning.state(connection).enabled,
            terms=[(item.term, item.sessions) for item in learned],
            sessions=stored_learning.teaching_sessions(connection, name),
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "learning": "on" if self.enabled else "off",
            "sessions": self.sessions,
            "terms": [{"term": term, "sessions": count} for term, count in self.terms],
        }
