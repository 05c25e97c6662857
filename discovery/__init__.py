"""tool-index: a persistent BM25+ index for tool discovery in LLM agents.

Each name is imported from its module when first used, so importing the package loads nothing
else and changes nothing in the process: a program decides for itself what its imports cost
(the command line pauses the collector around its own). Opening an index and searching it never
loads the pydantic models (``ToolRecord``, ``SessionSettings`` and the session's types)."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from discovery.catalog.models import ToolRecord
    from discovery.errors import (
        DatabaseMissing,
        DiscoveryDisabled,
        DiscoveryUnavailable,
        EmptyQuery,
        InvalidLimit,
        InvalidRecord,
        QueryNotText,
        QueryWithoutTerms,
        ToolCallError,
        ToolIndexError,
        UnknownToolNames,
    )
    from discovery.index import ImportReport, ToolIndex
    from discovery.results import MatchDetails, SearchDetails, SearchHit
    from discovery.sessions.search_tool import SearchTool, ToolResult
    from discovery.sessions.session import Session
    from discovery.sessions.settings import SessionSettings
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

_HOMES = {
    "ToolIndex": "discovery.index",
    "ImportReport": "discovery.index",
    "Session": "discovery.sessions.session",
    "SessionSettings": "discovery.sessions.settings",
    "SearchTool": "discovery.sessions.search_tool",
    "ToolResult": "discovery.sessions.search_tool",
    "ToolRecord": "discovery.catalog.models",
    "SearchHit": "discovery.results",
    "SearchDetails": "discovery.results",
    "MatchDetails": "discovery.results",
    **dict.fromkeys(
        [
            "DatabaseMissing",
            "DiscoveryDisabled",
            "DiscoveryUnavailable",
            "EmptyQuery",
            "InvalidLimit",
            "InvalidRecord",
            "QueryNotText",
            "QueryWithoutTerms",
            "ToolCallError",
            "ToolIndexError",
            "UnknownToolNames",
        ],
        "discovery.errors",
    ),
    **dict.fromkeys(
        [
            "ConcurrentUpdate",
            "CorruptIndex",
            "DatabaseUnavailable",
            "ReadOnlyDatabase",
            "SchemaOutdated",
            "SchemaTooNew",
            "SessionNotFound",
            "StorageFull",
            "StoreError",
            "ToolNotFound",
        ],
        "store.errors",
    ),
}
"""The module each public name is defined in."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'discovery' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
