"""Alembic run from code: the schema revision of a database, upgrades and the models check."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, inspect

from store import _driver as driver
from store._engine import read_transaction, use_wal
from store._schema import metadata
from store.errors import DatabaseUnavailable, SchemaOutdated, SchemaTooNew

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic is imported inside the functions that run it: opening a database already at this
# revision, which every start does, then costs a query instead of the alembic import.
HEAD_REVISION = "0016"
"""The revision the models are at; a test checks it is the head of ``migrations``."""


def alembic_config(connection: Connection | None = None) -> Config:
    """A config pointing at the ``migrations`` package, wherever it is installed."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations package has no revision"
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision stored in the database, or ``None`` for a database alembic never touched."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return _stored_revision(connection)


def _stored_revision(connection: Connection) -> str | None:
    rows = driver.fetch(connection, "SELECT version_num FROM alembic_version")
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` in one transaction."""
    from alembic import command

    with engine.begin() as connection:
        _lock_schema(connection)
        command.upgrade(alembic_config(connection), revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

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
        driver.fetch(connection, "SELECT pg_advisory_xact_lock(hashtext('tool-index:' || current_schema()))")


def pending_model_changes(engine: Engine) -> list[str]:
    """How the database differs from the models, one line per difference (empty = in sync)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with read_transaction(engine) as connection:
        changes = compare_metadata(MigrationContext.configure(connection), metadata)
    return [describe_change(change) for change in changes]


def describe_change(change: Any) -> str:
    """One of autogenerate's diff tuples in words. ``add_*`` names what the models have and the
    database lacks, ``remove_*`` the reverse; the changes to one column come as a list."""
    if isinstance(change, list):
        return "; ".join(describe_change(part) for part in change)
    kind, *args = change
    action, _, what = kind.partition("_")
    if action == "modify":  # (schema, table, column, existing settings, database's, models')
        _schema, table, column, _existing, in_database, in_models = args
        return f"column {table}.{column}: {what} is {in_database} in the database, {in_models} in the models"
    if what == "column":  # (schema, table, column)
        subject = f"column {args[1]}.{args[2].name}"
    else:  # (item, ...): a table, an index, a constraint or a table's comment
        item = args[0]
        subject = f"{_NOUNS.get(what, what)} {item.name or '(unnamed)'}"
        if what not in ("table", "table_comment"):
            subject += f" on {item.table.name}"
    if action == "add":
        return f"the database lacks {subject}"
    return f"the database has {subject}, which the models do not"


_NOUNS = {"fk": "foreign key", "table_comment": "the comment of table"}


def is_empty(engine: Engine) -> bool:
    """Whether the database holds no table at all (neither ours nor another program's)."""
    with read_transaction(engine) as connection:
        return not inspect(connection).get_table_names()


def ensure_schema(engine: Engine, *, upgrade_if_old: bool) -> None:
    """Create the schema in an empty database; check (or upgrade) an existing one.

    Raises ``SchemaTooNew`` for a revision this code does not know, ``SchemaOutdated`` for an
    older one when ``upgrade_if_old`` is false, ``DatabaseUnavailable`` for a database holding
    other tables than ours.
    """
    # A read, which another process's write does not hold up: every open starts here.
    with read_transaction(engine) as connection:
        # Tables before revision: a concurrent first migration commits both at once, so this
        # order never sees its tables without its revision.
        tables = set(inspect(connection).get_table_names())
        revision = _stored_revision(connection) if "alembic_version" in tables else None
    if revision == HEAD_REVISION:
        _recognized(engine)
        return
    head = head_revision()
    if revision is None:
        if tables - {"alembic_version"}:
            raise DatabaseUnavailable(
                "the database holds tables but no tool-index schema revision; "
                "point --db at a tool-index database or an empty one"
            )
        _recognized(engine)
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
    _recognized(engine)
    upgrade(engine)


def _recognized(engine: Engine) -> None:
    """What a database gets once it is known to be ours (empty or at a known revision), and never
    before: a refused database is left exactly as it was."""
    with engine.connect() as connection:
        use_wal(connection)
