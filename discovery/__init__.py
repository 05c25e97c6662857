"""tool-index: a persistent BM25+ index for tool discovery in LLM agents."""

from discovery.errors import (
    DiscoveryDisabled,
    DiscoveryUnavailable,
    EmptyQuery,
    InvalidLimit,
    InvalidRecord,
    QueryWithoutTerms,
    ToolCallError,
    ToolIndexError,
)
from discovery.index import ImportReport, ToolIndex
from discovery.models import SearchHit, ToolRecord

__all__ = [
    "DiscoveryDisabled",
    "DiscoveryUnavailable",
    "EmptyQuery",
    "ImportReport",
    "InvalidLimit",
    "InvalidRecord",
    "QueryWithoutTerms",
    "SearchHit",
    "ToolCallError",
    "ToolIndex",
    "ToolIndexError",
    "ToolRecord",
]
