"""server origins: what each MCP server in the catalog is, and which host's config synced it

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-06 08:00:00.000000

Adds ``mcp_servers``: per server name, a fingerprint of what the server is (transport and command
and arguments, or URL), a form of it safe to show, the host and config file that made the catalog
hold it, and its latest sync. A catalog shared by many hosts then refuses a sync that would give
one server's name to a different server (issue 56). Existing servers have no row: the next sync of
each records it. Downgrade drops the table; the tools stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("transport", sa.String(length=16), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_mcp_servers")),
    )


def downgrade() -> None:
    op.drop_table("mcp_servers")
