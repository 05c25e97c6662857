"""Stored sessions as a whole: their list, one session's record with its log, and deletion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from discovery.params import checked_id
from discovery.ranking.corpus import SEARCH_TOOL_NAME
from store import SessionNotFound
from store import learning as stored_learning
from store import sessions as stored_sessions
from store.engine import read_transaction, write_transaction
from store.reads import tools_by_names


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


def event_record(entry: stored_sessions.LoggedEvent) -> dict[str, Any]:
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


def session_summaries(engine: Engine) -> list[SessionSummary]:
    """Every stored session with its sizes and number of search calls."""
    with read_transaction(engine) as connection:
        counts = stored_sessions.search_counts(connection)
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
            for state in stored_sessions.all_sessions(connection)
        ]


def session_record(engine: Engine, session_id: str) -> dict[str, Any]:
    """``{"id", "settings", "active", "selected", "calls", "not_in_catalog"}``: the stored lists,
    every logged event, and the stored names the catalog no longer has."""
    session_id = checked_id(session_id, "session id")
    with read_transaction(engine) as connection:
        state = stored_sessions.load(connection, session_id)
        if state is None:
            raise SessionNotFound(f"no session {session_id!r} in the store")
        logged = stored_sessions.events(connection, session_id)
        listed = list(dict.fromkeys([*state.active, *state.selected]))
        known = tools_by_names(connection, listed)
    return {
        "id": state.id,
        "settings": state.settings,
        "active": state.active,
        "selected": state.selected,
        "calls": [event_record(entry) for entry in logged],
        # Stored names whose tool has left the catalog: the live session skips them (contract §5).
        "not_in_catalog": [name for name in listed if name not in known and name != SEARCH_TOOL_NAME],
    }


def delete_session(engine: Engine, session_id: str) -> None:
    session_id = checked_id(session_id, "session id")
    with write_transaction(engine) as connection:
        if not stored_sessions.remove(connection, session_id):
            raise SessionNotFound(f"no session {session_id!r} in the store")
        # What a session taught is read from its log: with the log, it goes.
        stored_learning.remove_credits(connection, session_id=session_id)
