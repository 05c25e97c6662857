"""tool-index: a persistent BM25+ index for tool discovery in LLM agents."""

from typing import TYPE_CHECKING, Any

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
from discovery.hits import SearchHit
from discovery.index import ImportReport, ToolIndex

if TYPE_CHECKING:
    from discovery.models import ToolRecord


def __getattr__(name: str) -> Any:
    # ``ToolRecord`` is a pydantic model: loaded when first asked for, so that opening an index
    # and searching it does not load pydantic.
    if name == "ToolRecord":
        from discovery.models import ToolRecord

        return ToolRecord
    raise AttributeError(f"module 'discovery' has no attribute {name!r}")


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
