"""The learned field as this process knows it, within one catalog generation (``learned`` does
the arithmetic).

It is read lazily, term by term, and kept current from the learned journal: a call made anywhere
changes the tfs of the terms it taught, which are applied to a term's cached postings when the
term is next searched, so catching up with a call costs nothing for the terms a process does not
search. A change the journal cannot replay (learning switched, or the journal trimmed) gives a
new ``LearnedField``; a tool that starts or stops having a field gives a new ``Layout``.

Two kinds of postings are kept: the shared ones (per term, the tools enough identities taught,
with how many did: the same for every viewer) and each viewer's own (per term and identity, the
tools its sessions taught, read in the search's transaction for the terms not held yet). A
journaled change of a term drops both, so a viewer's own counts are never older than the shared
ones they are laid over (``learned.seen_by``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from discovery._ranking.cache import ByTerm, TermCache
from discovery._ranking.scope import Scope
from discovery._ranking.sharing import shared_tf, sharing_threshold
from discovery._ranking.source import RankingSource
from store import LearnedChange, LearnedTool, LearningState

if TYPE_CHECKING:
    # The arithmetic (``learned``, on numpy arrays) is loaded by the first search that reads
    # the field: a snapshot holds a field before any.
    import numpy as np

    from discovery._ranking.learned import LearnedPostings, LearnedTerm, Membership, Roster, TextMatches

LEARNED_TERMS_CACHED = 4096
"""Query terms whose learned postings are kept per process."""

LEARNED_PARTS_CACHED = 1024
"""Learned contributions (per term, query count and corpus) kept per process, and as many of the
terms' memberships in corpora."""

CorpusKey = tuple[tuple[int, ...], frozenset[str]]
"""A corpus' groups and excluded names: what a part is found by (its hash costs less than the
corpus dataclass')."""

Viewer = str | None
"""Whose own postings a part or membership lays over the shared ones (``None``: nobody's, as
every viewer that taught the term nothing sees it)."""


class Layout:
    """The catalog tools that learned anything (``learned.Roster``: what completes a term's stored
    postings, and the universe its parts are laid out against), with what is laid out against
    them: each term's membership in a corpus and its part. A call takes out the parts of the
    terms it taught and no other, since a part depends on its term's postings alone."""

    def __init__(self, roster: Roster) -> None:
        self.roster = roster
        self.members: ByTerm[tuple[CorpusKey, Viewer], Membership | None] = ByTerm(LEARNED_PARTS_CACHED)
        self.parts: ByTerm[tuple[int, CorpusKey, Viewer], LearnedTerm | None] = ByTerm(LEARNED_PARTS_CACHED)


class LearnedField:
    """The learned postings of the terms searched so far, with what they add to each corpus."""

    def __init__(self, state: LearningState) -> None:
        self.state = state
        self._postings: dict[str, LearnedPostings | None] = {}
        # Per term and identity, the tools its own sessions taught the term.
        self._own: ByTerm[str, LearnedPostings | None] = ByTerm(LEARNED_TERMS_CACHED)
        # The changes the journal made to cached postings since they were read, by term and
        # tool id: (group, tf), applied when the term is next searched.
        self._pending: dict[str, dict[int, tuple[int, int]]] = {}
        # The catalog tools that learned anything, by name: read whole once, then kept current.
        self._tools: dict[str, LearnedTool] | None = None
        self._layout: Layout | None = None
        # The tool ids holding a term in their text, sorted, per corpus groups: what a learned
        # term's df is counted against.
        self._text_ids: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def holds(self, term: str) -> bool:
        """Whether ``term``'s learned postings are cached."""
        return term in self._postings

    def caught_up(self, reader: RankingSource, state: LearningState) -> LearnedField:
        """This field brought to ``state`` from the journal, or a new one when the journal cannot
        say what changed."""
        known = self.state
        if state == known:
            return self
        if (
            state.enabled == known.enabled
            and known.generation >= 0
            and state.generation > known.generation
            and state.journaled_since(known.generation)
        ):
            self._apply(reader.learning.changes_since(known.generation))
            self.state = state
            return self
        return LearnedField(state)

    def _apply(self, changes: list[LearnedChange]) -> None:
        """The journaled ``changes``: the cached postings of their terms get the tools' new tf,
        and tools that started or stopped having a learned field join or leave the roster,
        without reading the rest of the field."""
        tools = {change.tool_name: change for change in changes}
        moved = False  # a tool came or went: the positions among the learned tools move
        if self._tools is not None:
            for name, change in tools.items():
                had = self._tools.pop(name, None) is not None
                if change.learned and change.tool_id is not None:
                    self._tools[name] = LearnedTool(change.tool_id, change.grp)
                moved = moved or had != change.learned
        if moved and self._layout is not None:
            roster = self._layout.roster.with_tools(
                {c.tool_id: c.grp if c.learned else None for c in tools.values() if c.tool_id is not None}
            )
            self._layout = Layout(roster)
        k = self.state.min_identities
        for change in changes:  # each the count as it is now: a later one replaces an earlier one
            if change.term in self._postings and change.tool_id is not None:
                count = shared_tf(change.identities, k, change.destructive)
                self._pending.setdefault(change.term, {})[change.tool_id] = (change.grp, count)
        self._own.drop({change.term for change in changes})
        if self._layout is not None:
            # A journaled term counts as moved even when its postings are not cached: its part may be.
            journaled = {change.term for change in changes}
            self._layout.members.drop(journaled)
            self._layout.parts.drop(journaled)

    def terms(
        self, reader: RankingSource, query_terms: dict[str, int], scope: Scope, text: TermCache
    ) -> list[LearnedTerm]:
        """What the field adds to a search of ``scope`` (nothing when learning is off), in query
        order; ``text`` holds the tool text's postings, against which a term's df is counted."""
        if not self.state.enabled:
            return []
        held = self._held(reader, query_terms)
        corpus = scope.corpus
        own = self._own_held(reader, corpus.viewer, query_terms)
        corpus_key = (corpus.groups, corpus.excluded)
        found: list[LearnedTerm] = []
        for term, qtf in query_terms.items():
            shared, mine = held[term], own[term]
            if shared is None and mine is None:
                continue
            layout = self.layout(reader)
            viewer = None if mine is None else corpus.viewer
            key = (qtf, corpus_key, viewer)
            if not layout.parts.holds(term, key):  # not computed for this corpus yet, or taught since
                postings = mine if shared is None else shared if mine is None else shared.seen_by(mine)
                assert postings is not None
                part = self._part(reader, term, qtf, postings, scope, text, viewer)
                layout.parts.put(term, key, part)
            else:
                part = layout.parts.get(term, key)
            if part is not None:
                found.append(part)
        return found

    def _own_held(
        self, reader: RankingSource, viewer: str, query_terms: dict[str, int]
    ) -> dict[str, LearnedPostings | None]:
        """``viewer``'s own postings of ``query_terms``: those not held read in one statement."""
        own = self._own
        found = {term: own.get(term, viewer) for term in query_terms if own.holds(term, viewer)}
        missing = [term for term in query_terms if term not in found]
        if missing:
            stored = reader.learning.own_postings(viewer, missing)
            roster = self.layout(reader).roster if stored else None
            for term in missing:
                rows = stored.get(term)
                found[term] = None if rows is None or roster is None else roster.postings(rows.ids, rows.tf)
                own.put(term, viewer, found[term])
        return found

    def _held(self, reader: RankingSource, query_terms: dict[str, int]) -> dict[str, LearnedPostings | None]:
        """The learned postings of ``query_terms``, current with the journal."""
        cached = self._postings
        missing = [term for term in query_terms if term not in cached]
        if missing:
            if len(cached) + len(missing) > LEARNED_TERMS_CACHED:
                cached.clear()
                self._pending.clear()
                if self._layout is not None:
                    self._layout.members.clear()
                missing = list(query_terms)
            k = self.state.min_identities
            stored = reader.learning.postings(missing, k, sharing_threshold(k, destructive=True))
            roster = self.layout(reader).roster if stored else None
            for term in missing:
                rows = stored.get(term)
                cached[term] = None if rows is None or roster is None else roster.postings(rows.ids, rows.tf)
        for term in query_terms:
            if term in self._pending:
                cached[term] = _patched(cached[term], self._pending.pop(term))
        return {term: cached[term] for term in query_terms}

    def layout(self, reader: RankingSource) -> Layout:
        """The learned tools and what is laid out against them, read on first use."""
        if self._layout is None:
            from discovery._ranking.learned import Roster

            if self._tools is None:
                self._tools = reader.learning.learned_tools()
            self._layout = Layout(Roster.of([(info.tool_id, info.grp) for info in self._tools.values()]))
        return self._layout

    def _part(
        self,
        reader: RankingSource,
        term: str,
        qtf: int,
        held: LearnedPostings,
        scope: Scope,
        text: TermCache,
        viewer: Viewer,
    ) -> LearnedTerm | None:
        """What ``term`` adds through the learned field in ``scope`` (``None``: none of the
        corpus' tools learned it), its postings ``held`` as seen by ``viewer``."""
        from discovery._ranking.learned import laid_out, learned_membership, learned_term

        layout = self.layout(reader)
        corpus = scope.corpus
        key = ((corpus.groups, corpus.excluded), viewer)
        if layout.members.holds(term, key):
            membership = layout.members.get(term, key)
        else:
            matches = self._text_matches(reader, term, scope, text)
            membership = learned_membership(held, corpus.groups, scope.exclusion.ids, matches, layout.roster)
            layout.members.put(term, key, membership)
        if membership is None:
            return None
        return laid_out(learned_term(term, qtf, membership, scope.n_docs), layout.roster)

    def _text_matches(self, reader: RankingSource, term: str, scope: Scope, text: TermCache) -> TextMatches:
        """The corpus' size, and which of its tools hold ``term`` in their text."""
        import numpy as np

        from discovery._ranking.learned import TextMatches

        entry = text.postings(reader, [term])[term]
        if entry is None:
            return TextMatches(scope.n_docs, 0, np.zeros(0, dtype=np.intp))
        groups = scope.corpus.groups
        key = (term, groups)
        if key not in self._text_ids:
            if len(self._text_ids) >= LEARNED_TERMS_CACHED:
                self._text_ids.clear()
            self._text_ids[key] = np.sort(entry.tool_ids[entry.span(groups)]).astype(np.intp)
        return TextMatches(scope.n_docs, scope.df(entry.term_id, entry.stats), self._text_ids[key])


def _patched(held: LearnedPostings | None, patch: dict[int, tuple[int, int]]) -> LearnedPostings | None:
    """A term's cached postings with the journal's changes (by tool id: group, tf) applied."""
    from discovery._ranking.learned import LearnedPostings

    if held is not None:
        return held.patched(patch)
    rows = [(i, grp, tf) for i, (grp, tf) in sorted(patch.items()) if tf > 0]  # its first postings
    return LearnedPostings.of(rows) if rows else None
