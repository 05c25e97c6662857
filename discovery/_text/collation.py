"""The tie-break order of contract §4: names compared as ``localeCompare`` does in an ``en`` locale.

``pyuca`` implements the Unicode Collation Algorithm with the default table, which orders tool
names as ICU's root collation does (``a_b`` < ``aB`` < ``b`` < ``Tool`` < ``tool_a`` < ``tool1``)
and is pure Python, so installing tool-index needs no ICU build. Its table takes a quarter of a
second to load and its lookups are slow, while tool names are nearly always ASCII, where each
character has fixed collation elements and no contraction applies: those names are keyed from a
small table, and ``pyuca`` is loaded the first time a name needs it.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from discovery._text.collation_table import ASCII_ELEMENTS


@cache
def _collator() -> Any:
    from pyuca import Collator

    return Collator()


@lru_cache(maxsize=65536)
def collation_key(name: str) -> tuple[int, ...]:
    """A key whose tuple order is the collation order of ``name``."""
    if name.isascii():
        return key_from_elements(
            [element for char in name.encode("ascii") for element in ASCII_ELEMENTS[char]]
        )
    return uca_key(name)


def key_from_elements(elements: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The UCA sort key: non-zero primaries, 0, secondaries, 0, tertiaries (as ``pyuca`` builds it)."""
    key: list[int] = []
    for level in range(4):
        if level:
            key.append(0)
        key.extend(element[level] for element in elements if len(element) > level and element[level])
    return tuple(key)


def uca_key(name: str) -> tuple[int, ...]:
    """The key ``pyuca`` computes for any string."""
    key: tuple[int, ...] = _collator().sort_key(name)
    return key


def utf16_sort_key(text: str) -> bytes:
    """JavaScript's default ``Array.prototype.sort`` order: UTF-16 code units."""
    return text.encode("utf-16-be", "surrogatepass")
