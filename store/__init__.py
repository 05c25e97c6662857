"""Everything that touches SQL, behind one interface: a ``Store`` and its read and write units.

``Store.at(url)`` (or ``Store(engine)``) is one database; ``with store.reading() as reader:`` and
``with store.writing() as writer:`` are its transactions, and the views of a unit (``catalog``,
``index``, ``sessions``, ``learning``, ``vectors``, ``audit``) are all that ``discovery`` reads and
writes through. Besides them the package exports the row types those views take and return
(with the values their fields take: the corpus groups, the longest key), the fixed encodings of
what is stored (a record's digests, the logged JSON form), and the errors (``store.errors``,
whose root is ``ToolIndexError``). Every other module of the package is private (its name
starts with ``_``)."""

from store._audit import AuditedTool, StoredPosting
from store._catalog import ReplaceScope
from store._digests import json_digest, record_digest
from store._learning import Credit, LearnedChange, LearnedTool, LearningState, StoredLearnedPostings
from store._logged_json import column_json, same_logged, storable
from store._postings import PostingBlock
from store._records import GroupStats, IndexedBatch, IndexedTool, StoredTool, TermStats, ToolRow, WriteReport
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
    ToolNotFound,
)

__all__ = [
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
    "ToolNotFound",
    "ToolRow",
    "VectorRow",
    "WriteReport",
    "Writer",
    "column_json",
    "json_digest",
    "record_digest",
    "same_logged",
    "storable",
]
