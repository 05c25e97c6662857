"""learned identities: credits are keyed by the identity whose session taught them

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 11:00:00.000000

Since revision 0013 session ids are per identity, but ``learned_credits`` was still keyed by
(session id, term, tool): alice's and bob's ``my-project`` shared their credits, and deleting one
session removed what the other taught. Credits are now keyed by (identity, session id, term,
tool), the identity read from ``sessions``; an id that several identities hold gives its credits
to those of them whose log called the tool (where both called it, both get them: ``verify`` names
a credit its log does not teach, and turning learning off and on computes them anew).
``learned_terms`` counts per (term, tool) the distinct identities that taught it beside the
sessions, and ``learning_state.min_identities`` (K, 2 by default) says how many identities must
teach a (term, tool) before it ranks for the others. The sums are summed again from the credits,
and the learned generation is reset.

Downgrade keys credits by (session id, term, tool) again (one credit where identities shared an
id), drops the identity counts and K, and sums again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_MIN_IDENTITIES = 2
"""``discovery._ranking.sharing.MIN_IDENTITIES`` as this revision knows it."""


def upgrade() -> None:
    op.execute("CREATE TABLE learned_credits_0016 AS SELECT * FROM learned_credits")
    _drop_learned_tables()
    op.create_table(
        "learned_credits",
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "identity", "session_id", "term", "tool_name", name=op.f("pk_learned_credits")
        ),
    )
    op.create_index("ix_learned_credits_identity_term", "learned_credits", ["identity", "term", "tool_name"])
    op.create_index("ix_learned_credits_tool_name", "learned_credits", ["tool_name"])
    op.execute(
        "INSERT INTO learned_credits (identity, session_id, term, tool_name) "
        "SELECT s.identity, c.session_id, c.term, c.tool_name FROM learned_credits_0016 c "
        "JOIN sessions s ON s.id = c.session_id "
        "WHERE (SELECT COUNT(*) FROM sessions o WHERE o.id = c.session_id) = 1 "
        "OR EXISTS (SELECT 1 FROM session_events e WHERE e.identity = s.identity "
        "AND e.session_id = c.session_id AND e.kind = 'tool_call' AND e.tool_name = c.tool_name)"
    )
    op.drop_table("learned_credits_0016")
    _create_terms(identities=True)
    op.execute(
        "INSERT INTO learned_terms (term, tool_name, sessions, identities) "
        "SELECT term, tool_name, COUNT(*), COUNT(DISTINCT identity) FROM learned_credits "
        "GROUP BY term, tool_name"
    )
    _sum_lengths()
    with op.batch_alter_table("learning_state", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "min_identities",
                sa.Integer(),
                nullable=False,
                server_default=sa.text(str(DEFAULT_MIN_IDENTITIES)),
            )
        )
    _reset_generation()


def downgrade() -> None:
    op.execute("CREATE TABLE learned_credits_0016 AS SELECT * FROM learned_credits")
    _drop_learned_tables()
    op.create_table(
        "learned_credits",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "term", "tool_name", name=op.f("pk_learned_credits")),
    )
    op.create_index("ix_learned_credits_tool_name", "learned_credits", ["tool_name"])
    op.execute(
        "INSERT INTO learned_credits (session_id, term, tool_name) "
        "SELECT DISTINCT session_id, term, tool_name FROM learned_credits_0016"
    )
    op.drop_table("learned_credits_0016")
    _create_terms(identities=False)
    op.execute(
        "INSERT INTO learned_terms (term, tool_name, sessions) "
        "SELECT term, tool_name, COUNT(*) FROM learned_credits GROUP BY term, tool_name"
    )
    _sum_lengths()
    with op.batch_alter_table("learning_state", schema=None) as batch_op:
        batch_op.drop_column("min_identities")
    _reset_generation()


def _drop_learned_tables() -> None:
    """The credits (copied aside first) and the sums made from them: made again from the copy."""
    op.drop_index("ix_learned_terms_tool_name", table_name="learned_terms")
    op.drop_table("learned_terms")
    op.drop_index("ix_learned_credits_tool_name", table_name="learned_credits")
    if sa.inspect(op.get_bind()).has_index("learned_credits", "ix_learned_credits_identity_term"):
        op.drop_index("ix_learned_credits_identity_term", table_name="learned_credits")
    op.drop_table("learned_credits")
    op.execute("DELETE FROM learned_tools")


def _create_terms(*, identities: bool) -> None:
    counts = [sa.Column("identities", sa.Integer(), nullable=False)] if identities else []
    op.create_table(
        "learned_terms",
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("sessions", sa.Integer(), nullable=False),
        *counts,
        sa.PrimaryKeyConstraint("term", "tool_name", name=op.f("pk_learned_terms")),
    )
    op.create_index("ix_learned_terms_tool_name", "learned_terms", ["tool_name"])


def _sum_lengths() -> None:
    op.execute(
        "INSERT INTO learned_tools (tool_name, length) "
        "SELECT tool_name, COUNT(*) FROM learned_credits GROUP BY tool_name"
    )


def _reset_generation() -> None:
    """A change the journal does not describe: every process reloads the learned field."""
    op.execute(
        "UPDATE learning_state SET generation = generation + 1, reset_generation = generation + 1 "
        "WHERE id = 1"
    )
    op.execute("DELETE FROM learned_journal")
