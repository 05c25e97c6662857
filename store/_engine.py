"""Engines: URL defaults, SQLite pragmas (WAL, busy timeout, foreign keys, background
checkpoints) and safe URL display."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, NoSuchModuleError

from store._checkpoints import FALLBACK_PAGES, Checkpointer
from store._urls import display_url, parse_url, sqlite_timeout
from store.errors import ConcurrentUpdate, DatabaseUnavailable, ReadOnlyDatabase, StorageFull, StoreError

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another's lock before giving up with ``ConcurrentUpdate``: SQLite's
busy timeout (a URL's ``?timeout=SECONDS`` sets another) and PostgreSQL's ``lock_timeout``."""
IDLE_IN_TRANSACTION_MS = 60_000
"""PostgreSQL ends a session left idle inside a transaction for this long (a writer stopped or
killed with its socket still open), so its locks cannot block every later writer."""
POSTGRES_TIMEOUTS = {
    "lock_timeout": BUSY_TIMEOUT_MS,
    "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION_MS,
}
"""Set on each PostgreSQL connection unless the URL (``options=-c lock_timeout=…``), the role or
the database already sets one: a setting of 0 means none, and waiting forever is never wanted."""
SQLITE_CACHE_KIB = 65_536
"""Page cache per connection: large imports touch the postings index all over."""
_CHECKPOINTERS: weakref.WeakKeyDictionary[Engine, Checkpointer] = weakref.WeakKeyDictionary()
_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
_POSTGRES_CONNECTIONS: weakref.WeakSet[Any] = weakref.WeakSet()
"""The driver connections this process opened to PostgreSQL: a forked child lets go of them."""
_INHERITED_POOLS: list[Any] = []
"""In a forked child: the pools of the parent's engines, kept so their connections are never
garbage-collected (and so closed) here."""


APPLICATION = "tool-index"
"""Who opens the database when the caller does not say (``make_engine``'s ``application``)."""
APPLICATION_NAME_BYTES = 63
"""The longest ``application_name`` PostgreSQL keeps (``NAMEDATALEN - 1``); it cuts longer ones."""


def application_name(application: str) -> str:
    """``APPLICATION@HOST``: what PostgreSQL's ``pg_stat_activity`` shows for this process's
    connections, so a team sees which command on which host holds one. The server keeps
    printable ASCII only, and 63 bytes: the host is cut rather than the command."""
    name = f"{application}@{socket.gethostname()}"
    return "".join(char if " " <= char <= "~" else "?" for char in name)[:APPLICATION_NAME_BYTES]


def make_engine(url: str | URL, application: str = APPLICATION) -> Engine:
    """An engine with the settings tool-index relies on for each backend; PostgreSQL connections
    are named ``application_name(application)`` unless the URL or ``PGAPPNAME`` names them."""
    parsed = parse_url(url)
    try:
        engine = (
            _sqlite_engine(parsed)
            if parsed.get_backend_name() == "sqlite"
            else _postgres_engine(parsed, application_name(application))
        )
        _ENGINES.add(engine)
        return engine
    except (NoSuchModuleError, ImportError) as exc:
        raise DatabaseUnavailable(
            f"no driver for {display_url(parsed)}: use sqlite:///PATH or postgresql+psycopg://…"
        ) from exc
    except OSError as exc:
        raise DatabaseUnavailable(f"cannot create the database at {display_url(parsed)}: {exc}") from exc


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction (SQLite: ``BEGIN IMMEDIATE``); database errors become store errors."""
    with translated_errors(engine), engine.begin() as connection:
        yield connection
    checkpointer = checkpointer_of(engine)
    if checkpointer is not None:
        checkpointer.wrote()


def checkpointer_of(engine: Engine) -> Checkpointer | None:
    """The background checkpointer of a SQLite file's engine (``None`` for other databases)."""
    return _CHECKPOINTERS.get(engine)


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """One consistent snapshot for reading several statements, without taking a write lock."""
    with translated_errors(engine), engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            connection = connection.execution_options(sqlite_begin="DEFERRED")
        else:
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            yield connection


@contextmanager
def translated_errors(engine: Engine) -> Iterator[None]:
    """Turn driver errors people can act on into one clear store error, told apart by the
    driver's error code (SQLite's result code name, PostgreSQL's SQLSTATE), not its wording."""
    # Bulk reads and writes of postings and tool rows go to the driver's cursor directly, so its
    # own errors arrive unwrapped.
    driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error
    try:
        yield
    except (DBAPIError, driver_error) as exc:
        original = exc.orig if isinstance(exc, DBAPIError) else exc
        invalidated = exc.connection_invalidated if isinstance(exc, DBAPIError) else False
        kind = error_kind(original, invalidated=invalidated)
        if kind is None:
            raise
        message = str(original).strip().splitlines()[0] if original is not None else str(exc)
        where = display_url(engine.url)
        raise _ERRORS[kind][0](
            _ERRORS[kind][1].format(where=where, message=message, name=engine.url.database)
        ) from exc


_SQLITE_KINDS = {
    "SQLITE_READONLY": "read-only",
    "SQLITE_FULL": "full",
    "SQLITE_IOERR": "io",
    "SQLITE_BUSY": "busy",
    "SQLITE_LOCKED": "busy",
    "SQLITE_NOTADB": "not-a-database",
    "SQLITE_CORRUPT": "not-a-database",
    "SQLITE_CANTOPEN": "not-a-database",
}
"""SQLite result codes by primary name (``SQLITE_IOERR_WRITE`` is an ``SQLITE_IOERR``)."""

_SQLSTATE_KINDS = {
    "25006": "read-only",  # read_only_sql_transaction
    "53100": "full",  # disk_full
    "58030": "io",  # io_error
    "40001": "busy",  # serialization_failure
    "40P01": "busy",  # deadlock_detected
    "55P03": "busy",  # lock_not_available (lock_timeout)
    "3D000": "no-database",  # invalid_catalog_name
    "25P03": "idle-timeout",  # idle_in_transaction_session_timeout
}
"""PostgreSQL SQLSTATEs; class 08 (connection exception), 28 (authorization) and 57P0x (the
server shutting down or starting) mean the server cannot be used as given."""

_ERRORS: dict[str, tuple[type[StoreError], str]] = {
    "read-only": (
        ReadOnlyDatabase,
        "{where} is read-only ({message}); use a writable file or server for changes",
    ),
    # The transaction was rolled back, so nothing is half written.
    "full": (
        StorageFull,
        "{where} has no room for this write ({message}); nothing was written: free some space and try again",
    ),
    "io": (
        DatabaseUnavailable,
        "{where} could not be read or written ({message}); check the disk and the file system",
    ),
    "busy": (ConcurrentUpdate, "{where} stayed locked by another writer: {message}"),
    # Rolled back by the server: nothing of the transaction was written.
    "idle-timeout": (
        ConcurrentUpdate,
        "{where} ended a transaction left idle too long ({message}); nothing was written: try again",
    ),
    "not-a-database": (
        DatabaseUnavailable,
        "{where} is not a usable SQLite database ({message}); point --db at another file",
    ),
    "no-database": (
        DatabaseUnavailable,
        "{where}: the server has no such database ({message}); create it (createdb {name}) or fix the URL",
    ),
    "unreachable": (
        DatabaseUnavailable,
        "cannot reach {where} ({message}); check that the server runs and the URL is right",
    ),
}


_MISSING_DATABASE = re.compile(r'FATAL: +database ".*" does not exist')


def error_kind(error: BaseException | None, *, invalidated: bool = False) -> str | None:
    """What a driver error means for the user, from its code; ``None`` for anything else."""
    name = getattr(error, "sqlite_errorname", None)
    if isinstance(name, str):
        return _SQLITE_KINDS.get("_".join(name.split("_")[:2]))
    state = getattr(error, "sqlstate", None)
    if isinstance(state, str):
        if state in _SQLSTATE_KINDS:
            return _SQLSTATE_KINDS[state]
        if state.startswith(("08", "28", "57P0")):
            return "unreachable"
        return "unreachable" if invalidated else None
    # psycopg raises OperationalError without a SQLSTATE when it cannot connect at all, so the
    # server's refusal of an unknown database (3D000 once connected) is known only by its text.
    connecting = type(error).__module__.startswith("psycopg") and type(error).__name__ == "OperationalError"
    if connecting and _MISSING_DATABASE.search(str(error)):
        return "no-database"
    return "unreachable" if invalidated or connecting else None


def sqlite_file(url: URL) -> str | None:
    """The path of the plain SQLite file ``url`` names; ``None`` for other databases, memory and
    ``file:`` URIs."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        return None
    return database


def _postgres_engine(url: URL, name: str) -> Engine:
    # libpq's fallback: the URL's own application_name, then PGAPPNAME, win over it.
    engine = create_engine(
        url,
        isolation_level="READ COMMITTED",
        pool_pre_ping=True,
        connect_args={"fallback_application_name": name},
    )
    from store._urls import check_postgres_options

    check_postgres_options(url, engine.dialect.create_connect_args(url)[1])

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        _POSTGRES_CONNECTIONS.add(dbapi_connection)
        names = list(POSTGRES_TIMEOUTS)
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(f"current_setting('{name}')" for name in names))
            unset = [name for name, value in zip(names, cursor.fetchone(), strict=True) if value == "0"]
            if unset:
                calls = [f"set_config('{name}', '{POSTGRES_TIMEOUTS[name]}', false)" for name in unset]
                cursor.execute("SELECT " + ", ".join(calls))
        dbapi_connection.commit()

    return engine


def _sqlite_engine(url: URL) -> Engine:
    database = sqlite_file(url)
    if database is not None:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    given = sqlite_timeout(url)
    busy_ms = BUSY_TIMEOUT_MS if given is None else round(given * 1000)
    frozen = database is not None and frozen_wal_file(database, url)
    if frozen:
        assert database is not None
        engine = create_engine(url, creator=_immutable_opener(database, busy_ms / 1000))
        database = None  # nothing to checkpoint: nobody here can write it
    else:
        engine = create_engine(url, connect_args={"timeout": busy_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN drive transactions (pysqlite's implicit ones are unreliable).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        cursor.execute(f"PRAGMA wal_autocheckpoint = {FALLBACK_PAGES}")  # see store._checkpoints
        # No journal switch here: WAL is a lasting change to the file, made only once the schema
        # is known to be ours (``use_wal``).
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # IMMEDIATE takes the write lock up front, so read-then-write transactions never
        # deadlock on a lock upgrade; readers use plain BEGIN through ``read_transaction``.
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        # Straight to the driver: every search runs one transaction, and its errors are
        # translated like any other (``translated_errors``).
        connection.connection.dbapi_connection.execute(f"BEGIN {mode}")

    if database is not None:
        checkpointer = Checkpointer(os.path.abspath(database))  # the file SQLAlchemy opens
        _CHECKPOINTERS[engine] = checkpointer

        @event.listens_for(engine, "engine_disposed")
        def _on_dispose(_engine: Engine) -> None:
            checkpointer.close()

        weakref.finalize(engine, checkpointer.close)  # an index dropped without ``close()``

    return engine


WAL_HEADER_VERSION = 2
"""Bytes 18 and 19 of a SQLite file's header in WAL mode (1 in rollback-journal mode)."""


def frozen_wal_file(database: str, url: URL) -> bool:
    """Whether ``database`` is a WAL file that only an immutable open can read: the file and its
    directory are read-only to us, and there is no ``-shm`` file (SQLite needs one to read a WAL
    database, and cannot make it). Such a file is read as it is, without locks: no one without
    write access can change it. ``DatabaseUnavailable`` says what to do when its ``-wal`` file
    still holds changes, which an immutable open would not see."""
    path = Path(database)
    directory = path.parent
    if not path.is_file() or os.access(path, os.W_OK) or os.access(directory, os.W_OK):
        return False
    if Path(f"{database}-shm").exists():
        return False  # SQLite reads a WAL database read-only when its -shm file exists
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError:
        return False  # unreadable: the usual open reports it
    if len(header) < 20 or header[18] != WAL_HEADER_VERSION or header[19] != WAL_HEADER_VERSION:
        return False
    wal = Path(f"{database}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise DatabaseUnavailable(
            f"{display_url(url)} is read-only and its {wal.name} file holds changes that need a "
            f"{path.name}-shm file beside it, which cannot be made in the read-only {directory}: "
            "open it once with write access to the directory (any tool-index command does), "
            "or copy the database with its -wal file to a writable directory"
        )
    return True


def _immutable_opener(database: str, timeout: float) -> Callable[[], sqlite3.Connection]:
    uri = f"file:{urllib.parse.quote(os.path.abspath(database))}?mode=ro&immutable=1"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)

    return connect


def use_wal(connection: Connection) -> None:
    """Switch a SQLite database to WAL (lasting: once per file); call it outside a transaction,
    and only on a database recognized as tool-index's. A read-only file keeps the mode it has, and
    reading it still works."""
    if connection.dialect.name != "sqlite":
        return
    dbapi_connection = connection.connection.dbapi_connection
    assert dbapi_connection is not None
    mode = dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() != "wal":
        with contextlib.suppress(sqlite3.Error):
            dbapi_connection.execute("PRAGMA journal_mode = WAL")


def _release_inherited_sockets() -> None:
    """In a forked child, the copies of the parent's PostgreSQL sockets become ``/dev/null``.

    The server sees a session end only when every copy of its socket is closed: a child keeping
    one would keep a killed parent's transaction, and its locks, alive. ``dup2`` keeps the
    descriptor numbers taken, so nothing else reuses them while the old driver objects live.
    """
    sockets = []
    for dbapi_connection in list(_POSTGRES_CONNECTIONS):
        with contextlib.suppress(Exception):  # a closed connection has no socket
            sockets.append(dbapi_connection.fileno())
    if not sockets:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in sockets:
            os.dup2(null, fd)
    finally:
        os.close(null)
    _POSTGRES_CONNECTIONS.clear()


def _leave_inherited_connections() -> None:
    """After a fork, in the child: every engine gets a new, empty pool.

    The connections in the old one belong to the parent. A PostgreSQL connection used by two
    processes interleaves their messages on one socket, and SQLite forbids carrying a connection
    across ``fork()``; closing them here would end the parent's sessions with the server, so the
    old pools are kept, untouched, for the child's lifetime (SQLAlchemy's ``dispose(close=False)``
    recipe, without its ``engine_disposed`` event, which would stop the checkpointer). The
    checkpointer's thread did not survive the fork: it starts again on the child's first write.
    """
    _release_inherited_sockets()
    for engine in list(_ENGINES):
        _INHERITED_POOLS.append(engine.pool)
        engine.pool = engine.pool.recreate()
        checkpointer = _CHECKPOINTERS.get(engine)
        if checkpointer is not None:
            checkpointer.forget_thread()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_leave_inherited_connections)
