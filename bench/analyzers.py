"""Analyzer experiments: which text analysis finds more of the right tools, measured.

    python -m bench.analyzers [--variants enhanced,reference,...] [--markdown]

Every variant is ranked by the same in-memory, exact BM25+ of contract §4 (field weights 6/4/4/2/2/1,
k1 1.2, b 0.75, δ 1) and differs only in how documents and queries become terms (and, for the
variants that say so, one rule on top). Two labelled query sets:

- MetaTool (``../shared/data/metatool``): 199 tools, 21,060 model-written queries. A query counts
  when any labelled tool is in the first k, as in ``bench.quality``, so ``reference`` here gives
  that table's tool-index row.
- The real 757-tool MCP catalog (``../shared/data/mcp-catalog.jsonl``) with our own labelled
  requests, ``bench/queries/mcp-catalog.jsonl`` (groups: any tool of a group will do).

Recall@k and MRR@8 as in ``bench.quality``; "empty" is the share of queries with no result.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.peers import read_catalog
from discovery._quality.evaluate import LabelledQuery, read_queries
from discovery._quality.metrics import satisfied_at
from discovery._text import enhanced
from discovery._text.tokenizer import tokenize

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
METATOOL = DATA / "metatool"
MCP_CATALOG = DATA / "mcp-catalog.jsonl"
MCP_QUERIES = ROOT / "bench" / "queries" / "mcp-catalog.jsonl"
DEPTH = 8
RECALL_AT = (1, 5, 8)

# contract §4 [fixed]: the harness states them itself; tests/test_quality_bench.py checks that its
# reference ranking is the library's.
FIELD_WEIGHTS = {"name": 6, "label": 4, "mcp_tool_name": 4, "server_name": 2, "summary": 2, "schema_key": 1}
K1, B, DELTA = 1.2, 0.75, 1.0

Fields = list[tuple[str, str]]
"""A tool's indexed ``(field, text)`` pairs, one per schema key."""


@dataclass(frozen=True)
class Analyzer:
    """How a variant turns tools and queries into terms, and the ranking rule it adds, if any."""

    name: str
    document: Callable[[str], list[str]]
    """The terms of one field's text."""
    query: Callable[[str], list[str]]
    full_description: bool = False
    """Index the whole description in the summary field instead of its first 200 units."""
    split_compounds: bool = False
    """Also index a name word that runs together words of the tool's own text as those words."""
    per_field_norm: bool = False
    """BM25F: normalize each field's tf by that field's length, then saturate once."""
    coverage: bool = False
    """Queries of 3+ distinct terms return only tools that match at least 2 of them."""
    k1: float = K1
    b: float = B
    delta: float = DELTA
    """BM25+'s parameters; contract §4's unless a variant says otherwise."""
    coord: float = 0.0
    """Lucene's classic coordination factor: scores times (matched terms / query terms) ** coord."""
    feedback: tuple[int, int, float] | None = None
    """Pseudo-relevance feedback ``(docs, terms, weight)``: the best ``terms`` terms of the first
    ``docs`` tools (by score share × weighted tf / length, as RM3) join the query, their weights
    scaled to ``weight`` × the query's own, and the query is ranked again."""
    query_weights: Callable[[list[str]], list[float]] | None = None
    """A weight per query token (before stemming) in place of 1: a term's qtf is their sum."""


@dataclass
class MemoryIndex:
    """Exact BM25+ over in-memory documents: weighted tf per term, one length per document."""

    names: list[str]
    n_docs: int
    k1: float = K1
    delta: float = DELTA
    postings: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)
    """Per term: ``(doc, tf, norm)`` with ``norm`` the length part of the BM25 denominator."""

    def idf(self, term: str) -> float:
        df = len(self.postings[term])
        return math.log(1 + (self.n_docs - df + 0.5) / (df + 0.5))

    def scores(self, terms: Mapping[str, float]) -> tuple[dict[int, float], Counter[int]]:
        scores: dict[int, float] = {}
        matched: Counter[int] = Counter()
        for term, qtf in terms.items():
            if term not in self.postings:
                continue
            idf = self.idf(term)
            for doc, tf, norm in self.postings[term]:
                scores[doc] = scores.get(doc, 0.0) + qtf * idf * (
                    (tf * (self.k1 + 1)) / (tf + norm) + self.delta
                )
                matched[doc] += 1
        return scores, matched

    def rank(
        self, terms: Mapping[str, float], limit: int, *, coverage: bool = False, coord: float = 0.0
    ) -> list[tuple[str, float]]:
        """The best ``limit`` tools by score, ties by name; ``coverage`` and ``coord`` apply
        those rules (``Analyzer``)."""
        scores, matched = self.scores(terms)
        if coverage and len(terms) >= 3:
            scores = {doc: score for doc, score in scores.items() if matched[doc] >= 2}
        if coord:
            scores = {doc: score * (matched[doc] / len(terms)) ** coord for doc, score in scores.items()}
        best = sorted(scores.items(), key=lambda item: (-item[1], self.names[item[0]]))[:limit]
        return [(self.names[doc], score) for doc, score in best]


def tool_fields(record: dict[str, Any], *, full_description: bool = False) -> tuple[str, Fields]:
    """A catalog record's name and indexed fields, with the library's defaults (contract §2)."""
    from discovery import ToolRecord

    tool = ToolRecord.model_validate(record)
    pairs: Fields = [("name", tool.name), ("label", tool.label)]
    if tool.mcp_tool_name:
        pairs.append(("mcp_tool_name", tool.mcp_tool_name))
    if tool.server_name:
        pairs.append(("server_name", tool.server_name))
    pairs.append(("summary", tool.description if full_description else tool.summary))
    pairs.extend(("schema_key", key) for key in tool.schema_keys)
    return tool.name, pairs


def build(tools: Sequence[tuple[str, Fields]], analyzer: Analyzer) -> MemoryIndex:
    """Index ``tools`` under ``analyzer``."""
    per_doc = [_field_terms(pairs, analyzer) for _, pairs in tools]
    index = MemoryIndex([name for name, _ in tools], len(tools), analyzer.k1, analyzer.delta)
    if analyzer.per_field_norm:
        _add_bm25f(index, per_doc, analyzer.b)
    else:
        _add_bm25(index, per_doc, analyzer.b)
    return index


def _field_terms(pairs: Fields, analyzer: Analyzer) -> dict[str, list[str]]:
    own = {token for field_, text in pairs if field_ in ("summary", "schema_key") for token in tokenize(text)}
    terms: dict[str, list[str]] = {}
    for field_, text in pairs:
        if analyzer.split_compounds and field_ in ("name", "label", "mcp_tool_name"):
            text = " ".join(_with_parts(tokenize(text), own))
        terms.setdefault(field_, []).extend(analyzer.document(text))
    return terms


def _with_parts(tokens: Iterable[str], own: set[str]) -> Iterable[str]:
    for token in tokens:
        yield token
        yield from compound_parts(token, own) or ()


def compound_parts(token: str, words: set[str], shortest: int = 3) -> list[str] | None:
    """``token`` as two or more of ``words`` (each ``shortest`` letters or more) run together,
    compared by stem (``socialsearch`` with ``social`` and ``search`` in the tool's own text);
    ``None`` when it is not such a run. The split with the fewest parts wins."""
    stems = {enhanced.stem(word) for word in words if len(word) >= shortest}
    best: list[list[str] | None] = [[]] + [None] * len(token)
    for end in range(1, len(token) + 1):
        for start in range(max(0, end - 40), end - shortest + 1):
            before = best[start]
            piece = token[start:end]
            current = best[end]
            shorter = current is None or (before is not None and len(before) + 1 < len(current))
            if before is not None and shorter and enhanced.stem(piece) in stems:
                best[end] = [*before, piece]
    parts = best[len(token)]
    return parts if parts is not None and len(parts) >= 2 else None


def _add_bm25(index: MemoryIndex, per_doc: list[dict[str, list[str]]], b: float) -> None:
    weighted = [_weighted(terms) for terms in per_doc]
    lengths = [sum(tf.values()) for tf in weighted]
    avgdl = (sum(lengths) / len(lengths) if lengths else 0) or 1.0
    for doc, tf in enumerate(weighted):
        norm = index.k1 * (1 - b + b * (lengths[doc] / avgdl))
        for term, value in tf.items():
            index.postings.setdefault(term, []).append((doc, value, norm))


def _add_bm25f(index: MemoryIndex, per_doc: list[dict[str, list[str]]], b: float) -> None:
    totals: Counter[str] = Counter()
    for terms in per_doc:
        totals.update({field_: len(tokens) for field_, tokens in terms.items()})
    average = {field_: (total / len(per_doc)) or 1.0 for field_, total in totals.items()}
    for doc, terms in enumerate(per_doc):
        tf: dict[str, float] = {}
        for field_, tokens in terms.items():
            scale = FIELD_WEIGHTS[field_] / (1 - b + b * len(tokens) / average[field_])
            for term, count in Counter(tokens).items():
                tf[term] = tf.get(term, 0.0) + count * scale
        for term, value in tf.items():
            index.postings.setdefault(term, []).append((doc, value, index.k1))


def _weighted(terms: dict[str, list[str]]) -> dict[str, float]:
    tf: dict[str, float] = {}
    for field_, tokens in terms.items():
        for token in tokens:
            tf[token] = tf.get(token, 0) + FIELD_WEIGHTS[field_]
    return tf


_REQUEST_WORDS = (
    "please kindly would could can may might must shall will help need want wish like love "
    "request ask tell show give provide let know assist require specific specifically "
    "particular particularly comprehensive detailed details detail information info various "
    "several certain also really just exactly"
)
REQUEST_WORDS = frozenset(enhanced.stem(word) for word in _REQUEST_WORDS.split())
"""Words that phrase a request rather than say what it is for (tried, not kept)."""


def _without_request_words(text: str) -> list[str]:
    terms = enhanced.query_tokens(text)
    return [term for term in terms if term not in REQUEST_WORDS] or terms


def _version_1(text: str) -> list[str]:
    """``enhanced``'s query terms before version 2 left out ``tool`` and ``tools``."""
    tokens = tokenize(text)
    return [enhanced.stem(t) for t in [t for t in tokens if t not in enhanced.ENGLISH_STOP_WORDS] or tokens]


def _stemmed(text: str) -> list[str]:
    return [enhanced.stem(token) for token in tokenize(text)]


def _without_stop_words(text: str) -> list[str]:
    tokens = tokenize(text)
    return [token for token in tokens if token not in enhanced.STOP_WORDS] or tokens


REFERENCE = Analyzer("reference", tokenize, tokenize)
ENHANCED = Analyzer("enhanced", enhanced.document_tokens, enhanced.query_tokens)
VARIANTS: dict[str, Analyzer] = {
    variant.name: variant
    for variant in (
        REFERENCE,
        Analyzer("stemming only", _stemmed, _stemmed),
        Analyzer("query stop words only", tokenize, _without_stop_words),
        ENHANCED,
        replace(ENHANCED, name="enhanced version 1", query=_version_1),
        replace(ENHANCED, name="enhanced + request words", query=_without_request_words),
        replace(ENHANCED, name="enhanced + compound names", split_compounds=True),
        replace(ENHANCED, name="enhanced + full description", full_description=True),
        replace(ENHANCED, name="enhanced + per-field length", per_field_norm=True),
        replace(ENHANCED, name="enhanced + coverage rule", coverage=True),
    )
}


@dataclass(frozen=True)
class QuerySet:
    title: str
    catalog: Path
    queries: tuple[LabelledQuery, ...]


@dataclass(frozen=True)
class Result:
    found_at: tuple[int, ...]
    """Per query, the rank of the first relevant tool in the first ``DEPTH``; 0 for none."""
    empty: int

    def recall(self, k: int) -> float:
        return sum(1 for rank in self.found_at if 0 < rank <= k) / len(self.found_at)

    def mrr(self) -> float:
        return sum(1 / rank for rank in self.found_at if rank) / len(self.found_at)

    def cells(self) -> list[str]:
        recalls = [f"{self.recall(k):.3f}" for k in RECALL_AT]
        return [*recalls, f"{self.mrr():.3f}", f"{self.empty / len(self.found_at):.1%}"]


def query_sets() -> list[QuerySet]:
    """The query sets whose data is present."""
    found = []
    if (METATOOL / "queries.jsonl").is_file():
        # bench.quality's measure: any labelled tool counts, so the labels are one group.
        metatool = tuple(
            replace(query, groups=(tuple(query.names),)) for query in read_queries(METATOOL / "queries.jsonl")
        )
        found.append(QuerySet("MetaTool", METATOOL / "catalog.jsonl", metatool))
    if MCP_CATALOG.is_file():
        labelled = tuple(read_queries(MCP_QUERIES))
        found.append(QuerySet("MCP catalog", MCP_CATALOG, labelled))
        asked = tuple(
            replace(query, query=ASKING_FOR_A_TOOL[number % len(ASKING_FOR_A_TOOL)] + query.query)
            for number, query in enumerate(labelled)
        )
        found.append(QuerySet("MCP, asked for a tool", MCP_CATALOG, asked))
    return found


ASKING_FOR_A_TOOL = ("a tool to ", "which tool can ", "use the tool that lets me ")
"""How a model often words a request to a tool search: the MCP catalog's requests, each worded
one of these ways in turn, are the third query set."""


def run(analyzer: Analyzer, query_set: QuerySet) -> Result:
    records = read_catalog(query_set.catalog)
    tools = [tool_fields(record, full_description=analyzer.full_description) for record in records]
    index = build(tools, analyzer)
    forward = [_weighted(_field_terms(pairs, analyzer)) for _, pairs in tools] if analyzer.feedback else []
    found, empty = [], 0
    for labelled in query_set.queries:
        terms = query_terms(analyzer, labelled.query)
        if analyzer.feedback:
            terms = with_feedback(index, forward, terms, *analyzer.feedback)
        ranked = index.rank(terms, DEPTH, coverage=analyzer.coverage, coord=analyzer.coord)
        names = [name for name, _ in ranked]
        empty += not names
        ranks = [rank for rank in satisfied_at(names, labelled.groups) if rank]
        found.append(min(ranks) if ranks else 0)
    return Result(tuple(found), empty)


def query_terms(analyzer: Analyzer, query: str) -> dict[str, float]:
    """The query's terms with their qtf, or with the sum of their tokens' weights."""
    if analyzer.query_weights is None:
        return {term: float(count) for term, count in Counter(analyzer.query(query)).items()}
    tokens = tokenize(query)
    content = [token for token in tokens if token not in enhanced.STOP_WORDS] or tokens
    terms: dict[str, float] = {}
    for token, weight in zip(content, analyzer.query_weights(content), strict=True):
        term = enhanced.stem(token)
        terms[term] = terms.get(term, 0.0) + weight
    weighted = {term: weight for term, weight in terms.items() if weight > 0}
    # A query whose every token weighs nothing still searches, with its plain counts.
    return weighted or {term: float(count) for term, count in Counter(map(enhanced.stem, content)).items()}


def with_feedback(
    index: MemoryIndex,
    forward: list[dict[str, float]],
    terms: dict[str, float],
    docs: int,
    count: int,
    weight: float,
) -> dict[str, float]:
    """``terms`` and the ``count`` best terms of the first ``docs`` tools (RM3's estimate: each
    tool's score share times the term's share of its weighted length), scaled to ``weight``
    times the query's total qtf."""
    scores, _ = index.scores(terms)
    first = sorted(scores.items(), key=lambda item: (-item[1], index.names[item[0]]))[:docs]
    total = sum(score for _, score in first)
    expansion: dict[str, float] = {}
    for doc, score in first:
        length = sum(forward[doc].values())
        for term, tf in forward[doc].items():
            expansion[term] = expansion.get(term, 0.0) + (score / total) * (tf / length)
    ordered = sorted(expansion.items(), key=lambda item: (-item[1], item[0]))
    best = [(term, value) for term, value in ordered if term not in terms][:count]
    if not best:
        return terms
    scale = weight * sum(terms.values()) / sum(value for _, value in best)
    return {**terms, **{term: value * scale for term, value in best}}


def english_weights(tokens: list[str]) -> list[float]:
    """A weight per token from its frequency in general English (``wordfreq``'s Zipf value,
    log10 of uses per billion words): 8 - Zipf, so ``want`` weighs about 2 and ``histogram``
    about 5. Needs the ``wordfreq`` package, which the project does not depend on."""
    zipf_frequency = import_module("wordfreq").zipf_frequency
    return [max(0.0, 8.0 - zipf_frequency(token, "en")) for token in tokens]


def _without_document_stop_words(text: str) -> list[str]:
    return [enhanced.stem(token) for token in tokenize(text) if token not in enhanced.STOP_WORDS]


def _stems_cut(text: str) -> list[str]:
    return [term[:6] for term in enhanced.document_tokens(text)]


def _query_stems_cut(text: str) -> list[str]:
    return [term[:6] for term in enhanced.query_tokens(text)]


TRIED = {
    variant.name: variant
    for variant in (
        replace(ENHANCED, name="enhanced, k1 1.5", k1=1.5),
        replace(ENHANCED, name="enhanced, k1 2", k1=2.0),
        replace(ENHANCED, name="enhanced, b 0.5", b=0.5),
        replace(ENHANCED, name="enhanced, δ 0", delta=0.0),
        replace(ENHANCED, name="enhanced, k1 2, δ 0", k1=2.0, delta=0.0),
        replace(ENHANCED, name="enhanced + document stop words", document=_without_document_stop_words),
        replace(ENHANCED, name="enhanced + stems cut to 6", document=_stems_cut, query=_query_stems_cut),
        replace(ENHANCED, name="enhanced + coord", coord=0.5),
        replace(ENHANCED, name="enhanced + feedback", feedback=(3, 10, 0.3)),
        replace(ENHANCED, name="enhanced + English frequency", query_weights=english_weights),
        replace(
            ENHANCED,
            name="enhanced, k1 2, δ 0 + English frequency",
            k1=2.0,
            delta=0.0,
            query_weights=english_weights,
        ),
    )
}
"""Variants measured after ``enhanced`` was chosen, none kept (``--variants tried``)."""


def header(sets: Sequence[QuerySet]) -> list[str]:
    columns = ["analyzer"]
    for query_set in sets:
        columns += [f"{query_set.title} {m}" for m in (*(f"R@{k}" for k in RECALL_AT), "MRR", "empty")]
    return columns


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.analyzers", description=__doc__)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variant names")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    known = {**VARIANTS, **TRIED}
    names = [name for name in args.variants.split(",") if name]
    if names == ["tried"]:
        names = ["reference", "enhanced", *TRIED]
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown variants: {', '.join(unknown)}; the variants are {', '.join(known)}")
    chosen = [known[name] for name in names]
    if any(variant.query_weights is english_weights for variant in chosen) and not find_spec("wordfreq"):
        parser.error("the English frequency variants need the wordfreq package (pip install wordfreq)")
    sets = query_sets()
    if not sets:
        parser.error(f"no query set data under {DATA}")
    console = Console()
    rows = []
    for analyzer in chosen:
        cells = [analyzer.name]
        for query_set in sets:
            with console.status(f"{analyzer.name}: {query_set.title}"):
                cells += run(analyzer, query_set).cells()
        rows.append(cells)
    sizes = ", ".join(f"{s.title} {len(s.queries):,} queries" for s in sets)
    if args.markdown:
        from bench.report import machine_info

        columns = header(sets)
        print(f"Command: `python -m bench.analyzers --variants {args.variants} --markdown`\n")
        print("Machine: " + "; ".join(f"{key} {value}" for key, value in machine_info().items()) + "\n")
        print(f"**Analyzers ({sizes}; in-memory exact BM25+)**\n")
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for cells in rows:
            print("| " + " | ".join(cells) + " |")
        return
    table = Table(title=f"Analyzers: {sizes}", title_justify="left")
    for i, column in enumerate(header(sets)):
        table.add_column(column, justify="left" if i == 0 else "right")
    for cells in rows:
        table.add_row(*cells)
    console.print(table)


if __name__ == "__main__":
    main()
