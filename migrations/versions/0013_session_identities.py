"""session identities: every session belongs to one identity, and ids are per identity

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 08:00:00.000000

Sessions are keyed by (identity, id), and so are their logs; ``sessions.opened_by`` says which
command on which host made a session. Existing sessions keep their ids and logs: one whose log
has a gateway's ``owner`` entry becomes that identity's (unqualified, as identities were one
namespace before), every other one the local identity's.

Downgrade gives the ids back their single namespace. A session of another identity than the
local one gets an ``owner`` entry (unless it has one), so that revision 0012's gateways still
keep it to its identity. It is refused while two identities hold sessions of the same id, which
one namespace cannot keep apart: delete one of them first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCAL_IDENTITY = "local"
"""``discovery._rules.LOCAL_IDENTITY`` as this revision knows it (a revision never imports the
code it migrates for)."""
OWNER_EVENT = "owner"
SESSION_COLUMNS = "id, settings, active, selected, event_count, created_at, updated_at"
EVENT_COLUMNS = "seq, kind, tool_name, call_id, params, content, details, error, activated, created_at"


def upgrade() -> None:
    connection = op.get_bind()
    owners = _owners(connection)
    _set_aside()
    _create_keyed_tables()
    connection.execute(
        sa.text(
            f"INSERT INTO sessions (identity, {SESSION_COLUMNS}) "
            f"SELECT :identity, {SESSION_COLUMNS} FROM sessions_0013"
        ),
        {"identity": LOCAL_IDENTITY},
    )
    connection.execute(
        sa.text(
            f"INSERT INTO session_events (identity, session_id, {EVENT_COLUMNS}) "
            f"SELECT :identity, session_id, {EVENT_COLUMNS} FROM session_events_0013"
        ),
        {"identity": LOCAL_IDENTITY},
    )
    _drop_set_aside()
    for session_id, owner in owners.items():
        moved = {"owner": owner, "id": session_id, "local": LOCAL_IDENTITY}
        connection.execute(
            sa.text("UPDATE sessions SET identity = :owner WHERE identity = :local AND id = :id"), moved
        )
        # The log follows by its foreign key; said again for a connection that does not enforce it.
        connection.execute(
            sa.text(
                "UPDATE session_events SET identity = :owner WHERE identity = :local AND session_id = :id"
            ),
            moved,
        )


def downgrade() -> None:
    connection = op.get_bind()
    shared = connection.execute(
        sa.text("SELECT id FROM sessions GROUP BY id HAVING COUNT(*) > 1 ORDER BY id")
    ).scalars()
    clashes = list(shared)
    if clashes:
        shown = ", ".join(repr(session_id) for session_id in clashes[:5])
        raise RuntimeError(
            f"cannot downgrade below revision 0013: sessions {shown} of different identities share "
            "an id, which older revisions cannot keep apart; delete one of each first"
        )
    _own_unowned(connection)
    _set_aside()
    _create_plain_tables()
    connection.execute(
        sa.text(f"INSERT INTO sessions ({SESSION_COLUMNS}) SELECT {SESSION_COLUMNS} FROM sessions_0013")
    )
    connection.execute(
        sa.text(
            f"INSERT INTO session_events (session_id, {EVENT_COLUMNS}) "
            f"SELECT session_id, {EVENT_COLUMNS} FROM session_events_0013"
        )
    )
    _drop_set_aside()


def _owners(connection: sa.Connection) -> dict[str, str]:
    """Each session's identity by its first ``owner`` entry (revision 0012's gateways)."""
    rows = connection.execute(
        sa.text("SELECT session_id, params FROM session_events WHERE kind = :kind ORDER BY session_id, seq"),
        {"kind": OWNER_EVENT},
    )
    owners: dict[str, str] = {}
    for session_id, params in rows:
        identity = _decoded(params).get("identity")
        if session_id not in owners and isinstance(identity, str) and identity:
            owners[session_id] = identity
    return owners


def _decoded(params: Any) -> dict[str, Any]:
    """A logged entry's params as an object: SQLite gives JSON text, PostgreSQL the value."""
    if isinstance(params, str | bytes):
        try:
            params = json.loads(params)
        except ValueError:
            return {}
    return params if isinstance(params, dict) else {}


def _own_unowned(connection: sa.Connection) -> None:
    """Log an ``owner`` entry in each session of another identity than the local one that has none."""
    owned = set(_owners(connection))
    rows = connection.execute(
        sa.text(
            "SELECT identity, id, event_count FROM sessions WHERE identity <> :local ORDER BY identity, id"
        ),
        {"local": LOCAL_IDENTITY},
    )
    events = sa.table(
        "session_events",
        sa.column("identity", sa.Text),
        sa.column("session_id", sa.Text),
        sa.column("seq", sa.Integer),
        sa.column("kind", sa.String),
        sa.column("params", sa.JSON),
        sa.column("activated", sa.JSON),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    stamp = datetime.now(UTC)
    for identity, session_id, count in list(rows):
        if session_id in owned:
            continue
        connection.execute(
            events.insert().values(
                identity=identity,
                session_id=session_id,
                seq=count + 1,
                kind=OWNER_EVENT,
                params={"identity": identity},
                activated=[],
                created_at=stamp,
            )
        )
        connection.execute(
            sa.text("UPDATE sessions SET event_count = :count WHERE identity = :identity AND id = :id"),
            {"count": count + 1, "identity": identity, "id": session_id},
        )


def _set_aside() -> None:
    """Copy both tables aside and drop them (the log first: nothing refers to it), so that they
    are made again with their new keys; a copy has no constraint to clash with theirs."""
    op.execute("CREATE TABLE sessions_0013 AS SELECT * FROM sessions")
    op.execute("CREATE TABLE session_events_0013 AS SELECT * FROM session_events")
    op.drop_index("ix_session_events_call_seq", table_name="session_events")
    op.drop_table("session_events")
    op.drop_table("sessions")


def _drop_set_aside() -> None:
    op.drop_table("session_events_0013")
    op.drop_table("sessions_0013")


def _session_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("active", sa.JSON(), nullable=False),
        sa.Column("selected", sa.JSON(), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def _event_columns() -> list[sa.Column[Any]]:
    return [
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
    ]


def _create_keyed_tables() -> None:
    op.create_table(
        "sessions",
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        *_session_columns(),
        sa.Column("opened_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("identity", "id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "session_events",
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        *_event_columns(),
        sa.ForeignKeyConstraint(
            ["identity", "session_id"],
            ["sessions.identity", "sessions.id"],
            name=op.f("fk_session_events_identity_sessions"),
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
        sa.PrimaryKeyConstraint("identity", "session_id", "seq", name=op.f("pk_session_events")),
    )
    op.create_index(
        "ix_session_events_call_seq", "session_events", ["identity", "session_id", "call_id", "seq"]
    )


def _create_plain_tables() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.Text(), nullable=False),
        *_session_columns(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "session_events",
        sa.Column("session_id", sa.Text(), nullable=False),
        *_event_columns(),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_events_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "seq", name=op.f("pk_session_events")),
    )
    op.create_index("ix_session_events_call_seq", "session_events", ["session_id", "call_id", "seq"])
