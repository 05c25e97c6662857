"""content digests from a faster encoding of the record

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 15:00:00.000000

``tools.content_hash`` was the SHA-256 of the record's standard JSON; it is now
``store._digests.record_digest``, which costs an import much less to compute. Every stored
digest is recomputed from its row (and back again on a downgrade), so that re-importing an
unchanged catalog still rewrites nothing and ``verify`` still finds each digest its record's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from store._digests import json_digest, record_digest

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5_000
"""Rows read and rewritten per step: a million-tool catalog is never held whole."""

_TEXT_FIELDS = ("name", "label", "description", "summary", "source", "server_name", "mcp_tool_name")
_tools = sa.table(
    "tools",
    sa.column("id", sa.Integer),
    *(sa.column(name, sa.Text) for name in _TEXT_FIELDS),
    sa.column("schema_keys", sa.JSON),
    sa.column("input_schema", sa.JSON),
    sa.column("load_mode", sa.Text),
    sa.column("content_hash", sa.Text),
)


def _fields(row: Any) -> dict[str, Any]:
    """A row's record fields but its input schema."""
    fields = {name: getattr(row, name) for name in _TEXT_FIELDS}
    return {**fields, "schema_keys": row.schema_keys, "load_mode": row.load_mode}


def _new(row: Any) -> str:
    return record_digest(_fields(row), row.input_schema)


def _old(row: Any) -> str:
    return json_digest({**_fields(row), "input_schema": row.input_schema})


def _rehash(digest: Callable[[Any], str]) -> None:
    bind = op.get_bind()
    update = (
        sa.update(_tools)
        .where(_tools.c.id == sa.bindparam("tool_id"))
        .values(content_hash=sa.bindparam("digest"))
    )
    last = 0
    while rows := bind.execute(
        sa.select(_tools).where(_tools.c.id > last).order_by(_tools.c.id).limit(BATCH)
    ).all():
        bind.execute(update, [{"tool_id": row.id, "digest": digest(row)} for row in rows])
        last = rows[-1].id


def upgrade() -> None:
    _rehash(_new)


def downgrade() -> None:
    _rehash(_old)
