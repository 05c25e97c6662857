"""Sessions, their active and selected lists, and the append-only event log.

``SessionReads`` and ``SessionWrites`` run on their unit's connection; every write runs inside
its write transaction. ``lock`` serializes callers of one session (SQLite: the transaction's
write lock; PostgreSQL: ``SELECT … FOR UPDATE`` on its row), so concurrent searches never lose a
selection or reuse a sequence number.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
from sqlalchemy import JSON, Connection, DateTime

from store import _driver as driver
from store._logged_json import json_text, plain_json_text, same_logged
from store.errors import CorruptIndex


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
            f"INSERT INTO session_events (identity, session_id, {_EVENT_COLUMNS}) "
            "VALUES (:identity, :session_id, :seq, :kind, :tool_name, :call_id, "
            f"{json_bind('params')}, :content, "
            f"{json_bind('details')}, :error, {json_bind('activated')}, :created_at)"
        )
        update = (
            f"UPDATE sessions SET active = {json_bind('active')}, selected = {json_bind('selected')}, "
            "event_count = :event_count, updated_at = :updated_at WHERE identity = :identity AND id = :id"
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


_SESSION_COLUMNS = (
    "s.id, s.identity, s.settings, s.active, s.selected, s.event_count, s.created_at, s.updated_at, "
    "s.opened_by"
)
_SESSION_COLUMN_COUNT = 9
_ONE_SESSION = "s.identity = :identity AND s.id = :id"
_ONE_LOG = "identity = :identity AND session_id = :session_id"
_EVENT_COLUMNS = "seq, kind, tool_name, call_id, params, content, details, error, activated, created_at"
_GENERATION = "(SELECT generation FROM catalog_state WHERE id = 1)"
_ANSWERED = (
    "(SELECT MIN(e.seq) FROM session_events e "
    "WHERE e.identity = s.identity AND e.session_id = s.id AND e.call_id = :call_id AND e.kind = 'search')"
)


_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE {_ONE_SESSION}"
_SESSION_WITH_GENERATION = f"SELECT {_SESSION_COLUMNS}, {_GENERATION} FROM sessions s WHERE {_ONE_SESSION}"
_SHARE_CATALOG = "SELECT generation FROM catalog_state WHERE id = 1 FOR SHARE"
_CALL_SQLITE = f"SELECT {_SESSION_COLUMNS}, {_ANSWERED}, {_GENERATION} FROM sessions s WHERE {_ONE_SESSION}"
# PostgreSQL: a share lock on the catalog row (catalog writers wait, so the transaction sees one
# catalog) and the session row for update, in one round trip. Catalog writers lock only the
# catalog row, so no order of these two locks can close a cycle with them.
_LOCKED = f"FROM catalog_state c, sessions s WHERE c.id = 1 AND {_ONE_SESSION} FOR SHARE OF c FOR UPDATE OF s"
_LOCK_POSTGRES = f"SELECT {_SESSION_COLUMNS} {_LOCKED}"
_CALL_POSTGRES = f"SELECT {_SESSION_COLUMNS}, {_ANSWERED}, c.generation {_LOCKED}"
_EVENT = f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE {_ONE_LOG} AND seq = :seq"
_EVENTS = f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE {_ONE_LOG} ORDER BY seq"


def _state(row: Sequence[Any], codec: _Codec) -> SessionState:
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


Reader = tuple[int, str, Callable[[_Codec, Any], Any]]

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


def _entry(key: SessionKey, seq: int, event: Event, stored_stamp: Any) -> dict[str, Any]:
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


_COUNT_SQLITE = "SELECT event_count FROM sessions s WHERE " + _ONE_SESSION
# Only the session row: its lock orders the sequence numbers; the catalog is not read.
_COUNT_POSTGRES = f"SELECT event_count FROM sessions s WHERE {_ONE_SESSION} FOR UPDATE"
_COUNTED = (
    "UPDATE sessions SET event_count = :event_count, updated_at = :updated_at "
    "WHERE identity = :identity AND id = :id"
)


def _params(key: SessionKey) -> dict[str, str]:
    return {"identity": key.identity, "id": key.id}


def _log_params(key: SessionKey) -> dict[str, str]:
    return {"identity": key.identity, "session_id": key.id}


def _logged(row: Sequence[Any], codec: _Codec, key: SessionKey) -> LoggedEvent:
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


class SessionReads:
    """Sessions and their event logs."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def load(self, key: SessionKey) -> SessionState | None:
        rows = driver.fetch(self._connection, _SESSION, _params(key))
        return _state(rows[0], _codec(self._connection)) if rows else None

    def load_with_generation(self, key: SessionKey) -> tuple[SessionState | None, int | None]:
        """The session and the catalog generation in one statement (a session read's hot path)."""
        rows = driver.fetch(self._connection, _SESSION_WITH_GENERATION, _params(key))
        if not rows:
            return None, None
        return _state(rows[0], _codec(self._connection)), int(rows[0][_SESSION_COLUMN_COUNT])

    def all(self, *, readable_only: bool = False) -> list[SessionState]:
        """Every session, oldest first; ``readable_only`` skips those whose row cannot be read
        (``unreadable_sessions`` names them) instead of raising ``CorruptIndex``."""
        rows = driver.fetch(
            self._connection,
            f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.created_at, s.identity, s.id",
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

    def events(self, key: SessionKey) -> list[LoggedEvent]:
        rows = driver.fetch(self._connection, _EVENTS, _log_params(key))
        codec = _codec(self._connection)
        return [_logged(row, codec, key) for row in rows]

    def events_before(self, key: SessionKey, seq: int, count: int, kinds: Sequence[str]) -> list[LoggedEvent]:
        """Up to ``count`` events of ``kinds`` logged before ``seq``, newest first."""
        kinds_in, params = driver.in_list("kind", kinds)
        rows = driver.fetch(
            self._connection,
            f"SELECT {_EVENT_COLUMNS} FROM session_events WHERE {_ONE_LOG} AND seq < :seq "
            f"AND kind IN {kinds_in} ORDER BY seq DESC LIMIT :count",
            {**_log_params(key), "seq": seq, "count": count, **params},
        )
        codec = _codec(self._connection)
        return [_logged(row, codec, key) for row in rows]

    def events_of_kind(self, kinds: Sequence[str]) -> dict[SessionKey, list[LoggedEvent]]:
        """Every session's events of ``kinds``, in order, by session."""
        kinds_in, params = driver.in_list("kind", kinds)
        rows = driver.fetch(
            self._connection,
            f"SELECT identity, session_id, {_EVENT_COLUMNS} FROM session_events WHERE kind IN {kinds_in} "
            "ORDER BY identity, session_id, seq",
            params,
        )
        codec = _codec(self._connection)
        found: dict[SessionKey, list[LoggedEvent]] = {}
        for identity, session_id, *row in rows:
            key = SessionKey(identity, session_id)
            found.setdefault(key, []).append(_logged(row, codec, key))
        return found

    def kind_counts(self) -> dict[SessionKey, dict[str, int]]:
        """How many events of each kind every session logged."""
        rows = driver.fetch(
            self._connection,
            "SELECT identity, session_id, kind, COUNT(*) FROM session_events "
            "GROUP BY identity, session_id, kind",
        )
        found: dict[SessionKey, dict[str, int]] = {}
        for identity, session_id, kind, count in rows:
            found.setdefault(SessionKey(identity, session_id), {})[kind] = int(count)
        return found

    def stored_settings(self) -> list[tuple[SessionKey, Any]]:
        """Each session's key and its settings as decoded, ``None`` where they are not JSON."""
        codec = _codec(self._connection)
        found: list[tuple[SessionKey, Any]] = []
        for identity, session_id, settings in driver.fetch(
            self._connection, "SELECT identity, id, settings FROM sessions ORDER BY identity, id"
        ):
            key = SessionKey(identity, session_id)
            try:
                found.append((key, codec.load_json(settings)))
            except ValueError:
                found.append((key, None))
        return found

    def unreadable(self) -> list[str]:
        """Each stored session row or log entry that cannot be read back, in words (for ``verify``)."""
        codec = _codec(self._connection)
        found = []
        rows = driver.fetch(
            self._connection, f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.identity, s.id"
        )
        for row in rows:
            try:
                _state(row, codec)
            except CorruptIndex as exc:
                found.append(exc.what)
        entries = driver.fetch(
            self._connection,
            f"SELECT identity, session_id, {_EVENT_COLUMNS} FROM session_events "
            "ORDER BY identity, session_id, seq",
        )
        for entry in entries:
            try:
                _logged(entry[2:], codec, SessionKey(entry[0], entry[1]))
            except CorruptIndex as exc:
                found.append(exc.what)
        return found


class SessionWrites(SessionReads):
    """Sessions and their logs, written: every write runs inside the unit's transaction."""

    def lock(self, key: SessionKey) -> SessionState | None:
        """Load a session for update; also holds the catalog steady until the transaction ends."""
        if self._connection.dialect.name == "sqlite":  # the transaction's write lock covers both
            return self.load(key)
        rows = driver.fetch(self._connection, _LOCK_POSTGRES, _params(key))
        if not rows:  # a session about to be made still reads the catalog steady
            driver.fetch(self._connection, _SHARE_CATALOG)
            return None
        return _state(rows[0], _codec(self._connection))

    def lock_for_call(
        self, key: SessionKey, call_id: str
    ) -> tuple[SessionState | None, int, LoggedEvent | None]:
        """``lock`` for a search call: also the catalog generation, and the logged answer when the
        session already answered ``call_id``, in one statement (every search call starts here).
        The generation is 0 when there is no such session."""
        sqlite = self._connection.dialect.name == "sqlite"
        rows = driver.fetch(
            self._connection,
            _CALL_SQLITE if sqlite else _CALL_POSTGRES,
            {"call_id": call_id or None, **_params(key)},
        )
        if not rows:
            return None, 0, None
        generation = int(rows[0][_SESSION_COLUMN_COUNT + 1])
        codec = _codec(self._connection)
        answered = rows[0][_SESSION_COLUMN_COUNT]
        logged = None
        if answered is not None:
            logged = _logged(
                driver.fetch(self._connection, _EVENT, {**_log_params(key), "seq": answered})[0],
                codec,
                key,
            )
        return _state(rows[0], codec), generation, logged

    def create(
        self, key: SessionKey, settings: dict[str, Any], active: list[str], *, opened_by: str | None = None
    ) -> SessionState | None:
        """Insert a new session and its ``create`` event (which carries the initial active list).

        ``None`` when the key is taken: on PostgreSQL two callers can both find no session and
        insert it at once; the second waits for the first to commit, then inserts nothing."""
        codec = _codec(self._connection)
        stamp = now()
        stored = codec.store_stamp(stamp)
        json = codec.json_bind
        inserted = driver.execute(
            self._connection,
            "INSERT INTO sessions (identity, id, settings, active, selected, event_count, created_at, "
            f"updated_at, opened_by) VALUES (:identity, :id, {json('settings')}, {json('active')}, "
            f"{json('selected')}, 0, :created_at, :created_at, :opened_by) "
            "ON CONFLICT (identity, id) DO NOTHING",
            {
                **_params(key),
                "settings": json_text(settings),
                "active": json_text(active),
                "selected": "[]",
                "created_at": stored,
                "opened_by": opened_by,
            },
        )
        if inserted == 0:
            return None
        state = SessionState(key.id, key.identity, settings, active, [], 0, stamp, stamp, opened_by)
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
        entry = _entry(state.key, seq, event, stored)
        lists = {
            "active": plain_json_text(active),
            "selected": plain_json_text(selected),
            "event_count": seq,
            "updated_at": stored,
            **_params(state.key),
        }
        if len(codec.record) == 1:
            driver.execute(self._connection, codec.record[0], {**entry, **lists})
        else:
            insert, update = codec.record
            driver.execute_each(self._connection, [(insert, entry), (update, lists)])
        return dataclasses.replace(state, active=active, selected=selected, event_count=seq, updated_at=stamp)

    def append(self, key: SessionKey, *logged: Event) -> bool:
        """Log ``logged``, events that change neither list (tool calls a gateway forwarded, the
        digests it pinned), in order; ``False`` when there is no such session.

        The lists stay as stored, so only the event count and the time move: the row's lists are
        neither read nor written again."""
        sqlite = self._connection.dialect.name == "sqlite"
        rows = driver.fetch(self._connection, _COUNT_SQLITE if sqlite else _COUNT_POSTGRES, _params(key))
        if not rows:
            return False
        if not logged:
            return True
        codec = _codec(self._connection)
        stored = codec.store_stamp(now())
        count = int(rows[0][0])
        statements: list[tuple[str, driver.Params]] = [
            (codec.insert, _entry(key, count + offset, event, stored))
            for offset, event in enumerate(logged, start=1)
        ]
        statements.append(
            (_COUNTED, {"event_count": count + len(logged), "updated_at": stored, **_params(key)})
        )
        driver.execute_each(self._connection, statements)
        return True

    def remove(self, key: SessionKey) -> bool:
        driver.execute(self._connection, f"DELETE FROM session_events WHERE {_ONE_LOG}", _log_params(key))
        return bool(
            driver.execute(
                self._connection, "DELETE FROM sessions WHERE identity = :identity AND id = :id", _params(key)
            )
        )

    def adopt(self, identities: Mapping[str, str]) -> dict[str, tuple[int, int]]:
        """Give the sessions of each identity in ``identities`` to the identity it maps to: per
        identity, how many sessions moved, and how many stayed because the new identity already
        has a session of the same id. The log follows its session (``ON UPDATE CASCADE``)."""
        moved: dict[str, tuple[int, int]] = {}
        for old, new in identities.items():
            params = {"old": old, "new": new}
            taken = driver.fetch(
                self._connection,
                "SELECT COUNT(*) FROM sessions s WHERE s.identity = :old AND EXISTS "
                "(SELECT 1 FROM sessions t WHERE t.identity = :new AND t.id = s.id)",
                params,
            )[0][0]
            count = driver.execute(
                self._connection,
                "UPDATE sessions SET identity = :new WHERE identity = :old AND NOT EXISTS "
                "(SELECT 1 FROM sessions t WHERE t.identity = :new AND t.id = sessions.id)",
                params,
            )
            if count or taken:
                moved[old] = (int(count), int(taken))
        return moved

    def flag_calls(self, tool_names: Sequence[str] | None, flag: str) -> int:
        """Set ``flag`` to true in the params of every logged ``tool_call`` of ``tool_names`` (all
        when ``None``); how many calls changed."""
        codec = _codec(self._connection)
        statement = "SELECT identity, session_id, seq, params FROM session_events WHERE kind = 'tool_call'"
        params: dict[str, str] = {}
        if tool_names is not None:
            names, params = driver.in_list("tool_name", tool_names)
            statement += f" AND tool_name IN {names}"
        changed = []
        for identity, session_id, seq, stored in driver.fetch(self._connection, statement, params):
            value = codec.load_json(stored)
            value = dict(value) if isinstance(value, dict) else {}
            if value.get(flag) is True:
                continue
            value[flag] = True
            changed.append((plain_json_text(value), identity, session_id, seq))
        driver.execute_many(
            self._connection,
            f"UPDATE session_events SET params = {codec.json_bind('params')} "
            "WHERE identity = :identity AND session_id = :session_id AND seq = :seq",
            changed,
        )
        return len(changed)
