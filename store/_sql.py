"""SQL helpers shared by the store's query modules: batching, lookups that can match, and the
columns a tool is read with."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import JSON, Dialect, TypeDecorator, type_coerce
from sqlalchemy.sql.elements import KeyedColumnElement

from store._schema import tools_table
from store.errors import CorruptIndex

CHUNK = 500
"""Names or ids per ``IN (...)``: far below every backend's bound-parameter limit."""

T = TypeVar("T")


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""What no backend stores as given: NUL and lone surrogates."""


def matchable(text: str) -> bool:
    """Whether stored text could equal ``text``: stored text never holds NUL or a lone surrogate.

    Such a value matches nothing, and it cannot even be sent (PostgreSQL refuses NUL in a
    parameter, neither driver encodes a lone surrogate), so lookups drop it instead.
    """
    return UNSTORABLE.search(text) is None


def lookup_keys(names: Iterable[str]) -> list[str]:
    """Distinct names to look up, in first-seen order, less those that cannot match."""
    return [name for name in dict.fromkeys(names) if matchable(name)]


class CheckedJSON(TypeDecorator[Any]):
    """A JSON column read back, whose text (SQLite keeps any) fails as one ``CorruptIndex``
    naming the column rather than as the decoder's own error."""

    impl = JSON
    cache_ok = True

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        load = self.impl_instance.dialect_impl(dialect).result_processor(dialect, coltype)
        if load is None:
            return None
        where = self.where

        def checked(value: Any) -> Any:
            try:
                return load(value)
            except ValueError:
                raise CorruptIndex.found(f"{where} holds text that is not JSON") from None

        return checked


def checked_json(column: KeyedColumnElement[Any]) -> Any:
    """``column`` read as ``CheckedJSON``, under its own name."""
    return type_coerce(column, CheckedJSON(f"{column.table.name}.{column.name}")).label(column.name)


TOOL_COLUMNS = (
    tools_table.c.id,
    tools_table.c.name,
    tools_table.c.label,
    tools_table.c.description,
    tools_table.c.summary,
    tools_table.c.source,
    tools_table.c.server_name,
    tools_table.c.mcp_tool_name,
    checked_json(tools_table.c.schema_keys),
    checked_json(tools_table.c.input_schema),
    tools_table.c.load_mode,
    tools_table.c.grp,
    tools_table.c.doc_len,
    checked_json(tools_table.c.mcp_meta),
)
