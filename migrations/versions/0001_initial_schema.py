"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 15:54:19.625707
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "catalog_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_state")),
    )
    op.create_table(
        "group_stats",
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("doc_count", sa.Integer(), nullable=False),
        sa.Column("total_len", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("grp", name=op.f("pk_group_stats")),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("active", sa.JSON(), nullable=False),
        sa.Column("selected", sa.JSON(), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "terms",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_terms")),
        sa.UniqueConstraint("text", name=op.f("uq_terms_text")),
    )
    op.create_table(
        "tools",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("server_name", sa.Text(), nullable=True),
        sa.Column("mcp_tool_name", sa.Text(), nullable=True),
        sa.Column("schema_keys", sa.JSON(), nullable=False),
        sa.Column("input_schema", sa.JSON(), nullable=True),
        sa.Column("load_mode", sa.String(length=16), nullable=False),
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("doc_len", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tools")),
        sa.UniqueConstraint("name", name=op.f("uq_tools_name")),
    )
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tools_server_name"), ["server_name"], unique=False)

    op.create_table(
        "postings",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("tool_id", sa.Integer(), nullable=False),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.Column("doc_len", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tool_id"],
            ["tools.id"],
            name=op.f("fk_postings_tool_id_tools"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("term_id", "grp", "tool_id", name=op.f("pk_postings")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("postings", schema=None) as batch_op:
        batch_op.create_index("ix_postings_tool_id", ["tool_id"], unique=False)

    op.create_table(
        "session_events",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("activated", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_events_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "seq", name=op.f("pk_session_events")),
    )
    with op.batch_alter_table("session_events", schema=None) as batch_op:
        batch_op.create_index("ix_session_events_call", ["session_id", "call_id"], unique=False)
    op.create_table(
        "term_stats",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("df", sa.Integer(), nullable=False),
        sa.Column("max_tf", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["term_id"], ["terms.id"], name=op.f("fk_term_stats_term_id_terms")),
        sa.PrimaryKeyConstraint("term_id", "grp", name=op.f("pk_term_stats")),
    )
    # The aggregates start at zero, so every write can update them in place.
    op.bulk_insert(
        sa.table(
            "catalog_state",
            sa.column("id", sa.Integer),
            sa.column("generation", sa.BigInteger),
        ),
        [{"id": 1, "generation": 0}],
    )
    op.bulk_insert(
        sa.table(
            "group_stats",
            sa.column("grp", sa.SmallInteger),
            sa.column("doc_count", sa.Integer),
            sa.column("total_len", sa.BigInteger),
        ),
        [{"grp": grp, "doc_count": 0, "total_len": 0} for grp in (0, 1, 2)],
    )


def downgrade() -> None:
    op.drop_table("term_stats")
    with op.batch_alter_table("session_events", schema=None) as batch_op:
        batch_op.drop_index("ix_session_events_call")

    op.drop_table("session_events")
    with op.batch_alter_table("postings", schema=None) as batch_op:
        batch_op.drop_index("ix_postings_tool_id")

    op.drop_table("postings")
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tools_server_name"))

    op.drop_table("tools")
    op.drop_table("terms")
    op.drop_table("sessions")
    op.drop_table("group_stats")
    op.drop_table("catalog_state")
