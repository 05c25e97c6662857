"""Stored sessions as a whole: their list, one session's record with its log, and deletion."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from discovery._params import checked_id, checked_identity, stored_analyzer_named
from discovery._rules import LOCAL_IDENTITY, SEARCH_TOOL_NAME
from discovery._sessions.host_files import selection_from_file
from discovery._sessions.learning import CALL_EVENT, FIRST_SEARCHES, relearn_if_enabled
from discovery._sessions.session import Session, no_session
from store import LoggedEvent, Reader, SessionKey, Store, Writer

if TYPE_CHECKING:
    from discovery._ranking.ranker import Ranker

CALL_START_EVENT = "tool_call_start"
"""Logged by a gateway before it forwards a call (``{"tool", "server", "call"}``); the call's
``tool_call`` entry, after the answer, names the same ``call``. A start with no such entry is a
call whose outcome was never logged: still running, or its gateway ended during it."""


@dataclass(frozen=True, slots=True)
class RestoredSelection:
    """What ``import_session_file`` restored; ``found`` is false when the file had no selection."""

    session_id: str
    identity: str
    found: bool
    restored: list[str]
    missing: list[str]


def import_session_file(
    store: Store,
    ranker: Ranker,
    path: Path,
    session_id: str,
    identity: str,
    settings: dict[str, Any] | None,
) -> RestoredSelection:
    """The selection in force in a host's JSONL session file restored into ``identity``'s session
    ``session_id`` (created with ``settings``, or resumed); names the catalog does not have are
    reported and skipped, as on resume. An unreadable file creates no session."""
    names = selection_from_file(path)
    session = Session.open(store, ranker, session_id, settings, identity)
    restored, missing = session.restore_selection(names or [], source=str(path))
    return RestoredSelection(
        session_id, session.identity, found=names is not None, restored=restored, missing=missing
    )


@dataclass(frozen=True, slots=True)
class SessionSummary:
    id: str
    identity: str
    settings: dict[str, Any]
    active: int
    selected: int
    searches: int
    """Search calls logged (``search_tool_bm25``)."""
    calls: int
    """Tool calls logged (a gateway's forwarded calls, a host's ``record_call``)."""
    created_at: str
    updated_at: str
    opened_by: str | None
    """The command and host that made the session (``None``: made before it was recorded)."""


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
    """Every stored session of every identity with its sizes and numbers of searches and calls."""
    with store.reading() as reader:
        counts = reader.sessions.kind_counts()
        return [
            SessionSummary(
                id=state.id,
                identity=state.identity,
                settings=state.settings,
                active=len(state.active),
                selected=len(state.selected),
                searches=counts.get(state.key, {}).get("search", 0),
                calls=counts.get(state.key, {}).get(CALL_EVENT, 0),
                created_at=state.created_at.isoformat(),
                updated_at=state.updated_at.isoformat(),
                opened_by=state.opened_by,
            )
            for state in reader.sessions.all()
        ]


def session_key(session_id: str, identity: str = LOCAL_IDENTITY) -> SessionKey:
    """The key of ``identity``'s session ``session_id``, both checked."""
    return SessionKey(checked_identity(identity), checked_id(session_id, "session id"))


def session_record(store: Store, session_id: str, identity: str = LOCAL_IDENTITY) -> dict[str, Any]:
    """``{"id", "identity", "settings", "active", "selected", "calls", "not_in_catalog",
    "opened_by"}``: the stored lists, every logged event, and the stored names the catalog no
    longer has."""
    key = session_key(session_id, identity)
    with store.reading() as reader:
        state = reader.sessions.load(key)
        if state is None:
            raise no_session(key)
        logged = reader.sessions.events(key)
        listed = list(dict.fromkeys([*state.active, *state.selected]))
        known = reader.catalog.tools_by_names(listed)
    return {
        "id": state.id,
        "identity": state.identity,
        "opened_by": state.opened_by,
        "settings": state.settings,
        "active": state.active,
        "selected": state.selected,
        "calls": with_outcomes([event_record(entry) for entry in logged]),
        # Stored names whose tool has left the catalog: the live session skips them (contract §5).
        "not_in_catalog": [name for name in listed if name not in known and name != SEARCH_TOOL_NAME],
    }


def delete_session(store: Store, session_id: str, identity: str = LOCAL_IDENTITY) -> None:
    key = session_key(session_id, identity)
    if not _deleted(store, lambda _: [key]):
        raise no_session(key)


def prune_sessions(store: Store, idle_since: datetime, *, dry_run: bool = False) -> list[SessionKey]:
    """Delete, as ``delete_session`` does, every identity's sessions whose last change is before
    ``idle_since``, in one transaction; the keys of those deleted (or, ``dry_run``, that would be)."""

    def idle(reader: Reader) -> list[SessionKey]:
        return [state.key for state in reader.sessions.all() if state.updated_at < idle_since]

    if dry_run:
        with store.reading() as reader:
            return idle(reader)
    return _deleted(store, idle)


def _deleted(store: Store, chosen: Callable[[Writer], list[SessionKey]]) -> list[SessionKey]:
    """Delete the sessions ``chosen`` picks (in the same transaction) that exist; those deleted."""
    with store.writing() as writer:
        deleted = [key for key in chosen(writer) if writer.sessions.remove(key)]
        for key in deleted:
            # What a session taught is read from its log: with the log, it goes.
            writer.learning.remove_credits(session=(key.identity, key.id))
    for key in deleted:
        FIRST_SEARCHES.forget(store, key)  # a new session of that id starts its log anew
    return deleted


def adopt_identities(store: Store, identities: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """Give each identity's sessions to the identity it maps to (a gateway qualifying its
    identities by its realm); per identity that had any, how many moved and how many stayed
    because the new identity already holds a session of the same id."""
    for identity in (*identities, *identities.values()):
        checked_identity(identity)
    with store.writing() as writer:
        moved = writer.sessions.adopt(identities)
        if any(count for count, _ in moved.values()):
            # What the moved sessions taught is their new identity's: counted again from the logs.
            relearn_if_enabled(writer, stored_analyzer_named(writer.catalog.analyzer()))
        return moved
