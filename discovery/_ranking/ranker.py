"""Exact BM25+ top-k over a corpus drawn from the stored postings (contract §4).

The statistics of a corpus are the stored group aggregates minus the few documents a session
excludes, so a search costs the postings of its terms whatever the catalog's size. What the
process reads to rank is kept in a ``Snapshot`` of the catalog generation it was read from: a
write in any process bumps the generation, and the next search here starts a new snapshot.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from discovery._params import Query
from discovery._ranking.bm25 import idf
from discovery._ranking.learned_field import LearnedField
from discovery._ranking.scope import Scope
from discovery._ranking.semantic import Models, SemanticQuery
from discovery._ranking.snapshot import Snapshot
from discovery._ranking.source import RankingSource
from discovery._rules import Corpus
from discovery._text.analyzers import Analyzer
from store import StoredTool

if TYPE_CHECKING:
    # The arithmetic of a search (numpy and the modules working on its arrays) is imported by
    # the first search: a gateway opens its sessions and lists its tools without them.
    import numpy as np

    from discovery._ranking.fusion import SemanticPart
    from discovery._ranking.learned import LearnedTerm
    from discovery._ranking.scores import ScoreBuffer
    from discovery._ranking.topk import RankedTool

PRUNE_FROM = 300_000
"""Corpora this large are searched with pruning. In smaller ones every contribution of the
queried terms fits the cache, adding them is cheap, and bounding costs more than it saves
(see bench/results.md)."""


@dataclass(frozen=True, slots=True)
class Ranking:
    total_tools: int
    hits: list[RankedTool]


Params = ParamSpec("Params")
Result = TypeVar("Result")


def _serialized(
    method: Callable[Concatenate[Ranker, Params], Result],
) -> Callable[Concatenate[Ranker, Params], Result]:
    """One caller at a time, for what ranks: threads sharing an index share the score buffer
    and the snapshot's term postings and learned parts, which evict as they fill."""

    @functools.wraps(method)
    def serialized(ranker: Ranker, /, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        with ranker._lock:
            return method(ranker, *args, **kwargs)

    return serialized


class Ranker:
    """Scores queries against the store; one per process and index, shared by its threads.

    Every public method starts from the snapshot of the catalog generation its caller's
    transaction sees (``_snapshot``), so a thread whose transaction is older or newer than the
    snapshot held reads a new one. What ranks runs alone (``_serialized``); the rest reads the
    snapshot's fixed fields and its row caches, which only grow (or are dropped whole), with
    no lock."""

    def __init__(self, *, prune_from: int | None = PRUNE_FROM) -> None:
        self.prune_from = prune_from
        """The corpus size from which a search with a limit skips postings (``pruned``;
        ``None``: never). Results are the same either way."""
        self._lock = threading.RLock()
        self._held: tuple[Snapshot, RankingSource | None] | None = None
        """The latest snapshot and the transaction it was taken for, replaced as one (no
        thread ever sees one's snapshot with another's transaction)."""
        self._models = Models()

    @functools.cached_property
    def _buffer(self) -> ScoreBuffer:
        """The score arrays, made for the first search."""
        from discovery._ranking.scores import ScoreBuffer

        return ScoreBuffer()

    @property
    def semantic_problem(self) -> str | None:
        """Why an index with vectors is searched without them in this process (the model could
        not be loaded), or ``None``."""
        current = self._current
        return None if current is None else current.semantic.problem

    @property
    def _current(self) -> Snapshot | None:
        """The latest snapshot taken, if any."""
        held = self._held
        return None if held is None else held[0]

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
        scores are fused with its semantic similarity (``fusion``). A query that reaches the
        learned field or is fused is ranked exhaustively: the pruning bounds cover the tool-text
        terms only, and exhaustive is exact by construction."""
        snapshot = self._snapshot(reader)
        scope = snapshot.scope(reader, corpus)
        if limit is not None and limit < 1:
            return Ranking(scope.n_docs, [])
        field = snapshot.learned  # one learned field for the whole search, however others catch up
        learned = field.terms(reader, query_terms, scope, snapshot.terms)
        semantic = snapshot.semantic.query(reader, query) if query is not None else None
        if not learned and semantic is None and self._prunes(scope, limit):
            assert limit is not None
            from discovery._ranking.pruned import pruned_top

            hits = pruned_top(reader, snapshot, self._buffer, query_terms, scope, limit)
            if hits is not None:
                return Ranking(scope.n_docs, hits)
        return Ranking(
            scope.n_docs,
            self._exhaustive(reader, snapshot, query_terms, scope, limit, (field, learned), semantic),
        )

    def _prunes(self, scope: Scope, limit: int | None) -> bool:
        return limit is not None and self.prune_from is not None and scope.n_docs >= self.prune_from

    def _exhaustive(
        self,
        reader: RankingSource,
        snapshot: Snapshot,
        query_terms: dict[str, int],
        scope: Scope,
        limit: int | None,
        learning: tuple[LearnedField, list[LearnedTerm]],
        semantic: SemanticQuery | None,
    ) -> list[RankedTool]:
        """Every posting of the query terms scored: the learned field's terms first, in query
        order, from 0.0 (``explain`` adds them so too), then the tool text's."""
        from discovery._ranking.fusion import fused_top, part_of
        from discovery._ranking.learned import add_learned
        from discovery._ranking.postings import norm_table
        from discovery._ranking.topk import candidates, ordered

        field, learned = learning
        entries = snapshot.terms.postings(reader, list(query_terms))
        present = [entry for entry in entries.values() if entry is not None]
        if not present and not learned and semantic is None:
            return []
        # Needed only to compute a contribution that is not cached yet.
        norms = functools.cache(functools.partial(norm_table, present, scope.avgdl))
        highest = [entry.max_id for entry in present] + [part.max_id for part in learned]
        buffer = self._buffer
        scores = buffer.zeroed(max(highest, default=-1) + 1)
        scored: list[tuple[float, np.ndarray]] = []  # each term's weight and documents
        sparse = True  # learned parts are never laid out by tool id
        if learned:
            add_learned(scores, learned, field.layout(reader).roster, buffer.scratch)
            scored += [(part.weight, part.ids) for part in learned]
        for term, qtf in query_terms.items():
            entry = entries.get(term)
            if entry is None:
                continue
            df = scope.df(entry.term_id, entry.stats)
            if df <= 0:
                continue
            weight = qtf * idf(scope.n_docs, df)
            groups = scope.corpus.groups
            contribution = snapshot.terms.contribution(term, entry, groups, scope.avgdl, norms, weight)
            contribution.add_to(scores)
            scored.append((weight, contribution.ids))
            sparse = sparse and not contribution.dense
        snapshot.terms.evict()
        dropped = [doc.id for doc in scope.exclusion.documents if doc.id < scores.size]
        scores[dropped] = 0.0
        names_of = functools.partial(snapshot.names_of, reader)
        if semantic is not None:
            part = part_of(semantic, scope.corpus, scope.exclusion.ids)
            hits = fused_top(scores, semantic, part, limit, names_of)
        else:
            hits = ordered(
                scores, candidates(scores, buffer.scratch, limit, scored, sparse=sparse), limit, names_of
            )
        buffer.done(scores, [ids for _, ids in scored], sparse=sparse)
        return hits

    @_serialized
    def learned(
        self, reader: RankingSource, query_terms: dict[str, int], corpus: Corpus
    ) -> list[LearnedTerm]:
        """What the learned field adds to a search of ``corpus`` (nothing when learning is off):
        what ``rank`` adds, for ``explain``."""
        snapshot = self._snapshot(reader)
        return snapshot.learned.terms(reader, query_terms, snapshot.scope(reader, corpus), snapshot.terms)

    @_serialized
    def semantic(
        self, reader: RankingSource, query: str, corpus: Corpus
    ) -> tuple[SemanticQuery, SemanticPart] | None:
        """The semantic side of a search of ``corpus`` (``None`` when it is not fused): for
        ``explain``."""
        from discovery._ranking.fusion import part_of

        snapshot = self._snapshot(reader)
        semantic = snapshot.semantic.query(reader, query)
        if semantic is None:
            return None
        return semantic, part_of(semantic, corpus, snapshot.scope(reader, corpus).exclusion.ids)

    def analyzer(self, reader: RankingSource) -> Analyzer:
        """The analyzer the catalog is indexed with, as the caller's transaction sees it."""
        return self._snapshot(reader).analyzer

    def learning_enabled(self, reader: RankingSource) -> bool:
        """Whether the index ranks with its learned field, as the caller's transaction sees it."""
        return self._snapshot(reader).learned.state.enabled

    def query_terms(self, reader: RankingSource, query: Query) -> dict[str, int]:
        """The terms of ``query`` under the catalog's analyzer (``Query.terms``)."""
        return query.terms(self._snapshot(reader).analyzer)

    def catalog_size(self, reader: RankingSource) -> int:
        return self._snapshot(reader).catalog_size

    def corpus_size(self, reader: RankingSource, corpus: Corpus) -> int:
        """``N`` of a corpus, from the group aggregates less its excluded documents."""
        return self._snapshot(reader).scope(reader, corpus).n_docs

    def excluded_documents(self, reader: RankingSource, corpus: Corpus) -> list[StoredTool]:
        """The catalog documents of ``corpus.groups`` that the corpus leaves out (its statistics
        are not counted for them: a session's description needs only the documents)."""
        return self._snapshot(reader).excluded_documents(reader, corpus)

    def known_names(self, reader: RankingSource, names: Sequence[str]) -> set[str]:
        """Which of ``names`` are catalog tools."""
        return set(self._snapshot(reader).documents(reader, names))

    def documents(self, reader: RankingSource, names: Sequence[str]) -> dict[str, StoredTool]:
        """The catalog records of those of ``names`` that are catalog tools."""
        return self._snapshot(reader).documents(reader, names)

    def tools(self, reader: RankingSource, ids: Sequence[int]) -> dict[int, StoredTool]:
        """Tool rows by id."""
        return self._snapshot(reader).tools(reader, ids)

    def sync(self, reader: RankingSource, generation: int) -> None:
        """Take the generation the caller read in this transaction, saving the query."""
        self._snapshot(reader, generation)

    def _snapshot(self, reader: RankingSource, known: int | None = None) -> Snapshot:
        """The snapshot of the generation ``reader``'s transaction sees, caught up with its
        learned field; read once per transaction (its view is fixed)."""
        held = self._held
        if held is not None and reader is held[1] and known is None:
            return held[0]
        current = None if held is None else held[0]
        if known is None:
            generation, learning = reader.learning.with_catalog_generation()
        else:
            generation, learning = known, reader.learning.state()
        if current is None or generation != current.generation:
            current = Snapshot.read(reader, generation, learning, self._models)
        else:
            current.learned = current.learned.caught_up(reader, learning)
        self._held = (current, reader)
        return current
