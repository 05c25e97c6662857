"""A tool's row as ``store._driver`` reads it: its columns (``TOOL_SELECT``) and how a row becomes
a ``StoredTool`` on a backend (``tool_reader``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Dialect

from store._records import StoredTool
from store._sql import TOOL_COLUMNS, CheckedJSON

TOOL_FIELDS = tuple(column.name for column in TOOL_COLUMNS)
TOOL_SELECT = f"SELECT {', '.join(TOOL_FIELDS)} FROM tools"
"""A tool's columns, in ``StoredTool``'s order, for ``store._driver``: ``tool_reader`` reads a row."""

_JSON_FIELDS = ("schema_keys", "input_schema", "mcp_meta")


def tool_reader(dialect: Dialect) -> Callable[[Sequence[Any]], StoredTool]:
    """How a row of ``TOOL_SELECT`` becomes a ``StoredTool`` on ``dialect``: its JSON columns
    decoded as SQLAlchemy would (a column that is not JSON is one ``CorruptIndex`` naming it)."""
    if dialect.name not in _TOOL_READERS:
        _TOOL_READERS[dialect.name] = _tool_reader(dialect)
    return _TOOL_READERS[dialect.name]


_TOOL_READERS: dict[str, Callable[[Sequence[Any]], StoredTool]] = {}
"""One reader per backend (engines come and go; their dialects read JSON alike)."""


def _tool_reader(dialect: Dialect) -> Callable[[Sequence[Any]], StoredTool]:
    loaders = {
        TOOL_FIELDS.index(field): CheckedJSON(f"tools.{field}")
        .dialect_impl(dialect)
        .result_processor(dialect, None)
        for field in _JSON_FIELDS
    }
    decoders = [(at, load) for at, load in loaders.items() if load is not None]

    def read(row: Sequence[Any]) -> StoredTool:
        values = list(row)
        for at, load in decoders:
            values[at] = load(values[at])
        return StoredTool(*values)

    return read
