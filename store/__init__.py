"""Everything that touches SQL, behind one interface: a ``Store`` and its read and write units.

``Store.at(url)`` (or ``Store(engine)``) is one database; ``with store.reading() as reader:`` and
``with store.writing() as writer:`` are its transactions, and the views of a unit (``catalog``,
``index``, ``sessions``, ``learning``, ``vectors``, ``audit``) are all that ``discovery`` reads and
writes through. Besides them the package exports the row types those views take and return, the
corpus groups a tool is stored in, and where the database is when none is named. The errors are
those of ``store.errors`` (whose root is ``ToolIndexError``). Every other module of the package
is private (its name starts with ``_``)."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store._audit import AuditedTool, StoredPosting
    from store._learning import LearnedChange, LearnedTool, LearningState
    from store._location import ENV_VAR, default_url
    from store._records import GroupStats, IndexedBatch, StoredTool, TermStats, ToolRow
    from store._schema import GROUPS
    from store._servers import ServerOrigin, StoredServer
    from store._session_rows import Event, LoggedEvent, SessionKey, SessionState
    from store._units import Reader, Store, Writer
    from store._vectors import EmbeddingState, StoredVectors, VectorRow

_HOMES = {
    "AuditedTool": "store._audit",
    "StoredPosting": "store._audit",
    "ENV_VAR": "store._location",
    "default_url": "store._location",
    "LearnedChange": "store._learning",
    "LearnedTool": "store._learning",
    "LearningState": "store._learning",
    "GroupStats": "store._records",
    "IndexedBatch": "store._records",
    "StoredTool": "store._records",
    "TermStats": "store._records",
    "ToolRow": "store._records",
    "GROUPS": "store._schema",
    "ServerOrigin": "store._servers",
    "StoredServer": "store._servers",
    "Event": "store._session_rows",
    "LoggedEvent": "store._session_rows",
    "SessionKey": "store._session_rows",
    "SessionState": "store._session_rows",
    "Reader": "store._units",
    "Store": "store._units",
    "Writer": "store._units",
    "EmbeddingState": "store._vectors",
    "StoredVectors": "store._vectors",
    "VectorRow": "store._vectors",
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
    "AuditedTool",
    "EmbeddingState",
    "Event",
    "GroupStats",
    "IndexedBatch",
    "LearnedChange",
    "LearnedTool",
    "LearningState",
    "LoggedEvent",
    "Reader",
    "ServerOrigin",
    "SessionKey",
    "SessionState",
    "Store",
    "StoredPosting",
    "StoredServer",
    "StoredTool",
    "StoredVectors",
    "TermStats",
    "ToolRow",
    "VectorRow",
    "Writer",
    "default_url",
]
