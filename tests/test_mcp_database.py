"""The gateway and its database: PostgreSQL connections named after the command and host.

Real parts: the PostgreSQL test server (``TOOL_INDEX_TEST_PG``; skipped without one), a database
of each test's own on it, ``tool-index serve`` processes and the SDK's client."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.conftest import PG_ENV
from tests.mcp_helpers import http_gateway, upstream_entry, write_config


@contextmanager
def own_database() -> Iterator[tuple[str, str]]:
    """A new, empty database on the PostgreSQL test server, dropped afterwards: its URL and name
    (what ``pg_stat_activity`` tells its connections apart by)."""
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(f"set {PG_ENV} to a PostgreSQL URL to run the gateway on PostgreSQL")
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server).set(database=name).render_as_string(hide_password=False), name
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def applications(server_url: str, database: str) -> set[str]:
    """The ``application_name`` of every connection to ``database`` now."""
    engine = create_engine(server_url)
    try:
        with engine.connect() as connection:
            query = text("SELECT application_name FROM pg_stat_activity WHERE datname = :name")
            rows = connection.execute(query, {"name": database})
            return {str(row[0]) for row in rows}
    finally:
        engine.dispose()


def test_a_gateway_connects_to_postgresql_as_tool_index_serve_at_its_host(tmp_path: Path) -> None:
    with own_database() as (url, name):
        config = write_config(tmp_path, {"up": upstream_entry()})
        with http_gateway(url, config):
            # The gateway has answered its start from the database, so its connection is open.
            assert applications(os.environ[PG_ENV], name) == {f"tool-index serve@{socket.gethostname()}"[:63]}
