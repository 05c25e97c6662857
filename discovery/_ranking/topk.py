"""Top-k selection over a score array: the documents that can place, and their order.

Pure functions of arrays. ``scratch`` is a float array at least as long as the ids handed in,
reused by the caller: partitions run there, since copies of a large catalog's scores into fresh
arrays cost page faults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from discovery._text.collation import collation_key

SCAN_SHARE = 4
"""Documents reaching a score are found by scanning the whole score array once the postings
added are one in this many of its ids: looking up that many scattered ids costs more."""


@dataclass(frozen=True, slots=True)
class RankedTool:
    tool_id: int
    name: str
    score: float


def candidates(
    scores: np.ndarray,
    scratch: np.ndarray,
    limit: int | None,
    scored: list[tuple[float, np.ndarray]],
    *,
    sparse: bool,
) -> np.ndarray:
    """The documents with a positive score that may place in the top ``limit``: those scoring
    at least the limit-th best score, ties included. ``scored`` holds each query term's weight
    and documents.

    A floor first: the limit-th best score among one term's documents is at most the limit-th
    best among all, so nothing below it can place. The term weighing most (the rarest, usually)
    gives a floor close to the answer from few documents. With sparse contributions only, every
    positive score is among the terms' documents, and the rest of the array is never read unless
    they are so many that one pass over it costs less (``SCAN_SHARE``): the same documents either
    way."""
    if not scored:
        return np.zeros(0, dtype=np.int64)
    floor = 0.0
    if limit is not None:
        enough = [(weight, ids) for weight, ids in scored if ids.size >= limit]
        if enough:
            _, ids = max(enough, key=lambda term: term[0])
            floor = kth_best(scores, scratch, ids, limit)
    if sparse and sum(ids.size for _, ids in scored) * SCAN_SHARE <= scores.size:
        parts = []
        for _, ids in scored:
            values = np.take(scores, ids, out=scratch[: ids.size])
            parts.append(ids[(values > 0) & (values >= floor)])
        found = parts[0] if len(parts) == 1 else union(parts)
    else:
        found = np.flatnonzero(scores >= floor) if floor > 0 else np.flatnonzero(scores > 0)
    if limit is None or found.size <= limit:
        return found
    threshold = kth_best(scores, scratch, found, limit)
    placing: np.ndarray = found[np.take(scores, found, out=scratch[: found.size]) >= threshold]
    return placing


def kth_best(scores: np.ndarray, scratch: np.ndarray, ids: np.ndarray, k: int) -> float:
    """The k-th best score among ``ids`` (at least ``k`` of them, no repeats)."""
    values = np.take(scores, ids, out=scratch[: ids.size])
    values.partition(ids.size - k)
    return float(values[ids.size - k])


def union(parts: list[np.ndarray]) -> np.ndarray:
    """The distinct ids of ``parts``, ascending (``np.unique`` without its ``numpy.ma`` import)."""
    ids = np.sort(np.concatenate(parts))
    if ids.size < 2:
        return ids
    distinct: np.ndarray = ids[np.concatenate(([True], ids[1:] != ids[:-1]))]
    return distinct


def ordered(
    scores: np.ndarray,
    found: np.ndarray,
    limit: int | None,
    names_of: Callable[[list[int]], dict[int, str]],
) -> list[RankedTool]:
    """``found`` by score, descending, ties by name collation (contract §4), the first ``limit``.

    Only inside a run of equal scores does the collation of names matter, so whole runs are
    taken until the limit is reached and names are read (and collated) only for those."""
    found_scores = scores[found]
    order = np.argsort(-found_scores, kind="stable")
    ids_in_order, values = found[order], found_scores[order]
    ends = [*(np.flatnonzero(values[1:] != values[:-1]) + 1).tolist(), values.size]
    if limit is not None:
        ends = ends[: next((i for i, end in enumerate(ends) if end >= limit), len(ends) - 1) + 1]
    ids: list[int] = ids_in_order[: ends[-1]].tolist()
    kept: list[float] = values[: ends[-1]].tolist()
    names = names_of(ids)
    ranked: list[RankedTool] = []
    start = 0
    for end in ends:
        hits = [
            RankedTool(i, names[i], score) for i, score in zip(ids[start:end], kept[start:end], strict=True)
        ]
        if len(hits) > 1:
            hits.sort(key=lambda hit: (collation_key(hit.name), hit.name))
        ranked.extend(hits)
        start = end
    return ranked if limit is None else ranked[:limit]
