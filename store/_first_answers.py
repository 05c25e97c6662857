"""The gateway's first answers: what a ``serve`` process answered to its first ``tools/list``,
kept with the state it was made from, so that the next process can give the same answer before
it has loaded the library that makes it.

An answer is kept under a key its maker chooses (the code, the config scope and the options the
answer depends on) and a stamp of the database state it was made from: the catalog generation
and the row of the session it was for, read before the answer was made. A process reads it back
with the standard library's ``sqlite3`` alone, and only while the stamp is still the database's:
any catalog write, any change of that session, and the answer is not given. Only plain SQLite
files are read this way (``store._location.plain_sqlite_file``); other databases answer through
the store as always.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from store._location import plain_sqlite_file

if TYPE_CHECKING:
    from sqlalchemy import Connection

KEPT = 64
"""First answers kept, the most recently written; older keys (sessions long gone, configs
changed since) are dropped as new ones are written."""
STAMP_SQL = (
    "SELECT (SELECT generation FROM catalog_state WHERE id = 1), s.settings, s.active, s.selected, "
    "s.event_count, s.created_at, s.updated_at FROM (SELECT 1) AS one LEFT JOIN sessions AS s ON s.id = ?"
)
"""The state an answer is made from, as the SQLite driver returns it: the catalog generation and
the session's row (all null for a session not stored), its times included, so that a session
deleted and made again just as it was is not the same state."""
ANSWER_SQL = "SELECT stamp, answer FROM first_answers WHERE key = ?"


def stamp_of(row: Any) -> str:
    """A digest of ``STAMP_SQL``'s row, whatever its values' types (a damaged row included)."""
    return hashlib.sha256(repr(tuple(row)).encode()).hexdigest()


def stamp(connection: Connection, session_id: str | None) -> str | None:
    """The stamp of the state now, for the session ``session_id`` (``None``: a new one);
    ``None`` for a database other than SQLite, where no answer is read before the store loads."""
    if connection.dialect.name != "sqlite":
        return None
    return stamp_of(connection.exec_driver_sql(STAMP_SQL, (session_id,)).one())


def keep(connection: Connection, key: str, stamp: str, answer: str) -> None:
    """Keep ``answer`` under ``key`` (replacing an older one), and only the latest ``KEPT``."""
    connection.exec_driver_sql("DELETE FROM first_answers WHERE key = ?", (key,))
    connection.exec_driver_sql(
        "INSERT INTO first_answers (key, stamp, answer, written_at) VALUES (?, ?, ?, ?)",
        (key, stamp, answer, datetime.now(UTC).isoformat()),
    )
    connection.exec_driver_sql(
        "DELETE FROM first_answers WHERE key NOT IN "
        "(SELECT key FROM first_answers ORDER BY written_at DESC, key LIMIT ?)",
        (KEPT,),
    )


def kept(connection: Connection, key: str) -> tuple[str, str] | None:
    """``(stamp, answer)`` kept under ``key``."""
    row = connection.exec_driver_sql(ANSWER_SQL, (key,)).first()
    return None if row is None else (row[0], row[1])


def stored_first_answer(url: str, key: str, session_id: str | None) -> str | None:
    """The answer kept under ``key`` in the SQLite file of ``url``, if it was made from the state
    the database is in now (for the session ``session_id``); ``None`` otherwise, and for every
    database this cannot read: another backend, no such file, a schema without first answers,
    a file that is locked or damaged. Reads with ``sqlite3`` in one read-only transaction, which
    never changes the database (and never makes one), though on a database in WAL mode it may
    leave the ``-wal`` and ``-shm`` files every reader of such a database needs."""
    path = plain_sqlite_file(url)
    if path is None:
        return None
    try:
        connection = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True, timeout=0.1)
    except sqlite3.Error:
        return None
    try:
        connection.execute("BEGIN")
        found = connection.execute(ANSWER_SQL, (key,)).fetchone()
        if found is None:
            return None
        now = stamp_of(connection.execute(STAMP_SQL, (session_id,)).fetchone())
        return found[1] if found[0] == now and isinstance(found[1], str) else None
    except sqlite3.Error:
        return None
    finally:
        connection.close()


def _uri_path(path: str) -> str:
    """``path`` as the path of a ``file:`` URI: the characters a URI gives meaning to escaped."""
    from urllib.parse import quote

    return quote(path, safe="/:")
