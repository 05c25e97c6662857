"""Statements sent straight to the connection's DB-API cursor, in the caller's transaction.

Postings and tool rows are read and written in bulk on every search and import, session rows
and events on every search call; these skip SQLAlchemy's per-statement and per-row work.
Statements are written with ``?`` markers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection


def _sql(connection: Connection, statement: str) -> str:
    """``statement`` with the driver's parameter marker."""
    return statement if connection.dialect.name == "sqlite" else statement.replace("?", "%s")


def fetch(connection: Connection, statement: str, params: Sequence[Any] = ()) -> list[Any]:
    """Every row of one query (the same transaction and snapshot as the connection's)."""
    cursor = connection.connection.cursor()
    try:
        cursor.execute(_sql(connection, statement), tuple(params))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def fetch_blocks(
    connection: Connection, statement: str, params: Sequence[Any] = (), size: int = 4096
) -> Iterator[list[Any]]:
    """The rows of one query, ``size`` at a time: for results too large to hold as rows at once."""
    cursor = connection.connection.cursor()
    try:
        cursor.execute(_sql(connection, statement), tuple(params))
        while block := cursor.fetchmany(size):
            yield list(block)
    finally:
        cursor.close()


def execute(connection: Connection, statement: str, params: Sequence[Any] = ()) -> int:
    """One statement that returns no rows; how many rows it changed."""
    cursor = connection.connection.cursor()
    try:
        cursor.execute(_sql(connection, statement), tuple(params))
        return int(cursor.rowcount)
    finally:
        cursor.close()


def execute_each(connection: Connection, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Several statements that return no rows, in order, on one cursor."""
    cursor = connection.connection.cursor()
    try:
        for statement, params in statements:
            cursor.execute(_sql(connection, statement), tuple(params))
    finally:
        cursor.close()


def execute_many(connection: Connection, statement: str, rows: Sequence[Sequence[Any]]) -> None:
    """One statement for each of ``rows``, in one driver call."""
    if not rows:
        return
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(_sql(connection, statement), rows)
    finally:
        cursor.close()


def next_id(connection: Connection, table: str) -> int:
    """The id after the largest of ``table``: new rows may take ids from here on while the
    caller holds the write lock (``BEGIN IMMEDIATE`` on SQLite)."""
    return int(fetch(connection, f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")[0][0])
