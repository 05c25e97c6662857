"""Sessions, their active and selected lists, and the append-only event log.

``SessionReads`` and ``SessionWrites`` run on their unit's connection; every write runs inside
its write transaction. ``lock`` serializes callers of one session (SQLite: the transaction's
write lock; PostgreSQL: ``SELECT … FOR UPDATE`` on its row), so concurrent searches never lose a
selection or reuse a sequence number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import JSON, Connection, DateTime, delete, func, select

from store import _driver as driver
from store._logged_json import json_text, plain_json_text, same_logged
from store._schema import session_events_table, sessions_table
from store.errors import CorruptIndex


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
class _Codec:
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


_CODECS: dict[str, _Codec] = {}


def _codec(connection: Connection) -> _Codec:
    dialect = connection.dialect
    if dialect.name not in _CODECS:
        json_type = JSON().dialect_impl(dialect)
        stamp_type = DateTime(timezone=True).dialect_impl(dialect)
        load_json = json_type.result_processor(dialect, None) or _unchanged
        sqlite = dialect.name == "sqlite"
        json_bind = _json_bind_sqlite if sqlite else _json_bind_postgres
        insert = (
            f"INSERT INTO session_events (session_id, {_EVENT_COLUMNS}) "
            f"VALUES (:session_id, :seq, :kind, :tool_name, :call_id, {json_bind('params')}, :content, "
            f"{json_bind('details')}, :error, {json_bind('activated')}, :created_at)"
        )
        update = (
            f"UPDATE sessions SET active = {json_bind('active')}, selected = {json_bind('selected')}, "
            "event_count = :event_count, updated_at = :updated_at WHERE id = :id"
        )
        _CODECS[dialect.name] = _Codec(
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


_SESSION_COLUMNS = "s.id, s.settings, s.active, s.selected, s.event_count, s.created_at, s.updated_at"
_EVENT_COLUMNS = "seq, kind, tool_name, call_id, params, content, details, error, activated, created_at"
_GENERATION = "(SELECT generation FROM catalog_state WHERE id = 1)"
_ANSWERED = (
    "(SELECT MIN(e.seq) FROM session_events e "
    "WHERE e.session_id = s.id AND e.call_id = :call_id AND e.kind = 'search')"
)


_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.id = :id"
_SESSION_WITH_GENERATION = f"SELECT {_SESSION_COLUMNS}, {_GENERATION} FROM sessions s WHERE s.id = :id"
_SHARE_CATALOG = "SELECT generation FROM catalog_state WHERE id = 1 FOR SHARE"
_CALL_SQLITE = f"SELECT {_SESSION_COLUMNS}, {_ANSWERED}, {_GENERATION} FROM sessions s WHERE s.id = :id"
# PostgreSQL: a share lock on the catalog row (catalog writers wait, so the transaction sees one
# catalog) and the session row for update, in one round trip. Catalog writers lock only the
# catalog row, so no order of these two locks can close a cycle with them.
_LOCKED = "FROM catalog_state c, sessions s WHERE c.id = 1 AND s.id = :id FOR SHARE OF c FOR UPDATE OF s"
_LOCK_POSTGRES = f"SELECT {_SESSION_COLUMNS} {_LOCKED}"
_CALL_POSTGRES = f"SELECT {_SESSION_COLUMNS}, {_ANSWERED}, c.generation {_LOCKED}"
_EVENT = f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE session_id = :session_id AND seq = :seq"
_EVENTS = f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE session_id = :session_id ORDER BY seq"
_FIRST_OF_KIND = (
    f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE session_id = :session_id AND kind = :kind "
    "ORDER BY seq LIMIT 1"
)


def _state(row: Sequence[Any], codec: _Codec) -> SessionState:
    try:
        return SessionState(
            id=row[0],
            settings=_object(codec.load_json(row[1])),
            active=_names(codec.load_names(row[2])),
            selected=_names(codec.load_names(row[3])),
            event_count=int(row[4]),
            created_at=codec.load_stamp(row[5]),
            updated_at=codec.load_stamp(row[6]),
        )
    except (TypeError, ValueError):
        # Only a damaged row gets here: find out which column, for the message.
        raise CorruptIndex.found(f"session {row[0]!r}: {_unreadable(row, codec, _SESSION_READERS)}") from None


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    return value


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise TypeError("not a JSON array of names")
    return value


Reader = tuple[int, str, Callable[[_Codec, Any], Any]]

_SESSION_READERS: tuple[Reader, ...] = (
    (1, "settings", lambda codec, value: _object(codec.load_json(value))),
    (2, "active", lambda codec, value: _names(codec.load_names(value))),
    (3, "selected", lambda codec, value: _names(codec.load_names(value))),
    (4, "event_count", lambda codec, value: int(value)),
    (5, "created_at", lambda codec, value: codec.load_stamp(value)),
    (6, "updated_at", lambda codec, value: codec.load_stamp(value)),
)
_EVENT_READERS: tuple[Reader, ...] = (
    (4, "params", lambda codec, value: codec.load_json(value)),
    (6, "details", lambda codec, value: codec.load_json(value)),
    (8, "activated", lambda codec, value: _names(codec.load_json(value))),
    (9, "created_at", lambda codec, value: codec.load_stamp(value)),
)


def _unreadable(row: Sequence[Any], codec: _Codec, readers: Sequence[Reader]) -> str:
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


def _entry(session_id: str, seq: int, event: Event, stored_stamp: Any) -> dict[str, Any]:
    """The values of one ``session_events`` row, by column."""
    return {
        "session_id": session_id,
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


_COUNT_SQLITE = "SELECT event_count FROM sessions WHERE id = :id"
# Only the session row: its lock orders the sequence numbers; the catalog is not read.
_COUNT_POSTGRES = "SELECT event_count FROM sessions WHERE id = :id FOR UPDATE"
_COUNTED = "UPDATE sessions SET event_count = :event_count, updated_at = :updated_at WHERE id = :id"


def _logged(row: Sequence[Any], codec: _Codec, session_id: str) -> LoggedEvent:
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
        raise CorruptIndex.found(f"session {session_id!r}, log entry {seq}: {what}") from None


class SessionReads:
    """Sessions and their event logs."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def load(self, session_id: str) -> SessionState | None:
        rows = driver.fetch(self._connection, _SESSION, {"id": session_id})
        return _state(rows[0], _codec(self._connection)) if rows else None

    def load_with_generation(self, session_id: str) -> tuple[SessionState | None, int | None]:
        """The session and the catalog generation in one statement (a session read's hot path)."""
        rows = driver.fetch(self._connection, _SESSION_WITH_GENERATION, {"id": session_id})
        return (None, None) if not rows else (_state(rows[0], _codec(self._connection)), int(rows[0][7]))

    def all(self, *, readable_only: bool = False) -> list[SessionState]:
        """Every session, oldest first; ``readable_only`` skips those whose row cannot be read
        (``unreadable_sessions`` names them) instead of raising ``CorruptIndex``."""
        rows = driver.fetch(
            self._connection, f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.created_at, s.id"
        )
        codec = _codec(self._connection)
        states = []
        for row in rows:
            try:
                states.append(_state(row, codec))
            except CorruptIndex:
                if not readable_only:
                    raise
        return states

    def events(self, session_id: str) -> list[LoggedEvent]:
        rows = driver.fetch(self._connection, _EVENTS, {"session_id": session_id})
        codec = _codec(self._connection)
        return [_logged(row, codec, session_id) for row in rows]

    def first_of_kind(self, session_id: str, kind: str) -> LoggedEvent | None:
        """The session's first logged event of ``kind`` (read along the session's own log only)."""
        rows = driver.fetch(self._connection, _FIRST_OF_KIND, {"session_id": session_id, "kind": kind})
        return _logged(rows[0], _codec(self._connection), session_id) if rows else None

    def events_before(self, session_id: str, seq: int, count: int, kinds: Sequence[str]) -> list[LoggedEvent]:
        """Up to ``count`` events of ``kinds`` logged before ``seq``, newest first."""
        kinds_in, params = driver.in_list("kind", kinds)
        rows = driver.fetch(
            self._connection,
            f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE session_id = :session_id AND seq < :seq "
            f"AND kind IN {kinds_in} ORDER BY seq DESC LIMIT :count",
            {"session_id": session_id, "seq": seq, "count": count, **params},
        )
        codec = _codec(self._connection)
        return [_logged(row, codec, session_id) for row in rows]

    def events_of_kind(self, kinds: Sequence[str]) -> dict[str, list[LoggedEvent]]:
        """Every session's events of ``kinds``, in order, by session."""
        kinds_in, params = driver.in_list("kind", kinds)
        rows = driver.fetch(
            self._connection,
            f"SELECT session_id, {_EVENT_COLUMNS} FROM session_events WHERE kind IN {kinds_in} "
            "ORDER BY session_id, seq",
            params,
        )
        codec = _codec(self._connection)
        found: dict[str, list[LoggedEvent]] = {}
        for session_id, *row in rows:
            found.setdefault(session_id, []).append(_logged(row, codec, session_id))
        return found

    def search_counts(self) -> dict[str, int]:
        rows = self._connection.execute(
            select(session_events_table.c.session_id, func.count())
            .where(session_events_table.c.kind == "search")
            .group_by(session_events_table.c.session_id)
        )
        return {session_id: int(count) for session_id, count in rows}

    def stored_settings(self) -> list[tuple[str, Any]]:
        """Each session's id and its settings as decoded, ``None`` where they are not JSON."""
        codec = _codec(self._connection)
        found = []
        for session_id, settings in driver.fetch(
            self._connection, "SELECT id, settings FROM sessions ORDER BY id"
        ):
            try:
                found.append((session_id, codec.load_json(settings)))
            except ValueError:
                found.append((session_id, None))
        return found

    def unreadable(self) -> list[str]:
        """Each stored session row or log entry that cannot be read back, in words (for ``verify``)."""
        codec = _codec(self._connection)
        found = []
        for row in driver.fetch(self._connection, f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.id"):
            try:
                _state(row, codec)
            except CorruptIndex as exc:
                found.append(exc.what)
        entries = driver.fetch(
            self._connection,
            f"SELECT session_id, {_EVENT_COLUMNS} FROM session_events ORDER BY session_id, seq",
        )
        for entry in entries:
            try:
                _logged(entry[1:], codec, entry[0])
            except CorruptIndex as exc:
                found.append(exc.what)
        return found


class SessionWrites(SessionReads):
    """Sessions and their logs, written: every write runs inside the unit's transaction."""

    def lock(self, session_id: str) -> SessionState | None:
        """Load a session for update; also holds the catalog steady until the transaction ends."""
        if self._connection.dialect.name == "sqlite":  # the transaction's write lock covers both
            return self.load(session_id)
        rows = driver.fetch(self._connection, _LOCK_POSTGRES, {"id": session_id})
        if not rows:  # a session about to be made still reads the catalog steady
            driver.fetch(self._connection, _SHARE_CATALOG)
            return None
        return _state(rows[0], _codec(self._connection))

    def lock_for_call(
        self, session_id: str, call_id: str
    ) -> tuple[SessionState | None, int, LoggedEvent | None]:
        """``lock`` for a search call: also the catalog generation, and the logged answer when the
        session already answered ``call_id``, in one statement (every search call starts here).
        The generation is 0 when there is no such session."""
        sqlite = self._connection.dialect.name == "sqlite"
        rows = driver.fetch(
            self._connection,
            _CALL_SQLITE if sqlite else _CALL_POSTGRES,
            {"call_id": call_id or None, "id": session_id},
        )
        if not rows:
            return None, 0, None
        generation = int(rows[0][8])
        codec = _codec(self._connection)
        answered = rows[0][7]
        logged = None
        if answered is not None:
            logged = _logged(
                driver.fetch(self._connection, _EVENT, {"session_id": session_id, "seq": answered})[0],
                codec,
                session_id,
            )
        return _state(rows[0], codec), generation, logged

    def create(self, session_id: str, settings: dict[str, Any], active: list[str]) -> SessionState | None:
        """Insert a new session and its ``create`` event (which carries the initial active list).

        ``None`` when the id is taken: on PostgreSQL two callers can both find no session and insert
        it at once; the second waits for the first to commit, then inserts nothing."""
        codec = _codec(self._connection)
        stamp = now()
        stored = codec.store_stamp(stamp)
        json = codec.json_bind
        inserted = driver.execute(
            self._connection,
            "INSERT INTO sessions (id, settings, active, selected, event_count, created_at, updated_at) "
            f"VALUES (:id, {json('settings')}, {json('active')}, {json('selected')}, 0, "
            ":created_at, :created_at) "
            "ON CONFLICT (id) DO NOTHING",
            {
                "id": session_id,
                "settings": json_text(settings),
                "active": json_text(active),
                "selected": "[]",
                "created_at": stored,
            },
        )
        if inserted == 0:
            return None
        state = SessionState(session_id, settings, active, [], 0, stamp, stamp)
        return self.record(state, Event(kind="create", params={"active": active}), active, [])

    def record(
        self,
        state: SessionState,
        event: Event,
        active: list[str],
        selected: list[str],
    ) -> SessionState:
        """Append ``event`` to the log and store the lists it produced, in the same transaction."""
        codec = _codec(self._connection)
        stamp = now()
        stored = codec.store_stamp(stamp)
        seq = state.event_count + 1
        entry = _entry(state.id, seq, event, stored)
        lists = {
            "active": plain_json_text(active),
            "selected": plain_json_text(selected),
            "event_count": seq,
            "updated_at": stored,
            "id": state.id,
        }
        if len(codec.record) == 1:
            driver.execute(self._connection, codec.record[0], {**entry, **lists})
        else:
            insert, update = codec.record
            driver.execute_each(self._connection, [(insert, entry), (update, lists)])
        return SessionState(state.id, state.settings, active, selected, seq, state.created_at, stamp)

    def append(self, session_id: str, *logged: Event) -> bool:
        """Log ``logged``, events that change neither list (tool calls a gateway forwarded, the
        digests it pinned), in order; ``False`` when there is no such session.

        The lists stay as stored, so only the event count and the time move: the row's lists are
        neither read nor written again."""
        sqlite = self._connection.dialect.name == "sqlite"
        rows = driver.fetch(
            self._connection, _COUNT_SQLITE if sqlite else _COUNT_POSTGRES, {"id": session_id}
        )
        if not rows:
            return False
        if not logged:
            return True
        codec = _codec(self._connection)
        stored = codec.store_stamp(now())
        count = int(rows[0][0])
        statements: list[tuple[str, driver.Params]] = [
            (codec.insert, _entry(session_id, count + offset, event, stored))
            for offset, event in enumerate(logged, start=1)
        ]
        statements.append(
            (_COUNTED, {"event_count": count + len(logged), "updated_at": stored, "id": session_id})
        )
        driver.execute_each(self._connection, statements)
        return True

    def remove(self, session_id: str) -> bool:
        self._connection.execute(
            delete(session_events_table).where(session_events_table.c.session_id == session_id)
        )
        return bool(
            self._connection.execute(delete(sessions_table).where(sessions_table.c.id == session_id)).rowcount
        )

    def flag_calls(self, tool_names: Sequence[str] | None, flag: str) -> int:
        """Set ``flag`` to true in the params of every logged ``tool_call`` of ``tool_names`` (all
        when ``None``); how many calls changed."""
        codec = _codec(self._connection)
        statement = "SELECT session_id, seq, params FROM session_events WHERE kind = 'tool_call'"
        params: dict[str, str] = {}
        if tool_names is not None:
            names, params = driver.in_list("tool_name", tool_names)
            statement += f" AND tool_name IN {names}"
        changed = []
        for session_id, seq, stored in driver.fetch(self._connection, statement, params):
            value = codec.load_json(stored)
            value = dict(value) if isinstance(value, dict) else {}
            if value.get(flag) is True:
                continue
            value[flag] = True
            changed.append((plain_json_text(value), session_id, seq))
        driver.execute_many(
            self._connection,
            f"UPDATE session_events SET params = {codec.json_bind('params')} "
            "WHERE session_id = :session_id AND seq = :seq",
            changed,
        )
        return len(changed)
