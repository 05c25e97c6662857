"""the answered-call lookup index covers ``seq``

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 20:00:00.000000

Every search call asks for the first ``search`` event of its session with its call id. With the
index on ``(session_id, call_id)`` alone, SQLite answers ``min(seq)`` by walking the session's
events in primary-key order instead, which reads the whole log whenever the call id is new (a
session with 2,000 events: 0.5 ms a call, growing with the log). With ``seq`` in the index the
answer is its first entry for the pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_session_events_call_seq", "session_events", ["session_id", "call_id", "seq"])
    op.drop_index("ix_session_events_call", table_name="session_events")


def downgrade() -> None:
    op.create_index("ix_session_events_call", "session_events", ["session_id", "call_id"])
    op.drop_index("ix_session_events_call_seq", table_name="session_events")
