"""Sessions, their active and selected lists, and the append-only event log.

``SessionReads`` and ``SessionWrites`` run on their unit's connection; every write runs inside
its write transaction. ``lock`` serializes callers of one session (SQLite: the transaction's
write lock; PostgreSQL: ``SELECT … FOR UPDATE`` on its row), so concurrent searches never lose a
selection or reuse a sequence number.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from store import _driver as driver
from store._logged_json import json_text, plain_json_text
from store._session_rows import (
    EVENT_COLUMNS,
    Event,
    LoggedEvent,
    SessionKey,
    SessionState,
    codec_of,
    log_entry,
    logged_event,
    now,
    state_of,
)
from store.errors import CorruptIndex

_SESSION_COLUMNS = (
    "s.id, s.identity, s.settings, s.active, s.selected, s.event_count, s.created_at, s.updated_at, "
    "s.opened_by"
)
_SESSION_COLUMN_COUNT = 9
_ONE_SESSION = "s.identity = :identity AND s.id = :id"
_ONE_LOG = "identity = :identity AND session_id = :session_id"
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
_EVENT = f"SELECT {EVENT_COLUMNS} FROM session_events WHERE {_ONE_LOG} AND seq = :seq"
_EVENTS = f"SELECT {EVENT_COLUMNS} FROM session_events WHERE {_ONE_LOG} ORDER BY seq"


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


class SessionReads:
    """Sessions and their event logs."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def load(self, key: SessionKey) -> SessionState | None:
        rows = driver.fetch(self._connection, _SESSION, _params(key))
        return state_of(rows[0], codec_of(self._connection)) if rows else None

    def load_with_generation(self, key: SessionKey) -> tuple[SessionState | None, int | None]:
        """The session and the catalog generation in one statement (a session read's hot path)."""
        rows = driver.fetch(self._connection, _SESSION_WITH_GENERATION, _params(key))
        if not rows:
            return None, None
        return state_of(rows[0], codec_of(self._connection)), int(rows[0][_SESSION_COLUMN_COUNT])

    def all(self, *, readable_only: bool = False) -> list[SessionState]:
        """Every session, oldest first; ``readable_only`` skips those whose row cannot be read
        (``unreadable_sessions`` names them) instead of raising ``CorruptIndex``."""
        rows = driver.fetch(
            self._connection,
            f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.created_at, s.identity, s.id",
        )
        codec = codec_of(self._connection)
        states = []
        for row in rows:
            try:
                states.append(state_of(row, codec))
            except CorruptIndex:
                if not readable_only:
                    raise
        return states

    def events(self, key: SessionKey) -> list[LoggedEvent]:
        rows = driver.fetch(self._connection, _EVENTS, _log_params(key))
        codec = codec_of(self._connection)
        return [logged_event(row, codec, key) for row in rows]

    def events_before(self, key: SessionKey, seq: int, count: int, kinds: Sequence[str]) -> list[LoggedEvent]:
        """Up to ``count`` events of ``kinds`` logged before ``seq``, newest first."""
        kinds_in, params = driver.in_list("kind", kinds)
        rows = driver.fetch(
            self._connection,
            f"SELECT {EVENT_COLUMNS} FROM session_events WHERE {_ONE_LOG} AND seq < :seq "
            f"AND kind IN {kinds_in} ORDER BY seq DESC LIMIT :count",
            {**_log_params(key), "seq": seq, "count": count, **params},
        )
        codec = codec_of(self._connection)
        return [logged_event(row, codec, key) for row in rows]

    def events_of_kind(self, kinds: Sequence[str]) -> dict[SessionKey, list[LoggedEvent]]:
        """Every session's events of ``kinds``, in order, by session."""
        kinds_in, params = driver.in_list("kind", kinds)
        rows = driver.fetch(
            self._connection,
            f"SELECT identity, session_id, {EVENT_COLUMNS} FROM session_events WHERE kind IN {kinds_in} "
            "ORDER BY identity, session_id, seq",
            params,
        )
        codec = codec_of(self._connection)
        found: dict[SessionKey, list[LoggedEvent]] = {}
        for identity, session_id, *row in rows:
            key = SessionKey(identity, session_id)
            found.setdefault(key, []).append(logged_event(row, codec, key))
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
        codec = codec_of(self._connection)
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
        codec = codec_of(self._connection)
        found = []
        rows = driver.fetch(
            self._connection, f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.identity, s.id"
        )
        for row in rows:
            try:
                state_of(row, codec)
            except CorruptIndex as exc:
                found.append(exc.what)
        entries = driver.fetch(
            self._connection,
            f"SELECT identity, session_id, {EVENT_COLUMNS} FROM session_events "
            "ORDER BY identity, session_id, seq",
        )
        for entry in entries:
            try:
                logged_event(entry[2:], codec, SessionKey(entry[0], entry[1]))
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
        return state_of(rows[0], codec_of(self._connection))

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
        codec = codec_of(self._connection)
        answered = rows[0][_SESSION_COLUMN_COUNT]
        logged = None
        if answered is not None:
            logged = logged_event(
                driver.fetch(self._connection, _EVENT, {**_log_params(key), "seq": answered})[0],
                codec,
                key,
            )
        return state_of(rows[0], codec), generation, logged

    def create(
        self, key: SessionKey, settings: dict[str, Any], active: list[str], *, opened_by: str | None = None
    ) -> SessionState | None:
        """Insert a new session and its ``create`` event (which carries the initial active list).

        ``None`` when the key is taken: on PostgreSQL two callers can both find no session and
        insert it at once; the second waits for the first to commit, then inserts nothing."""
        codec = codec_of(self._connection)
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
        codec = codec_of(self._connection)
        stamp = now()
        stored = codec.store_stamp(stamp)
        seq = state.event_count + 1
        entry = log_entry(state.key, seq, event, stored)
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
        codec = codec_of(self._connection)
        stored = codec.store_stamp(now())
        count = int(rows[0][0])
        statements: list[tuple[str, driver.Params]] = [
            (codec.insert, log_entry(key, count + offset, event, stored))
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

    def flag_calls(self, tool_names: Sequence[str] | None, flag: str, *, identity: str | None = None) -> int:
        """Set ``flag`` to true in the params of every logged ``tool_call`` of ``tool_names`` (all
        when ``None``), of ``identity``'s sessions alone when given; how many calls changed."""
        codec = codec_of(self._connection)
        statement = "SELECT identity, session_id, seq, params FROM session_events WHERE kind = 'tool_call'"
        params: dict[str, str] = {}
        if tool_names is not None:
            names, params = driver.in_list("tool_name", tool_names)
            statement += f" AND tool_name IN {names}"
        if identity is not None:
            statement += " AND identity = :identity"
            params = {**params, "identity": identity}
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
