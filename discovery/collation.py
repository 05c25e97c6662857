"""The tie-break order of SPEC §4: names compared as ``localeCompare`` does in an ``en`` locale.

``pyuca`` implements the Unicode Collation Algorithm with the default table, which orders tool
names as ICU's root collation does (``a_b`` < ``aB`` < ``b`` < ``Tool`` < ``tool_a`` < ``tool1``)
and is pure Python, so installing tool-index needs no ICU build.
"""

from __future__ import annotations

from functools import lru_cache

from pyuca import Collator

_COLLATOR = Collator()


@lru_cache(maxsize=65536)
def collation_key(name: str) -> tuple[int, ...]:
    """A key whose tuple order is the collation order of ``name``; equal names tie on name."""
    key: tuple[int, ...] = _COLLATOR.sort_key(name)
    return key
