"""The learned field's part of a score: BM25+ over the terms sessions taught each tool.

Pure functions of arrays. The field is scored by the formula of ``bm25`` as a second
document per tool, with the corpus' ``N`` and, for ``df``, the corpus tools that hold the term in
either field (their text or what they learned), as BM25F counts a term's documents. A word that
every request holds ("the", "my") is then as common as it is in tool texts and weighs little,
while a word no tool text holds ("notify") weighs as much as its rarity says, however few tools
learned it. The length normalisation is the field's own: its length against the average over the
corpus tools that learned anything. Each term's weight is ``LEARNED_WEIGHT · qtf · idf``. A search
adds these contributions, in query order, after the tool-text ones, and ``explain`` adds them in
the same order, so both give the same doubles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from discovery.ranking.bm25 import average_length, contribution, idf, length_norm, saturation_numerator
from discovery.ranking.fields import LEARNED_WEIGHT


@dataclass(frozen=True, slots=True)
class LearnedPostings:
    """The tools holding one learned term, ascending by tool id: their group, tf (sessions that
    taught the term) and learned length."""

    ids: np.ndarray
    grp: np.ndarray
    tf: np.ndarray
    length: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[tuple[int, int, int, int]]) -> LearnedPostings:
        table = np.array(rows, dtype=np.int64).reshape(-1, 4)
        return cls(
            table[:, 0].astype(np.intp),
            table[:, 1],
            table[:, 2].astype(np.float64),
            table[:, 3].astype(np.float64),
        )

    def in_corpus(self, groups: Sequence[int], excluded: np.ndarray) -> np.ndarray:
        """Which postings belong to the corpus: a mask."""
        mask = np.isin(self.grp, np.asarray(groups, dtype=np.int64))
        if excluded.size:
            mask &= ~np.isin(self.ids, excluded)
        return mask


@dataclass(frozen=True, slots=True)
class TextMatches:
    """What the tool texts of a corpus say of a term: the corpus size, how many corpus tools
    hold the term in their text, and their ids (excluded tools may be among them)."""

    n_docs: int
    df: int
    ids: np.ndarray


@dataclass(frozen=True, slots=True)
class LearnedTerm:
    """What one query term adds through the learned field: its weight, the tools and values."""

    term: str
    weight: float
    df: int
    """Corpus tools holding the term in their text or their learned field."""
    ids: np.ndarray
    values: np.ndarray
    tf: np.ndarray
    length: np.ndarray


def learned_weight(qtf: int, idf_value: float) -> float:
    """``LEARNED_WEIGHT · qtf · idf``, in that order."""
    return LEARNED_WEIGHT * qtf * idf_value


@dataclass(frozen=True, slots=True)
class LearnedPopulation:
    """The corpus tools that learned anything: how many, and their average learned length."""

    count: int
    avgdl: float


def learned_population(
    stats: dict[int, tuple[int, int]], groups: Sequence[int], excluded: tuple[int, int]
) -> LearnedPopulation:
    """From the per-group ``(count, total length)`` of the tools that learned anything, less the
    excluded tools' ``(count, total length)``."""
    count = sum(stats.get(g, (0, 0))[0] for g in groups) - excluded[0]
    total = sum(stats.get(g, (0, 0))[1] for g in groups) - excluded[1]
    return LearnedPopulation(count, average_length(count, total))


def learned_term(
    term: str,
    qtf: int,
    held: LearnedPostings,
    groups: Sequence[int],
    excluded: np.ndarray,
    population: LearnedPopulation,
    text: TextMatches,
) -> LearnedTerm | None:
    """What one query term adds through the learned field in a corpus (``None``: no corpus tool
    learned it)."""
    mask = held.in_corpus(groups, excluded)
    learned = int(np.count_nonzero(mask))
    if learned == 0:
        return None
    ids = held.ids[mask]
    both = int(np.count_nonzero(np.isin(ids, text.ids))) if text.ids.size else 0
    df = text.df + learned - both
    weight = learned_weight(qtf, idf(text.n_docs, df))
    tf, length = held.tf[mask], held.length[mask]
    values = contribution(weight, saturation_numerator(tf), tf, length_norm(length, population.avgdl))
    return LearnedTerm(term, weight, df, ids, values, tf, length)
