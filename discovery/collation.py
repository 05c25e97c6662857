"""The tie-break order of SPEC §4: names compared as ``localeCompare`` does in an ``en`` locale.

``pyuca`` implements the Unicode Collation Algorithm with the default table, which orders tool
names as ICU's root collation does (``a_b`` < ``aB`` < ``b`` < ``Tool`` < ``tool_a`` < ``tool1``)
and is pure Python, so installing tool-index needs no ICU build. Its table lookup is slow, and
tool names are nearly always ASCII, where the table maps each character to fixed collation
elements with no contraction: those names get their key from a per-character table instead.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pyuca import Collator

_COLLATOR = Collator()
_ASCII_ELEMENTS: list[list[Any]] = [_COLLATOR.collation_elements(chr(code)) for code in range(128)]


@lru_cache(maxsize=65536)
def collation_key(name: str) -> tuple[int, ...]:
    """A key whose tuple order is the collation order of ``name``."""
    if name.isascii():
        elements = [element for char in name.encode("ascii") for element in _ASCII_ELEMENTS[char]]
        key: tuple[int, ...] = _COLLATOR.sort_key_from_collation_elements(elements)
    else:
        key = _COLLATOR.sort_key(name)
    return key


def uca_key(name: str) -> tuple[int, ...]:
    """The key as ``pyuca`` computes it for any string (the reference the fast path must equal)."""
    key: tuple[int, ...] = _COLLATOR.sort_key(name)
    return key
