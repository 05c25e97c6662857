"""The rows of sessions and their event logs, and how they travel through each backend's driver.

A session row reads as a ``SessionState``, a log entry as a ``LoggedEvent``; ``codec_of`` gives a
dialect's processors (SQLAlchemy's own for JSON and time stamps) and the statements that write
an entry. A damaged row is a ``CorruptIndex`` naming the column that cannot be read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
from sqlalchemy import JSON, Connection, DateTime

from store._logged_json import plain_json_text, same_logged
from store.errors import CorruptIndex

EVENT_COLUMNS = "seq, kind, tool_name, call_id, params, content, details, error, activated, created_at"
"""The columns of a log entry, in the order ``logged_event`` reads them."""


class SessionKey(NamedTuple):
    """What a stored session is found by: its identity and its id, which is unique only within
    that identity (two identities' sessions may share an id and never meet)."""

    identity: str
    id: str


@dataclass(frozen=True, slots=True)
class SessionState:
    id: str
    identity: str
    settings: dict[str, Any]
    active: list[str]
    selected: list[str]
    event_count: int
    created_at: datetime
    updated_at: datetime
    opened_by: str | None = None
    """Who made the session: the command and host name (``None`` for sessions made before it
    was stored)."""

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.identity, self.id)


@dataclass(frozen=True, slots=True)
class Event:
    """One logged change or call; ``params`` holds what replay needs (``discovery._rules.replay``)."""

    kind: str
    tool_name: str | None = None
    call_id: str | None = None
    params: dict[str, Any] | None = None
    content: str | None = None
    details: Mapping[str, Any] | None = None
    error: str | None = None
    activated: tuple[str, ...] = ()

    def same_params(self, params: Any) -> bool:
        """Whether ``params``, logged now, would read back as this logged event's ``params``:
        both are compared in their logged form (``store._logged_json.same_logged``)."""
        return same_logged(self.params, params)


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    seq: int
    event: Event
    created_at: datetime


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Codec:
    """How session rows travel through one backend's driver.

    Session rows and events are read and written on every search call, so these statements go
    to the driver directly (``store._driver``); the column types' own processors keep the stored
    form exactly what SQLAlchemy reads and writes elsewhere."""

    json_bind: Callable[[str], str]
    """The bind of a JSON value: PostgreSQL takes the text as ``json`` only when told."""
    load_json: Callable[[Any], Any]
    load_names: Callable[[Any], Any]
    record: tuple[str, ...]
    """The statements of ``record``: the log entry's insert, then the lists' update; PostgreSQL
    runs both as one statement (one round trip)."""
    store_stamp: Callable[[datetime], Any]
    load_stamp: Callable[[Any], datetime]
    insert: str
    """The log entry's insert alone."""


_CODECS: dict[str, Codec] = {}


def codec_of(connection: Connection) -> Codec:
    dialect = connection.dialect
    if dialect.name not in _CODECS:
        json_type = JSON().dialect_impl(dialect)
        stamp_type = DateTime(timezone=True).dialect_impl(dialect)
        load_json = json_type.result_processor(dialect, None) or _unchanged
        sqlite = dialect.name == "sqlite"
        json_bind = _json_bind_sqlite if sqlite else _json_bind_postgres
        insert = (
            f"INSERT INTO session_events (identity, session_id, {EVENT_COLUMNS}) "
            "VALUES (:identity, :session_id, :seq, :kind, :tool_name, :call_id, "
            f"{json_bind('params')}, :content, "
            f"{json_bind('details')}, :error, {json_bind('activated')}, :created_at)"
        )
        update = (
            f"UPDATE sessions SET active = {json_bind('active')}, selected = {json_bind('selected')}, "
            "event_count = :event_count, updated_at = :updated_at WHERE identity = :identity AND id = :id"
        )
        _CODECS[dialect.name] = Codec(
            json_bind=json_bind,
            load_json=load_json,
            # SQLite hands back the text of the active and selected lists on every call; they
            # hold only names, which ``orjson`` reads as the standard decoder does, in half the time.
            load_names=_names_reader(load_json) if sqlite else load_json,
            record=(insert, update) if sqlite else (f"WITH logged AS ({insert}) {update}",),
            store_stamp=stamp_type.bind_processor(dialect) or _unchanged,
            load_stamp=_in_utc(stamp_type.result_processor(dialect, None) or _unchanged),
            insert=insert,
        )
    return _CODECS[dialect.name]


def _unchanged(value: Any) -> Any:
    return value


def _json_bind_sqlite(name: str) -> str:
    return f":{name}"  # SQLite stores JSON text as it is


def _json_bind_postgres(name: str) -> str:
    return f"CAST(:{name} AS JSON)"


def _in_utc(load: Callable[[Any], Any]) -> Callable[[Any], datetime]:
    """``load``, giving times in UTC on every backend.

    Times are written in UTC. SQLite keeps them as text without an offset and gives them back
    naive; PostgreSQL gives them in the connection's time zone. Either way a time reads the same.
    """

    def load_in_utc(value: Any) -> datetime:
        stamp: datetime = load(value)
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)

    return load_in_utc


def _names_reader(load_json: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def load_names(text: Any) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # not what the log writes; the standard decoder decides
            return load_json(text)

    return load_names


def state_of(row: Sequence[Any], codec: Codec) -> SessionState:
    try:
        return SessionState(
            id=row[0],
            identity=row[1],
            settings=_object(codec.load_json(row[2])),
            active=_names(codec.load_names(row[3])),
            selected=_names(codec.load_names(row[4])),
            event_count=int(row[5]),
            created_at=codec.load_stamp(row[6]),
            updated_at=codec.load_stamp(row[7]),
            opened_by=row[8],
        )
    except (TypeError, ValueError):
        # Only a damaged row gets here: find out which column, for the message.
        what = _unreadable(row, codec, _SESSION_READERS)
        raise CorruptIndex.found(f"session {row[0]!r} of identity {row[1]!r}: {what}") from None


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    return value


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise TypeError("not a JSON array of names")
    return value


Reader = tuple[int, str, Callable[[Codec, Any], Any]]

_SESSION_READERS: tuple[Reader, ...] = (
    (2, "settings", lambda codec, value: _object(codec.load_json(value))),
    (3, "active", lambda codec, value: _names(codec.load_names(value))),
    (4, "selected", lambda codec, value: _names(codec.load_names(value))),
    (5, "event_count", lambda codec, value: int(value)),
    (6, "created_at", lambda codec, value: codec.load_stamp(value)),
    (7, "updated_at", lambda codec, value: codec.load_stamp(value)),
)
_EVENT_READERS: tuple[Reader, ...] = (
    (4, "params", lambda codec, value: codec.load_json(value)),
    (6, "details", lambda codec, value: codec.load_json(value)),
    (8, "activated", lambda codec, value: _names(codec.load_json(value))),
    (9, "created_at", lambda codec, value: codec.load_stamp(value)),
)


def _unreadable(row: Sequence[Any], codec: Codec, readers: Sequence[Reader]) -> str:
    """Which of ``row``'s columns cannot be read, and why."""
    for at, column, read in readers:
        try:
            read(codec, row[at])
        except (TypeError, ValueError) as exc:
            reason = "not JSON" if isinstance(exc, ValueError) and "JSON" in type(exc).__name__ else exc
            return f"its {column} cannot be read ({_short(reason)})"
    return "a column cannot be read"


def _short(reason: object) -> str:
    text = str(reason)
    return text if len(text) <= 80 else text[:77] + "..."


def log_entry(key: SessionKey, seq: int, event: Event, stored_stamp: Any) -> dict[str, Any]:
    """The values of one ``session_events`` row, by column."""
    return {
        "identity": key.identity,
        "session_id": key.id,
        "seq": seq,
        "kind": event.kind,
        "tool_name": event.tool_name,
        "call_id": event.call_id,
        "params": plain_json_text(event.params),
        "content": event.content,
        "details": plain_json_text(event.details),
        "error": event.error,
        "activated": plain_json_text(list(event.activated)),
        "created_at": stored_stamp,
    }


def logged_event(row: Sequence[Any], codec: Codec, key: SessionKey) -> LoggedEvent:
    seq, kind, tool_name, call_id, params, content, details, error, activated, created_at = row
    try:
        return LoggedEvent(
            seq=int(seq),
            event=Event(
                kind=kind,
                tool_name=tool_name,
                call_id=call_id,
                params=codec.load_json(params),
                content=content,
                details=codec.load_json(details),
                error=error,
                activated=tuple(_names(codec.load_json(activated))),
            ),
            created_at=codec.load_stamp(created_at),
        )
    except (TypeError, ValueError):
        what = _unreadable(row, codec, _EVENT_READERS)
        raise CorruptIndex.found(
            f"session {key.id!r} of identity {key.identity!r}, log entry {seq}: {what}"
        ) from None
