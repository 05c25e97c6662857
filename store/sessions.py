"""Sessions, their active and selected lists, and the append-only event log.

Every function runs inside the caller's write transaction. ``lock`` serializes callers of one
session (SQLite: the transaction's write lock; PostgreSQL: ``SELECT … FOR UPDATE`` on its row),
so concurrent searches never lose a selection or reuse a sequence number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from store.schema import CatalogState, Session, SessionEvent


@dataclass(frozen=True, slots=True)
class SessionState:
    id: str
    settings: dict[str, Any]
    active: list[str]
    selected: list[str]
    event_count: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Event:
    """One logged change or call; ``params`` holds what replay needs (see ``SessionEvent``)."""

    kind: str
    tool_name: str | None = None
    call_id: str | None = None
    params: dict[str, Any] | None = None
    content: str | None = None
    details: dict[str, Any] | None = None
    error: str | None = None
    activated: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    seq: int
    event: Event
    created_at: datetime


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: Any) -> Any:
    """A JSON value every backend accepts: NUL and lone surrogates become U+FFFD, non-finite
    numbers and other non-JSON values their ``repr``."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {storable(str(key)): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return storable(repr(value))


def now() -> datetime:
    return datetime.now(UTC)


def _state(row: Any) -> SessionState:
    return SessionState(
        id=row.id,
        settings=dict(row.settings),
        active=list(row.active),
        selected=list(row.selected),
        event_count=int(row.event_count),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


_COLUMNS = (
    Session.id,
    Session.settings,
    Session.active,
    Session.selected,
    Session.event_count,
    Session.created_at,
    Session.updated_at,
)


_LOAD = select(*_COLUMNS).where(Session.id == bindparam("session_id"))
"""Built once: every session call starts with it."""


_LOAD_WITH_GENERATION = select(
    *_COLUMNS,
    select(CatalogState.generation).where(CatalogState.id == 1).scalar_subquery().label("generation"),
).where(Session.id == bindparam("session_id"))


def load_with_generation(connection: Connection, session_id: str) -> tuple[SessionState | None, int | None]:
    """The session and the catalog generation in one statement (a session read's hot path)."""
    row = connection.execute(_LOAD_WITH_GENERATION, {"session_id": session_id}).one_or_none()
    return (None, None) if row is None else (_state(row), int(row.generation))


def load(connection: Connection, session_id: str) -> SessionState | None:
    row = connection.execute(_LOAD, {"session_id": session_id}).one_or_none()
    return None if row is None else _state(row)


def lock(connection: Connection, session_id: str) -> SessionState | None:
    """Load a session for update; also holds the catalog steady until the transaction ends."""
    if connection.dialect.name != "sqlite":
        # A share lock on the catalog row: catalog writers wait, so the search sees one catalog.
        connection.execute(_SHARE_CATALOG)
        row = connection.execute(
            select(*_COLUMNS).where(Session.id == session_id).with_for_update()
        ).one_or_none()
        return None if row is None else _state(row)
    return load(connection, session_id)


_SHARE_CATALOG = select(CatalogState.generation).where(CatalogState.id == 1).with_for_update(read=True)


def create(
    connection: Connection, session_id: str, settings: dict[str, Any], active: list[str]
) -> SessionState:
    """Insert a new session and its ``create`` event (which carries the initial active list)."""
    stamp = now()
    connection.execute(
        insert(Session).values(
            id=session_id,
            settings=settings,
            active=active,
            selected=[],
            event_count=0,
            created_at=stamp,
            updated_at=stamp,
        )
    )
    state = SessionState(session_id, settings, active, [], 0, stamp, stamp)
    return record(connection, state, Event(kind="create", params={"active": active}), active, [])


# Built once, with every value a parameter: a search call writes both, and a statement built per
# call (``.values(...)`` with literals) costs more to compile and cache-key than to run.
_INSERT_EVENT = insert(SessionEvent)
_UPDATE_LISTS = (
    update(Session)
    .where(Session.id == bindparam("key"))
    .values(
        active=bindparam("active"),
        selected=bindparam("selected"),
        event_count=bindparam("event_count"),
        updated_at=bindparam("updated_at"),
    )
)
_ANSWERED = (
    select(func.min(SessionEvent.seq))
    .where(
        SessionEvent.session_id == Session.id,
        SessionEvent.call_id == bindparam("call_id"),
        SessionEvent.kind == "search",
    )
    .scalar_subquery()
    .label("answered")
)
_EVENT = select(*SessionEvent.__table__.c).where(
    SessionEvent.session_id == bindparam("session_id"), SessionEvent.seq == bindparam("seq")
)
_LOCK_FOR_CALL_SQLITE = select(
    *_COLUMNS,
    select(CatalogState.generation).where(CatalogState.id == 1).scalar_subquery().label("generation"),
    _ANSWERED,
).where(Session.id == bindparam("session_id"))
_LOCK_FOR_CALL = (
    select(*_COLUMNS, _ANSWERED).where(Session.id == bindparam("session_id")).with_for_update(of=Session)
)


def record(
    connection: Connection,
    state: SessionState,
    event: Event,
    active: list[str],
    selected: list[str],
) -> SessionState:
    """Append ``event`` to the log and store the lists it produced, in the same transaction."""
    stamp = now()
    seq = state.event_count + 1
    connection.execute(
        _INSERT_EVENT,
        {
            "session_id": state.id,
            "seq": seq,
            "kind": event.kind,
            "tool_name": event.tool_name,
            "call_id": event.call_id,
            "params": storable(event.params),
            "content": event.content,
            "details": storable(event.details),
            "error": event.error,
            "activated": list(event.activated),
            "created_at": stamp,
        },
    )
    connection.execute(
        _UPDATE_LISTS,
        {"key": state.id, "active": active, "selected": selected, "event_count": seq, "updated_at": stamp},
    )
    return SessionState(state.id, state.settings, active, selected, seq, state.created_at, stamp)


def lock_for_call(
    connection: Connection, session_id: str, call_id: str
) -> tuple[SessionState | None, int, LoggedEvent | None]:
    """``lock`` for a search call: also the catalog generation, and the logged answer when the
    session already answered ``call_id`` — in one statement on SQLite, two on PostgreSQL (the
    catalog share lock, then the session row), since every search call starts here."""
    params = {"session_id": session_id, "call_id": call_id or None}
    if connection.dialect.name == "sqlite":
        row = connection.execute(_LOCK_FOR_CALL_SQLITE, params).one_or_none()
        if row is None:
            return None, 0, None
        generation = int(row.generation)
    else:
        generation = int(connection.execute(_SHARE_CATALOG).scalar_one())
        row = connection.execute(_LOCK_FOR_CALL, params).one_or_none()
        if row is None:
            return None, generation, None
    answered = None
    if row.answered is not None:
        logged = connection.execute(_EVENT, {"session_id": session_id, "seq": row.answered}).one()
        answered = _logged(logged)
    return _state(row), generation, answered


def events(connection: Connection, session_id: str) -> list[LoggedEvent]:
    rows = connection.execute(
        select(*SessionEvent.__table__.c)
        .where(SessionEvent.session_id == session_id)
        .order_by(SessionEvent.seq)
    )
    return [_logged(row) for row in rows]


def _logged(row: Any) -> LoggedEvent:
    return LoggedEvent(
        seq=row.seq,
        event=Event(
            kind=row.kind,
            tool_name=row.tool_name,
            call_id=row.call_id,
            params=row.params,
            content=row.content,
            details=row.details,
            error=row.error,
            activated=tuple(row.activated),
        ),
        created_at=row.created_at,
    )


def all_sessions(connection: Connection) -> list[SessionState]:
    rows = connection.execute(select(*_COLUMNS).order_by(Session.created_at, Session.id))
    return [_state(row) for row in rows]


def search_counts(connection: Connection) -> dict[str, int]:
    rows = connection.execute(
        select(SessionEvent.session_id, func.count())
        .where(SessionEvent.kind == "search")
        .group_by(SessionEvent.session_id)
    )
    return {session_id: int(count) for session_id, count in rows}


def remove(connection: Connection, session_id: str) -> bool:
    connection.execute(delete(SessionEvent).where(SessionEvent.session_id == session_id))
    return bool(connection.execute(delete(Session).where(Session.id == session_id)).rowcount)


def replay(logged: list[LoggedEvent]) -> tuple[list[str], list[str]]:
    """The ``(active, selected)`` lists that a session's log produces, event by event."""
    active: list[str] = []
    selected: list[str] = []
    for entry in logged:
        event, params = entry.event, entry.event.params or {}
        if event.kind in ("create", "reset"):
            active, selected = list(params["active"]), []
        elif event.kind == "search":
            selected += [name for name in event.activated if name not in selected]
            active += [name for name in event.activated if name not in active]
        elif event.kind == "set_active":
            active = list(params["active"])
            selected = [name for name in selected if name in active]
        elif event.kind == "restore":
            active, selected = list(params["active"]), list(params["selected"])
    return active, selected
