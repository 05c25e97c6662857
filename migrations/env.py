"""Alembic environment: runs on the connection that ``store._migrate`` hands it."""

from __future__ import annotations

from alembic import context

from store._schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through store._migrate (tool-index db upgrade)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,  # SQLite can only alter tables by copying them
    compare_type=True,
)
context.run_migrations()
