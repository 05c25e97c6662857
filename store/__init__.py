"""Everything that touches SQL: schema, engines, migrations, catalog and session storage.

The package exports what ``discovery`` uses of it by name: the row types (and the values their
fields take: the corpus groups, the longest key), the errors, and the engine's entry points. The
query modules (``catalog``, ``reads``, ``sessions``, ``learning``, ``audit``, ``migrate``) are
imported by name; the transaction helpers and URL defaults come from ``store.engine``."""

from store.audit import AuditedTool, StoredPosting
from store.catalog import ReplaceScope
from store.digests import json_digest, record_digest
from store.engine import ENV_VAR, default_url, sqlite_file
from store.errors import (
    ConcurrentUpdate,
    CorruptIndex,
    DatabaseUnavailable,
    ReadOnlyDatabase,
    SchemaOutdated,
    SchemaTooNew,
    SessionNotFound,
    StorageFull,
    StoreError,
    ToolNotFound,
)
from store.learning import Credit, LearnedTool, LearningState
from store.logged_json import column_json, same_logged, storable
from store.records import GroupStats, IndexedBatch, IndexedTool, StoredTool, TermStats, ToolRow, WriteReport
from store.schema import GROUP_FIXED, GROUP_LOCAL, GROUP_MCP, GROUPS, MAX_KEY_BYTES
from store.sessions import Event, LoggedEvent, SessionState
from store.units import Reader, Store, Writer
from store.urls import parse_url
from store.vectors import EmbeddingState, StoredVectors, VectorRow

__all__ = [
    "ENV_VAR",
    "GROUPS",
    "GROUP_FIXED",
    "GROUP_LOCAL",
    "GROUP_MCP",
    "MAX_KEY_BYTES",
    "AuditedTool",
    "ConcurrentUpdate",
    "CorruptIndex",
    "Credit",
    "DatabaseUnavailable",
    "EmbeddingState",
    "Event",
    "GroupStats",
    "IndexedBatch",
    "IndexedTool",
    "LearnedTool",
    "LearningState",
    "LoggedEvent",
    "ReadOnlyDatabase",
    "Reader",
    "ReplaceScope",
    "SchemaOutdated",
    "SchemaTooNew",
    "SessionNotFound",
    "SessionState",
    "StorageFull",
    "Store",
    "StoreError",
    "StoredPosting",
    "StoredTool",
    "StoredVectors",
    "TermStats",
    "ToolNotFound",
    "ToolRow",
    "VectorRow",
    "WriteReport",
    "Writer",
    "column_json",
    "default_url",
    "json_digest",
    "parse_url",
    "record_digest",
    "same_logged",
    "sqlite_file",
    "storable",
]
