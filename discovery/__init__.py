"""tool-index: a persistent BM25+ index for tool discovery in LLM agents."""

import gc
from typing import TYPE_CHECKING, Any

# Importing SQLAlchemy and numpy makes some eighty thousand objects that live as long as the
# process. On the way they set off about a hundred collections, a full one among them, which
# free next to nothing and cost a tenth of a cold start. The collector waits until the imports
# are done, and then does not walk what they made either: freezing and unfreezing moves every
# tracked object to the oldest generation unexamined, where the young collections that would
# have promoted them step by step (25-37 ms) do not look. A later full collection still does.
_collecting = gc.isenabled()
gc.disable()
try:
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
finally:
    if _collecting:
        gc.freeze()
        gc.unfreeze()
        gc.enable()
    del _collecting

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
