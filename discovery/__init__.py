"""tool-index: a persistent BM25+ index for tool discovery in LLM agents.

What a program needs: the index and its results, sessions and their search tool, the record
model, and the errors a program acts on. Every error tool-index raises is a ``ToolIndexError``
(its docstring draws the tree); the rest are imported from their modules (``discovery.errors``,
``store.errors``).

Each name is imported from its module when first used, so importing the package loads nothing
else and changes nothing in the process: a program decides for itself what its imports cost
(the command line pauses the collector around its own). Opening an index and searching it never
loads the pydantic models (``ToolRecord``, ``SessionSettings`` and the session's types)."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from discovery._catalog.models import ToolRecord
    from discovery._catalog.writes import ImportReport
    from discovery._index import ToolIndex
    from discovery._results import MatchDetails, SearchDetails, SearchHit
    from discovery._sessions.search_tool import SearchTool, ToolResult
    from discovery._sessions.session import Session
    from discovery._sessions.settings import SessionSettings
    from discovery.errors import (
        ConcurrentUpdate,
        CorruptIndex,
        DatabaseMissing,
        DatabaseUnavailable,
        InvalidRecord,
        SessionNotFound,
        ToolCallError,
        ToolIndexError,
        ToolNotFound,
        UnknownToolNames,
    )

_HOMES = {
    "ToolIndex": "discovery._index",
    "ImportReport": "discovery._catalog.writes",
    "SearchHit": "discovery._results",
    "SearchDetails": "discovery._results",
    "MatchDetails": "discovery._results",
    "Session": "discovery._sessions.session",
    "SessionSettings": "discovery._sessions.settings",
    "SearchTool": "discovery._sessions.search_tool",
    "ToolResult": "discovery._sessions.search_tool",
    "ToolRecord": "discovery._catalog.models",
    "ToolIndexError": "discovery.errors",
    "ToolCallError": "discovery.errors",
    "InvalidRecord": "discovery.errors",
    "DatabaseMissing": "discovery.errors",
    "UnknownToolNames": "discovery.errors",
    "DatabaseUnavailable": "discovery.errors",
    "ConcurrentUpdate": "discovery.errors",
    "CorruptIndex": "discovery.errors",
    "ToolNotFound": "discovery.errors",
    "SessionNotFound": "discovery.errors",
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
    "ImportReport",
    "InvalidRecord",
    "MatchDetails",
    "SearchDetails",
    "SearchHit",
    "SearchTool",
    "Session",
    "SessionNotFound",
    "SessionSettings",
    "ToolCallError",
    "ToolIndex",
    "ToolIndexError",
    "ToolNotFound",
    "ToolRecord",
    "ToolResult",
    "UnknownToolNames",
]
