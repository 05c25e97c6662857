"""Exact BM25+ top-k over a corpus drawn from the stored postings (SPEC §4).

The statistics of a corpus are the stored group aggregates minus the few documents a session
excludes, so a search costs the postings of its terms whatever the catalog's size. Postings of
queried terms are kept in process as numpy arrays, keyed by the catalog generation: a write in
any process bumps it and the next search here starts from fresh data.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection

from discovery.collation import collation_key
from discovery.scoring import DELTA, K1, B, average_length, idf
from store import GroupStats, StoredTool, TermStats, reads

CACHED_POSTINGS_LIMIT = 4_000_000
"""Postings kept in memory per process (16 bytes each), least recently used first out."""


@dataclass(frozen=True, slots=True)
class TermPostings:
    """A term's postings sorted by (group, tool id), with where each group's run starts."""

    stats: dict[int, TermStats]
    tool_ids: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray
    group_starts: dict[int, tuple[int, int]]

    def for_groups(self, groups: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The postings of ``groups``: one contiguous slice, since groups are adjacent."""
        spans = [self.group_starts[g] for g in groups if g in self.group_starts]
        if not spans:
            return self.tool_ids[:0], self.tf[:0], self.doc_len[:0]
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        return self.tool_ids[start:end], self.tf[start:end], self.doc_len[start:end]


@dataclass(frozen=True, slots=True)
class Corpus:
    """A corpus: whole groups, less the named documents a session excludes."""

    groups: tuple[int, ...]
    excluded: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RankedTool:
    tool_id: int
    name: str
    score: float


@dataclass(frozen=True, slots=True)
class Ranking:
    total_tools: int
    hits: list[RankedTool]


class Ranker:
    """Scores queries against the store; one per process and index."""

    def __init__(self) -> None:
        self._generation = -1
        self._group_stats: dict[int, GroupStats] = {}
        self._postings: OrderedDict[str, TermPostings | None] = OrderedDict()
        self._cached_postings = 0
        self._documents: dict[str, StoredTool | None] = {}
        self._names: dict[int, str] = {}

    def rank(
        self,
        connection: Connection,
        query_terms: dict[str, int],
        corpus: Corpus,
        limit: int | None,
    ) -> Ranking:
        """The best ``limit`` documents (all when ``None``) by score, then name collation."""
        self._sync(connection)
        excluded = self._excluded_documents(connection, corpus)
        n_docs = sum(self._group_stats[g].doc_count for g in corpus.groups) - len(excluded)
        total_len = sum(self._group_stats[g].total_len for g in corpus.groups) - sum(
            doc.doc_len for doc in excluded
        )
        avgdl = average_length(n_docs, total_len)
        excluded_ids = np.array(sorted(doc.id for doc in excluded), dtype=np.int64)
        entries = self._term_postings(connection, list(query_terms))
        scores: np.ndarray | None = None
        for term, qtf in query_terms.items():
            entry = entries.get(term)
            if entry is None:
                continue
            ids, tf, doc_len = entry.for_groups(corpus.groups)
            df = sum(entry.stats[g].df for g in corpus.groups if g in entry.stats)
            if excluded_ids.size and ids.size:
                keep = ~_members(ids, excluded_ids)
                ids, tf, doc_len = ids[keep], tf[keep], doc_len[keep]
                df -= int(keep.size - ids.size)
            if not ids.size:
                continue
            weight = qtf * idf(n_docs, df)
            norm = K1 * (1 - B + B * (doc_len / avgdl))
            contribution = weight * ((tf * (K1 + 1)) / (tf + norm) + DELTA)
            if scores is None or scores.size <= int(ids.max()):
                scores = _grown(scores, int(ids.max()) + 1)
            scores[ids] += contribution
        if scores is None:
            return Ranking(total_tools=n_docs, hits=[])
        return Ranking(total_tools=n_docs, hits=self._top(connection, scores, limit))

    def corpus_size(self, connection: Connection, corpus: Corpus) -> int:
        """``N`` of a corpus, from the group aggregates less its excluded documents."""
        self._sync(connection)
        excluded = self._excluded_documents(connection, corpus)
        return sum(self._group_stats[g].doc_count for g in corpus.groups) - len(excluded)

    def excluded_documents(self, connection: Connection, corpus: Corpus) -> list[StoredTool]:
        """The catalog documents of ``corpus.groups`` that the corpus leaves out."""
        self._sync(connection)
        return self._excluded_documents(connection, corpus)

    def _sync(self, connection: Connection) -> None:
        current = reads.generation(connection)
        if current != self._generation:
            self._generation = current
            self._group_stats = reads.group_stats(connection)
            self._postings.clear()
            self._cached_postings = 0
            self._documents.clear()
            self._names.clear()

    def _excluded_documents(self, connection: Connection, corpus: Corpus) -> list[StoredTool]:
        missing = [name for name in corpus.excluded if name not in self._documents]
        if missing:
            found = reads.tools_by_names(connection, missing)
            for name in missing:
                self._documents[name] = found.get(name)
        groups = set(corpus.groups)
        return [
            doc
            for name in corpus.excluded
            if (doc := self._documents[name]) is not None and doc.grp in groups
        ]

    def _term_postings(self, connection: Connection, terms: Sequence[str]) -> dict[str, TermPostings | None]:
        missing = [term for term in terms if term not in self._postings]
        if missing:
            stats = reads.term_stats(connection, missing)
            for term in missing:
                if term in stats:
                    term_id, by_group = stats[term]
                    self._remember(term, _load(connection, term_id, by_group))
                else:
                    self._remember(term, None)
        found = {}
        for term in terms:
            self._postings.move_to_end(term)
            found[term] = self._postings[term]
        return found

    def _remember(self, term: str, entry: TermPostings | None) -> None:
        self._postings[term] = entry
        self._cached_postings += 0 if entry is None else entry.tool_ids.size
        while self._cached_postings > CACHED_POSTINGS_LIMIT and len(self._postings) > 1:
            _, evicted = self._postings.popitem(last=False)
            self._cached_postings -= 0 if evicted is None else evicted.tool_ids.size

    def _top(self, connection: Connection, scores: np.ndarray, limit: int | None) -> list[RankedTool]:
        candidates = np.flatnonzero(scores > 0)
        if limit is not None and candidates.size > limit:
            # Everything scoring at least the limit-th best score may place: ties included.
            threshold = np.partition(scores[candidates], candidates.size - limit)[candidates.size - limit]
            candidates = candidates[scores[candidates] >= threshold]
        names = self._names_of(connection, candidates.tolist())
        ranked = sorted(
            (RankedTool(int(i), names[int(i)], float(scores[i])) for i in candidates),
            key=lambda hit: (-hit.score, collation_key(hit.name), hit.name),
        )
        return ranked if limit is None else ranked[:limit]

    def _names_of(self, connection: Connection, ids: list[int]) -> dict[int, str]:
        missing = [i for i in ids if i not in self._names]
        if missing:
            self._names.update(reads.names_by_ids(connection, missing))
        return {i: self._names[i] for i in ids}


def _load(connection: Connection, term_id: int, stats: dict[int, TermStats]) -> TermPostings:
    rows = reads.postings(connection, term_id)
    groups = rows["grp"]
    starts: dict[int, tuple[int, int]] = {}
    for grp in np.unique(groups).tolist():
        run = np.flatnonzero(groups == grp)
        starts[int(grp)] = (int(run[0]), int(run[-1]) + 1)
    return TermPostings(
        stats=stats,
        # Integers in memory; every arithmetic step promotes them to doubles exactly.
        tool_ids=rows["tool_id"].astype(np.int64),
        tf=rows["tf"].astype(np.int32),
        doc_len=rows["doc_len"].astype(np.int32),
        group_starts=starts,
    )


def _members(ids: np.ndarray, sorted_small: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in ``sorted_small``: a binary search per id, not a scan per member."""
    at = np.searchsorted(sorted_small, ids).clip(max=sorted_small.size - 1)
    return np.asarray(sorted_small[at] == ids)


def _grown(scores: np.ndarray | None, size: int) -> np.ndarray:
    grown = np.zeros(size, dtype=np.float64)
    if scores is not None:
        grown[: scores.size] = scores
    return grown
