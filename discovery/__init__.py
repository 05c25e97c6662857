"""tool-index: a persistent BM25+ index for tool discovery in LLM agents."""

import gc
from typing import TYPE_CHECKING, Any

# Importing SQLAlchemy and numpy makes tens of thousands of objects that live as long as the
# process. On the way they set off many collections, a full one among them, which free next to
# nothing and weigh on every cold start. The collector waits until the imports are done, and
# then does not walk what they made either: freezing and unfreezing moves every tracked object
# to the oldest generation unexamined, where the young collections that would have promoted
# them step by step do not look. A later full collection still does.
_collecting = gc.isenabled()
gc.disable()
try:
    from discovery.errors import (
        DatabaseMissing,
        DiscoveryDisabled,
        DiscoveryUnavailable,
        EmptyQuery,
        InvalidLimit,
        InvalidRecord,
        QueryNotText,
        QueryWithoutTerms,
        ServerNameCollision,
        ToolCallError,
        ToolIndexError,
        UnknownToolNames,
    )
    from discovery.index import ImportReport, ToolIndex
    from discovery.results import MatchDetails, SearchDetails, SearchHit
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
finally:
    if _collecting:
        gc.freeze()
        gc.unfreeze()
        gc.enable()
    del _collecting

if TYPE_CHECKING:
    from discovery.catalog.models import ToolRecord
    from discovery.sessions.search_tool import SearchTool, ToolResult
    from discovery.sessions.session import Session
    from discovery.sessions.settings import SessionSettings

_LOADED_WHEN_ASKED = {
    "ToolRecord": "discovery.catalog.models",
    "Session": "discovery.sessions.session",
    "SessionSettings": "discovery.sessions.settings",
    "SearchTool": "discovery.sessions.search_tool",
    "ToolResult": "discovery.sessions.search_tool",
}
"""Names whose modules load pydantic (the record and settings models): imported when first asked
for, so that opening an index and searching it does not load pydantic."""


def __getattr__(name: str) -> Any:
    if name in _LOADED_WHEN_ASKED:
        import importlib

        return getattr(importlib.import_module(_LOADED_WHEN_ASKED[name]), name)
    raise AttributeError(f"module 'discovery' has no attribute {name!r}")


__all__ = [
    "ConcurrentUpdate",
    "CorruptIndex",
    "DatabaseMissing",
    "DatabaseUnavailable",
    "DiscoveryDisabled",
    "DiscoveryUnavailable",
    "EmptyQuery",
    "ImportReport",
    "InvalidLimit",
    "InvalidRecord",
    "MatchDetails",
    "QueryNotText",
    "QueryWithoutTerms",
    "ReadOnlyDatabase",
    "SchemaOutdated",
    "SchemaTooNew",
    "SearchDetails",
    "SearchHit",
    "SearchTool",
    "ServerNameCollision",
    "Session",
    "SessionNotFound",
    "SessionSettings",
    "StorageFull",
    "StoreError",
    "ToolCallError",
    "ToolIndex",
    "ToolIndexError",
    "ToolNotFound",
    "ToolRecord",
    "ToolResult",
    "UnknownToolNames",
]
