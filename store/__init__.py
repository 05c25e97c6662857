"""Everything that touches SQL, behind one interface: a ``Store`` and its read and write units.

``Store.at(url)`` (or ``Store(engine)``) is one database; ``with store.reading() as reader:`` and
``with store.writing() as writer:`` are its transactions, and the views of a unit (``catalog``,
``index``, ``sessions``, ``learning``, ``vectors``, ``audit``) are all that ``discovery`` reads and
writes through. Besides them the package exports the row types those views take and return
(with the values their fields take: the corpus groups, the longest key), the fixed encodings of
what is stored (a record's digests, the logged JSON form), and the errors (``store.errors``,
whose root is ``ToolIndexError``). Every other module of the package is private (its name
starts with ``_``)."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store._audit import AuditedTool, StoredPosting
    from store._catalog import ReplaceScope
    from store._digests import json_digest, record_digest
    from store._first_answers import stored_first_answer
    from store._learning import Credit, LearnedChange, LearnedTool, LearningState, StoredLearnedPostings
    from store._location import ENV_VAR, default_url
    from store._logged_json import column_json, same_logged, storable
    from store._postings import PostingBlock
    from store._records import (
        GroupStats,
        IndexedBatch,
        IndexedTool,
        StoredTool,
        TermStats,
        ToolRow,
        WriteReport,
    )
    from store._schema import GROUP_FIXED, GROUP_LOCAL, GROUP_MCP, GROUPS, MAX_KEY_BYTES
    from store._sessions import Event, LoggedEvent, SessionState
    from store._units import Reader, Store, Writer
    from store._vectors import EmbeddingState, StoredVectors, VectorRow
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
        ToolIndexError,
        ToolNotFound,
    )

_HOMES = {
    "AuditedTool": "store._audit",
    "StoredPosting": "store._audit",
    "ReplaceScope": "store._catalog",
    "stored_first_answer": "store._first_answers",
    "ENV_VAR": "store._location",
    "default_url": "store._location",
    "json_digest": "store._digests",
    "record_digest": "store._digests",
    "Credit": "store._learning",
    "LearnedChange": "store._learning",
    "LearnedTool": "store._learning",
    "LearningState": "store._learning",
    "StoredLearnedPostings": "store._learning",
    "column_json": "store._logged_json",
    "same_logged": "store._logged_json",
    "storable": "store._logged_json",
    "PostingBlock": "store._postings",
    "GroupStats": "store._records",
    "IndexedBatch": "store._records",
    "IndexedTool": "store._records",
    "StoredTool": "store._records",
    "TermStats": "store._records",
    "ToolRow": "store._records",
    "WriteReport": "store._records",
    "GROUP_FIXED": "store._schema",
    "GROUP_LOCAL": "store._schema",
    "GROUP_MCP": "store._schema",
    "GROUPS": "store._schema",
    "MAX_KEY_BYTES": "store._schema",
    "Event": "store._sessions",
    "LoggedEvent": "store._sessions",
    "SessionState": "store._sessions",
    "Reader": "store._units",
    "Store": "store._units",
    "Writer": "store._units",
    "EmbeddingState": "store._vectors",
    "StoredVectors": "store._vectors",
    "VectorRow": "store._vectors",
    "ConcurrentUpdate": "store.errors",
    "CorruptIndex": "store.errors",
    "DatabaseUnavailable": "store.errors",
    "ReadOnlyDatabase": "store.errors",
    "SchemaOutdated": "store.errors",
    "SchemaTooNew": "store.errors",
    "SessionNotFound": "store.errors",
    "StorageFull": "store.errors",
    "StoreError": "store.errors",
    "ToolIndexError": "store.errors",
    "ToolNotFound": "store.errors",
}
"""The module each exported name is defined in. Each is imported when first used, so that a
program reading one small module of the package (``store.errors``) does not load SQLAlchemy."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
    "LearnedChange",
    "LearnedTool",
    "LearningState",
    "LoggedEvent",
    "PostingBlock",
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
    "StoredLearnedPostings",
    "StoredPosting",
    "StoredTool",
    "StoredVectors",
    "TermStats",
    "ToolIndexError",
    "ToolNotFound",
    "ToolRow",
    "VectorRow",
    "WriteReport",
    "Writer",
    "column_json",
    "default_url",
    "json_digest",
    "record_digest",
    "same_logged",
    "storable",
    "stored_first_answer",
]
