"""Stored sessions as a whole: their list, one session's record with its log, and deletion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from discovery._params import checked_id
from discovery._rules import SEARCH_TOOL_NAME
from discovery._sessions.learning import CALL_EVENT, FIRST_SEARCHES
from discovery.errors import SessionNotFound
from store import LoggedEvent, Store

CALL_START_EVENT = "tool_call_start"
"""Logged by a gateway before it forwards a call (``{"tool", "server", "call"}``); the call's
``tool_call`` entry, after the answer, names the same ``call``. A start with no such entry is a
call whose outcome was never logged: still running, or its gateway ended during it."""


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


def event_record(entry: LoggedEvent) -> dict[str, Any]:
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


def with_outcomes(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with each call start marked ``"outcome_logged"``: whether its call's outcome
    is in the log too."""
    ended = {
        (record.get("params") or {}).get("call")
        for record in records
        if record["kind"] == CALL_EVENT and (record.get("params") or {}).get("call") is not None
    }
    for record in records:
        if record["kind"] == CALL_START_EVENT:
            record["outcome_logged"] = (record.get("params") or {}).get("call") in ended
    return records


def session_summaries(store: Store) -> list[SessionSummary]:
    """Every stored session with its sizes and number of search calls."""
    with store.reading() as reader:
        counts = reader.sessions.search_counts()
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
            for state in reader.sessions.all()
        ]


def session_record(store: Store, session_id: str) -> dict[str, Any]:
    """``{"id", "settings", "active", "selected", "calls", "not_in_catalog"}``: the stored lists,
    every logged event, and the stored names the catalog no longer has."""
    session_id = checked_id(session_id, "session id")
    with store.reading() as reader:
        state = reader.sessions.load(session_id)
        if state is None:
            raise SessionNotFound(f"no session {session_id!r} in the store")
        logged = reader.sessions.events(session_id)
        listed = list(dict.fromkeys([*state.active, *state.selected]))
        known = reader.catalog.tools_by_names(listed)
    return {
        "id": state.id,
        "settings": state.settings,
        "active": state.active,
        "selected": state.selected,
        "calls": with_outcomes([event_record(entry) for entry in logged]),
        # Stored names whose tool has left the catalog: the live session skips them (contract §5).
        "not_in_catalog": [name for name in listed if name not in known and name != SEARCH_TOOL_NAME],
    }


def delete_session(store: Store, session_id: str) -> None:
    session_id = checked_id(session_id, "session id")
    with store.writing() as writer:
        if not writer.sessions.remove(session_id):
            raise SessionNotFound(f"no session {session_id!r} in the store")
        # What a session taught is read from its log: with the log, it goes.
        writer.learning.remove_credits(session_id=session_id)
    FIRST_SEARCHES.forget(store, session_id)  # a new session of that id starts its log anew
