"""The top k of a large corpus without scoring every posting (``pruning`` holds the bounds).

Terms are taken strongest bound first, each over all its postings, until the k-th best partial
score is a floor that no document outside their postings can reach and few inside them can;
those few are scored in full from their own terms. The answer is the exhaustive search's, bit
for bit; when the bounds do not rule out enough documents, the exhaustive search runs instead.
"""

from __future__ import annotations

import functools

import numpy as np

from discovery._ranking import pruning
from discovery._ranking.bm25 import idf
from discovery._ranking.postings import Contribution, TermPostings, norm_table
from discovery._ranking.scope import Scope
from discovery._ranking.scores import ScoreBuffer
from discovery._ranking.snapshot import Snapshot
from discovery._ranking.source import RankingSource
from discovery._ranking.topk import SCAN_SHARE, RankedTool, kth_best, ordered, union

ROW_READ_POSTINGS = 128
"""What reading one tool's row costs, in postings of a term loaded: scattered rows each cost a
page read and a decode of their own, postings are read by the page."""

FORWARD_SCORED = 2048
"""The most documents a pruned search scores from their own terms; more, and it takes one
more term over all its postings (whose bound then no longer counts) to rule more out."""

Weights = dict[str, tuple[int, float]]
"""Each query term held in the corpus: its id and its weight (qtf · idf)."""


def pruned_top(
    reader: RankingSource,
    snapshot: Snapshot,
    buffer: ScoreBuffer,
    query_terms: dict[str, int],
    scope: Scope,
    limit: int,
) -> list[RankedTool] | None:
    """The top ``limit`` of ``scope``, or ``None`` when the bounds do not rule out enough."""
    weights, bounds = _weighed(reader, snapshot, query_terms, scope)
    if len(weights) < 2:
        return None
    order = sorted(weights, key=lambda term: -bounds[term])
    dropped = [doc.id for doc in scope.exclusion.documents]
    scores: np.ndarray | None = None
    kept: list[Contribution] = []
    probe: np.ndarray | None = None
    try:
        for taken, term in enumerate(order, 1):
            entry = snapshot.terms.postings(reader, [term])[term]
            if entry is None:
                return None
            norms = functools.partial(norm_table, [entry], scope.avgdl)
            groups = scope.corpus.groups
            added = snapshot.terms.contribution(term, entry, groups, scope.avgdl, norms, weights[term][1])
            scores = buffer.grown(scores, entry.max_id + 1)
            added.add_to(scores)
            kept.append(added)
            scores[[i for i in dropped if i < scores.size]] = 0.0
            if probe is None:
                # The floor comes from the first documents found, at least ``limit`` of them:
                # the k-th best of any of them is at most the k-th best of all.
                probe = _probe(scores, buffer.scratch, kept, limit)
                if probe is None:
                    continue
            floor = pruning.floor_of(kth_best(scores, buffer.scratch, probe, limit))
            rest = pruning.bound_sum([bounds[t] for t in order[taken:]])
            if rest >= floor:
                continue
            placing = _reaching(scores, buffer.scratch, kept, pruning.floor_of(floor - rest))
            if placing.size > FORWARD_SCORED:
                continue
            return _rescored(reader, snapshot, placing, query_terms, weights, scope, limit)
        return None
    finally:
        snapshot.terms.evict()
        if scores is not None:
            buffer.done(scores, [part.ids for part in kept], sparse=True)


def _weighed(
    reader: RankingSource, snapshot: Snapshot, query_terms: dict[str, int], scope: Scope
) -> tuple[Weights, dict[str, float]]:
    """The weights of the query terms the corpus holds, and the bound of each."""
    weights: Weights = {}
    bounds: dict[str, float] = {}
    known = snapshot.terms.stats(reader, list(query_terms))
    for term, qtf in query_terms.items():
        found = known[term]
        if found is None:
            continue
        term_id, stats = found
        df = scope.df(term_id, stats)
        if df <= 0:
            continue
        weight = qtf * idf(scope.n_docs, df)
        weights[term] = (term_id, weight)
        max_tf = max(stats[g].max_tf for g in scope.corpus.groups if g in stats)
        bounds[term] = pruning.upper_bound(weight, max_tf)
    return weights, bounds


def _reaching(
    scores: np.ndarray, scratch: np.ndarray, kept: list[Contribution], minimum: float | None
) -> np.ndarray:
    """The documents (ascending, distinct) whose score so far is at least ``minimum`` (positive
    when ``None``): all are among the postings of the terms added, ``kept``, so each term's are
    filtered and only what passes is merged, or, when they are many next to the array, the
    array is scanned in order (a pass over contiguous memory)."""
    if sum(part.ids.size for part in kept) * SCAN_SHARE > scores.size:
        return np.flatnonzero(scores > 0 if minimum is None else scores >= minimum)
    parts = []
    for part in kept:
        values = np.take(scores, part.ids, out=scratch[: part.ids.size])
        parts.append(part.ids[values > 0 if minimum is None else values >= minimum])
    return np.sort(parts[0]) if len(parts) == 1 else union(parts)


def _probe(
    scores: np.ndarray, scratch: np.ndarray, kept: list[Contribution], limit: int
) -> np.ndarray | None:
    """At least ``limit`` distinct documents of the terms added so far, or ``None``: the first
    term's, when it has enough, else all of them."""
    first = kept[0].ids
    positive = first[np.take(scores, first, out=scratch[: first.size]) > 0]
    found = positive if positive.size >= limit or len(kept) == 1 else _reaching(scores, scratch, kept, None)
    return found if found.size >= limit else None


def _rescored(
    reader: RankingSource,
    snapshot: Snapshot,
    ids: np.ndarray,
    query_terms: dict[str, int],
    weights: Weights,
    scope: Scope,
    limit: int,
) -> list[RankedTool]:
    """``ids`` (ascending) ranked by their full scores, computed from their own terms: from the
    postings of the query terms when those cost less to have at hand than the rows of ``ids``
    (``_postings_at_hand``), else from the rows."""
    in_order = [term for term in query_terms if term in weights]
    id_list: list[int] = ids.tolist()
    entries = _postings_at_hand(reader, snapshot, in_order, id_list)
    if entries is not None:
        parts = [(entries[term].held(ids, scope.corpus.groups), weights[term][1]) for term in in_order]
    else:
        held = pruning.held_in_forward(ids, snapshot.rows.postings(reader, id_list))
        parts = [(held(weights[term][0]), weights[term][1]) for term in in_order]
    full = pruning.exact_scores(ids.size, parts, scope.avgdl)

    def names_at(positions: list[int]) -> dict[int, str]:
        names = snapshot.names_of(reader, [id_list[p] for p in positions])
        return {p: names[id_list[p]] for p in positions}

    # Ranked by position in ``ids``, then given back their tool ids.
    hits = ordered(full, np.arange(ids.size), limit, names_at)
    return [RankedTool(id_list[hit.tool_id], hit.name, hit.score) for hit in hits]


def _postings_at_hand(
    reader: RankingSource, snapshot: Snapshot, terms: list[str], ids: list[int]
) -> dict[str, TermPostings] | None:
    """The postings of ``terms``, or ``None`` when loading those not cached would cost more than
    reading the rows of ``ids`` not cached (``ROW_READ_POSTINGS``). A row is a seek to a page of
    its own; postings come in long runs, and once loaded serve the next search of their term too."""
    missing = [term for term in terms if term not in snapshot.terms]
    if missing:
        unread = sum(1 for i in ids if i not in snapshot.rows)
        known = snapshot.terms.stats(reader, missing)
        postings = sum(stats.df for found in known.values() if found for stats in found[1].values())
        if postings > unread * ROW_READ_POSTINGS:
            return None
    entries = snapshot.terms.postings(reader, terms)
    present = {term: entry for term, entry in entries.items() if entry is not None}
    return present if len(present) == len(terms) else None
