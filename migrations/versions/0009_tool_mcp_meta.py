"""what an MCP server says of a tool beyond the record: title, annotations, output schema, icons

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 02:00:00.000000

Adds ``tools.mcp_meta``, a JSON object or null: a tool listed by its server keeps them in the
catalog, so a gateway shows them whichever process synced the server. Existing rows hold null
(their digests are unchanged: a record's digest covers ``mcp_meta`` only when it has one).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("mcp_meta", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.drop_column("mcp_meta")
