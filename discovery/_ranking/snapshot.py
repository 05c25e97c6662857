"""What this process holds of one catalog generation.

Every write to the catalog, in any process, bumps its generation. A ``Snapshot`` is what the
ranker has read of one generation: the analyzer and group statistics, then, as searches need
them, the postings of the terms queried, the tool rows and names met, each corpus' statistics,
the learned field and the semantic signal. Nothing in it is ever invalidated: the next
generation gets a new snapshot, and a search keeps the one it started with.
"""

from __future__ import annotations

from collections.abc import Sequence

from discovery._params import stored_analyzer_named
from discovery._ranking.cache import RowCache, TermCache
from discovery._ranking.learned_field import LearnedField
from discovery._ranking.scope import Exclusion, Scope
from discovery._ranking.semantic import Models, SemanticSignal
from discovery._ranking.source import RankingSource
from discovery._rules import Corpus
from discovery._text.analyzers import Analyzer
from store import GroupStats, LearningState, StoredTool

CACHED_TOOLS_LIMIT = 4096
"""Tool rows kept per process for search results."""

SCOPES_KEPT = 256
"""Corpora (sessions' exclusion sets) whose statistics are kept."""
SCOPE_REUSE_WINDOW = 8
"""Corpora kept last that a new corpus' statistics may start from (``Snapshot._excluding_less``)."""
SCOPE_REUSE_FROM = 64
"""Excluded names from which a corpus' exclusion is worth reusing rather than counting again."""


class Snapshot:
    """One catalog generation as this process has read it so far. Threads may read one at
    once: each row cache is a dict that only grows or is dropped whole, and a lookup answers
    from what it read itself, never from what another thread may drop meanwhile."""

    def __init__(
        self,
        generation: int,
        analyzer: Analyzer,
        group_stats: dict[int, GroupStats],
        learned: LearnedField,
        semantic: SemanticSignal,
    ) -> None:
        self.generation = generation
        self.analyzer = analyzer
        self.group_stats = group_stats
        self.learned = learned
        self.semantic = semantic
        self.terms = TermCache()
        self.rows = RowCache()
        self._documents: dict[str, StoredTool | None] = {}
        self._tools: dict[int, StoredTool] = {}
        self._names: dict[int, str] = {}
        self._document_terms: dict[int, frozenset[int]] = {}
        self._scopes: dict[Corpus, Scope] = {}

    @classmethod
    def read(
        cls, reader: RankingSource, generation: int, learning: LearningState, models: Models
    ) -> Snapshot:
        """The snapshot of ``generation``, which ``reader``'s transaction sees. The analyzer is
        read first: a catalog refused here stays refused on the next call."""
        analyzer = stored_analyzer_named(reader.catalog.analyzer())
        semantic = SemanticSignal(reader.vectors.state(), models)
        return cls(generation, analyzer, reader.index.group_stats(), LearnedField(learning), semantic)

    @property
    def catalog_size(self) -> int:
        return sum(stats.doc_count for stats in self.group_stats.values())

    def documents(self, reader: RankingSource, names: Sequence[str]) -> dict[str, StoredTool]:
        """The catalog records of those of ``names`` that are catalog tools."""
        known = {name: self._documents[name] for name in names if name in self._documents}
        missing = list(dict.fromkeys(name for name in names if name not in known))
        if missing:
            found = reader.catalog.tools_by_names(missing)
            read = {name: found.get(name) for name in missing}
            self._documents.update(read)
            known.update(read)
        return {name: doc for name in names if (doc := known[name]) is not None}

    def tools(self, reader: RankingSource, ids: Sequence[int]) -> dict[int, StoredTool]:
        """Tool rows by id: the hits of a session's searches recur, and a search call returns
        each hit's row."""
        known = {i: row for i in ids if (row := self._tools.get(i)) is not None}
        missing = [i for i in ids if i not in known]
        if missing:
            read = reader.catalog.tools_by_ids(missing)
            if len(self._tools) + len(read) > CACHED_TOOLS_LIMIT:
                self._tools.clear()
            self._tools.update(read)
            known.update(read)
        return {i: known[i] for i in ids if i in known}

    def names_of(self, reader: RankingSource, ids: list[int]) -> dict[int, str]:
        known = {i: name for i in ids if (name := self._names.get(i)) is not None}
        missing = [i for i in ids if i not in known]
        if missing:
            read = reader.catalog.names_by_ids(missing)
            self._names.update(read)
            known.update(read)
        return {i: known[i] for i in ids}

    def scope(self, reader: RankingSource, corpus: Corpus) -> Scope:
        """``corpus`` with its statistics, kept per corpus: a session's corpus recurs call after call."""
        found = self._scopes.get(corpus)
        if found is None:
            if len(self._scopes) >= SCOPES_KEPT:
                self._scopes.clear()
            found = Scope.of(corpus, self._exclusion(reader, corpus), self.group_stats)
            self._scopes[corpus] = found
        return found

    def _exclusion(self, reader: RankingSource, corpus: Corpus) -> Exclusion:
        base = self._excluding_less(corpus)
        if base is None:
            return self._excluding(reader, corpus)
        # A session's corpus loses the tools each search activates: count only those, not again
        # the many a gateway's scope leaves out.
        return base.exclusion.plus(
            self._excluding(reader, Corpus(corpus.groups, corpus.excluded - base.corpus.excluded))
        )

    def excluded_documents(self, reader: RankingSource, corpus: Corpus) -> list[StoredTool]:
        """The catalog documents of ``corpus.groups`` that ``corpus`` leaves out."""
        by_name = self.documents(reader, list(corpus.excluded))
        groups = set(corpus.groups)
        return [by_name[name] for name in corpus.excluded if name in by_name and by_name[name].grp in groups]

    def _excluding(self, reader: RankingSource, corpus: Corpus) -> Exclusion:
        """What ``corpus`` leaves out of its groups, counted document by document."""
        documents = self.excluded_documents(reader, corpus)
        return Exclusion.of(documents, self._terms_of(reader, [doc.id for doc in documents]))

    def _excluding_less(self, corpus: Corpus) -> Scope | None:
        """One of the corpora kept last whose excluded documents are a part of ``corpus``'s (same
        groups); only worth it when that part is large."""
        for kept in list(self._scopes.values())[-SCOPE_REUSE_WINDOW:][::-1]:
            if (
                kept.corpus.groups == corpus.groups
                and len(kept.corpus.excluded) >= SCOPE_REUSE_FROM
                and kept.corpus.excluded <= corpus.excluded
            ):
                return kept
        return None

    def _terms_of(self, reader: RankingSource, tool_ids: list[int]) -> list[frozenset[int]]:
        missing = [i for i in tool_ids if i not in self._document_terms]
        if missing:
            self._document_terms.update(reader.index.term_ids_of_tools(missing))
        return [self._document_terms[i] for i in tool_ids]
