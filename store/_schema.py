"""The tables of the catalog, its postings and aggregates, and the session store.

Postings are packed per (term, group) with the document length of each tool, so a query reads
only the blocks of its terms — one row per term and group — and never the tool table
(``store._postings`` explains the layout).
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    text,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class CorpusGroups(NamedTuple):
    """Which documents a session corpus can ever contain (contract §5): each tool is stored in
    one group, and a corpus is drawn from whole groups."""

    fixed: int
    """Never in a corpus: essential by load mode, internal names, non-MCP tools not discoverable."""
    local: int
    """Non-MCP tools with load mode ``discoverable``: searchable in mode ``all``."""
    mcp: int
    """Tools whose name starts with ``mcp__`` and that are not essential by load mode."""


GROUPS = CorpusGroups(fixed=0, local=1, mcp=2)
"""The corpus groups by name (``GROUPS.mcp``); iterated, every group in order."""


metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""Core tables rather than ORM classes: nothing here needs identity maps or units of work, and
a new process that opens an index and searches it skips importing ``sqlalchemy.orm``."""


tools_table = Table(
    "tools",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, unique=True, nullable=False),
    Column("label", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("source", String(16), nullable=False),
    Column("server_name", Text, index=True),
    Column("mcp_tool_name", Text),
    Column("schema_keys", JSON, nullable=False),
    Column("input_schema", JSON),
    Column("load_mode", String(16), nullable=False),
    Column("grp", SmallInteger, nullable=False),
    Column("doc_len", Integer, nullable=False),
    Column("content_hash", String(64), nullable=False),
    # The tool's postings seen from the tool: ``(term id, weighted tf)`` pairs packed as
    # ``store._postings.FORWARD_DTYPE``, in the order the record's text gives them. Writes read it
    # to undo a tool's postings without scanning the blocks; ``verify`` checks it against both.
    Column("indexed_terms", LargeBinary, nullable=False),
    # What the tool's MCP server said of it beyond the record (title, annotations, output schema,
    # icons): shown by a gateway, never indexed.
    Column("mcp_meta", JSON),
)
"""One catalog record, stored whole, with its indexing facts."""

terms_table = Table(
    "terms",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("text", Text, unique=True, nullable=False),
)
"""A distinct token of the catalog; postings refer to it by id."""

term_stats_table = Table(
    "term_stats",
    metadata,
    Column("term_id", ForeignKey("terms.id"), primary_key=True),
    Column("grp", SmallInteger, primary_key=True),
    Column("df", Integer, nullable=False),
    Column("max_tf", Integer, nullable=False),
)
"""Per term and corpus group: document frequency and the largest weighted tf.

``max_tf`` bounds the term's contribution to any document (``scoring.term_upper_bound``)."""

posting_blocks_table = Table(
    "posting_blocks",
    metadata,
    Column("term_id", Integer, primary_key=True),
    Column("grp", SmallInteger, primary_key=True),
    Column("size", Integer, nullable=False),
    # Bytes per tool id, tf and length as three digits (``store._postings.LAYOUTS``); blocks
    # written before revision 0006 are all 8, 4 and 4.
    Column("widths", SmallInteger, nullable=False, server_default=text("844")),
    Column("tool_ids", LargeBinary, nullable=False),
    Column("tfs", LargeBinary, nullable=False),
    Column("doc_lens", LargeBinary, nullable=False),
)
"""The postings of one term in one corpus group, packed by ``store._postings``."""

posting_delta_table = Table(
    "posting_delta",
    metadata,
    Column("term_id", Integer, primary_key=True),
    Column("grp", SmallInteger, primary_key=True),
    Column("tool_id", Integer, primary_key=True),
    Column("tf", Integer, nullable=False),
    Column("doc_len", Integer, nullable=False),
    # Clustered by (term, group, tool) on SQLite: a term's overrides are one contiguous range.
    sqlite_with_rowid=False,
)
"""Recent changes to the blocks: the entry of (term, group, tool) is set (``tf > 0``) or
removed (``tf = 0``) until a write merges the key's overrides into its block."""

group_stats_table = Table(
    "group_stats",
    metadata,
    Column("grp", SmallInteger, primary_key=True),
    Column("doc_count", Integer, nullable=False),
    Column("total_len", BigInteger, nullable=False),
)
"""Document count and total length per corpus group."""

catalog_state_table = Table(
    "catalog_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("generation", BigInteger, nullable=False),
    Column("analyzer", Text, nullable=False, server_default="reference"),
)
"""One row: the catalog generation, bumped by every catalog write, and the name of the analyzer
its postings were made with.

Processes key their caches by the generation, so a write in one process is seen by all others;
changing the analyzer is such a write."""

sessions_table = Table(
    "sessions",
    metadata,
    Column("identity", Text, primary_key=True),
    Column("id", Text, primary_key=True),
    Column("settings", JSON, nullable=False),
    Column("active", JSON, nullable=False),
    Column("selected", JSON, nullable=False),
    Column("event_count", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("opened_by", Text),
)
"""A discovery session of one identity: settings and the ordered active and selected lists, and
who opened it (command and host). Ids are per identity: another identity's id is another session."""

session_events_table = Table(
    "session_events",
    metadata,
    Column("identity", Text, primary_key=True),
    Column("session_id", Text, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("tool_name", Text),
    Column("call_id", Text),
    Column("params", JSON),
    Column("content", Text),
    Column("details", JSON),
    Column("error", Text),
    Column("activated", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # The log follows its session when a gateway adopts the sessions of an identity of its own
    # (``SessionWrites.adopt``), and goes with it.
    ForeignKeyConstraint(
        ["identity", "session_id"],
        ["sessions.identity", "sessions.id"],
        ondelete="CASCADE",
        onupdate="CASCADE",
    ),
    # A retried call id is answered from the log instead of running twice. ``seq`` is in the
    # index so that the first answer is its first entry: without it SQLite walks the whole log.
    Index("ix_session_events_call_seq", "identity", "session_id", "call_id", "seq"),
)
"""The append-only log of a session, in order: ``create``, ``search``, ``set_active``, ``reset``.

Replaying it (``store._sessions.replay``) gives the session's stored lists: ``create`` and
``reset`` carry the active list they started with in ``params``, ``search`` the names it
activated, ``set_active`` the names it was given."""

learning_state_table = Table(
    "learning_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("enabled", Integer, nullable=False, server_default=text("0")),
    Column("generation", BigInteger, nullable=False, server_default=text("0")),
    Column("reset_generation", BigInteger, nullable=False, server_default=text("0")),
    Column("min_identities", Integer, nullable=False, server_default=text("2")),
)
"""One row: whether the index ranks with its learned field, and the learned generation, bumped by
every change of the learned field; ``reset_generation`` is the last change that the journal does
not describe (a rebuild, the switch, forgetting everything, a new ``min_identities``), which a
cache older than it drops. ``min_identities`` is K: how many distinct identities must teach a
(term, tool) before it ranks for other identities than its teachers (2K for a destructive tool).

A row of its own, not ``catalog_state``: a recorded call changes what was learned, and must
neither wait for catalog readers nor make other processes drop their catalog caches."""

learned_credits_table = Table(
    "learned_credits",
    metadata,
    Column("identity", Text, primary_key=True),
    Column("session_id", Text, primary_key=True),
    Column("term", Text, primary_key=True),
    Column("tool_name", Text, primary_key=True),
    Index("ix_learned_credits_identity_term", "identity", "term", "tool_name"),
    Index("ix_learned_credits_tool_name", "tool_name"),
)
"""Which session (of which identity: session ids are per identity) taught which query term to
which tool: each counts once (``discovery._sessions.learning`` states the rule). Everything below
is summed from these rows, and these from the session logs. The second index serves a search's
read of its identity's own credits for the query's terms, and whether an identity still teaches
a (term, tool) another of its sessions stopped teaching."""

learned_terms_table = Table(
    "learned_terms",
    metadata,
    Column("term", Text, primary_key=True),
    Column("tool_name", Text, primary_key=True),
    Column("sessions", Integer, nullable=False),
    Column("identities", Integer, nullable=False),
    Index("ix_learned_terms_tool_name", "tool_name"),
)
"""The learned field's sums per term and tool: how many sessions taught it, and how many distinct
identities (what decides whether it ranks for others). Keyed by tool name, not id, so that
learning outlives a tool's removal and comes back with it."""

learned_tools_table = Table(
    "learned_tools",
    metadata,
    Column("tool_name", Text, primary_key=True),
    Column("length", Integer, nullable=False),
)
"""Per tool, the learned field's length: the sum of its tfs."""

learned_journal_table = Table(
    "learned_journal",
    metadata,
    Column("generation", BigInteger, primary_key=True),
    Column("term", Text, primary_key=True),
    Column("tool_name", Text, primary_key=True),
)
"""The (term, tool) sums each recent learned generation changed: a process whose caches are a few
generations behind reloads only those, not the whole field. Pruned to the last
``store._learning.JOURNAL_KEPT`` generations."""

embedding_state_table = Table(
    "embedding_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("model", Text),
    Column("model_digest", String(64)),
    Column("dimensions", Integer, nullable=False, server_default=text("0")),
    Column("weight", Float, nullable=False, server_default=text("0.5")),
)
"""One row: the embedding model the index's vectors come from (``None``: no semantic signal), a
digest of its files, the vectors' length, and the weight of the semantic part in a fused score."""

tool_vectors_table = Table(
    "tool_vectors",
    metadata,
    Column("tool_name", Text, primary_key=True),
    Column("content_hash", String(64), nullable=False),
    Column("scale", Float, nullable=False),
    Column("vector", LargeBinary, nullable=False),
)
"""One embedding per tool, as 4-bit values packed two to a byte (int8 before revision 0010) with
its scale (the value of 1 in those units). Current when ``content_hash`` is the tool's: a tool
changed since it was embedded has a stale vector, which no search uses. Keyed by name, so a
removed tool's vector is dropped by the write that removes it."""

mcp_servers_table = Table(
    "mcp_servers",
    metadata,
    Column("name", Text, primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("transport", String(16), nullable=False),
    Column("target", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("config", Text, nullable=False),
    Column("synced_at", DateTime(timezone=True), nullable=False),
)
"""Per MCP server name that a sync wrote: what the server is (a digest of its transport and command
and arguments, or URL, and a form of it without secrets), the host and config file that made the
catalog hold it, and its latest sync (``store._servers``)."""
