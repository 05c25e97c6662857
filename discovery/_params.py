"""One check of what a caller asks for, shared by every entry point (library, tool, CLI).

A query is text that is not blank; a limit is a positive integer, an integral float counting
(JSON numbers arrive as ``5.0``), booleans and NaN not; ids are text the store keeps exactly.
A search, a session search and a preview all raise the same error for the same input.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from discovery._text.analyzers import ANALYZER_NAMES, REFERENCE, Analyzer, find_analyzer, stored_version
from discovery._text.tokenizer import tokens
from discovery.errors import (
    AnalyzerOutdated,
    EmptyQuery,
    InvalidLimit,
    InvalidParams,
    QueryNotText,
    QueryWithoutTerms,
    ToolIndexError,
    UnknownAnalyzer,
)

MAX_KEY_BYTES = 1024
"""The longest indexed key, in UTF-8 bytes: a tool name, a server name, a term, a session id or
a call id. PostgreSQL refuses an index entry past a third of a page (about 2.7 kB, less for text
that does not compress, and the call index holds a session id and a call id together); every
backend refuses longer keys alike, before writing, so a catalog behaves the same on both."""
MAX_IDENTITY_BYTES = 512
"""The longest identity, in UTF-8 bytes: the call index holds it beside a session id and a call
id, and the three together stay under PostgreSQL's limit for an index entry."""
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""NUL and lone surrogates: no backend stores them as text."""

DEFAULT_LIMIT = 8
"""Matches returned when a search names no limit [fixed]."""


JSON_TYPES = {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}


def checked_query(query: Any) -> str:
    """``query`` trimmed; ``EmptyQuery`` when it is missing or blank, ``QueryNotText`` naming the
    JSON type when it is given but not a string (the schema's ``"type": "string"``)."""
    if query is not None and not isinstance(query, str):
        raise QueryNotText(JSON_TYPES.get(type(query), type(query).__name__))
    if query is None or not query.strip():
        raise EmptyQuery()
    return query.strip()


def checked_limit(limit: Any) -> int:
    """A positive integer (``None`` is the default); ``InvalidLimit`` for anything else."""
    if limit is None:
        return DEFAULT_LIMIT
    if isinstance(limit, bool):
        raise InvalidLimit()
    if isinstance(limit, float) and math.isfinite(limit) and limit.is_integer():
        limit = int(limit)
    if not isinstance(limit, int) or limit < 1:
        raise InvalidLimit()
    return limit


@dataclass(frozen=True, slots=True)
class Query:
    """A query as a search takes it: its text, trimmed, and its reference tokens (contract §3),
    at least one. Made once per search (``checked_search``, ``searched_query``) and passed on
    whole, so no step of a search checks or tokenizes the text again."""

    text: str
    tokens: tuple[str, ...]

    def terms(self, analyzer: Analyzer = REFERENCE) -> dict[str, int]:
        """Distinct query terms under ``analyzer`` with their counts, in order of first appearance
        (contract §4). Never empty: every analyzer makes terms of any reference token."""
        return dict(Counter(analyzer.query_terms(self.tokens)))


def searched_query(text: str) -> Query:
    """``text`` (checked, trimmed) with its tokens; ``QueryWithoutTerms`` when it has none."""
    found = tuple(tokens(text))
    if not found:
        raise QueryWithoutTerms()
    return Query(text, found)


def query_terms(query: str, analyzer: Analyzer = REFERENCE) -> dict[str, int]:
    """The terms of ``query`` given as text (``Query.terms``); ``QueryWithoutTerms`` when there
    are none. For what is not a search: learning from a logged call, tests."""
    return searched_query(query).terms(analyzer)


def analyzer_named(name: Any) -> Analyzer:
    """The analyzer called ``name``; ``UnknownAnalyzer`` names the known ones otherwise."""
    found = find_analyzer(name) if isinstance(name, str) else None
    if found is None:
        raise UnknownAnalyzer(str(name), ANALYZER_NAMES)
    return found


def stored_analyzer_named(stored: str) -> Analyzer:
    """The analyzer a ``catalog_state.analyzer`` value records: ``UnknownAnalyzer`` for a name
    that is not one, ``AnalyzerOutdated`` for another version of one (its terms are not this
    release's, so searching them would give wrong answers)."""
    name, version = stored_version(stored)
    analyzer = analyzer_named(name)
    if version != analyzer.version:
        raise AnalyzerOutdated(stored, name, version, analyzer.version)
    return analyzer


def checked_search(query: Any, limit: Any) -> tuple[Query, int]:
    """Query and limit, checked in contract §6's order: query, then limit, then that the query has
    terms (which the catalog's analyzer then makes from its tokens, in the search's transaction)."""
    trimmed = checked_query(query)
    checked = checked_limit(limit)
    return searched_query(trimmed), checked


def checked_id(value: object, what: str, *, blank: bool = False) -> str:
    """A session or call id the store can keep and match exactly: text, with no NUL and no lone
    surrogate (no backend stores those as given), and not blank unless ``blank``."""
    if not isinstance(value, str):
        raise ToolIndexError(f"a {what} must be text, not {type(value).__name__}")
    if not blank and not value.strip():
        raise ToolIndexError(f"a {what} must not be blank")
    if UNSTORABLE.search(value):
        raise ToolIndexError(f"a {what} must not contain NUL characters or lone surrogates: {value!r}")
    if too_long(value):
        raise ToolIndexError(
            f"a {what} must be at most {MAX_KEY_BYTES} bytes in UTF-8, not {utf8_size(value)}"
        )
    return value


def checked_identity(value: object) -> str:
    """An identity (whose sessions these are): non-empty printable text, at most
    ``MAX_IDENTITY_BYTES`` in UTF-8 (so no control characters, and no NUL or lone surrogate)."""
    if not isinstance(value, str):
        raise ToolIndexError(f"an identity must be text, not {type(value).__name__}")
    if not value.strip():
        raise ToolIndexError("an identity must not be blank")
    if UNSTORABLE.search(value) or not value.isprintable():
        raise ToolIndexError(f"an identity must be printable text: {value!r}")
    if utf8_size(value) > MAX_IDENTITY_BYTES:
        raise ToolIndexError(
            f"an identity must be at most {MAX_IDENTITY_BYTES} bytes in UTF-8, not {utf8_size(value)}"
        )
    return value


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def too_long(text: str) -> bool:
    """Whether ``text`` is longer than the store indexes (``MAX_KEY_BYTES``); cheap for short text."""
    return len(text) * 4 > MAX_KEY_BYTES and utf8_size(text) > MAX_KEY_BYTES


MAX_PARAMS_DEPTH = 64
"""Deepest nesting of a call's params: they are logged as JSON, and the encoder recurses."""


def checked_params(params: Any) -> None:
    """Refuse params that cannot be logged: a walk without recursion, so any depth is safe."""
    stack: list[tuple[Any, int, frozenset[int]]] = [(params, 1, frozenset())]
    while stack:
        value, depth, inside = stack.pop()
        if not isinstance(value, dict | list | tuple):
            continue
        if id(value) in inside:
            raise InvalidParams("Params must not contain themselves.")
        if depth > MAX_PARAMS_DEPTH:
            raise InvalidParams(f"Params must be nested at most {MAX_PARAMS_DEPTH} levels deep.")
        children = value.values() if isinstance(value, dict) else value
        enclosing = inside | {id(value)}
        stack.extend((child, depth + 1, enclosing) for child in children)
