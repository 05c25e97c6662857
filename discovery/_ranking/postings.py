"""A term's stored postings as numpy arrays, and what the term adds to each score of a corpus."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from discovery._ranking.bm25 import contribution, length_norm, saturation_numerator
from discovery._ranking.pruning import Held
from discovery._ranking.source import RankingSource
from store import TermStats

DENSE_SHARE = 6
"""A contribution is laid out densely by tool id when its postings are at least one in this
many ids: adding it is then one contiguous pass instead of a scatter per posting, and it costs at
most this many times the memory."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """What a term adds to each document's score in one corpus (``bm25.contribution``), per
    posting of the corpus' groups, whose tool ids are ``ids`` (``intp``: a view of the cached
    postings when they are stored so, else a copy, made once here rather than by numpy at every
    indexing), or, when ``dense``, laid out by tool id with 0 where the term is absent. Adding 0
    leaves a score's bits as they are, so both layouts give the same scores."""

    values: np.ndarray
    ids: np.ndarray
    dense: bool
    owns_ids: bool = False

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes) + (int(self.ids.nbytes) if self.owns_ids else 0)

    def add_to(self, scores: np.ndarray) -> None:
        if self.dense:
            target = scores[: self.values.size]
            target += self.values
        else:
            # The ids are unique, so a fancy-indexed add is one addition per posting, as
            # ``np.add.at`` would make, without its per-element dispatch.
            scores[self.ids] += self.values


Contributions = OrderedDict[tuple[float, tuple[int, ...], float], Contribution]


@dataclass(slots=True)
class TermPostings:
    """A term's postings sorted by (group, tool id), with where each group's run starts.

    The arrays are kept as stored (each in its block's narrow unsigned width, or wider when a
    term's groups or pending overrides differ): a large catalog's common terms fill the cache,
    and the doubles of a contribution are cheap to derive again.
    ``contributions`` keeps what the term adds to each score by (average length, groups, weight)
    for the corpora searched last (the ranker fills it), so a repeated search of one corpus only
    adds them up.
    """

    term_id: int
    stats: dict[int, TermStats]
    tool_ids: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray
    group_starts: dict[int, tuple[int, int]]
    max_id: int
    longest: int
    contributions: Contributions = field(default_factory=OrderedDict)

    def span(self, groups: Sequence[int]) -> slice:
        """The postings of ``groups``: one contiguous run, since corpus groups are adjacent."""
        spans = [self.group_starts[g] for g in groups if g in self.group_starts]
        if not spans:
            return slice(0, 0)
        return slice(min(s for s, _ in spans), max(e for _, e in spans))

    @property
    def nbytes(self) -> int:
        arrays = (self.tool_ids, self.tf, self.doc_len)
        return sum(array.nbytes for array in arrays) + sum(
            kept.nbytes for kept in self.contributions.values()
        )

    def held(self, ids: np.ndarray, groups: Sequence[int]) -> Held:
        """Which of ``ids`` (ascending, unique) hold the term in ``groups``, looked up in each
        group's run (sorted by tool id; together the runs are not)."""
        positions, rows = [], []
        for grp in groups:
            if grp not in self.group_starts:
                continue
            start, end = self.group_starts[grp]
            run = self.tool_ids[start:end]
            at = np.searchsorted(run, _as_dtype_of(run, ids))
            inside = at < run.size
            found = np.flatnonzero(inside)[run[at[inside]] == ids[inside]]
            positions.append(found)
            rows.append(at[found] + start)
        if not positions:
            return Held(np.empty(0, np.int64), self.tf[:0], self.doc_len[:0])
        at_rows = np.concatenate(rows)
        return Held(np.concatenate(positions), self.tf[at_rows], self.doc_len[at_rows])

    def contribution(
        self, groups: tuple[int, ...], avgdl: float, norms: np.ndarray | None, weight: float
    ) -> Contribution:
        """``bm25.contribution`` at ``weight`` for the postings of ``groups`` at ``avgdl``."""
        run = self.span(groups)
        tf, doc_len, stored_ids = self.tf[run], self.doc_len[run], self.tool_ids[run]
        values = _contributions(weight, tf, doc_len, avgdl, norms)
        ids = stored_ids.astype(np.intp, copy=False)
        owns_ids = ids is not stored_ids
        id_range = int(ids.max()) + 1 if ids.size else 0
        if ids.size == 0 or ids.size * DENSE_SHARE < id_range:
            return Contribution(values, ids, dense=False, owns_ids=owns_ids)
        dense = np.zeros(id_range)
        dense[ids] = values
        return Contribution(dense, ids, dense=True, owns_ids=owns_ids)


def _as_dtype_of(run: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``ids`` (ascending) in ``run``'s dtype when it holds them all, so that a binary search
    does not convert the whole run to a common type; as they are otherwise."""
    if ids.dtype == run.dtype or ids.size == 0:
        return ids
    limits = np.iinfo(run.dtype)
    if int(ids[0]) >= limits.min and int(ids[-1]) <= limits.max:
        return ids.astype(run.dtype)
    return ids


def _contributions(
    weight: float, tf: np.ndarray, doc_len: np.ndarray, avgdl: float, norms: np.ndarray | None
) -> np.ndarray:
    """``bm25.contribution`` per posting.

    A contribution depends only on the posting's (tf, length), and a common term's hundreds of
    thousands of postings share a few thousand such pairs: when every pair fits in a table
    smaller than the postings, the table is computed (the same operations on the same doubles,
    so the same bits) and looked up, one gather instead of a pass per arithmetic step."""
    if norms is not None and tf.size:
        tf_values = int(tf.max()) + 1
        if tf_values * norms.size <= min(tf.size, CONTRIBUTION_TABLE_LIMIT) and tf.min() >= 0:
            tfs = np.arange(tf_values, dtype=np.float64)[:, None]
            table = contribution(weight, saturation_numerator(tfs), tfs, norms[None, :]).ravel()
            at = tf * np.int32(norms.size)
            at += doc_len
            looked_up: np.ndarray = table.take(at)
            return looked_up
    as_float = tf.astype(np.float64)
    norm = norms[doc_len] if norms is not None else length_norm(doc_len, avgdl)
    values: np.ndarray = contribution(weight, saturation_numerator(as_float), as_float, norm)
    return values


CONTRIBUTION_TABLE_LIMIT = 1 << 20
"""Most (tf, length) pairs a contribution table holds: its index stays well inside int32."""


def load_postings(reader: RankingSource, term_id: int, stats: dict[int, TermStats]) -> TermPostings:
    blocks = reader.index.posting_blocks(term_id)
    starts: dict[int, tuple[int, int]] = {}
    end = 0
    for grp, block in blocks:
        starts[grp] = (end, end + block.size)
        end += block.size

    tool_ids = _joined([block.tool_ids for _, block in blocks], np.int64)
    doc_len = _joined([block.doc_len for _, block in blocks], np.int32)
    return TermPostings(
        term_id=term_id,
        stats=stats,
        tool_ids=tool_ids,
        tf=_joined([block.tf for _, block in blocks], np.int32),
        doc_len=doc_len,
        group_starts=starts,
        max_id=int(tool_ids.max()) if tool_ids.size else 0,
        longest=int(doc_len.max()) if doc_len.size else 0,
    )


def _joined(arrays: list[np.ndarray], dtype: type[np.generic]) -> np.ndarray:
    """The groups' arrays one after the other; one group (the common case) is its block's
    array as it is, not a copy."""
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.empty(0, dtype)


NORM_TABLE_LIMIT = 1 << 16
"""Longest document for which length norms come from a table rather than per posting."""


def norm_table(entries: list[TermPostings], avgdl: float) -> np.ndarray | None:
    """``k1 · (1 − b + b · (len / avgdl))`` for every length up to the longest posting's.

    Lengths are small integers shared by many postings; the table holds exactly the doubles the
    formula gives each of them, so looking them up changes no bit of any score.
    """
    longest = max((entry.longest for entry in entries), default=0)
    if longest > NORM_TABLE_LIMIT:
        return None
    lengths = np.arange(longest + 1, dtype=np.float64)
    return length_norm(lengths, avgdl)
