"""SQLAlchemy models of the catalog, its postings and aggregates, and the session store.

Postings are packed per (term, group) with the document length of each tool, so a query reads
only the blocks of its terms — one row per term and group — and never the tool table
(``store.postings`` explains the layout).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Corpus groups: which documents a session corpus can ever contain (SPEC §5).
GROUP_FIXED = 0
"""Never in a corpus: essential by load mode, internal names, non-MCP tools not discoverable."""
GROUP_LOCAL = 1
"""Non-MCP tools with load mode ``discoverable``: searchable in mode ``all``."""
GROUP_MCP = 2
"""Tools whose name starts with ``mcp__`` and that are not essential by load mode."""
GROUPS = (GROUP_FIXED, GROUP_LOCAL, GROUP_MCP)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[str]: JSON}


class Tool(Base):
    """One catalog record, stored whole, with its indexing facts."""

    __tablename__ = "tools"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    label: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    summary: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16))
    server_name: Mapped[str | None] = mapped_column(Text, index=True)
    mcp_tool_name: Mapped[str | None] = mapped_column(Text)
    schema_keys: Mapped[list[str]] = mapped_column(JSON)
    input_schema: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    load_mode: Mapped[str] = mapped_column(String(16))
    grp: Mapped[int] = mapped_column(SmallInteger)
    doc_len: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    indexed_terms: Mapped[bytes] = mapped_column(LargeBinary)
    """The tool's postings seen from the tool: ``(term id, weighted tf)`` pairs packed as
    ``store.postings.FORWARD_DTYPE``, in the order the record's text gives them. Writes read it
    to undo a tool's postings without scanning the blocks; ``verify`` checks it against both."""


class Term(Base):
    """A distinct token of the catalog; postings refer to it by id."""

    __tablename__ = "terms"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    text: Mapped[str] = mapped_column(Text, unique=True)


class TermStat(Base):
    """Per term and corpus group: document frequency and the largest weighted tf.

    ``max_tf`` bounds the term's contribution to any document (``scoring.term_upper_bound``).
    """

    __tablename__ = "term_stats"

    term_id: Mapped[int] = mapped_column(ForeignKey("terms.id"), primary_key=True)
    grp: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    df: Mapped[int] = mapped_column(Integer)
    max_tf: Mapped[int] = mapped_column(Integer)


class PostingBlock(Base):
    """The postings of one term in one corpus group, packed by ``store.postings``."""

    __tablename__ = "posting_blocks"

    term_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    grp: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    size: Mapped[int] = mapped_column(Integer)
    tool_ids: Mapped[bytes] = mapped_column(LargeBinary)
    tfs: Mapped[bytes] = mapped_column(LargeBinary)
    doc_lens: Mapped[bytes] = mapped_column(LargeBinary)


class PostingDelta(Base):
    """Recent changes to the blocks: the entry of (term, group, tool) is set (``tf > 0``) or
    removed (``tf = 0``) until a write merges the key's overrides into its block."""

    __tablename__ = "posting_delta"

    term_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    grp: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    tool_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tf: Mapped[int] = mapped_column(Integer)
    doc_len: Mapped[int] = mapped_column(Integer)

    # Clustered by (term, group, tool) on SQLite: a term's overrides are one contiguous range.
    __table_args__ = ({"sqlite_with_rowid": False},)


class GroupStat(Base):
    """Document count and total length per corpus group."""

    __tablename__ = "group_stats"

    grp: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    doc_count: Mapped[int] = mapped_column(Integer)
    total_len: Mapped[int] = mapped_column(BigInteger)


class CatalogState(Base):
    """One row: the catalog generation, bumped by every catalog write.

    Processes key their caches by it, so a write in one process is seen by all others.
    """

    __tablename__ = "catalog_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)


class Session(Base):
    """A discovery session: settings and the ordered active and selected lists."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    active: Mapped[list[str]] = mapped_column(JSON)
    selected: Mapped[list[str]] = mapped_column(JSON)
    event_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SessionEvent(Base):
    """The append-only log of a session, in order: ``create``, ``search``, ``set_active``, ``reset``.

    Replaying it (``store.sessions.replay``) gives the session's stored lists: ``create`` and
    ``reset`` carry the active list they started with in ``params``, ``search`` the names it
    activated, ``set_active`` the names it was given.
    """

    __tablename__ = "session_events"

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    tool_name: Mapped[str | None] = mapped_column(Text)
    call_id: Mapped[str | None] = mapped_column(Text)
    params: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    content: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    activated: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    # A retried call id is answered from the log instead of running twice. ``seq`` is in the
    # index so that the first answer is its first entry: without it SQLite walks the whole log.
    __table_args__ = (Index("ix_session_events_call_seq", "session_id", "call_id", "seq"),)
