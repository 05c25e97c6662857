"""The tokenizer of contract §3, shared by documents and queries.

The reference was defined with JavaScript ``/u`` regexes; the ``regex`` module gives the same
Unicode property classes (``\\p{Lu}`` and friends), which the standard ``re`` module lacks.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _unicode_patterns() -> tuple[Any, Any, Any, Any]:
    """The four patterns of contract §3, compiled on the first non-ASCII text: most catalogs are
    ASCII, and a process that never meets other text skips importing ``regex``."""
    import regex

    return (
        regex.compile(r"\p{M}+"),
        regex.compile(r"(\p{Lu}+)(\p{Lu}\p{Ll})"),
        regex.compile(r"([\p{Ll}\p{N}])(\p{Lu})"),
        regex.compile(r"[^\p{L}\p{N}]+"),
    )


# The same steps for ASCII text, where the property classes are exactly these ranges (no
# combining marks, no other letters or numbers), with the standard ``re``. Both boundary steps
# become one pass of lookarounds: the acronym step only splits between two capitals and the case
# step never does, so neither can make or break a place where the other splits.
_ASCII_BOUNDARIES = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])")
_ASCII_ANY_BOUNDARY = re.compile(r"[A-Z](?:(?<=[a-z0-9][A-Z])|(?=[A-Z][a-z]))")
"""Finds whether there is a boundary at all: most text has none. Both kinds of boundary are
anchored on a capital (``[a-z0-9][A-Z]`` looked back at, ``[A-Z][A-Z][a-z]`` looked ahead of),
so the search only stops at capitals, rather than trying two alternatives at every character."""
_ASCII_FOLD = bytes(
    code + 32 if 0x41 <= code <= 0x5A else code if 0x61 <= code <= 0x7A or 0x30 <= code <= 0x39 else 0x20
    for code in range(256)
)
"""Lowercases ASCII letters, keeps digits and makes every other byte a space: after it, the
words are what ``split`` finds. One table lookup per byte costs less than a regex scan."""


SHORT_TEXT = 64
"""Texts up to this length (names, labels, schema keys) repeat across a catalog: their tokens
are cached."""


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase word tokens, exactly as contract §3 orders the steps."""
    return list(tokens(text))


def tokens(text: str) -> Sequence[str]:
    """``tokenize``'s tokens, to read and not to change: a short text's are shared with every
    other caller from a cache, without a copy for each (an import reads millions of them)."""
    if len(text) <= SHORT_TEXT:
        return _cached_tokens(text)
    return _tokens(text)


@lru_cache(maxsize=1 << 16)
def _cached_tokens(text: str) -> tuple[str, ...]:
    return tuple(_tokens(text))


def _tokens(text: str) -> list[str]:
    return ascii_tokens(text) if text.isascii() else unicode_tokens(text)


def ascii_tokens(text: str) -> list[str]:
    """``unicode_tokens`` for ASCII text (NFKD and mark removal change nothing there)."""
    if _ASCII_ANY_BOUNDARY.search(text) is not None:
        text = _ASCII_BOUNDARIES.sub(" ", text)
    return text.encode("ascii").translate(_ASCII_FOLD).decode("ascii").split()


def unicode_tokens(text: str) -> list[str]:
    """The six steps of contract §3 on any text."""
    combining_marks, acronym_boundary, case_boundary, separators = _unicode_patterns()
    text = combining_marks.sub("", unicodedata.normalize("NFKD", text))
    text = acronym_boundary.sub(r"\1 \2", text)
    text = case_boundary.sub(r"\1 \2", text)
    text = separators.sub(" ", text)
    return text.lower().split()
