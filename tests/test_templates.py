"""A database the fixtures copy from their template is the one a first open migrates: same schema,
same rows, same revision, same sequences, on both backends."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url

from discovery import ToolIndex
from store import _migrate as migrate
from store._engine import make_engine
from tests.conftest import BACKENDS, scratch_database


def sqlite_snapshot(url: str) -> dict[str, Any]:
    path = make_url(url).database
    assert path is not None
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        master = sorted(connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall())
        tables = [name for kind, name, _, _ in master if kind == "table"]
        pragmas = ["journal_mode", "page_size", "auto_vacuum", "encoding", "user_version", "application_id"]
        return {
            "master": master,
            "pragmas": {name: connection.execute(f"PRAGMA {name}").fetchone() for name in pragmas},
            "rows": {
                table: sorted(map(repr, connection.execute(f'SELECT * FROM "{table}"'))) for table in tables
            },
        }
    finally:
        connection.close()


POSTGRES_CATALOG = {
    "relations": """
        SELECT c.relname, c.relkind, c.relpersistence, c.reloptions::text,
               obj_description(c.oid, 'pg_class')
        FROM pg_class c WHERE c.relnamespace = CAST(:schema AS regnamespace)""",
    "columns": """
        SELECT table_name, column_name, ordinal_position, column_default, is_nullable, data_type,
               udt_name, character_maximum_length, numeric_precision, collation_name, is_identity,
               is_generated, col_description(CAST(quote_ident(table_schema) || '.' || quote_ident(table_name)
               AS regclass), ordinal_position)
        FROM information_schema.columns WHERE table_schema = :schema""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid), condeferrable
        FROM pg_constraint WHERE connamespace = CAST(:schema AS regnamespace)""",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = :schema",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, min_value, max_value, increment_by, cycle,
               cache_size, last_value
        FROM pg_sequences WHERE schemaname = :schema""",
    "owned sequences": """
        SELECT s.relname, t.relname, a.attname
        FROM pg_depend d JOIN pg_class s ON s.oid = d.objid JOIN pg_class t ON t.oid = d.refobjid
        JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
        WHERE s.relkind = 'S' AND s.relnamespace = CAST(:schema AS regnamespace)""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger
        WHERE NOT tgisinternal AND tgrelid IN
            (SELECT oid FROM pg_class WHERE relnamespace = CAST(:schema AS regnamespace))""",
}


def postgres_snapshot(connection: Connection) -> dict[str, Any]:
    schema = connection.execute(text("SELECT current_schema()")).scalar_one()

    def normalized(rows: Any) -> list[str]:
        return sorted(repr(tuple(row)).replace(schema, "<schema>") for row in rows)

    snapshot: dict[str, Any] = {
        name: normalized(connection.execute(text(query), {"schema": schema}))
        for name, query in POSTGRES_CATALOG.items()
    }
    tables = connection.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema})
    snapshot["rows"] = {
        table: normalized(connection.execute(text(f'SELECT * FROM "{table}"'))) for (table,) in tables
    }
    return snapshot


def snapshot(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        return sqlite_snapshot(url)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return postgres_snapshot(connection)
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_copied_template_is_a_freshly_migrated_database(backend: str, tmp_path: Path) -> None:
    with (
        scratch_database(backend, tmp_path, "copied.db") as copied,
        scratch_database(backend, tmp_path, "fresh.db", migrated=False) as fresh,
    ):
        assert snapshot(fresh)["rows"] == {}  # nothing yet: the open below migrates it
        ToolIndex.open(fresh).close()
        expected = snapshot(fresh)
        assert expected["rows"]["alembic_version"] == [repr((migrate.HEAD_REVISION,))]
        assert snapshot(copied) == expected
        # The library sees a schema at head: no upgrade is needed or made, the models match.
        ToolIndex.open(copied, upgrade=False).close()
        engine = make_engine(copied)
        try:
            with engine.connect() as connection:
                assert migrate.current_revision(connection) == migrate.head_revision()
            assert migrate.pending_model_changes(engine) == []
        finally:
            engine.dispose()
        assert snapshot(copied) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_copies_are_independent_and_take_writes(backend: str, tmp_path: Path) -> None:
    with (
        scratch_database(backend, tmp_path, "one.db") as one,
        scratch_database(backend, tmp_path, "two.db") as two,
    ):
        with ToolIndex.open(one) as index:
            index.upsert_tools([{"name": "send_mail", "description": "Send an email message"}])
            assert [hit.name for hit in index.search("email", 3)] == ["send_mail"]
        with ToolIndex.open(two) as index:
            assert index.stats()["tools"] == 0
            index.upsert_tools([{"name": "read_mail", "description": "Read email messages"}])
            assert [hit.name for hit in index.search("email", 3)] == ["read_mail"]
