"""The ``enhanced`` analyzer: the reference tokens, stemmed, and queries without stop words.

What it changes, and nothing else (the formula, field weights, k1, b and δ stay contract §4's):

- **Documents**, every field alike: each token of the reference tokenizer (contract §3) becomes its
  Snowball English stem (``scheduling``, ``schedules`` → ``schedul``). One token stays one
  token, so a tool's weighted length, and the corpus's average length, are exactly the
  reference's; only the terms (and so ``tf`` and ``df``) merge.
- **Queries**: the reference tokens minus English stop words (Snowball's list, tokenized the
  same way) and the words of asking for a tool (``tool``, ``tools``: every request to a tool
  search is for one, while the descriptions that say "This tool…" are few), then stemmed. A
  query made only of stop words keeps them all, so ``who`` or ``the the`` still searches rather
  than failing. In BM25+ every matched term adds at least ``idf · δ``, so the filler of a
  natural-language request (``can``, ``you``, ``me``, ``for``, ``a tool to``) would otherwise
  lift whichever tools share it.

Tokens the stemmer does not know (numbers, other scripts) come back unchanged. Why these two
steps and not others (request words, compound splitting, per-field length normalization) is
measured in ``bench/analyzers.py``; the figures are in ``bench/results.md``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import Stemmer

from discovery._text.tokenizer import tokenize

NAME = "enhanced"

VERSION = 2
"""Raised whenever the terms this module makes change, for any text: indexes built with another
version are refused until reindexed (``analyzers``). ``tests/test_analyzers.py`` holds a digest of
the terms of a fixed text set, so a change that forgets this fails there."""

SNOWBALL_ENGLISH_STOP_WORDS = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself "
    "she her hers herself it its itself they them their theirs themselves what which who whom "
    "this that these those am is are was were be been being have has had having do does did "
    "doing would should could ought i'm you're he's she's it's we're they're i've you've we've "
    "they've i'd you'd he'd she'd we'd they'd i'll you'll he'll she'll we'll they'll isn't "
    "aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't won't wouldn't shan't "
    "shouldn't can't cannot couldn't mustn't let's that's who's what's here's there's when's "
    "where's why's how's a an the and but if or because as until while of at by for with about "
    "against between into through during before after above below to from up down in out on off "
    "over under again further then once here there when where why how all any both each few "
    "more most other some such no nor not only own same so than too very"
)
"""The English stop word list of the Snowball project (snowballstem.org, BSD licence)."""

ENGLISH_STOP_WORDS = frozenset(
    token for word in SNOWBALL_ENGLISH_STOP_WORDS.split() for token in tokenize(word)
)
"""The list as the tokenizer sees it: ``don't`` gives ``don`` and ``t``, ``can't`` gives ``can``."""

REQUEST_WORDS = frozenset({"tool", "tools"})
"""Words every request to a tool search may say (version 2): "a tool to…", "which tools…"."""

STOP_WORDS = ENGLISH_STOP_WORDS | REQUEST_WORDS
"""What queries leave out."""

_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # A PyStemmer object keeps a cache and is not safe to share between threads.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


@lru_cache(maxsize=1 << 16)
def stem(token: str) -> str:
    """The Snowball English stem of one reference token."""
    result: str = _stemmer().stemWord(token)
    return result


def document_tokens(text: str) -> list[str]:
    """The terms of one field's text, in order, one per reference token (any field)."""
    return [stem(token) for token in tokenize(text)]


def query_tokens(text: str) -> list[str]:
    """The terms of a query: its reference tokens less stop words (unless all are), stemmed."""
    return query_terms(tokenize(text))


def query_terms(tokens: Sequence[str]) -> list[str]:
    """``query_tokens`` from the query's reference tokens."""
    content = [token for token in tokens if token not in STOP_WORDS]
    return [stem(token) for token in content or tokens]


def query_term_counts(text: str) -> dict[str, int]:
    """Distinct query terms with their counts, in order of first appearance (as contract §4's qtf)."""
    return dict(Counter(query_tokens(text)))
