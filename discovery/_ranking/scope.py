"""A corpus with its statistics: the stored group aggregates less the documents it excludes."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from discovery._ranking.bm25 import average_length
from discovery._rules import Corpus
from store import GroupStats, StoredTool, TermStats

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Exclusion:
    """What a corpus takes out of its groups: the documents, their length, and per term how many
    of them hold it."""

    documents: list[StoredTool]
    total_len: int
    term_counts: Counter[int]

    @classmethod
    def of(cls, documents: list[StoredTool], terms: Sequence[frozenset[int]]) -> Exclusion:
        """Of ``documents``, each holding the term ids ``terms`` says, in the same order."""
        return cls(
            documents=documents,
            total_len=sum(doc.doc_len for doc in documents),
            term_counts=Counter(term for held in terms for term in held),
        )

    def plus(self, more: Exclusion) -> Exclusion:
        return Exclusion(
            documents=self.documents + more.documents,
            total_len=self.total_len + more.total_len,
            term_counts=self.term_counts + more.term_counts,
        )

    @functools.cached_property
    def ids(self) -> np.ndarray:
        """The documents' ids, sorted: made when a search first needs them, not when a session
        opens and counts its corpus."""
        import numpy as np

        return np.array(sorted(doc.id for doc in self.documents), dtype=np.intp)


@dataclass(frozen=True, slots=True)
class Scope:
    """A corpus and its statistics: ``N`` and the average length, from the group aggregates less
    what it excludes (contract §4)."""

    corpus: Corpus
    exclusion: Exclusion
    n_docs: int
    avgdl: float

    @classmethod
    def of(cls, corpus: Corpus, exclusion: Exclusion, group_stats: dict[int, GroupStats]) -> Scope:
        n_docs = sum(group_stats[g].doc_count for g in corpus.groups) - len(exclusion.documents)
        total_len = sum(group_stats[g].total_len for g in corpus.groups) - exclusion.total_len
        return cls(corpus, exclusion, n_docs, average_length(n_docs, total_len))

    def df(self, term_id: int, stats: dict[int, TermStats]) -> int:
        """How many of the corpus' documents hold the term of ``stats`` (by group)."""
        groups = self.corpus.groups
        return sum(stats[g].df for g in groups if g in stats) - self.exclusion.term_counts.get(term_id, 0)
