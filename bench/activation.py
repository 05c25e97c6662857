"""Which matches a search should activate: the rule of ``discovery._sessions.answer``, measured.

    python -m bench.activation [--shares 0,0.2,0.3,...] [--analyzer enhanced]

A session that answers richly activates a hit of its top ``limit`` only when the hit matches by
more than common words and scores at least a share of the best score of the search. Measured at
limit 5 on each labelled set (MetaTool's 21,060 queries over its 199 tools; our labelled requests
over the 757-tool MCP catalog) and on requests that no tool of the MCP catalog serves
(``bench/queries/mcp-unserved.jsonl``), for each share:

- activated: tools activated per query (the plain ranking activates every hit of the top 5);
- kept: of the queries whose right tool the plain ranking puts in the top 5, the share whose right
  tool the rule still activates (the rule must keep all of them);
- none: the share of queries that activate nothing.

A share is chosen on one set (the highest that keeps every right tool) and checked on the other.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.peers import read_catalog
from discovery import ToolIndex
from discovery._params import searched_query
from discovery._quality.evaluate import LabelledQuery, read_queries
from discovery._ranking.bm25 import idf
from discovery._ranking.topk import RankedTool
from discovery._rules import read_only_corpus
from discovery._sessions.answer import SURE_SHARE, common_only

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
LIMIT = 5
COVERAGES = (0.1, 0.2, 0.3, 0.4, 0.5)
SHARES = (0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6)


@dataclass(frozen=True)
class Searched:
    """One query's plain top ``LIMIT``, which of its hits match by common words only, and the
    share of the query's idf that each hit matches (terms no tool holds count at full idf)."""

    hits: list[RankedTool]
    weak: set[int]
    coverage: dict[int, float]
    right: set[str]

    def activated(self, share: float, *, weak_rule: bool = True, coverage: float = 0.0) -> list[str]:
        top = self.hits[0].score if self.hits else 0.0
        return [
            hit.name
            for hit in self.hits
            if hit.score >= share * top
            and not (weak_rule and hit.tool_id in self.weak)
            and self.coverage[hit.tool_id] >= coverage
        ]


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
            weights = {
                term: qtf
                * idf(n_docs, sum(s.df for g, s in stats.get(term, (0, {}))[1].items() if g in corpus.groups))
                for term, qtf in terms.items()
            }
            postings = reader.index.postings_of_tools([hit.tool_id for hit in hits])
            coverage = {
                hit.tool_id: sum(
                    weights[t] for t in {p.term for p in postings.get(hit.tool_id, [])} if t in weights
                )
                / max(sum(weights.values()), 1e-12)
                for hit in hits
            }
            found.append(Searched(hits, weak, coverage, set(labelled.names)))
    return found


@dataclass(frozen=True)
class Figures:
    activated: float
    kept: float
    lost: int
    none: float


def figures(
    results: Sequence[Searched], share: float, *, weak_rule: bool = True, coverage: float = 0.0
) -> Figures:
    total = kept = lost = none = 0
    answerable = 0
    for result in results:
        activated = result.activated(share, weak_rule=weak_rule, coverage=coverage)
        total += len(activated)
        none += not activated
        if result.right & {hit.name for hit in result.hits}:
            answerable += 1
            if result.right & set(activated):
                kept += 1
            else:
                lost += 1
    count = max(len(results), 1)
    return Figures(total / count, kept / max(answerable, 1), lost, none / count)


def unserved(path: Path) -> list[LabelledQuery]:
    """Requests no tool serves: ``{"query": …}`` lines, with no right tool."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [LabelledQuery(f"{path}:{n}", json.loads(line)["query"], ()) for n, line in enumerate(lines, 1)]


def opened(workdir: Path, name: str, catalog: Path, analyzer: str) -> ToolIndex:
    index = ToolIndex.open(f"sqlite:///{workdir / name}.db", analyzer=analyzer)
    index.upsert_tools(read_catalog(catalog))
    return index


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shares", default=",".join(map(str, SHARES)))
    parser.add_argument("--analyzer", default="enhanced")
    args = parser.parse_args()
    shares = [float(share) for share in args.shares.split(",")]
    with tempfile.TemporaryDirectory() as workdir:
        metatool = opened(Path(workdir), "metatool", DATA / "metatool" / "catalog.jsonl", args.analyzer)
        mcp = opened(Path(workdir), "mcp", DATA / "mcp-catalog.jsonl", args.analyzer)
        sets = {
            "MetaTool": searched(metatool, read_queries(DATA / "metatool" / "queries.jsonl")),
            "MCP catalog": searched(mcp, read_queries(ROOT / "bench" / "queries" / "mcp-catalog.jsonl")),
            "MCP unserved": searched(mcp, unserved(ROOT / "bench" / "queries" / "mcp-unserved.jsonl")),
        }
        metatool.close()
        mcp.close()
    print(f"analyzer {args.analyzer}, limit {LIMIT}; shipped share {SURE_SHARE}")
    print("| rule | " + " | ".join(f"{name} activated / kept / lost / none" for name in sets) + " |")
    print("|---|" + "---|" * len(sets))
    print(_row("plain top 5", [figures(r, 0.0, weak_rule=False) for r in sets.values()]))
    for share in shares:
        print(_row(f"not weak, ≥ {share:g} × best", [figures(r, share) for r in sets.values()]))
    for floor in COVERAGES:
        for share in (0.0, 0.2):
            cells = [figures(r, share, coverage=floor) for r in sets.values()]
            print(_row(f"not weak, ≥ {share:g} × best, idf coverage ≥ {floor:g}", cells))
    for tuned, checked in (("MetaTool", "MCP catalog"), ("MCP catalog", "MetaTool")):
        best = max((s for s in shares if figures(sets[tuned], s).lost == 0), default=0.0)
        print(f"tuned on {tuned}: share {best:g}; on {checked} it loses {figures(sets[checked], best).lost}")


def _row(rule: str, cells: list[Figures]) -> str:
    shown = [f"{f.activated:.2f} / {f.kept:.1%} / {f.lost} / {f.none:.1%}" for f in cells]
    return f"| {rule} | " + " | ".join(shown) + " |"


if __name__ == "__main__":
    main()
