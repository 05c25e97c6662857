"""``tool-index explain``: why a tool scores what it does for a query, term by term and field by field.

The numbers come from the same stored statistics and postings a read-only search uses (group
aggregates less the corpus' excluded documents, the tool's own postings) and are combined in the
same floating-point order as ``discovery._ranking.ranker``, so ``Explanation.score`` equals the score
``ToolIndex.search`` reports for the tool, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from discovery._catalog.indexing import record_fields
from discovery._diagnostics.statistics import corpus_statistics
from discovery._index import ToolIndex
from discovery._params import Query, checked_query, searched_query
from discovery._ranking.bm25 import average_length, idf, length_norm, round6, term_score
from discovery._ranking.fields import FIELD_WEIGHTS, field_term_frequencies
from discovery._rules import Corpus, read_only_corpus, session_corpus, session_named
from discovery.errors import ToolIndexError, ToolNotFound
from store import Reader

if TYPE_CHECKING:
    from discovery._sessions.session import Session


class NotInCorpus(ToolIndexError):
    """The tool exists but a search in that mode never ranks it (essential, internal, or not
    discoverable), so it has no score to explain."""


@dataclass(frozen=True, slots=True)
class FieldPart:
    """One field's part of a term: its weighted tf and its proportional share of the contribution."""

    field: str
    weight: int
    tf: int
    contribution: float


@dataclass(frozen=True, slots=True)
class TermExplanation:
    """One distinct query term against the tool.

    ``tf`` is the weighted term frequency stored for the tool (0 when the tool lacks the term,
    which then contributes nothing: δ counts only for matched terms). ``fields`` splits
    ``contribution`` across the fields holding the term in proportion to each field's share of
    ``tf``; BM25+ is not linear in tf, so this is an attribution rather than what each field
    would score alone, and the parts add up to the contribution only up to rounding.
    """

    term: str
    qtf: int
    df: int
    idf: float
    tf: int
    contribution: float
    fields: list[FieldPart]


@dataclass(frozen=True, slots=True)
class LearnedExplanation:
    """One query term against the tool's learned field: how many corpus tools hold it in their text
    or learned it (``df``), how many sessions taught it to this one (``tf``), and what it adds
    (the field's weight included)."""

    term: str
    qtf: int
    df: int
    weight: float
    tf: int
    contribution: float


@dataclass(frozen=True, slots=True)
class SemanticExplanation:
    """The fused side of a score (``discovery._ranking.fusion``): the tool's cosine with the query,
    the corpus' best lexical score and best cosine, and the weight of the semantic part."""

    weight: float
    cosine: float
    best_cosine: float
    best_lexical: float

    def parts(self, lexical: float) -> tuple[float, float]:
        """The lexical and semantic parts of the fused score, as the ranking computes them."""
        lexical_part = (1.0 - self.weight) * (lexical / self.best_lexical) if self.best_lexical > 0 else 0.0
        semantic_part = (
            self.weight * (max(self.cosine, 0.0) / self.best_cosine) if self.best_cosine > 0 else 0.0
        )
        return lexical_part, semantic_part


@dataclass(frozen=True, slots=True)
class Explanation:
    """A tool's score for a query in a read-only corpus, with the corpus statistics behind it.

    ``score`` is the learned field's contributions (``learned``, empty when learning is off) added
    left to right in query order from 0.0, then the tool-text terms', exactly as the ranking adds
    them.
    """

    query: str
    name: str
    mode: str
    n_docs: int
    avgdl: float
    doc_len: int
    norm: float
    terms: list[TermExplanation]
    learning: bool = False
    learned: list[LearnedExplanation] = field(default_factory=list)
    semantic: SemanticExplanation | None = None
    """The fused side of the score, when the index has vectors (``None``: lexical only)."""

    @property
    def score(self) -> float:
        """The score a search reports: the lexical one, or fused with the semantic part."""
        lexical = self.lexical_score
        if self.semantic is None:
            return lexical
        lexical_part, semantic_part = self.semantic.parts(lexical)
        return lexical_part + semantic_part

    @property
    def lexical_score(self) -> float:
        """BM25+ and the learned field: the learned terms' contributions in query order from
        0.0, then the tool-text terms', as a search adds them."""
        total = 0.0
        for part in self.learned:
            if part.tf > 0:
                total += part.contribution
        for term in self.terms:
            if term.tf > 0:
                total += term.contribution
        return total

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per query term, for a table."""
        return [
            {
                "term": term.term,
                "qtf": term.qtf,
                "df": term.df,
                "idf": term.idf,
                "tf": term.tf,
                "fields": " ".join(f"{part.field}:{part.tf}" for part in term.fields),
                "contribution": term.contribution,
            }
            for term in self.terms
        ]

    def as_dict(self) -> dict[str, Any]:
        """Everything, as plain JSON-ready values (``--json``)."""
        return {
            "query": self.query,
            "name": self.name,
            "mode": self.mode,
            "score": self.score,
            "score6": round6(self.score),
            "lexical_score": self.lexical_score,
            "n_docs": self.n_docs,
            "avgdl": self.avgdl,
            "doc_len": self.doc_len,
            "norm": self.norm,
            "terms": [
                {
                    "term": term.term,
                    "qtf": term.qtf,
                    "df": term.df,
                    "idf": term.idf,
                    "tf": term.tf,
                    "contribution": term.contribution,
                    "fields": [
                        {"field": p.field, "weight": p.weight, "tf": p.tf, "contribution": p.contribution}
                        for p in term.fields
                    ],
                }
                for term in self.terms
            ],
            "learning": self.learning,
            "learned": [
                {
                    "term": part.term,
                    "qtf": part.qtf,
                    "df": part.df,
                    "weight": part.weight,
                    "tf": part.tf,
                    "contribution": part.contribution,
                }
                for part in self.learned
            ],
            "semantic": None if self.semantic is None else self._semantic_dict(self.semantic),
        }

    def _semantic_dict(self, semantic: SemanticExplanation) -> dict[str, Any]:
        lexical_part, semantic_part = semantic.parts(self.lexical_score)
        return {
            "weight": semantic.weight,
            "cosine": semantic.cosine,
            "best_cosine": semantic.best_cosine,
            "best_lexical": semantic.best_lexical,
            "lexical_part": lexical_part,
            "semantic_part": semantic_part,
        }


def explain(index: ToolIndex, query: str, name: str, *, mode: str = "all") -> Explanation:
    """Break down the score of tool ``name`` for ``query`` in the read-only corpus of ``mode``."""
    return explain_query(index, searched_query(checked_query(query)), name, mode=mode)


def explain_query(
    index: ToolIndex, query: Query, name: str, *, mode: str = "all", corpus: Corpus | None = None
) -> Explanation:
    """``explain`` of a query checked already; in ``corpus`` when given (a session's, which
    ``mode`` then names in words), else in the read-only corpus of ``mode``."""
    where = f"mode {mode!r}" if corpus is None else mode
    corpus = read_only_corpus(mode) if corpus is None else corpus
    with index.store.reading() as reader:
        analyzer = index.ranker.analyzer(reader)
        counts = query.terms(analyzer)
        tool = reader.catalog.tools_by_names([name]).get(name)
        if tool is None:
            raise ToolNotFound(f"no tool named {name!r} in the catalog")
        if tool.grp not in corpus.groups or name in corpus.excluded:
            raise NotInCorpus(f"{name!r} is never ranked in {where}: it is not discoverable there")
        statistics = corpus_statistics(reader, corpus, list(counts))
        postings = reader.index.postings_of_tools([tool.id])
        learning = index.ranker.learning_enabled(reader)
        learned_parts = index.ranker.learned(reader, counts, corpus)
        semantic = _semantic(index, reader, query.text, counts, corpus, tool.id)
    n_docs, total_len, dfs = statistics
    avgdl = average_length(n_docs, total_len)
    own = {p.term: p for p in postings.get(tool.id, []) if p.term is not None}
    per_field = field_term_frequencies(record_fields(tool), analyzer)
    terms = []
    for term, qtf in counts.items():
        df = dfs[term]
        idf_value = idf(n_docs, df)
        posting = own.get(term)
        tf = 0 if posting is None else posting.tf
        contribution = (
            0.0 if posting is None else term_score(qtf, idf_value, tf, length_norm(posting.doc_len, avgdl))
        )
        terms.append(
            TermExplanation(
                term, qtf, df, idf_value, tf, contribution, _field_parts(term, per_field, contribution)
            )
        )
    learned = []
    for part in learned_parts:
        at = np.flatnonzero(part.ids == tool.id)
        tf, value = (0, 0.0) if at.size == 0 else (int(part.tf[at[0]]), float(part.values[at[0]]))
        learned.append(LearnedExplanation(part.term, counts[part.term], part.df, part.weight, tf, value))
    return Explanation(
        query=query.text,
        name=name,
        mode=mode,
        n_docs=n_docs,
        avgdl=avgdl,
        doc_len=tool.doc_len,
        norm=length_norm(tool.doc_len, avgdl),
        terms=terms,
        learning=learning,
        learned=learned,
        semantic=semantic,
    )


def session_corpus_of(session: Session) -> tuple[Corpus, str]:
    """What a search of ``session`` ranks now, and the words naming it: the corpus of its
    settings, its active tools and its handle's scope. A session answering richly (a gateway's)
    ranks the tools it has active too, and those its scope's filters leave out, as its searches
    do (they are named to the model as not available, so they score)."""
    view = session.view()
    if session.answer_style() == "rich":
        corpus = session_corpus(
            view.mode, (), view.essentials, view.out_of_scope - view.reported, view.state.identity
        )
    else:
        corpus = view.corpus
    return corpus, f"{session_named(session.identity, session.id)} (mode {view.mode})"


def _semantic(
    index: ToolIndex, reader: Reader, query: str, counts: dict[str, int], corpus: Corpus, tool_id: int
) -> SemanticExplanation | None:
    found = index.ranker.semantic(reader, query, corpus)
    if found is None:
        return None
    semantic, part = found
    at = np.flatnonzero(part.tool_ids == tool_id)
    cosine = float(part.cosines[at[0]]) if at.size else 0.0
    lexical = index.ranker.rank(reader, counts, corpus, 1).hits
    best_lexical = lexical[0].score if lexical else 0.0
    return SemanticExplanation(semantic.weight, cosine, part.best, best_lexical)


def _field_parts(term: str, per_field: dict[str, dict[str, int]], contribution: float) -> list[FieldPart]:
    tfs = [(field, per_field.get(field, {}).get(term, 0)) for field in FIELD_WEIGHTS]
    total = sum(tf for _, tf in tfs)
    return [
        FieldPart(field, FIELD_WEIGHTS[field], tf, contribution * tf / total) for field, tf in tfs if tf > 0
    ]
