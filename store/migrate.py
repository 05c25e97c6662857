"""Alembic run from code: the schema revision of a database, upgrades and the models check."""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from store.errors import DatabaseUnavailable, SchemaOutdated, SchemaTooNew
from store.schema import Base


def alembic_config(connection: Connection | None = None) -> Config:
    """A config pointing at the ``migrations`` package, wherever it is installed."""
    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations package has no revision"
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def known_revisions() -> set[str]:
    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` in one transaction."""
    with engine.begin() as connection:
        _lock_schema(connection)
        command.upgrade(alembic_config(connection), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        _lock_schema(connection)
        command.downgrade(alembic_config(connection), revision)


def _lock_schema(connection: Connection) -> None:
    """Serialize migrations of one schema, so processes opening an empty database at once do not
    both create its tables: the second waits, then alembic finds the schema at head.

    SQLite's ``BEGIN IMMEDIATE`` already does this; PostgreSQL takes a transaction-level
    advisory lock keyed by the schema the connection works in.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('tool-index:' || current_schema()))"))


def pending_model_changes(engine: Engine) -> list[object]:
    """What autogenerate would change to make the database match the models (empty = in sync)."""
    with engine.connect() as connection:
        return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))


def ensure_schema(engine: Engine, *, upgrade_if_old: bool) -> None:
    """Create the schema in an empty database; check (or upgrade) an existing one.

    Raises ``SchemaTooNew`` for a revision this code does not know, ``SchemaOutdated`` for an
    older one when ``upgrade_if_old`` is false, ``DatabaseUnavailable`` for a database holding
    other tables than ours.
    """
    with engine.connect() as connection:
        # Tables before revision: a concurrent first migration commits both at once, so this
        # order never sees its tables without its revision.
        tables = set(inspect(connection).get_table_names())
        revision = current_revision(connection)
    head = head_revision()
    if revision == head:
        return
    if revision is None:
        if tables - {"alembic_version"}:
            raise DatabaseUnavailable(
                "the database holds tables but no tool-index schema revision; "
                "point --db at a tool-index database or an empty one"
            )
        upgrade(engine)
        return
    if revision not in known_revisions():
        raise SchemaTooNew(
            f"the database schema is at revision {revision}, newer than this tool-index "
            f"(head {head}); upgrade tool-index"
        )
    if not upgrade_if_old:
        raise SchemaOutdated(
            f"the database schema is at revision {revision}, this tool-index needs {head}; "
            "run `tool-index db upgrade`"
        )
    upgrade(engine)
