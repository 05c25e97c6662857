"""The analyzers an index can be built with: how a field's text and a query become terms.

An index stores the name of its analyzer (``catalog_state.analyzer``); its postings, its
statistics and every search of it use that one, so a query always meets terms made the same way.

- ``reference``: the tokenizer of SPEC §3 for documents and queries alike (the default).
- ``enhanced``: the same tokens, stemmed, and queries without stop words (``text.enhanced``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from discovery.text.tokenizer import tokenize

Tokens = Callable[[str], list[str]]


@dataclass(frozen=True, slots=True)
class Analyzer:
    """One analyzer: the terms of a field's text, and the terms of a query."""

    name: str
    document_tokens: Tokens
    query_tokens: Tokens


REFERENCE = Analyzer("reference", tokenize, tokenize)

DEFAULT_ANALYZER = REFERENCE.name
ANALYZER_NAMES = ("reference", "enhanced")
"""Every analyzer, the default first."""


def find_analyzer(name: str) -> Analyzer | None:
    """The analyzer called ``name``, ``None`` for a name that is not one (``params`` turns that
    into the typed error)."""
    if name == REFERENCE.name:
        return REFERENCE
    if name == "enhanced":
        # Imported here: an index built with the reference analyzer never loads the stemmer.
        from discovery.text import enhanced

        return Analyzer("enhanced", enhanced.document_tokens, enhanced.query_tokens)
    return None
