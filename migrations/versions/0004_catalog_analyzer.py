"""the catalog records the analyzer its postings were made with

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 16:00:00.000000

Every database before this revision was indexed with the reference analyzer, so that is what
the new column says for them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "catalog_state",
        sa.Column("analyzer", sa.Text(), nullable=False, server_default="reference"),
    )


def downgrade() -> None:
    # An older revision can only read postings of the reference analyzer: refuse rather than
    # leave it a catalog it would search with the wrong terms.
    analyzer = op.get_bind().execute(sa.text("SELECT analyzer FROM catalog_state")).scalar()
    if analyzer not in (None, "reference"):
        raise RuntimeError(
            f"the catalog is indexed with the {analyzer!r} analyzer; run "
            "`tool-index reindex --analyzer reference` before downgrading"
        )
    with op.batch_alter_table("catalog_state") as batch:
        batch.drop_column("analyzer")
