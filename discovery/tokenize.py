"""The tokenizer of SPEC §3, shared by documents and queries.

The reference was defined with JavaScript ``/u`` regexes; the ``regex`` module gives the same
Unicode property classes (``\\p{Lu}`` and friends), which the standard ``re`` module lacks.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

_COMBINING_MARKS = regex.compile(r"\p{M}+")
_ACRONYM_BOUNDARY = regex.compile(r"(\p{Lu}+)(\p{Lu}\p{Ll})")
_CASE_BOUNDARY = regex.compile(r"([\p{Ll}\p{N}])(\p{Lu})")
_SEPARATORS = regex.compile(r"[^\p{L}\p{N}]+")


SHORT_TEXT = 64
"""Texts up to this length (names, labels, schema keys) repeat across a catalog: their tokens
are cached."""


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase word tokens, exactly as SPEC §3 orders the steps."""
    if len(text) <= SHORT_TEXT:
        return list(_cached_tokens(text))
    return _tokens(text)


@lru_cache(maxsize=1 << 16)
def _cached_tokens(text: str) -> tuple[str, ...]:
    return tuple(_tokens(text))


def _tokens(text: str) -> list[str]:
    if not text.isascii():
        text = _COMBINING_MARKS.sub("", unicodedata.normalize("NFKD", text))
    text = _ACRONYM_BOUNDARY.sub(r"\1 \2", text)
    text = _CASE_BOUNDARY.sub(r"\1 \2", text)
    text = _SEPARATORS.sub(" ", text)
    return text.lower().split()
