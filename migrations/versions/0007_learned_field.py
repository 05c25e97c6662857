"""learning from use: the learned field's tables and the learning switch

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 20:20:00.000000

Adds ``learning_state`` (one row: off, generation 0), ``learned_credits``, ``learned_terms``,
``learned_tools`` and ``learned_journal``, all empty: an index learns nothing until learning is
turned on, which computes the learned field from the session logs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    state = op.create_table(
        "learning_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("generation", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("reset_generation", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learning_state")),
    )
    op.bulk_insert(state, [{"id": 1, "enabled": 0, "generation": 0, "reset_generation": 0}])
    op.create_table(
        "learned_credits",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "term", "tool_name", name=op.f("pk_learned_credits")),
    )
    op.create_index("ix_learned_credits_tool_name", "learned_credits", ["tool_name"])
    op.create_table(
        "learned_terms",
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("sessions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("term", "tool_name", name=op.f("pk_learned_terms")),
    )
    op.create_index("ix_learned_terms_tool_name", "learned_terms", ["tool_name"])
    op.create_table(
        "learned_tools",
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tool_name", name=op.f("pk_learned_tools")),
    )
    op.create_table(
        "learned_journal",
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("generation", "term", "tool_name", name=op.f("pk_learned_journal")),
    )


def downgrade() -> None:
    op.drop_table("learned_journal")
    op.drop_table("learned_tools")
    op.drop_index("ix_learned_terms_tool_name", table_name="learned_terms")
    op.drop_table("learned_terms")
    op.drop_index("ix_learned_credits_tool_name", table_name="learned_credits")
    op.drop_table("learned_credits")
    op.drop_table("learning_state")
