"""Ranking metrics over one ranked list of tool names, pure functions.

Relevance comes in one of two shapes, as in a labelled query file:

- ``relevant``: a set of names, each one a separate thing to find;
- ``relevant_groups``: a list of groups of names, each group one thing to find, satisfied by any
  one of its names (catalogs often hold the same capability twice, say two servers that both
  read a file).

A set of names is the special case of one group per name, so every metric here takes groups.
Gains are binary: a result counts once when it satisfies a group that no earlier result satisfied.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

Groups = Sequence[Collection[str]]


def groups_of(relevant: Iterable[str]) -> list[frozenset[str]]:
    """One group per relevant name: the ``relevant`` shape as groups."""
    return [frozenset([name]) for name in dict.fromkeys(relevant)]


def satisfied_at(ranked: Sequence[str], groups: Groups) -> list[int]:
    """Per group, the 1-based rank of the first result in it; 0 when no result is."""
    first = {name: rank for rank, name in reversed(list(enumerate(ranked, start=1)))}
    ranks = []
    for group in groups:
        found = [first[name] for name in group if name in first]
        ranks.append(min(found) if found else 0)
    return ranks


def recall_at(ranked: Sequence[str], groups: Groups, k: int) -> float:
    """The share of groups satisfied by one of the first ``k`` results (0 for no groups)."""
    if not groups:
        return 0.0
    return sum(1 for rank in satisfied_at(ranked, groups) if 0 < rank <= k) / len(groups)


def reciprocal_rank(ranked: Sequence[str], groups: Groups) -> float:
    """``1 / rank`` of the first result that satisfies any group; 0 when none does."""
    ranks = [rank for rank in satisfied_at(ranked, groups) if rank]
    return 1 / min(ranks) if ranks else 0.0


def ndcg_at(ranked: Sequence[str], groups: Groups, k: int) -> float:
    """Normalized discounted cumulative gain of the first ``k`` results.

    ``DCG = Σ gain_i / log2(i + 1)`` over ranks ``i = 1..k``, where ``gain_i`` is 1 when result
    ``i`` is the first to satisfy some group; the ideal list satisfies one group per rank, so
    ``IDCG = Σ_{i=1..min(k, |groups|)} 1 / log2(i + 1)``. 0 for no groups.
    """
    if not groups or k < 1:
        return 0.0
    # A result that satisfies two groups at once is still one result: one gain.
    gains = sorted({rank for rank in satisfied_at(ranked, groups) if 0 < rank <= k})
    dcg = sum(1 / math.log2(rank + 1) for rank in gains)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(k, len(groups)) + 1))
    return dcg / ideal


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean, 0 for no values."""
    total, count = 0.0, 0
    for value in values:
        total += value
        count += 1
    return total / count if count else 0.0
