"""Which matches a search should activate: the rule of ``discovery._sessions.answer``, measured.

    python -m bench.activation [--shares 0,0.2,0.3,...] [--analyzer enhanced] [--model DIR]

A session that answers richly activates a hit of its top ``limit`` only when the hit matches by
more than common words and scores at least a share of the best score of the search. Measured at
limit 5 on each labelled set (MetaTool's 21,060 queries over its 199 tools; our labelled requests
over the 757-tool MCP catalog) and on requests that no tool of the MCP catalog serves
(``bench/queries/mcp-unserved.jsonl``), for the shipped rule and for stricter ones tried on top
of it:

- activated: tools activated per query (the plain ranking activates every hit of the top 5);
- kept: of the queries whose right tool the plain ranking puts in the top 5, the share whose right
  tool the rule still activates (the rule must keep all of them);
- lost: how many such right tools the rule does not activate;
- none: the share of queries that activate nothing.

The stricter rules, each with one parameter: a share of the best score; the share of the query's
idf that a hit matches (a term no tool holds counts at full idf), alone or only in queries of at
most five terms that are not common; a gate that activates nothing when the top five together
match one term that is not common and words no tool holds make at least a share of the query's
idf (the unserved requests' shape: "order a pizza" matches only ``order``); with ``--model``, the
cosine between the request's and each hit's embedding (a hit below it, or the whole answer when
its best activated hit is below it). Each parameter is chosen on one labelled set (the strictest
that loses no right tool) and checked on the other.

Last, the hits matched by common words only: how many there are and how many of them are right,
against a tool drawn at random (what a loss of the shipped rule is worth).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.peers import read_catalog
from discovery import ToolIndex
from discovery._params import searched_query
from discovery._quality.evaluate import LabelledQuery, read_queries
from discovery._ranking.bm25 import idf
from discovery._ranking.topk import RankedTool
from discovery._rules import read_only_corpus
from discovery._semantic.model import load
from discovery._semantic.vectors import tool_text
from discovery._sessions.answer import SURE_SHARE, common_only, is_common
from store import StoredPosting

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
LIMIT = 5
SHARES = (0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6)
COVERAGES = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
SHORT_QUERY_TERMS = 5
UNKNOWN_SHARES = (0.5, 0.6, 0.7, 0.8, 0.9)
COSINES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25)


@dataclass
class Searched:
    """One query's plain top ``LIMIT`` and what the rules look at: which hits match by common
    words only, the share of the query's idf each hit matches, how many terms that are not common
    the query has and the top five match together, the share of its idf held by no tool, and
    (with a model) each hit's cosine with the request."""

    hits: list[RankedTool]
    weak: set[int]
    coverage: dict[int, float]
    right: set[str]
    terms: int
    matched: int
    unknown: float
    cosine: dict[int, float] = field(default_factory=dict)

    def shipped(self, share: float = SURE_SHARE) -> list[RankedTool]:
        top = self.hits[0].score if self.hits else 0.0
        return [hit for hit in self.hits if hit.tool_id not in self.weak and hit.score >= share * top]


Rule = Callable[[Searched], list[RankedTool]]


def plain(result: Searched) -> list[RankedTool]:
    return result.hits


def shared(share: float) -> Rule:
    return lambda result: result.shipped(share)


def covering(floor: float, *, short_only: bool = False) -> Rule:
    def rule(result: Searched) -> list[RankedTool]:
        if short_only and result.terms > SHORT_QUERY_TERMS:
            return result.shipped()
        return [hit for hit in result.shipped() if result.coverage[hit.tool_id] >= floor]

    return rule


def short(floor: float) -> Rule:
    return covering(floor, short_only=True)


def unknown_gate(share: float) -> Rule:
    return lambda result: [] if result.matched <= 1 and result.unknown >= share else result.shipped()


def cosine_floor(floor: float) -> Rule:
    return lambda result: [hit for hit in result.shipped() if result.cosine[hit.tool_id] >= floor]


def cosine_gate(floor: float) -> Rule:
    def rule(result: Searched) -> list[RankedTool]:
        sure = result.shipped()
        return sure if sure and max(result.cosine[hit.tool_id] for hit in sure) >= floor else []

    return rule


def searched(index: ToolIndex, queries: Sequence[LabelledQuery]) -> list[Searched]:
    corpus = read_only_corpus("all")
    found = []
    with index.store.reading() as reader:
        n_docs = sum(stats.doc_count for g, stats in reader.index.group_stats().items() if g in corpus.groups)
        for labelled in queries:
            terms = index.ranker.query_terms(reader, searched_query(labelled.query))
            hits = index.ranker.rank(reader, terms, corpus, LIMIT, query=labelled.query).hits
            weak = common_only(reader, index.ranker, terms, corpus, hits)
            stats = reader.index.term_stats(list(terms))
            df = {
                term: sum(s.df for g, s in stats.get(term, (0, {}))[1].items() if g in corpus.groups)
                for term in terms
            }
            weights = {term: qtf * idf(n_docs, df[term]) for term, qtf in terms.items()}
            total = max(sum(weights.values()), 1e-12)
            postings = reader.index.postings_of_tools([hit.tool_id for hit in hits])
            held = {hit.tool_id: _held(postings.get(hit.tool_id, []), terms) for hit in hits}
            rare = {term for term in terms if not is_common(term, df[term], n_docs)}
            found.append(
                Searched(
                    hits,
                    weak,
                    {tool: sum(weights[t] for t in matched) / total for tool, matched in held.items()},
                    set(labelled.names),
                    terms=len(rare),
                    matched=len(rare.intersection(set().union(*held.values()))),
                    unknown=_share(weights, {t for t in rare if df[t] == 0}, rare),
                )
            )
    return found


def _held(postings: list[StoredPosting], terms: dict[str, int]) -> set[str]:
    return {p.term for p in postings if p.term is not None and p.term in terms}


def _share(weights: dict[str, float], part: set[str], whole: set[str]) -> float:
    return sum(weights[t] for t in part) / max(sum(weights[t] for t in whole), 1e-12)


def with_cosines(
    results: list[Searched], queries: Sequence[LabelledQuery], catalog: Path, model: str
) -> None:
    """Each hit's cosine with its request, by the model's embeddings of both (the text a tool is
    embedded from is the index's own, ``tool_text``)."""
    embedder = load(model)
    records = {record["name"]: record for record in read_catalog(catalog)}
    names = list(records)
    texts = [tool_text(records[n].get("label") or n, records[n].get("description", "")) for n in names]
    vectors = dict(zip(names, embedder.embed(texts), strict=True))
    for result, labelled in zip(results, queries, strict=True):
        query = embedder.embed_query(labelled.query)
        result.cosine = {hit.tool_id: float(np.dot(query, vectors[hit.name])) for hit in result.hits}


@dataclass(frozen=True)
class Figures:
    activated: float
    kept: float
    lost: int
    none: float
    answerable: int


def figures(results: Sequence[Searched], rule: Rule) -> Figures:
    total = kept = lost = none = 0
    answerable = 0
    for result in results:
        activated = {hit.name for hit in rule(result)}
        total += len(activated)
        none += not activated
        if result.right & {hit.name for hit in result.hits}:
            answerable += 1
            if result.right & activated:
                kept += 1
            else:
                lost += 1
    count = max(len(results), 1)
    return Figures(total / count, kept / max(answerable, 1), lost, none / count, answerable)


def unserved(path: Path) -> list[LabelledQuery]:
    """Requests no tool serves: ``{"query": …}`` lines, with no right tool."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [LabelledQuery(f"{path}:{n}", json.loads(line)["query"], ()) for n, line in enumerate(lines, 1)]


def opened(workdir: Path, name: str, catalog: Path, analyzer: str) -> ToolIndex:
    index = ToolIndex.open(f"sqlite:///{workdir / name}.db", analyzer=analyzer)
    index.upsert_tools(read_catalog(catalog))
    return index


def families(shares: Sequence[float], *, semantic: bool) -> dict[str, list[tuple[float, str, Rule]]]:
    """Each stricter rule's name and its rows, from the loosest parameter to the strictest."""
    found: dict[str, list[tuple[float, str, Rule]]] = {
        "share of the best score": [(s, f"not weak, ≥ {s:g} × best", shared(s)) for s in shares],
        "idf coverage": [(c, f"shipped, idf coverage ≥ {c:g}", covering(c)) for c in COVERAGES],
        f"idf coverage, ≤ {SHORT_QUERY_TERMS} terms": [
            (c, f"shipped, idf coverage ≥ {c:g} in queries of ≤ {SHORT_QUERY_TERMS} terms", short(c))
            for c in COVERAGES
        ],
        "words no tool holds": [
            (
                -u,
                f"shipped, nothing if one term matches and unknown words ≥ {u:g} of the idf",
                unknown_gate(u),
            )
            for u in sorted(UNKNOWN_SHARES, reverse=True)
        ],
    }
    if semantic:
        found["cosine of each hit"] = [
            (c, f"shipped, each hit's cosine ≥ {c:g}", cosine_floor(c)) for c in COSINES
        ]
        found["cosine of the best hit"] = [
            (c, f"shipped, nothing if the best hit's cosine < {c:g}", cosine_gate(c)) for c in COSINES
        ]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shares", default=",".join(map(str, SHARES)))
    parser.add_argument("--analyzer", default="enhanced")
    parser.add_argument("--model", default=None, help="an embedding model: also measure the cosine rules")
    args = parser.parse_args()
    shares = [float(share) for share in args.shares.split(",")]
    inputs = {
        "MetaTool": (DATA / "metatool" / "catalog.jsonl", read_queries(DATA / "metatool" / "queries.jsonl")),
        "MCP catalog": (
            DATA / "mcp-catalog.jsonl",
            read_queries(ROOT / "bench" / "queries" / "mcp-catalog.jsonl"),
        ),
        "MCP unserved": (
            DATA / "mcp-catalog.jsonl",
            unserved(ROOT / "bench" / "queries" / "mcp-unserved.jsonl"),
        ),
    }
    sets: dict[str, list[Searched]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name, (catalog, queries) in inputs.items():
            with opened(Path(workdir), name.replace(" ", "-"), catalog, args.analyzer) as index:
                sets[name] = searched(index, queries)
            if args.model is not None:
                with_cosines(sets[name], queries, catalog, args.model)
    print(f"analyzer {args.analyzer}, limit {LIMIT}; shipped share {SURE_SHARE}")
    print("| rule | " + " | ".join(f"{name} activated / kept / lost / none" for name in sets) + " |")
    print("|---|" + "---|" * len(sets))
    print(_row("plain top 5", [figures(r, plain) for r in sets.values()]))
    found = families(shares, semantic=args.model is not None)
    for rows in found.values():
        for _, rule_name, rule in rows:
            print(_row(rule_name, [figures(r, rule) for r in sets.values()]))
    for family, rows in found.items():
        for tuned, checked in (("MetaTool", "MCP catalog"), ("MCP catalog", "MetaTool")):
            keeping = [(p, name, rule) for p, name, rule in rows if figures(sets[tuned], rule).lost == 0]
            if not keeping:
                print(f"{family}: tuned on {tuned}, every parameter loses a right tool")
                continue
            _, name, rule = max(keeping, key=lambda row: row[0])
            on, off = figures(sets[checked], rule), figures(sets["MCP unserved"], rule)
            print(
                f"{family}: tuned on {tuned}: {name}; on {checked} it loses {on.lost}; "
                f"unserved activate {off.activated:.2f} per request, {off.none:.0%} nothing"
            )
    print(_weak_hits(sets))


def _weak_hits(sets: dict[str, list[Searched]]) -> str:
    """How many hits of the top 5 match by common words only, and how many of those are right."""
    parts = []
    for name, results in sets.items():
        weak = [hit for r in results for hit in r.hits if hit.tool_id in r.weak]
        right = sum(1 for r in results for hit in r.hits if hit.tool_id in r.weak and hit.name in r.right)
        if weak and any(r.right for r in results):
            parts.append(
                f"{name}: {len(weak)} hits by common words only, {right} right ({right / len(weak):.2%})"
            )
    return "; ".join(parts)


def _row(rule: str, cells: list[Figures]) -> str:
    shown = [f"{f.activated:.2f} / {_kept(f)} / {f.none:.1%}" for f in cells]
    return f"| {rule} | " + " | ".join(shown) + " |"


def _kept(cell: Figures) -> str:
    """Kept and lost, or dashes for a set with no right tools (the unserved requests)."""
    return "— / —" if cell.answerable == 0 else f"{cell.kept:.1%} / {cell.lost}"


if __name__ == "__main__":
    main()
