"""Learning from use: which requests taught which tools, read from the session logs.

The rule. A session's log, read for learning, is runs of searches and runs of calls (other
events — the session's creation, ``set_active``, a gateway's pins — and failed searches are
passed over). A recorded call of tool T that did not fail is credited to the request that found
T: the last search of the run just before its run of calls that showed T (else the run's last
search), together with the searches right before that one that showed no tool at all — the
requests the agent rephrased because they found nothing. Searches that found other tools are
other needs and teach T nothing. Of those requests' query terms (the index analyzer's), in
order, the call credits at most ``TERMS_PER_CALL``; a ``select:`` request names tools, not a
need, so its words credit nothing (``select:a,b`` would teach ``a`` the name of ``b``). A
(session, term, tool) counts once, however often the session repeats it; a failed call, or
one whose tool or identity was forgotten (``tool-index learned --forget``,
``--forget-identity``), teaches nothing. Credits are the
session's identity's: who sees them, and when, is the ranker's rule (``_ranking.learned``: an
identity's own at once, the others' once K identities taught the same).

Only the searches of the process that records the call count: a call made before any search of
its process (a resumed session, a host that restarted) teaches nothing. The searches a call
learns from are written into its log entry (``learned_from``: their sequence numbers), so the
rule is replayed from the log alone; a call logged before that entry existed is read with the
rule over its whole run.

The credits are stored (``store._learning``) as calls are recorded, in the transaction that logs
the call, and only while learning is on; turning it on computes them from the whole log, so
nothing is lost by switching, and ``verify`` recomputes them the same way.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from discovery._params import MAX_KEY_BYTES, query_terms
from discovery._sessions.answer import names_tools
from discovery._text.analyzers import Analyzer
from discovery.errors import QueryWithoutTerms
from store import Event, LoggedEvent, Reader, SessionKey, Store, StoredTool, Writer

CALL_EVENT = "tool_call"
"""The log's kind for a call of a catalog tool (recorded by a host or forwarded by the gateway)."""
SEARCH_EVENT = "search"
FORGOTTEN = "forgotten"
"""Set in a logged call's params when its tool's or its identity's learning is forgotten: it then
teaches nothing."""
LEARNED_FROM = "learned_from"
"""A logged call's params: the sequence numbers of the searches it learns from."""
RUN_KINDS = (SEARCH_EVENT, CALL_EVENT)
LOOKBACK_PAGE = 256
"""Log entries read at a time when looking back for the searches a call answers."""
TERMS_PER_CALL = 16
"""The most distinct terms one call credits. Every request of the project's own labelled set
has at most 9 terms (enhanced), and 84% of MetaTool's wordier ones at most 16; past that a
request teaches little more (measured in bench/results.md), while a hostile one could teach
thousands of terms at once."""
PREFIX_CHARS = 4096
"""The first prefix of a request read for its terms (``request_terms``)."""
WHITE_SPACE = re.compile(r"\s")
SESSIONS_REMEMBERED = 65536
"""Sessions per store whose first search in this process is remembered; one forgotten teaches
again from its next search."""

Credit = tuple[str, str, str, str]
"""``(identity, session id, term, tool name)``: one session's call of a tool, credited to one of
the terms of the searches it answers (what ``Writer.learning`` adds and removes)."""


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


def shown(event: Event) -> set[str]:
    """The tools a search's answer showed."""
    tools = (event.details or {}).get("tools")
    if not isinstance(tools, list):
        return set()
    return {str(tool["name"]) for tool in tools if isinstance(tool, Mapping) and "name" in tool}


def request_terms(query: str, analyzer: Analyzer, limit: int) -> list[str]:
    """The first ``limit`` distinct query terms of a request that the learned field can hold, in
    query order. They are read from a prefix of the request cut at white space, grown until it
    holds enough: a call after a megabyte request analyzes a few kilobytes of it."""
    size = PREFIX_CHARS
    while True:
        space = WHITE_SPACE.search(query, size) if size < len(query) else None
        part = query if space is None else query[: space.start()]
        try:
            terms = [
                term for term in query_terms(part, analyzer) if len(term.encode("utf-8")) <= MAX_KEY_BYTES
            ]
        except QueryWithoutTerms:
            terms = []
        if len(terms) >= limit or space is None:
            return terms[:limit]
        size *= 4


def credited_searches(run: Sequence[LoggedEvent], tool_name: str) -> list[LoggedEvent]:
    """The searches of ``run`` (successful ones, in log order) a call of ``tool_name`` learns
    from, the one that found it first: the last that showed it (else the last), and the searches
    right before it that showed nothing."""
    if not run:
        return []
    at = next((i for i in range(len(run) - 1, -1, -1) if tool_name in shown(run[i].event)), len(run) - 1)
    chosen = [run[at]]
    for before in range(at - 1, -1, -1):
        if shown(run[before].event):
            break
        chosen.append(run[before])
    return chosen


def call_terms(searches: Iterable[LoggedEvent], analyzer: Analyzer) -> list[str]:
    """The terms a call credits: those of ``searches`` in order, the first ``TERMS_PER_CALL``."""
    terms: dict[str, None] = {}
    for entry in searches:
        query = searched_query(entry.event)
        if query is None or names_tools(query):
            continue
        for term in request_terms(query, analyzer, TERMS_PER_CALL):
            terms.setdefault(term)
            if len(terms) == TERMS_PER_CALL:
                return list(terms)
    return list(terms)


def _learned_from(event: Event) -> list[int] | None:
    """The searches a logged call names as what it learns from (``None``: it names none, as
    calls logged before it did)."""
    value = (event.params or {}).get(LEARNED_FROM)
    if not isinstance(value, list):
        return None
    return [seq for seq in value if isinstance(seq, int) and not isinstance(seq, bool)]


def credits_of_log(session: SessionKey, logged: Iterable[LoggedEvent], analyzer: Analyzer) -> set[Credit]:
    """Every credit a session's log gives, by the rule (events in log order)."""
    found: set[Credit] = set()
    searches: dict[int, LoggedEvent] = {}
    run: list[LoggedEvent] = []
    after_calls = True
    for entry in logged:
        event = entry.event
        if event.kind == SEARCH_EVENT:
            if searched_query(event) is None:
                continue
            if after_calls:
                run, after_calls = [], False
            run.append(entry)
            searches[entry.seq] = entry
        elif event.kind == CALL_EVENT:
            after_calls = True
            if not teaches(event):
                continue
            assert event.tool_name is not None
            named = _learned_from(event)
            chosen = (
                credited_searches(run, event.tool_name)
                if named is None
                else [searches[seq] for seq in named if seq in searches]
            )
            found.update(
                (session.identity, session.id, term, event.tool_name) for term in call_terms(chosen, analyzer)
            )
    return found


class _FirstSearches:
    """Per store, the sequence number of each session's first search logged by this process."""

    def __init__(self) -> None:
        self._by_store: weakref.WeakKeyDictionary[Store, dict[SessionKey, int]] = weakref.WeakKeyDictionary()

    def note(self, store: Store, session: SessionKey, seq: int) -> None:
        sessions = self._by_store.setdefault(store, {})
        known = sessions.get(session)
        if known is not None and known <= seq:
            return
        if known is None and len(sessions) >= SESSIONS_REMEMBERED:
            del sessions[next(iter(sessions))]
        sessions[session] = seq  # lower than known: the session was made anew elsewhere

    def forget(self, store: Store, session: SessionKey) -> None:
        self._by_store.get(store, {}).pop(session, None)

    def first(self, store: Store, session: SessionKey) -> int | None:
        return self._by_store.get(store, {}).get(session)


FIRST_SEARCHES = _FirstSearches()
"""What this process searched: a call learns only from its own process' searches."""


def current_run(reader: Reader, session: SessionKey, since: int) -> list[LoggedEvent]:
    """The successful searches, from ``since`` on, of the run before the session's last run of
    calls (the run a call logged next belongs to), in log order."""
    found: list[LoggedEvent] = []
    seen_search = False
    before = 1 << 62
    while True:
        page = reader.sessions.events_before(session, before, LOOKBACK_PAGE, RUN_KINDS)
        for entry in page:
            if entry.seq < since:
                return found[::-1]
            if entry.event.kind == CALL_EVENT:
                if seen_search:
                    return found[::-1]
                continue
            if searched_query(entry.event) is not None:
                seen_search = True
                found.append(entry)
        if len(page) < LOOKBACK_PAGE:
            return found[::-1]
        before = page[-1].seq


def learned_from(reader: Reader, store: Store, session: SessionKey, tool_name: str) -> list[int]:
    """What a call of ``tool_name`` logged next in the session learns from, by the rule: the
    sequence numbers of its searches (none when this process searched nothing there yet)."""
    since = FIRST_SEARCHES.first(store, session)
    if since is None:
        return []
    return sorted(entry.seq for entry in credited_searches(current_run(reader, session, since), tool_name))


def call_params(
    reader: Reader, store: Store, session: SessionKey, tool_name: str, params: dict[str, Any]
) -> dict[str, Any]:
    """``params`` of a call to log, with the searches it learns from when it teaches."""
    if not teaches(Event(kind=CALL_EVENT, tool_name=tool_name, params=params)):
        return params
    return {**params, LEARNED_FROM: learned_from(reader, store, session, tool_name)}


def learn_from_calls(writer: Writer, analyzer: Analyzer, session: SessionKey, calls: Sequence[Event]) -> int:
    """Credit the calls just logged in a session (those that teach), when learning is on; how
    many credits were new."""
    taught = [call for call in calls if call.kind == CALL_EVENT and teaches(call)]
    if not taught:
        return 0
    if not writer.learning.state_for_crediting().enabled:
        return 0
    wanted = sorted({seq for call in taught for seq in _learned_from(call) or []})
    if not wanted:
        return 0
    window = writer.sessions.events_before(
        session, wanted[-1] + 1, wanted[-1] - wanted[0] + 1, (SEARCH_EVENT,)
    )
    searches = {entry.seq: entry for entry in window}
    credits: list[Credit] = []
    for call in taught:
        assert call.tool_name is not None
        chosen = [searches[seq] for seq in _learned_from(call) or [] if seq in searches]
        credits += [
            (session.identity, session.id, term, call.tool_name) for term in call_terms(chosen, analyzer)
        ]
    return writer.learning.add_credits(credits)


def credits_from_logs(reader: Reader, analyzer: Analyzer) -> set[Credit]:
    """Every credit of every session's log, by the rule."""
    found: set[Credit] = set()
    for session, logged in reader.sessions.events_of_kind(RUN_KINDS).items():
        found |= credits_of_log(session, logged, analyzer)
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


def destructive(tool: StoredTool | None) -> bool:
    """Whether a tool's MCP annotations say it may destroy (``destructiveHint: true``)."""
    annotations = (tool.mcp_meta or {}).get("annotations") if tool is not None else None
    return isinstance(annotations, dict) and annotations.get("destructiveHint") is True
