"""Everything that touches SQL: schema, engines, migrations, catalog and session storage.

The package exports the store's types, errors and engine functions; the query modules
(``catalog``, ``reads``, ``sessions``, ``audit``, ``migrate``) are imported by name."""

from store.engine import default_url, make_engine, sqlite_file
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
    damaged,
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
    "damaged",
    "default_url",
    "display_url",
    "make_engine",
    "parse_url",
    "sqlite_file",
]
