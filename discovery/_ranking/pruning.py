"""What exact top-k pruning needs beyond the exhaustive search: per-term upper bounds, and the
exact scores of a few documents from their own terms.

The ranker scores the query's strongest terms (by upper bound) over all their postings; the
k-th best of those partial scores is a floor that the k-th best full score reaches. A document
none of those terms holds scores at most the sum of the other terms' bounds, and one they hold
at most its partial score plus that sum: whatever cannot reach the floor cannot place. The few
documents left get their full scores from their terms (their indexed terms, or the postings of
the query terms when those are at hand), added in query order exactly as the exhaustive search
adds them, so their doubles are its doubles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from discovery._ranking.bm25 import contribution, length_norm, saturation_numerator, term_upper_bound

SLACK = 1e-9
"""Relative margin on every bound and floor. Bounds are real-number arguments about sums that
are evaluated in floating point, in another order; a margin far above the rounding error of a
few dozen additions keeps them safe, and costs only a few extra documents to score."""


def upper_bound(weight: float, max_tf: int) -> float:
    """No document of the corpus gets more than this from a term of ``weight`` whose largest tf
    in the corpus' groups is ``max_tf`` (its best tf at length 0), with the margin."""
    return term_upper_bound(1, weight, float(max_tf)) * (1 + SLACK)


def bound_sum(bounds: list[float]) -> float:
    """What the terms of ``bounds`` can add to any score together, with the margin."""
    return sum(bounds) * (1 + SLACK)


def floor_of(kth_partial: float) -> float:
    """A floor the k-th best full score reaches, from the k-th best partial score."""
    return kth_partial * (1 - SLACK)


@dataclass(frozen=True, slots=True)
class Held:
    """The documents being scored that hold one query term: their positions among them, and
    their tf and length."""

    positions: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray


def exact_scores(size: int, terms: Iterable[tuple[Held | None, float]], avgdl: float) -> np.ndarray:
    """The full scores of ``size`` documents, from each query term's ``Held`` (``None`` or empty:
    none holds it) and weight ``qtf · idf``, the terms in query order.

    Each term's contribution is the formula of ``TermPostings.contribution`` on the same inputs
    and dtypes, and the terms are added one after the other from 0, as the exhaustive search
    adds them to its score array (a term a document lacks adds nothing there, and nothing here).
    """
    scores = np.zeros(size)
    for held, weight in terms:
        if held is None or held.positions.size == 0:
            continue
        tf = held.tf.astype(np.float64)
        norm = length_norm(held.doc_len, avgdl)
        scores[held.positions] += contribution(weight, saturation_numerator(tf), tf, norm)
    return scores


def held_in_forward(ids: np.ndarray, forward: np.ndarray) -> Callable[[int], Held]:
    """Per term id, what ``Held`` says of ``ids`` (ascending, unique), from their postings
    ``forward`` (int64 rows of tool id, term id, tf, document length: every term they hold)."""
    tool_ids, term_ids, tf, doc_len = forward.T
    at = np.searchsorted(ids, tool_ids)

    def held(term_id: int) -> Held:
        rows = term_ids == term_id
        return Held(at[rows], tf[rows], doc_len[rows])

    return held
