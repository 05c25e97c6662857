"""Everything that touches SQL: schema, engines, migrations, catalog and session storage.

The package exports what ``discovery`` uses of it by name: the row types (and the values their
fields take: the corpus groups, the longest key), the errors, and the engine's entry points. The
query modules (``catalog``, ``reads``, ``sessions``, ``learning``, ``audit``, ``migrate``) are
imported by name; the transaction helpers and URL defaults come from ``store.engine``."""

from store.engine import make_engine, sqlite_file
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
from store.records import GroupStats, IndexedBatch, IndexedTool, StoredTool, TermStats, ToolRow, WriteReport
from store.schema import GROUP_FIXED, GROUP_LOCAL, GROUP_MCP, GROUPS, MAX_KEY_BYTES
from store.urls import display_url, parse_url

__all__ = [
    "GROUPS",
    "GROUP_FIXED",
    "GROUP_LOCAL",
    "GROUP_MCP",
    "MAX_KEY_BYTES",
    "ConcurrentUpdate",
    "CorruptIndex",
    "DatabaseUnavailable",
    "GroupStats",
    "IndexedBatch",
    "IndexedTool",
    "ReadOnlyDatabase",
    "SchemaOutdated",
    "SchemaTooNew",
    "SessionNotFound",
    "StorageFull",
    "StoreError",
    "StoredTool",
    "TermStats",
    "ToolNotFound",
    "ToolRow",
    "WriteReport",
    "display_url",
    "make_engine",
    "parse_url",
    "sqlite_file",
]
