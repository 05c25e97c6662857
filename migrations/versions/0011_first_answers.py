"""first answers: a gateway's first tools/list answer, kept with the state it was made from

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 08:00:00.000000

Adds ``first_answers``: what a ``serve`` process answered to its first ``tools/list``, so that the
next process gives the same answer before its library has loaded, while the catalog and the
session are as they were (``store._first_answers``). Empty at first; dropped on downgrade.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "first_answers",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("stamp", sa.String(length=64), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("written_at", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_first_answers")),
    )


def downgrade() -> None:
    op.drop_table("first_answers")
