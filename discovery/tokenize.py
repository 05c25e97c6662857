"""The tokenizer of SPEC §3, shared by documents and queries.

The reference was defined with JavaScript ``/u`` regexes; the ``regex`` module gives the same
Unicode property classes (``\\p{Lu}`` and friends), which the standard ``re`` module lacks.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import regex

_COMBINING_MARKS = regex.compile(r"\p{M}+")
_ACRONYM_BOUNDARY = regex.compile(r"(\p{Lu}+)(\p{Lu}\p{Ll})")
_CASE_BOUNDARY = regex.compile(r"([\p{Ll}\p{N}])(\p{Lu})")
_SEPARATORS = regex.compile(r"[^\p{L}\p{N}]+")

# The same three steps for ASCII text, where the property classes are exactly these ranges (no
# combining marks, no other letters or numbers); the standard ``re`` runs them nearly twice as fast.
_ASCII_ACRONYM_BOUNDARY = re.compile(r"([A-Z]+)([A-Z][a-z])")
_ASCII_CASE_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")
_ASCII_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


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
    return ascii_tokens(text) if text.isascii() else unicode_tokens(text)


def ascii_tokens(text: str) -> list[str]:
    """``unicode_tokens`` for ASCII text (NFKD and mark removal change nothing there)."""
    text = _ASCII_ACRONYM_BOUNDARY.sub(r"\1 \2", text)
    text = _ASCII_CASE_BOUNDARY.sub(r"\1 \2", text)
    return _ASCII_SEPARATORS.sub(" ", text).lower().split()


def unicode_tokens(text: str) -> list[str]:
    """The six steps of SPEC §3 on any text."""
    text = _COMBINING_MARKS.sub("", unicodedata.normalize("NFKD", text))
    text = _ACRONYM_BOUNDARY.sub(r"\1 \2", text)
    text = _CASE_BOUNDARY.sub(r"\1 \2", text)
    text = _SEPARATORS.sub(" ", text)
    return text.lower().split()
