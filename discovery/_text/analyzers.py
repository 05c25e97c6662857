"""The analyzers an index can be built with: how a field's text and a query become terms.

An index stores the name of its analyzer (``catalog_state.analyzer``); its postings, its
statistics and every search of it use that one, so a query always meets terms made the same way.

An analyzer whose terms change (other stems, other stop words, another rule) gets a new
``version``, and an index records the version its terms were made with: ``name`` for version 1
(what every index built before versions existed holds), ``name/version`` after. A catalog
recorded with another version of an analyzer is refused until it is reindexed, never searched
with terms of another kind; a release older than the version stores does not know the name
``enhanced/2`` and refuses it as an unknown analyzer, so it cannot misread it either.

- ``reference``: the tokenizer of contract §3 for documents and queries alike (the default).
- ``enhanced``: the same tokens, stemmed, and queries without stop words (``text.enhanced``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from discovery._text.tokenizer import tokens

Tokens = Callable[[str], Sequence[str]]
"""The terms of a text, in order, to read (they may be shared)."""

QueryTerms = Callable[[Sequence[str]], Sequence[str]]
"""The terms of a query, in order, from its reference tokens."""


@dataclass(frozen=True, slots=True)
class Analyzer:
    """One analyzer: the terms of a field's text, and the terms of a query.

    A query's terms are made from its reference tokens (``query_terms``): a search tokenizes its
    query once, when it is checked, and every analyzer starts from those tokens."""

    name: str
    document_tokens: Tokens
    query_terms: QueryTerms
    version: int = 1

    @property
    def stored(self) -> str:
        """What ``catalog_state.analyzer`` holds for an index built with this analyzer."""
        return self.name if self.version == 1 else f"{self.name}/{self.version}"

    def query_tokens(self, text: str) -> Sequence[str]:
        """The terms of a query given as text."""
        return self.query_terms(tokens(text))


def _as_given(reference_tokens: Sequence[str]) -> Sequence[str]:
    return reference_tokens


REFERENCE = Analyzer("reference", tokens, _as_given)

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
        from discovery._text import enhanced

        return Analyzer("enhanced", enhanced.document_tokens, enhanced.query_terms, enhanced.VERSION)
    return None


def stored_version(stored: str) -> tuple[str, int | None]:
    """The analyzer name and version a ``catalog_state.analyzer`` value records; ``None`` for a
    version that is not a positive number (no release writes one)."""
    name, slash, version = stored.partition("/")
    if not slash:
        return name, 1
    number = int(version) if version.isascii() and version.isdigit() else 0
    return name, number if number >= 1 and str(number) == version else None
