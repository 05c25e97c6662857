"""The store's one way to run SQL it writes as text: statements with named binds (``:name``),
rendered once per dialect by SQLAlchemy in the parameter style its driver declares, and sent
to the connection's DB-API cursor in the caller's transaction.

Postings and tool rows are read and written in bulk on every search and import, session rows
and events on every search call: these skip SQLAlchemy's per-statement and per-row work (what
SQLAlchemy's own ``Connection.execute`` adds is several times a small query's cost), and only
the rendering of a statement is SQLAlchemy's, cached. No placeholder is ever rewritten here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Dialect, text

Params = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Rendered:
    """A statement as one driver takes it: its text, and how its parameters are passed."""

    sql: str
    names: tuple[str, ...]
    """The statement's bind names, each once, in the order they first appear."""
    positions: tuple[str, ...] | None
    """The bind name of each of the driver's positional markers, in order; ``None`` for a
    driver that takes parameters by name."""

    def args(self, params: Params) -> Any:
        if self.positions is None:
            return params
        return tuple([params[name] for name in self.positions])

    def many(self, rows: Sequence[Sequence[Any]]) -> Sequence[Any]:
        if self.positions is None:
            return [dict(zip(self.names, row, strict=True)) for row in rows]
        if self.positions == self.names:
            return rows
        at = [self.names.index(name) for name in self.positions]
        return [tuple([row[i] for i in at]) for row in rows]


@functools.lru_cache(maxsize=1024)
def _rendered(statement: str, dialect: Dialect) -> _Rendered:
    compiled = text(statement).compile(dialect=dialect)
    positions = compiled.positiontup
    return _Rendered(compiled.string, tuple(compiled.binds), None if positions is None else tuple(positions))


def fetch(connection: Connection, statement: str, params: Params | None = None) -> list[Any]:
    """Every row of one query (the same transaction and snapshot as the connection's)."""
    rendered = _rendered(statement, connection.dialect)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(rendered.sql, rendered.args(params or {}))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def fetch_blocks(
    connection: Connection, statement: str, params: Params | None = None, size: int = 4096
) -> Iterator[list[Any]]:
    """The rows of one query, ``size`` at a time: for results too large to hold as rows at once."""
    rendered = _rendered(statement, connection.dialect)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(rendered.sql, rendered.args(params or {}))
        while block := cursor.fetchmany(size):
            yield list(block)
    finally:
        cursor.close()


def execute(connection: Connection, statement: str, params: Params | None = None) -> int:
    """One statement that returns no rows; how many rows it changed."""
    rendered = _rendered(statement, connection.dialect)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(rendered.sql, rendered.args(params or {}))
        return int(cursor.rowcount)
    finally:
        cursor.close()


def execute_each(connection: Connection, statements: Sequence[tuple[str, Params]]) -> None:
    """Several statements that return no rows, in order, on one cursor."""
    cursor = connection.connection.cursor()
    try:
        for statement, params in statements:
            rendered = _rendered(statement, connection.dialect)
            cursor.execute(rendered.sql, rendered.args(params))
    finally:
        cursor.close()


def execute_many(connection: Connection, statement: str, rows: Sequence[Sequence[Any]]) -> None:
    """One statement for each of ``rows``, in one driver call; a row holds the values of the
    statement's binds in the order they first appear (bulk rows are built as tuples)."""
    if not rows:
        return
    rendered = _rendered(statement, connection.dialect)
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(rendered.sql, rendered.many(rows))
    finally:
        cursor.close()


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``(:name_0, :name_1, …)`` for ``IN``, and its parameters. ``values`` are padded with the
    last one (which changes no ``IN``) to a power of two, or past ``_PADDED`` to a multiple of
    it, so that a few statements serve every count and each is rendered once."""
    if not values:
        return "(NULL)", {}
    count = len(values)
    size = 1 << (count - 1).bit_length() if count <= _PADDED else -(-count // _PADDED) * _PADDED
    padded = [*values, *[values[-1]] * (size - count)]
    binds = ", ".join(f":{name}_{at}" for at in range(size))
    return f"({binds})", {f"{name}_{at}": value for at, value in enumerate(padded)}


_PADDED = 512


def new_ids(connection: Connection, table: str, count: int) -> list[int]:
    """``count`` ids for new rows of ``table``, ascending, for the caller to insert with in one
    ``execute_many``. On SQLite the ids after the largest, which no one else takes while the
    caller holds the write lock (``BEGIN IMMEDIATE``); on PostgreSQL taken from the column's
    sequence, as any other writer's are."""
    if count <= 0:
        return []
    if connection.dialect.name == "sqlite":
        first = int(fetch(connection, f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")[0][0])
        return list(range(first, first + count))
    rows = fetch(
        connection,
        f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, :count)",
        {"count": count},
    )
    return sorted(int(value) for (value,) in rows)


def json_bind(connection: Connection, name: str) -> str:
    """The bind of a JSON column's value given as encoded text: PostgreSQL takes it as ``json``
    only when told, SQLite stores the text as it is."""
    return f":{name}" if connection.dialect.name == "sqlite" else f"CAST(:{name} AS JSON)"
