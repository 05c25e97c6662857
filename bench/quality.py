"""Retrieval quality: how often each engine puts the right tool first, or near it.

    python -m bench.quality [--engines tool-index,fts5,...] [--workdir DIR]

MetaTool (HowieHwong/MetaTool, ICLR 2024; in ``../shared/data/metatool``) pairs 199 tools
(a name and a description each) with 21,060 queries written by a model, each labelled with the
tool or tools it should find. Every engine indexes the tools and answers every query with its
top 8. Recall@k is the share of queries with a labelled tool among the first k results; MRR@8
the mean of 1/rank of the first labelled tool (0 when none is in the top 8). The labels are noisy
at rank 1 (a query often fits a second tool as well), so compare engines with each other rather
than with 100%. ``bench.run`` includes this table when the data is present.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.engines import ENGINES, make_peer
from bench.peers import read_catalog

ROOT = Path(__file__).resolve().parent.parent
METATOOL = ROOT / ".." / "shared" / "data" / "metatool"
DEPTH = 8
RECALL_AT = (1, 5, 8)
HEADER = ("engine", *(f"Recall@{k}" for k in RECALL_AT), f"MRR@{DEPTH}", "no result")


@dataclass(frozen=True)
class Labelled:
    query: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class Quality:
    engine: str
    queries: int
    found_at: tuple[int, ...]
    """Per query, the 1-based rank of the first relevant tool in the top ``DEPTH``; 0 if none."""
    empty: int
    """Queries the engine returned nothing for."""

    def recall(self, k: int) -> float:
        return sum(1 for rank in self.found_at if 0 < rank <= k) / self.queries

    def mrr(self) -> float:
        return sum(1 / rank for rank in self.found_at if rank) / self.queries

    def cells(self) -> list[str]:
        recalls = (f"{self.recall(k):.1%}" for k in RECALL_AT)
        return [self.engine, *recalls, f"{self.mrr():.3f}", f"{self.empty:,}"]


def available(directory: Path = METATOOL) -> bool:
    return (directory / "catalog.jsonl").is_file() and (directory / "queries.jsonl").is_file()


@cache  # read once per run, not once per engine
def labelled_queries(directory: Path = METATOOL) -> tuple[Labelled, ...]:
    with (directory / "queries.jsonl").open(encoding="utf-8") as src:
        rows = [json.loads(line) for line in src if line.strip()]
    return tuple(Labelled(row["query"], frozenset(row["relevant"])) for row in rows)


def first_relevant(names: Sequence[str], relevant: frozenset[str]) -> int:
    """The 1-based rank of the first of ``names`` in ``relevant``; 0 when there is none."""
    return next((rank for rank, name in enumerate(names, start=1) if name in relevant), 0)


def evaluate(engine: str, directory: Path, workdir: Path) -> Quality:
    """Index MetaTool's tools with ``engine`` (in ``workdir``) and answer every labelled query."""
    catalog = directory / "catalog.jsonl"
    queries = labelled_queries(directory)
    workdir.mkdir(parents=True, exist_ok=True)
    peer = make_peer(engine, workdir, catalog)
    try:
        peer.build(peer.prepare(read_catalog(catalog)))
        found, empty = [], 0
        for labelled in queries:
            names = [name for name, _ in peer.search(labelled.query, DEPTH)]
            empty += not names
            found.append(first_relevant(names, labelled.relevant))
    finally:
        peer.close()
    return Quality(engine, len(queries), tuple(found), empty)


def title(directory: Path = METATOOL) -> str:
    tools = len(read_catalog(directory / "catalog.jsonl"))
    return (
        f"Retrieval quality: MetaTool, {tools} tools, {len(labelled_queries(directory)):,} labelled queries"
    )


def markdown(rows: Sequence[Quality], heading: str) -> list[str]:
    lines = [f"**{heading}**", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return [*lines, ""]


def rich_table(rows: Sequence[Quality], heading: str) -> Table:
    table = Table(title=heading, title_justify="left")
    for i, column in enumerate(HEADER):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row.cells())
    return table


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument(
        "--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)}"
    )
    parser.add_argument("--data", type=Path, default=METATOOL, help="the MetaTool directory")
    parser.add_argument("--workdir", type=Path, help="keep the indexes here (default: temp)")
    args = parser.parse_args(argv)
    if not available(args.data):
        parser.error(f"no MetaTool data in {args.data} (catalog.jsonl and queries.jsonl)")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tool-index-quality-"))
    console = Console()
    try:
        rows = []
        for engine in (e for e in args.engines.split(",") if e):
            with console.status(f"MetaTool: {engine}"):
                rows.append(evaluate(engine, args.data, workdir / engine))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    console.print(rich_table(rows, title(args.data)))


if __name__ == "__main__":
    main()
