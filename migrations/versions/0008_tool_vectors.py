"""the semantic signal: one vector per tool and the embedding setting

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 23:00:00.000000

Adds ``embedding_state`` (one row: no model) and ``tool_vectors``, empty: an index has no semantic
signal until ``tool-index embed`` stores vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    state = op.create_table(
        "embedding_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("model_digest", sa.String(length=64), nullable=True),
        sa.Column("dimensions", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("weight", sa.Float(), server_default=sa.text("0.5"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_embedding_state")),
    )
    op.bulk_insert(state, [{"id": 1, "model": None, "model_digest": None, "dimensions": 0, "weight": 0.5}])
    op.create_table(
        "tool_vectors",
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("scale", sa.Float(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("tool_name", name=op.f("pk_tool_vectors")),
    )


def downgrade() -> None:
    op.drop_table("tool_vectors")
    op.drop_table("embedding_state")
