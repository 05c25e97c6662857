"""Exact BM25+ top-k over a corpus drawn from the stored postings (contract §4).

The statistics of a corpus are the stored group aggregates minus the few documents a session
excludes, so a search costs the postings of its terms whatever the catalog's size. Postings of
queried terms are kept in process as numpy arrays, keyed by the catalog generation: a write in
any process bumps it and the next search here starts from fresh data.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

import numpy as np

from discovery._params import Query, stored_analyzer_named
from discovery._ranking import pruning
from discovery._ranking.bm25 import average_length, idf
from discovery._ranking.cache import ByTerm, RowCache, TermCache
from discovery._ranking.fusion import SemanticPart, fused, semantic_part
from discovery._ranking.learned import (
    LearnedPostings,
    LearnedTerm,
    Membership,
    Roster,
    TextMatches,
    add_learned,
    laid_out,
    learned_membership,
    learned_term,
)
from discovery._ranking.postings import Contribution, TermPostings, norm_table
from discovery._ranking.source import RankingSource
from discovery._ranking.topk import SCAN_SHARE, RankedTool, candidates, kth_best, ordered, union
from discovery._rules import Corpus
from discovery._text.analyzers import REFERENCE, Analyzer
from discovery.errors import EmbeddingUnavailable, SemanticSignalOff
from store import (
    EmbeddingState,
    GroupStats,
    LearnedChange,
    LearnedTool,
    LearningState,
    StoredTool,
    StoredVectors,
)

if TYPE_CHECKING:
    from discovery._semantic.model import EmbeddingModel

PRUNE_FROM = 300_000
"""Corpora this large are searched with pruning. In smaller ones every contribution of the
queried terms fits the cache, adding them is cheap, and bounding costs more than it saves
(see bench/results.md)."""


@dataclass(frozen=True, slots=True)
class Exclusion:
    """What a corpus takes out of its groups: the documents, their length, and per term how many
    of them hold it."""

    documents: list[StoredTool]
    total_len: int
    term_counts: Counter[int]


@dataclass(frozen=True, slots=True)
class Ranking:
    total_tools: int
    hits: list[RankedTool]


@dataclass(frozen=True, slots=True)
class SemanticQuery:
    """What fusing a search needs: the catalog's vectors, the query's, the semantic weight."""

    vectors: StoredVectors
    query: np.ndarray
    weight: float


CorpusKey = tuple[tuple[int, ...], frozenset[str]]
"""A corpus' groups and excluded names."""

Params = ParamSpec("Params")
Result = TypeVar("Result")


def _serialized(
    method: Callable[Concatenate[Ranker, Params], Result],
) -> Callable[Concatenate[Ranker, Params], Result]:
    """One caller at a time: threads sharing an index share its caches, and a catalog change
    seen by one of them clears what another may be reading."""

    @functools.wraps(method)
    def serialized(ranker: Ranker, /, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        with ranker._lock:
            return method(ranker, *args, **kwargs)

    return serialized


class Ranker:
    """Scores queries against the store; one per process and index, shared by its threads.

    Every public method runs alone (``_serialized``) and starts by checking the catalog
    generation its caller's transaction sees, so a thread whose snapshot is older or newer than
    what the caches hold reloads them before using them."""

    def __init__(self, *, prune_from: int | None = PRUNE_FROM) -> None:
        self.prune_from = prune_from
        """The corpus size from which a search with a limit skips postings (``_pruned``;
        ``None``: never). Results are the same either way."""
        self._lock = threading.RLock()
        self._generation = -1
        self._analyzer: Analyzer = REFERENCE
        self._group_stats: dict[int, GroupStats] = {}
        self._terms = TermCache()
        self._documents: dict[str, StoredTool | None] = {}
        self._names: dict[int, str] = {}
        self._tools: dict[int, StoredTool] = {}
        self._document_terms: dict[int, frozenset[int]] = {}
        self._rows = RowCache()
        self._synced_on: RankingSource | None = None
        self._exclusions: dict[Corpus, Exclusion] = {}
        self._learning = LearningState(enabled=False, generation=-1)
        # The learned postings of the terms searched last, and the changes the learned journal
        # made to them since, by tool id (group, tf): applied when the term is next searched, so
        # a call costs the processes that catch up with it nothing for terms they do not search.
        self._learned: dict[str, LearnedPostings | None] = {}
        self._learned_pending: dict[str, dict[int, tuple[int, int]]] = {}
        # The catalog tools that learned anything, by name: loaded whole once, then kept current
        # from the learned journal.
        self._learned_tools: dict[str, LearnedTool] | None = None
        # The same tools with their group (``learned.Roster``), which complete a term's stored
        # postings and are the universe the learned parts are laid out against: built from
        # them, then kept current as tools start or stop having a field.
        self._roster: Roster | None = None
        # The ids of each corpus' excluded tools, sorted (until the catalog changes).
        self._learned_exclusions: dict[Corpus, np.ndarray] = {}
        # What each learned query term adds in a corpus, by term and then (qtf, corpus): a
        # repeated search only adds them up, as for the tool text. A call takes out the parts of
        # the terms it taught and no other, since a part depends on its term's postings alone
        # (the field is not length-normalised); keyed by the corpus' fields rather than the
        # corpus, whose hash costs more.
        self._learned_parts: ByTerm[tuple[int, CorpusKey], LearnedTerm | None] = ByTerm(LEARNED_PARTS_CACHED)
        # Which learned postings of a term each corpus holds, and its df there: kept across
        # calls that teach other terms.
        self._learned_members: ByTerm[Corpus, Membership | None] = ByTerm(LEARNED_PARTS_CACHED)
        # The tool ids holding a term in their text, sorted, per corpus groups (until the catalog
        # changes): what a learned term's df is counted against.
        self._text_ids: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
        # The scores of one search at a time (callers are serialized), and room to partition
        # them: reused, since a fresh array of a large catalog's size costs page faults each
        # time it is allocated.
        self._scores = np.zeros(0)
        self._scores_zeroed = True
        self._scratch = np.zeros(0)
        # The semantic signal: the index's embedding setting (read with each new generation),
        # its current vectors (loaded on the first fused search) and the model's query vectors.
        self._embedding = EmbeddingState(None, None, 0, 0.0)
        self._vectors: StoredVectors | None = None
        self._model: EmbeddingModel | None = None
        self.semantic_problem: str | None = None
        """Why an index with vectors is searched without them in this process (the model could
        not be loaded), or ``None``."""

    def search(
        self,
        reader: RankingSource,
        query: Query,
        corpus: Corpus,
        limit: int,
        *,
        selected: frozenset[str] = frozenset(),
    ) -> Ranking:
        """The search every caller runs (a read-only search, a session's search and its preview):
        ``query``'s best ``limit`` matches in ``corpus`` under the catalog's analyzer, fused with
        the semantic signal when the index has one, leaving out the ``selected`` tools (a
        session's; those the corpus does not already exclude cost one more ranked place each)."""
        terms = self.query_terms(reader, query)
        extra = len(selected - corpus.excluded)
        ranking = self.rank(reader, terms, corpus, limit + extra, query=query.text)
        if not selected:
            return ranking
        return Ranking(ranking.total_tools, [hit for hit in ranking.hits if hit.name not in selected][:limit])

    @_serialized
    def rank(
        self,
        reader: RankingSource,
        query_terms: dict[str, int],
        corpus: Corpus,
        limit: int | None,
        *,
        query: str | None = None,
    ) -> Ranking:
        """The best ``limit`` documents (all when ``None``) by score, then name collation.

        Excluded documents are scored with the rest and dropped at the end; their effect on
        ``N``, the average length and each ``df`` is subtracted from the stored aggregates.
        When the index has vectors and ``query`` (the text the terms came from) is given, the
        scores are fused with its semantic similarity (``fusion``).
        """
        self._sync(reader)
        exclusion = self._exclusion(reader, corpus)
        excluded, excluded_df = exclusion.documents, exclusion.term_counts
        n_docs = sum(self._group_stats[g].doc_count for g in corpus.groups) - len(excluded)
        total_len = sum(self._group_stats[g].total_len for g in corpus.groups) - exclusion.total_len
        avgdl = average_length(n_docs, total_len)
        if limit is not None and limit < 1:
            return Ranking(total_tools=n_docs, hits=[])
        learned = self._learned_terms(reader, query_terms, corpus, exclusion)
        semantic = self._semantic_query(reader, query) if query is not None else None
        # A query that reaches the learned field or is fused is ranked exhaustively: the pruning
        # bounds cover the tool-text terms only, and exhaustive is exact by construction.
        if (
            not learned
            and semantic is None
            and limit is not None
            and self.prune_from is not None
            and n_docs >= self.prune_from
        ):
            pruned = self._pruned(reader, query_terms, corpus, exclusion, n_docs, avgdl, limit)
            if pruned is not None:
                return Ranking(total_tools=n_docs, hits=pruned)
        entries = self._terms.postings(reader, list(query_terms))
        present = [entry for entry in entries.values() if entry is not None]
        # Needed only to compute a contribution that is not cached yet.
        norms = functools.cache(functools.partial(norm_table, present, avgdl))
        if not present and not learned and semantic is None:
            return Ranking(total_tools=n_docs, hits=[])
        highest = [entry.max_id for entry in present] + [part.max_id for part in learned]
        scores = self._zeroed_scores(max(highest, default=-1) + 1)
        scored: list[tuple[float, np.ndarray]] = []  # each term's weight and documents
        sparse = True
        # The learned field's terms first, in query order, from 0.0 (``explain`` adds them so
        # too); then the tool-text ones. They are never laid out by tool id: the array stays
        # sparse if the text's contributions leave it so.
        if learned:
            assert self._roster is not None
            add_learned(scores, learned, self._roster, self._scratch)
            scored += [(part.weight, part.ids) for part in learned]
        for term, qtf in query_terms.items():
            entry = entries.get(term)
            if entry is None:
                continue
            df = sum(entry.stats[g].df for g in corpus.groups if g in entry.stats)
            df -= excluded_df.get(entry.term_id, 0)
            if df <= 0:
                continue
            weight = qtf * idf(n_docs, df)
            contribution = self._terms.contribution(term, entry, corpus.groups, avgdl, norms, weight)
            contribution.add_to(scores)
            scored.append((weight, contribution.ids))
            sparse = sparse and not contribution.dense
        self._terms.evict()
        dropped = [doc.id for doc in excluded if doc.id < scores.size]
        scores[dropped] = 0.0
        if semantic is not None:
            hits = self._fused_hits(reader, scores, semantic, corpus, exclusion, limit)
        else:
            found = candidates(scores, self._scratch, limit, scored, sparse=sparse)
            hits = ordered(scores, found, limit, functools.partial(self._names_of, reader))
        # With sparse contributions only, the scores that are not 0 are all among the terms'
        # documents: the array is zeroed for the next search without walking all of it, unless
        # they are so many that one pass over it costs less.
        if sparse and sum(ids.size for _, ids in scored) * SCAN_SHARE <= scores.size:
            for _, ids in scored:
                scores[ids] = 0.0
        else:
            scores.fill(0.0)
        self._scores_zeroed = True
        return Ranking(total_tools=n_docs, hits=hits)

    def _fused_hits(
        self,
        reader: RankingSource,
        lexical: np.ndarray,
        semantic: SemanticQuery,
        corpus: Corpus,
        exclusion: Exclusion,
        limit: int | None,
    ) -> list[RankedTool]:
        part = self._semantic_part(semantic, corpus, exclusion)
        size = max(lexical.size, semantic.vectors.max_id + 1)
        scores = fused(lexical, part, semantic.weight, size)
        found = np.flatnonzero(scores > 0)
        if limit is not None and found.size > limit:
            threshold = float(np.partition(scores[found], found.size - limit)[found.size - limit])
            found = found[scores[found] >= threshold]
        return ordered(scores, found, limit, functools.partial(self._names_of, reader))

    def _semantic_part(self, semantic: SemanticQuery, corpus: Corpus, exclusion: Exclusion) -> SemanticPart:
        dropped = np.array(sorted(doc.id for doc in exclusion.documents), dtype=np.int64)
        return semantic_part(semantic.vectors, semantic.query, corpus.groups, dropped)

    def _semantic_query(self, reader: RankingSource, query: str) -> SemanticQuery | None:
        """What fusing ``query`` needs, or ``None`` when the index has no semantic signal (no
        vectors, weight 0) or this process cannot run its model (``semantic_problem`` says why)."""
        setting = self._embedding
        if setting.model is None or setting.weight <= 0 or self.semantic_problem is not None:
            return None
        if self._model is None or self._model.spec != setting.model:
            from discovery._semantic.model import load

            try:
                self._model = load(setting.model)
            except EmbeddingUnavailable as error:
                self.semantic_problem = str(error)
                warnings.warn(
                    f"searching without the semantic signal: {error}", SemanticSignalOff, stacklevel=4
                )
                return None
        if self._vectors is None:
            self._vectors = reader.vectors.current(setting.dimensions)
        return SemanticQuery(self._vectors, self._model.embed_query(query), setting.weight)

    @_serialized
    def semantic(
        self, reader: RankingSource, query: str, corpus: Corpus
    ) -> tuple[SemanticQuery, SemanticPart] | None:
        """The semantic side of a search of ``corpus`` (``None`` when it is not fused): for
        ``explain``."""
        self._sync(reader)
        semantic = self._semantic_query(reader, query)
        if semantic is None:
            return None
        return semantic, self._semantic_part(semantic, corpus, self._exclusion(reader, corpus))

    def _pruned(
        self,
        reader: RankingSource,
        query_terms: dict[str, int],
        corpus: Corpus,
        exclusion: Exclusion,
        n_docs: int,
        avgdl: float,
        limit: int,
    ) -> list[RankedTool] | None:
        """The top ``limit`` found without scoring every posting (``pruning``), or ``None`` when
        the bounds do not rule out enough documents: then the exhaustive search runs.

        Terms are taken strongest bound first, each over all its postings, until the k-th best
        partial score is a floor that no document outside their postings can reach and few
        inside them can; those few are scored in full from their own terms."""
        weights: dict[str, tuple[int, float]] = {}
        bounds: dict[str, float] = {}
        known = self._terms.stats(reader, list(query_terms))
        for term, qtf in query_terms.items():
            found = known[term]
            if found is None:
                continue
            term_id, stats = found
            df = sum(stats[g].df for g in corpus.groups if g in stats)
            df -= exclusion.term_counts.get(term_id, 0)
            if df <= 0:
                continue
            weight = qtf * idf(n_docs, df)
            weights[term] = (term_id, weight)
            max_tf = max(stats[g].max_tf for g in corpus.groups if g in stats)
            bounds[term] = pruning.upper_bound(weight, max_tf)
        if len(weights) < 2:
            return None
        order = sorted(weights, key=lambda term: -bounds[term])
        dropped = [doc.id for doc in exclusion.documents]
        scores: np.ndarray | None = None
        kept: list[Contribution] = []
        probe: np.ndarray | None = None
        try:
            for taken, term in enumerate(order, 1):
                entry = self._terms.postings(reader, [term])[term]
                if entry is None:
                    return None
                norms = functools.partial(norm_table, [entry], avgdl)
                added = self._terms.contribution(term, entry, corpus.groups, avgdl, norms, weights[term][1])
                scores = self._grown_scores(scores, entry.max_id + 1)
                added.add_to(scores)
                kept.append(added)
                scores[[i for i in dropped if i < scores.size]] = 0.0
                if probe is None:
                    # The floor comes from the first documents found, at least ``limit`` of them:
                    # the k-th best of any of them is at most the k-th best of all.
                    probe = self._probe(scores, kept, limit)
                    if probe is None:
                        continue
                floor = pruning.floor_of(kth_best(scores, self._scratch, probe, limit))
                rest = pruning.bound_sum([bounds[t] for t in order[taken:]])
                if rest >= floor:
                    continue
                placing = self._reaching(scores, kept, pruning.floor_of(floor - rest))
                if placing.size > FORWARD_SCORED:
                    continue
                return self._rescored(reader, placing, query_terms, weights, avgdl, limit, corpus.groups)
            return None
        finally:
            self._terms.evict()
            if scores is not None:
                self._clear(scores, kept)

    def _reaching(self, scores: np.ndarray, kept: list[Contribution], minimum: float | None) -> np.ndarray:
        """The documents (ascending, distinct) whose score so far is at least ``minimum``
        (positive when ``None``): all are among the postings of the terms added, ``kept``, so
        each term's are filtered and only what passes is merged, or, when they are many next to
        the array, the array is scanned in order (a pass over contiguous memory)."""
        if sum(part.ids.size for part in kept) * SCAN_SHARE > scores.size:
            return np.flatnonzero(scores > 0 if minimum is None else scores >= minimum)
        parts = []
        for part in kept:
            values = np.take(scores, part.ids, out=self._scratch[: part.ids.size])
            parts.append(part.ids[values > 0 if minimum is None else values >= minimum])
        return np.sort(parts[0]) if len(parts) == 1 else union(parts)

    def _probe(self, scores: np.ndarray, kept: list[Contribution], limit: int) -> np.ndarray | None:
        """At least ``limit`` distinct documents of the terms added so far, or ``None``: the
        first term's, when it has enough, else all of them."""
        first = kept[0].ids
        positive = first[np.take(scores, first, out=self._scratch[: first.size]) > 0]
        found = positive if positive.size >= limit or len(kept) == 1 else self._reaching(scores, kept, None)
        return found if found.size >= limit else None

    def _rescored(
        self,
        reader: RankingSource,
        ids: np.ndarray,
        query_terms: dict[str, int],
        weights: dict[str, tuple[int, float]],
        avgdl: float,
        limit: int,
        groups: tuple[int, ...],
    ) -> list[RankedTool]:
        """``ids`` (ascending) ranked by their full scores, computed from their own terms: from
        the postings of the query terms when those cost less to have at hand than the rows of
        ``ids`` (``_postings_at_hand``), else from the rows."""
        in_order = [term for term in query_terms if term in weights]
        id_list: list[int] = ids.tolist()
        entries = self._postings_at_hand(reader, in_order, id_list)
        if entries is not None:
            parts = [(entries[term].held(ids, groups), weights[term][1]) for term in in_order]
        else:
            held = pruning.held_in_forward(ids, self._rows.postings(reader, id_list))
            parts = [(held(weights[term][0]), weights[term][1]) for term in in_order]
        full = pruning.exact_scores(ids.size, parts, avgdl)

        def names_at(positions: list[int]) -> dict[int, str]:
            names = self._names_of(reader, [id_list[p] for p in positions])
            return {p: names[id_list[p]] for p in positions}

        # Ranked by position in ``ids``, then given back their tool ids.
        hits = ordered(full, np.arange(ids.size), limit, names_at)
        return [RankedTool(id_list[hit.tool_id], hit.name, hit.score) for hit in hits]

    def _postings_at_hand(
        self, reader: RankingSource, terms: list[str], ids: list[int]
    ) -> dict[str, TermPostings] | None:
        """The postings of ``terms``, or ``None`` when loading those not cached would cost more
        than reading the rows of ``ids`` not cached (``ROW_READ_POSTINGS``). A row is a seek to
        a page of its own; postings come in long runs, and once loaded serve the next search of
        their term too."""
        missing = [term for term in terms if term not in self._terms]
        if missing:
            unread = sum(1 for i in ids if i not in self._rows)
            known = self._terms.stats(reader, missing)
            postings = sum(stats.df for found in known.values() if found for stats in found[1].values())
            if postings > unread * ROW_READ_POSTINGS:
                return None
        entries = self._terms.postings(reader, terms)
        present = {term: entry for term, entry in entries.items() if entry is not None}
        return present if len(present) == len(terms) else None

    def _grown_scores(self, scores: np.ndarray | None, size: int) -> np.ndarray:
        """``scores`` (a zeroed score array when ``None``) at least ``size`` long, values kept."""
        if scores is None:
            return self._zeroed_scores(size)
        if scores.size >= size:
            return scores
        if self._scores.size >= size:  # a longer view of the same buffer, zero past the old end
            return self._scores[:size]
        grown = np.zeros(size)
        grown[: scores.size] = scores
        self._scores, self._scratch = grown, np.zeros(size)
        return grown

    def _clear(self, scores: np.ndarray, kept: list[Contribution]) -> None:
        """Zero what the pruned search added, for the next search: only the terms' postings
        are not 0, dense contributions included."""
        for part in kept:
            scores[part.ids] = 0.0
        self._scores_zeroed = True

    @_serialized
    def analyzer(self, reader: RankingSource) -> Analyzer:
        """The analyzer the catalog is indexed with, as the caller's transaction sees it."""
        self._sync(reader)
        return self._analyzer

    @_serialized
    def query_terms(self, reader: RankingSource, query: Query) -> dict[str, int]:
        """The terms of ``query`` under the catalog's analyzer (``Query.terms``)."""
        self._sync(reader)
        return query.terms(self._analyzer)

    @_serialized
    def corpus_size(self, reader: RankingSource, corpus: Corpus) -> int:
        """``N`` of a corpus, from the group aggregates less its excluded documents."""
        self._sync(reader)
        excluded = self._exclusion(reader, corpus).documents
        return sum(self._group_stats[g].doc_count for g in corpus.groups) - len(excluded)

    @_serialized
    def excluded_documents(self, reader: RankingSource, corpus: Corpus) -> list[StoredTool]:
        """The catalog documents of ``corpus.groups`` that the corpus leaves out."""
        self._sync(reader)
        return self._exclusion(reader, corpus).documents

    @_serialized
    def sync(self, reader: RankingSource, generation: int) -> None:
        """Take the generation the caller read in this transaction, saving the query."""
        self._synced_on = None
        self._sync(reader, generation)

    def _sync(self, reader: RankingSource, known: int | None = None) -> None:
        """Drop the caches if the catalog changed; once per transaction (its snapshot is fixed)."""
        if reader is self._synced_on:
            return
        if known is None:
            current, learning = reader.learning.with_catalog_generation()
        else:
            current, learning = known, reader.learning.state()
        if current != self._generation:
            # Every change of analyzer bumps the generation (it rewrites every posting). Read
            # first: a catalog refused here stays refused on the next call, not searched with
            # what was cached before.
            analyzer = stored_analyzer_named(reader.catalog.analyzer())
            self._generation = current
            self._analyzer = analyzer
            self._group_stats = reader.index.group_stats()
            self._terms.clear()
            self._documents.clear()
            self._names.clear()
            self._tools.clear()
            self._document_terms.clear()
            self._rows.clear()
            self._exclusions.clear()
            self._text_ids.clear()
            self._forget_learned()
            embedding = reader.vectors.state()
            if embedding.model != self._embedding.model:
                self.semantic_problem = None  # another model: try loading it
            self._embedding = embedding
            self._vectors = None
        if learning != self._learning:
            cached = self._learning
            if (
                learning.enabled == cached.enabled
                and cached.generation >= 0
                and learning.generation > cached.generation
                and learning.journaled_since(cached.generation)
            ):
                self._learned_changed(reader.learning.changes_since(cached.generation))
            else:
                self._forget_learned()
            self._learning = learning
        self._synced_on = reader

    def _forget_learned(self) -> None:
        self._learned.clear()
        self._learned_pending.clear()
        self._learned_tools = None
        self._roster = None
        self._learned_exclusions.clear()
        self._learned_parts.clear()
        self._learned_members.clear()

    def _learned_changed(self, changes: list[LearnedChange]) -> None:
        """Bring the learned caches up to date with the journaled ``changes``: the cached postings
        of their terms get the tools' new tf, and tools that started or stopped having a learned
        field join or leave the roster, without reading the rest of the field. The parts of the
        journaled terms are computed anew; the others hold, unless the learned tools changed
        (their positions moved)."""
        tools = {change.tool_name: change for change in changes}
        tools_moved = False  # a tool came or went: the universe moved
        if self._learned_tools is not None:
            for name, change in tools.items():
                had = self._learned_tools.pop(name, None) is not None
                if change.learned and change.tool_id is not None:
                    self._learned_tools[name] = LearnedTool(change.tool_id, change.grp)
                tools_moved = tools_moved or had != change.learned
        if tools_moved and self._roster is not None:
            moved = {c.tool_id: c.grp if c.learned else None for c in tools.values() if c.tool_id is not None}
            self._roster = self._roster.with_tools(moved)
        if tools_moved or self._roster is None:  # positions among the learned tools are taken anew
            self._learned_members.clear()
            self._learned_parts.clear()
        for change in changes:  # each the tf as it is now: a later one replaces an earlier one
            if change.term in self._learned and change.tool_id is not None:
                pending = self._learned_pending.setdefault(change.term, {})
                pending[change.tool_id] = (change.grp, change.tf)
        # A journaled term counts as moved even when its postings are not cached: its part may be.
        journaled = {change.term for change in changes}
        self._learned_members.drop(journaled)
        self._learned_parts.drop(journaled)

    @_serialized
    def learning_enabled(self, reader: RankingSource) -> bool:
        """Whether the index ranks with its learned field, as the caller's transaction sees it."""
        self._sync(reader)
        return self._learning.enabled

    @_serialized
    def learned(
        self, reader: RankingSource, query_terms: dict[str, int], corpus: Corpus
    ) -> list[LearnedTerm]:
        """What the learned field adds to a search of ``corpus`` (nothing when learning is off):
        what ``rank`` adds, for ``explain``."""
        self._sync(reader)
        return self._learned_terms(reader, query_terms, corpus, self._exclusion(reader, corpus))

    def _learned_terms(
        self,
        reader: RankingSource,
        query_terms: dict[str, int],
        corpus: Corpus,
        exclusion: Exclusion,
    ) -> list[LearnedTerm]:
        if not self._learning.enabled:
            return []
        learned = self._learned
        missing = [term for term in query_terms if term not in learned]
        if missing:
            if len(learned) + len(missing) > LEARNED_TERMS_CACHED:
                learned.clear()
                self._learned_pending.clear()
                self._learned_members.clear()
                missing = list(query_terms)
            stored = reader.learning.postings(missing)
            roster = self._learned_roster(reader) if stored else None
            for term in missing:
                rows = stored.get(term)
                learned[term] = None if rows is None or roster is None else roster.postings(rows.ids, rows.tf)
        for term in query_terms:
            if term in self._learned_pending:
                learned[term] = _patched(learned[term], self._learned_pending.pop(term))
        corpus_key = (corpus.groups, corpus.excluded)
        found: list[LearnedTerm] = []
        for term, qtf in query_terms.items():
            held = learned[term]
            if held is None:
                continue
            parts, key = self._learned_parts, (qtf, corpus_key)
            if not parts.holds(term, key):  # not computed for this corpus yet, or taught since
                parts.put(term, key, self._learned_part(reader, term, qtf, held, corpus, exclusion))
            part = parts.get(term, key)
            if part is not None:
                found.append(part)
        return found

    def _learned_part(
        self,
        reader: RankingSource,
        term: str,
        qtf: int,
        held: LearnedPostings,
        corpus: Corpus,
        exclusion: Exclusion,
    ) -> LearnedTerm | None:
        """What ``term`` adds through the learned field in ``corpus`` (``None``: none of the
        corpus' tools learned it)."""
        universe = self._learned_roster(reader)
        members = self._learned_members
        if not members.holds(term, corpus):
            text = self._text_matches(reader, term, corpus, exclusion)
            excluded = self._learned_exclusion(corpus, exclusion)
            members.put(term, corpus, learned_membership(held, corpus.groups, excluded, text, universe))
        membership = members.get(term, corpus)
        if membership is None:
            return None
        n_docs = sum(self._group_stats[g].doc_count for g in corpus.groups) - len(exclusion.documents)
        return laid_out(learned_term(term, qtf, membership, n_docs), universe)

    def _learned_roster(self, reader: RankingSource) -> Roster:
        """The catalog tools that learned anything, with their group (``learned.Roster``)."""
        if self._roster is None:
            if self._learned_tools is None:
                self._learned_tools = reader.learning.learned_tools()
            self._roster = Roster.of([(info.tool_id, info.grp) for info in self._learned_tools.values()])
        return self._roster

    def _text_matches(
        self, reader: RankingSource, term: str, corpus: Corpus, exclusion: Exclusion
    ) -> TextMatches:
        """The corpus' size, and which of its tools hold ``term`` in their text."""
        n_docs = sum(self._group_stats[g].doc_count for g in corpus.groups) - len(exclusion.documents)
        entry = self._terms.postings(reader, [term])[term]
        if entry is None:
            return TextMatches(n_docs, 0, np.zeros(0, dtype=np.intp))
        df = sum(entry.stats[g].df for g in corpus.groups if g in entry.stats)
        df -= exclusion.term_counts.get(entry.term_id, 0)
        key = (term, corpus.groups)
        if key not in self._text_ids:
            if len(self._text_ids) >= LEARNED_TERMS_CACHED:
                self._text_ids.clear()
            self._text_ids[key] = np.sort(entry.tool_ids[entry.span(corpus.groups)]).astype(np.intp)
        return TextMatches(n_docs, df, self._text_ids[key])

    def _learned_exclusion(self, corpus: Corpus, exclusion: Exclusion) -> np.ndarray:
        """The ids of the corpus' excluded tools, sorted (cached per corpus)."""
        found = self._learned_exclusions.get(corpus)
        if found is None:
            if len(self._learned_exclusions) >= EXCLUSION_CACHE_SIZE:
                self._learned_exclusions.clear()
            found = np.array(sorted(doc.id for doc in exclusion.documents), dtype=np.intp)
            self._learned_exclusions[corpus] = found
        return found

    def _excluded_documents(self, reader: RankingSource, corpus: Corpus) -> list[StoredTool]:
        self._remember_documents(reader, list(corpus.excluded))
        groups = set(corpus.groups)
        return [
            doc
            for name in corpus.excluded
            if (doc := self._documents[name]) is not None and doc.grp in groups
        ]

    @_serialized
    def known_names(self, reader: RankingSource, names: Sequence[str]) -> set[str]:
        """Which of ``names`` are catalog tools (cached until the catalog changes)."""
        self._sync(reader)
        self._remember_documents(reader, names)
        documents = self._documents
        return {name for name in names if documents[name] is not None}

    @_serialized
    def documents(self, reader: RankingSource, names: Sequence[str]) -> dict[str, StoredTool]:
        """The catalog records of those of ``names`` that are catalog tools (cached until the
        catalog changes, as ``known_names``)."""
        self._sync(reader)
        self._remember_documents(reader, names)
        documents = self._documents
        return {name: found for name in names if (found := documents[name]) is not None}

    @_serialized
    def catalog_size(self, reader: RankingSource) -> int:
        self._sync(reader)
        return sum(stats.doc_count for stats in self._group_stats.values())

    def _remember_documents(self, reader: RankingSource, names: Sequence[str]) -> None:
        documents = self._documents
        missing = [name for name in names if name not in documents]
        if missing:
            missing = list(dict.fromkeys(missing))
            found = reader.catalog.tools_by_names(missing)
            for name in missing:
                self._documents[name] = found.get(name)

    def _exclusion(self, reader: RankingSource, corpus: Corpus) -> Exclusion:
        """The documents ``corpus`` leaves out of its groups, with their share of the statistics
        (cached per corpus until the catalog changes: a session's corpus recurs call after call)."""
        if corpus not in self._exclusions:
            if len(self._exclusions) >= EXCLUSION_CACHE_SIZE:
                self._exclusions.clear()
            base = self._excluding_less(corpus)
            if base is None:
                documents = self._excluded_documents(reader, corpus)
                self._exclusions[corpus] = self._excluding(reader, documents)
            else:
                # A session's corpus loses the tools each search activates: count only those,
                # not again the many a gateway's scope leaves out.
                fewer, known = base
                added = Corpus(corpus.groups, corpus.excluded - fewer.excluded)
                more = self._excluding(reader, self._excluded_documents(reader, added))
                self._exclusions[corpus] = Exclusion(
                    documents=known.documents + more.documents,
                    total_len=known.total_len + more.total_len,
                    term_counts=known.term_counts + more.term_counts,
                )
        return self._exclusions[corpus]

    def _excluding(self, reader: RankingSource, documents: list[StoredTool]) -> Exclusion:
        terms = self._terms_of(reader, [doc.id for doc in documents])
        return Exclusion(
            documents=documents,
            total_len=sum(doc.doc_len for doc in documents),
            term_counts=Counter(term for held in terms for term in held),
        )

    def _excluding_less(self, corpus: Corpus) -> tuple[Corpus, Exclusion] | None:
        """One of the corpora cached last whose excluded documents are a part of ``corpus``'s (same
        groups), with its exclusion; only worth it when that part is large."""
        for cached in list(self._exclusions)[-EXCLUSION_REUSE_WINDOW:][::-1]:
            if (
                cached.groups == corpus.groups
                and len(cached.excluded) >= EXCLUSION_REUSE_FROM
                and cached.excluded <= corpus.excluded
            ):
                return cached, self._exclusions[cached]
        return None

    def _terms_of(self, reader: RankingSource, tool_ids: list[int]) -> list[frozenset[int]]:
        missing = [i for i in tool_ids if i not in self._document_terms]
        if missing:
            self._document_terms.update(reader.index.term_ids_of_tools(missing))
        return [self._document_terms[i] for i in tool_ids]

    def _zeroed_scores(self, size: int) -> np.ndarray:
        """A zeroed score array of ``size``, and a scratch array at least as long. A search
        zeroes what it scored when it ends; one that ended in an error leaves it to the next."""
        if self._scores.size < size:
            self._scores = np.zeros(size)
            self._scratch = np.zeros(size)
        elif not self._scores_zeroed:
            self._scores.fill(0.0)
        self._scores_zeroed = False
        return self._scores[:size]

    @_serialized
    def tools(self, reader: RankingSource, ids: Sequence[int]) -> dict[int, StoredTool]:
        """Tool rows by id (cached until the catalog changes: the hits of a session's searches
        recur, and a search call returns each hit's row)."""
        self._sync(reader)
        missing = [i for i in ids if i not in self._tools]
        if missing:
            if len(self._tools) + len(missing) > CACHED_TOOLS_LIMIT:
                self._tools.clear()
            self._tools.update(reader.catalog.tools_by_ids(missing))
        return {i: self._tools[i] for i in ids if i in self._tools}

    def _names_of(self, reader: RankingSource, ids: list[int]) -> dict[int, str]:
        missing = [i for i in ids if i not in self._names]
        if missing:
            self._names.update(reader.catalog.names_by_ids(missing))
        return {i: self._names[i] for i in ids}


CACHED_TOOLS_LIMIT = 4096
"""Tool rows kept per process for search results."""

ROW_READ_POSTINGS = 128
"""What reading one tool's row costs, in postings of a term loaded: scattered rows each cost a
page read and a decode of their own, postings are read by the page."""

FORWARD_SCORED = 2048
"""The most documents a pruned search scores from their own terms; more, and it takes one
more term over all its postings (whose bound then no longer counts) to rule more out."""


def _patched(held: LearnedPostings | None, patch: dict[int, tuple[int, int]]) -> LearnedPostings | None:
    """A term's cached postings with the journal's changes (by tool id: group, tf) applied."""
    if held is not None:
        return held.patched(patch)
    rows = [(i, grp, tf) for i, (grp, tf) in sorted(patch.items()) if tf > 0]  # its first postings
    return LearnedPostings.of(rows) if rows else None


LEARNED_TERMS_CACHED = 4096
"""Query terms whose learned postings are kept per process."""

LEARNED_PARTS_CACHED = 1024
"""Learned contributions (per term, query count and corpus) kept per process, and as many of the
terms' memberships in corpora."""

EXCLUSION_CACHE_SIZE = 256
"""Corpora (sessions' exclusion sets) whose per-term exclusion counts are kept."""
EXCLUSION_REUSE_WINDOW = 8
"""Corpora cached last that a new corpus's exclusion may start from (``_excluding_less``)."""
EXCLUSION_REUSE_FROM = 64
"""Excluded names from which an exclusion is worth reusing rather than counting again."""
