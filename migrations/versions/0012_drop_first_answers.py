"""drop first answers: the gateway answers its first tools/list as it answers every other one

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 05:00:00.000000

Drops ``first_answers`` (revision 0011): a ``serve`` process no longer gives a stored answer
before its library loads. What it held was only ever a copy of an answer the gateway makes
again, so nothing is lost. Downgrade makes the table again, empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table("first_answers")


def downgrade() -> None:
    op.create_table(
        "first_answers",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("stamp", sa.String(length=64), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("written_at", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_first_answers")),
    )
