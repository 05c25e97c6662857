"""The learned field's part of a score: BM25+ over the terms sessions taught each tool.

Pure functions of arrays. The field is scored by the formula of ``bm25`` as a second
document per tool, with the corpus' ``N`` and, for ``df``, the corpus tools that hold the term in
either field (their text or what they learned), as BM25F counts a term's documents. A word that
every request holds ("the", "my") is then as common as it is in tool texts and weighs little,
while a word no tool text holds ("notify") weighs as much as its rarity says, however few tools
learned it. The field is not length-normalised (``b`` = 0, so its norm is ``k1`` for every
tool): its length counts how often and how variously a tool was asked for, not how wordy it is,
and normalising by it would hold the most used tools back. A term's contribution to a tool is then
a function of its tf alone, and a call changes only the parts of the terms it taught. Each term's
weight is ``LEARNED_WEIGHT · qtf · idf``. A search adds these contributions first, in query
order from 0.0, then the tool-text ones, and ``explain`` adds them in the same order, so both
give the same doubles.

Whose evidence counts. A (term, tool) pair's tf, as identity X sees it, is the number of X's own
sessions that taught it, plus the number of the *other* identities that taught it when the pair
is shared: taught by at least K distinct identities (``min_identities``, a property of the
index), 2K for a tool whose annotations say it is destructive. Below that, another identity's
evidence is nowhere in X's scores, df or ``explain``. A host whose every session is one identity
ranks by its sessions' counts, as before identities; a Sybil of many sessions of one identity adds
at most 1 to any other identity's tf, and only once K identities agree. The shared part is the
same for every identity and cached as such (``sharing.shared_tf``); a viewer's own counts are laid over it
(``seen_by``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from discovery._ranking.bm25 import K1, contribution, idf, saturation_numerator
from discovery._ranking.fields import LEARNED_WEIGHT

LEARNED_NORM = K1
"""``k1 · (1 − b + b · len/avgdl)`` at ``b`` = 0: the learned field's norm, whatever its length."""


@dataclass(frozen=True, slots=True)
class LearnedPostings:
    """The tools holding one learned term, ascending by tool id: their group and tf, as
    integers (shared: the identities that taught it; own: one identity's sessions; as one
    identity sees it: ``seen_by``)."""

    ids: np.ndarray
    grp: np.ndarray
    tf: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[tuple[int, int, int]]) -> LearnedPostings:
        table = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return cls(table[:, 0].astype(np.intp), table[:, 1], table[:, 2])

    def patched(self, tf: dict[int, tuple[int, int]]) -> LearnedPostings | None:
        """These postings with ``tf`` applied (by tool id: ``(group, tf)``, tf 0 taking the tool
        out, a new id put in its place); ``None`` when no posting is left. The changed tools are
        found by bisection: a call changes a few postings of terms that many tools hold."""
        if not tf:
            return self
        changed = np.array(sorted(tf), dtype=np.intp)
        rows = np.array([tf[i] for i in changed.tolist()], dtype=np.int64).reshape(-1, 2)
        groups, counts = rows[:, 0], rows[:, 1]
        at = np.searchsorted(self.ids, changed)
        held = at < self.ids.size
        held[held] = self.ids[at[held]] == changed[held]
        ids, grp, tfs = self.ids, self.grp, self.tf.copy()
        kept = held & (counts > 0)
        tfs[at[kept]] = counts[kept]
        if not np.array_equal(grp[at[kept]], groups[kept]):  # a tool moved group (a catalog change)
            grp = grp.copy()
            grp[at[kept]] = groups[kept]
        gone = held & (counts == 0)
        if gone.any():
            keep = np.ones(ids.size, dtype=bool)
            keep[at[gone]] = False
            ids, grp, tfs = ids[keep], grp[keep], tfs[keep]
        new = ~held & (counts > 0)
        if new.any():
            where = np.searchsorted(ids, changed[new])
            ids = np.insert(ids, where, changed[new])
            grp = np.insert(grp, where, groups[new])
            tfs = np.insert(tfs, where, counts[new])
        if ids.size == 0:
            return None
        return LearnedPostings(ids, grp, tfs)

    def seen_by(self, own: LearnedPostings) -> LearnedPostings:
        """These shared postings as the identity whose own counts are ``own`` sees them: where it
        taught the pair its sessions count, plus the other identities when the pair is shared
        (the shared count less itself); elsewhere the shared count."""
        ids = np.union1d(self.ids, own.ids).astype(np.intp)
        tf = np.zeros(ids.size, dtype=np.int64)
        grp = np.zeros(ids.size, dtype=np.int64)
        shared_at = np.searchsorted(ids, self.ids)
        tf[shared_at], grp[shared_at] = self.tf, self.grp
        own_at = np.searchsorted(ids, own.ids)
        others = tf[own_at]
        tf[own_at] = own.tf + np.where(others > 0, others - 1, 0)
        grp[own_at] = own.grp
        return LearnedPostings(ids, grp, tf)

    def in_corpus(self, groups: Sequence[int], excluded: np.ndarray) -> np.ndarray:
        """Which postings belong to the corpus: a mask."""
        mask = np.zeros(self.ids.size, dtype=bool)
        for group in groups:
            mask |= self.grp == group
        if excluded.size:  # few, sorted: looked up rather than hashed
            at = np.minimum(np.searchsorted(excluded, self.ids), excluded.size - 1)
            mask &= excluded[at] != self.ids
        return mask


@dataclass(frozen=True, slots=True)
class Universe:
    """The catalog tools that learned anything, ascending by id: every learned posting is one of
    theirs, so the learned parts of a search can be added to these tools' scores gathered in an
    array of their own, shorter than the catalog's and dense with them."""

    ids: np.ndarray

    def positions(self, ids: np.ndarray) -> np.ndarray | None:
        """Where ``ids`` (ascending) stand among these tools; ``None`` when some are not."""
        if self.ids.size == 0:
            return None if ids.size else np.zeros(0, dtype=np.intp)
        at = np.minimum(np.searchsorted(self.ids, ids), self.ids.size - 1)
        return at if bool(np.array_equal(self.ids[at], ids)) else None


@dataclass(frozen=True, slots=True)
class Roster(Universe):
    """The catalog tools that learned anything, ascending by id, with their group: what completes
    the stored postings of a term (ids and tfs) into ``LearnedPostings``, and the universe the
    learned parts are laid out against."""

    grp: np.ndarray

    @classmethod
    def of(cls, tools: Sequence[tuple[int, int]]) -> Roster:
        """From ``(tool id, group)`` rows, one a tool."""
        table = np.array(tools, dtype=np.int64).reshape(-1, 2)
        order = np.argsort(table[:, 0], kind="stable")
        return cls(table[order, 0].astype(np.intp), table[order, 1])

    def postings(self, ids: np.ndarray, tf: np.ndarray) -> LearnedPostings | None:
        """The postings of the tools ``ids`` (ascending) with their tfs, ``None`` when there are
        none. A tool that is not among these (the stored sums miss it) is left out, as the
        learned field counts only the tools that learned anything."""
        if self.ids.size == 0:
            return None
        at = np.minimum(np.searchsorted(self.ids, ids), self.ids.size - 1)
        held = self.ids[at] == ids
        if not held.all():
            ids, tf, at = ids[held], tf[held], at[held]
        if ids.size == 0:
            return None
        return LearnedPostings(ids.astype(np.intp), self.grp[at], tf)

    def with_tools(self, tools: dict[int, int | None]) -> Roster:
        """These tools with ``tools`` applied (by id: the group, ``None`` taking the tool out, a
        new id put in its place)."""
        changed = np.array(sorted(tools), dtype=np.intp)
        kept = ~np.isin(self.ids, changed)
        added = [(i, group) for i in changed.tolist() if (group := tools[i]) is not None]
        rows = np.array(added, dtype=np.int64).reshape(-1, 2)
        ids = np.concatenate([self.ids[kept], rows[:, 0].astype(np.intp)])
        order = np.argsort(ids, kind="stable")
        grp = np.concatenate([self.grp[kept], rows[:, 1]])
        return Roster(ids[order], grp[order])


@dataclass(frozen=True, slots=True)
class TextMatches:
    """What the tool texts of a corpus say of a term: the corpus size, how many corpus tools
    hold the term in their text, and their ids (excluded tools may be among them)."""

    n_docs: int
    df: int
    ids: np.ndarray
    """Ascending."""


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
    at: np.ndarray | None = None
    """Where ``ids`` stand among the learned tools (``Universe.ids``), when known."""
    compact: np.ndarray | None = None
    """``values`` laid out over the learned tools (0 where the term is absent), when the term is
    common among them."""

    @property
    def max_id(self) -> int:
        return int(self.ids[-1])


def learned_weight(qtf: int, idf_value: float) -> float:
    """``LEARNED_WEIGHT · qtf · idf``, in that order."""
    return LEARNED_WEIGHT * qtf * idf_value


@dataclass(frozen=True, slots=True)
class Membership:
    """Which of a term's learned postings belong to a corpus (their tool ids and tfs), and the
    term's ``df`` there: the corpus tools holding it in their text or their learned field. It
    outlives the calls that teach other terms (a change of one of the term's tfs takes its
    memberships out of the cache); ``at`` holds while the learned tools stay the same ones."""

    df: int
    ids: np.ndarray
    at: np.ndarray | None
    """Where ``ids`` stand among the learned tools (``Universe.positions``)."""
    tf: np.ndarray
    top_tf: int
    """The largest of ``tf``."""


def learned_membership(
    held: LearnedPostings, groups: Sequence[int], excluded: np.ndarray, text: TextMatches, universe: Universe
) -> Membership | None:
    """``None`` when no corpus tool learned the term."""
    mask = held.in_corpus(groups, excluded)
    learned = int(np.count_nonzero(mask))
    if learned == 0:
        return None
    ids = held.ids[mask]
    both = 0
    if text.ids.size:
        at = np.minimum(np.searchsorted(text.ids, ids), text.ids.size - 1)
        both = int(np.count_nonzero(text.ids[at] == ids))
    tf = held.tf if learned == mask.size else held.tf[mask]
    return Membership(text.df + learned - both, ids, universe.positions(ids), tf, int(tf.max()))


def learned_term(term: str, qtf: int, membership: Membership, n_docs: int) -> LearnedTerm:
    """What one query term adds through the learned field in a corpus of ``n_docs`` tools.

    A contribution depends only on the posting's tf, a small integer: when the tfs are fewer
    than the postings, a table by tf is computed (the same operations on the same doubles, so the
    same bits) and looked up."""
    weight = learned_weight(qtf, idf(n_docs, membership.df))
    tf = membership.tf
    if membership.top_tf < tf.size:
        tfs = np.arange(membership.top_tf + 1.0)
        table = contribution(weight, saturation_numerator(tfs), tfs, np.full_like(tfs, LEARNED_NORM))
        values: np.ndarray = table.take(tf)
    else:
        as_float = tf.astype(np.float64)
        values = contribution(
            weight, saturation_numerator(as_float), as_float, np.full_like(as_float, LEARNED_NORM)
        )
    return LearnedTerm(term, weight, membership.df, membership.ids, values, tf, at=membership.at)


COMPACT_SHARE = 6
"""As for the tool text's contributions (``postings.DENSE_SHARE``), among the learned tools: a
learned term held by at least one in this many of them is added as one contiguous pass over
their scores, laid out in their order."""


def laid_out(part: LearnedTerm, universe: Universe) -> LearnedTerm:
    """``part`` with its values laid out over the learned tools when it is common enough among
    them (``COMPACT_SHARE``). Done when the part is computed: the layout is the learned tools'
    size, not the catalog's, so even a part computed anew after every call soon pays for it, and
    a part first laid out when added again would cost that search the layout's fresh memory."""
    if part.at is None or part.ids.size * COMPACT_SHARE < universe.ids.size:
        return part
    compact = np.zeros(int(part.at[-1]) + 1)
    compact[part.at] = part.values
    return replace(part, compact=compact)


UNIVERSE_SHARE = 2
"""The learned parts of a search are added in an array of the learned tools' own once their
postings together are at least one in this many learned tools: below that, writing that array
into the scores costs more than adding each posting in place."""


def add_learned(
    scores: np.ndarray, parts: Sequence[LearnedTerm], universe: Universe, scratch: np.ndarray
) -> None:
    """Put the learned field's score in ``scores``, which are all 0 (a search adds the tool
    text's after it): ``parts`` added in their order from 0.0. ``scratch`` is a float array at
    least as long as ``scores``.

    Either each part in place at its ids, or, when the parts are many postings and each knows
    its positions among the learned tools, in an array of those tools' own (``scratch``) then
    written into ``scores``: each score gets the same additions in the same order either way,
    and adding 0 (a compact part's value for a tool that did not learn its term) leaves a
    score's bits as they are. Starting from 0 spares reading the scores first."""
    postings = sum(part.ids.size for part in parts)
    if postings * UNIVERSE_SHARE < universe.ids.size or any(part.at is None for part in parts):
        for part in parts:
            scores[part.ids] += part.values
        return
    tools = universe.ids
    if tools.size and tools[-1] >= scores.size:  # only those inside the array, as every part's ids
        tools = tools[: int(np.searchsorted(tools, scores.size))]
    gathered = scratch[: tools.size]
    gathered.fill(0.0)
    for part in parts:
        compact = part.compact
        if compact is None:  # the positions are distinct: one addition each, as ``+=`` at them
            assert part.at is not None
            np.add.at(gathered, part.at, part.values)
        elif compact.size == gathered.size:
            gathered += compact
        else:
            target = gathered[: compact.size]
            target += compact
    scores[tools] = gathered
