"""The score arrays a search adds into, kept from one search to the next.

A fresh array of a large catalog's size costs page faults each time it is allocated, so one
process keeps one pair (the scores and a scratch array at least as long) and each search zeroes
what it wrote before it ends.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from discovery._ranking.topk import SCAN_SHARE


class ScoreBuffer:
    """The scores of one search at a time (the ranker's callers are serialized) and room to
    partition them."""

    def __init__(self) -> None:
        self._scores = np.zeros(0)
        self.scratch = np.zeros(0)
        self._zeroed = True

    def zeroed(self, size: int) -> np.ndarray:
        """A zeroed score array of ``size``; ``scratch`` is then at least as long. A search that
        ended in an error left its scores for this call to zero."""
        if self._scores.size < size:
            self._scores = np.zeros(size)
            self.scratch = np.zeros(size)
        elif not self._zeroed:
            self._scores.fill(0.0)
        self._zeroed = False
        return self._scores[:size]

    def grown(self, scores: np.ndarray | None, size: int) -> np.ndarray:
        """``scores`` (a zeroed array when ``None``) at least ``size`` long, values kept."""
        if scores is None:
            return self.zeroed(size)
        if scores.size >= size:
            return scores
        if self._scores.size >= size:  # a longer view of the same buffer, zero past the old end
            return self._scores[:size]
        grown = np.zeros(size)
        grown[: scores.size] = scores
        self._scores, self.scratch = grown, np.zeros(size)
        return grown

    def done(self, scores: np.ndarray, written: Sequence[np.ndarray], *, sparse: bool) -> None:
        """Zero ``scores`` for the next search. With sparse contributions only, every score that
        is not 0 is at the ``written`` ids, and zeroing those spares walking the whole array,
        unless they are so many that one pass over it costs less."""
        if sparse and sum(ids.size for ids in written) * SCAN_SHARE <= scores.size:
            for ids in written:
                scores[ids] = 0.0
        else:
            scores.fill(0.0)
        self._zeroed = True
