"""Learning from use: what the learned field gains, measured on requests it never learned from.

    python -m bench.learning [--analyzers reference,enhanced] [--per-tool 5,20] [--weights 1.0]

Two sets, each split so that no query tested was learned from:

- MetaTool (``../shared/data/metatool``, 199 tools, 21,060 labelled queries written by a model).
  Each tool's queries are shuffled with a fixed seed; its first N (5 or 20) are played as
  sessions (the request searched, then its labelled tools called) and its queries 20-39 are
  tested, so every N is tested on the same queries.
- The real MCP catalog (``../shared/data/mcp-catalog.jsonl``, 757 tools of 74 servers) with the
  project's own labelled requests (``bench/queries/mcp-catalog.jsonl``, written by people), in
  five folds: each fold is tested after learning from the other four (each request searched, then
  the first tool of each of its groups called), and the folds' results are pooled.

Every run copies the catalog into a fresh SQLite file, plays the training requests through the
library's own sessions (``discovery.quality.evaluate.learn_from``), turns learning on and runs the
test queries as read-only searches. ``--weights`` measures other weights of the learned field
than the shipped one (the choice is the table's, recorded in ``bench/results.md``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

import discovery.ranking.learned as learned_module
from discovery import ToolIndex
from discovery.quality.evaluate import LabelledQuery, TrainingRequest, evaluate, learn_from

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
METATOOL = DATA / "metatool"
MCP_CATALOG = DATA / "mcp-catalog.jsonl"
MCP_QUERIES = ROOT / "bench" / "queries" / "mcp-catalog.jsonl"
SEED = 20261204
TESTED = range(20, 40)
"""The positions of a MetaTool tool's shuffled queries that are tested."""
FOLDS = 5
KS = (1, 5, 10)


@dataclass(frozen=True)
class Split:
    name: str
    train: list[TrainingRequest]
    test: list[LabelledQuery]


@dataclass(frozen=True)
class Measured:
    queries: int
    recall1: float
    recall5: float
    mrr: float
    learn_seconds: float


def read_jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as source:
        return [json.loads(line) for line in source if line.strip()]


def metatool_splits(per_tool: Sequence[int]) -> list[Split]:
    by_tool: dict[str, list[dict[str, object]]] = {}
    for row in read_jsonl(METATOOL / "queries.jsonl"):
        relevant = row["relevant"]
        assert isinstance(relevant, list)
        by_tool.setdefault(str(relevant[0]), []).append(row)
    rng = random.Random(SEED)
    shuffled = {tool: rng.sample(rows, len(rows)) for tool, rows in sorted(by_tool.items())}
    test = [
        LabelledQuery(f"metatool:{tool}:{i}", str(rows[i]["query"]), tuple((str(n),) for n in rows[i]["relevant"]))  # type: ignore[attr-defined]
        for tool, rows in shuffled.items()
        for i in TESTED
        if i < len(rows)
    ]
    splits = [Split("MetaTool, no learning", [], test)]
    for n in per_tool:
        train = [
            TrainingRequest(f"train:{tool}:{i}", f"{tool}-{i}", str(row["query"]), tuple(map(str, row["relevant"])))  # type: ignore[call-overload]
            for tool, rows in shuffled.items()
            for i, row in enumerate(rows[: min(n, TESTED.start)])
        ]
        splits.append(Split(f"MetaTool, {n} requests per tool", train, test))
    return splits


def mcp_folds() -> list[tuple[list[TrainingRequest], list[LabelledQuery]]]:
    rows = read_jsonl(MCP_QUERIES)
    order = random.Random(SEED).sample(range(len(rows)), len(rows))
    folds = []
    for fold in range(FOLDS):
        held = {i for position, i in enumerate(order) if position % FOLDS == fold}
        train, test = [], []
        for i, row in enumerate(rows):
            groups = tuple(tuple(map(str, group)) for group in row["relevant_groups"])  # type: ignore[attr-defined]
            if i in held:
                test.append(LabelledQuery(f"mcp:{i}", str(row["query"]), groups))
            else:
                train.append(TrainingRequest(f"mcp:{i}", f"mcp-{i}", str(row["query"]), tuple(g[0] for g in groups)))
        folds.append((train, test))
    return folds


def measure(template: Path, workdir: Path, train: list[TrainingRequest], test: list[LabelledQuery]) -> Measured:
    copy = workdir / "copy.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, copy)
    with ToolIndex.open(str(copy)) as index:
        started = time.perf_counter()
        if train:
            learn_from(index, train)
        learned = time.perf_counter() - started
        result = evaluate(index, test, KS)
    return Measured(result.queries, result.recall[1], result.recall[5], result.mrr, learned)


def pooled(parts: list[Measured]) -> Measured:
    total = sum(part.queries for part in parts)

    def weighted(value: str) -> float:
        return sum(getattr(part, value) * part.queries for part in parts) / total

    return Measured(
        total,
        weighted("recall1"),
        weighted("recall5"),
        weighted("mrr"),
        sum(part.learn_seconds for part in parts),
    )


def template_of(catalog: Path, analyzer: str, workdir: Path) -> Path:
    path = workdir / f"{catalog.parent.name}-{catalog.stem}-{analyzer}.db"
    if not path.exists():
        with ToolIndex.open(str(path), analyzer=analyzer) as index:
            index.upsert_tools(read_jsonl(catalog))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--analyzers", default="reference,enhanced")
    parser.add_argument("--per-tool", default="5,20")
    parser.add_argument("--weights", default=str(learned_module.LEARNED_WEIGHT))
    parser.add_argument("--sets", default="metatool,mcp")
    args = parser.parse_args()
    analyzers = args.analyzers.split(",")
    weights = [float(w) for w in args.weights.split(",")]
    per_tool = [int(n) for n in args.per_tool.split(",")]
    sets = args.sets.split(",")
    table = Table(title="Learning from use: held-out queries, before and after learning")
    for column in ("set", "analyzer", "weight", "queries", "Recall@1", "Recall@5", "MRR@10", "learn s"):
        table.add_column(column, justify="left" if column in ("set", "analyzer") else "right")
    with tempfile.TemporaryDirectory(prefix="tool-index-learning-") as directory:
        workdir = Path(directory)
        for analyzer in analyzers:
            for weight in weights:
                learned_module.LEARNED_WEIGHT = weight
                rows: list[tuple[str, Measured]] = []
                if "metatool" in sets:
                    template = template_of(METATOOL / "catalog.jsonl", analyzer, workdir)
                    for split in metatool_splits(per_tool):
                        rows.append((split.name, measure(template, workdir, split.train, split.test)))
                if "mcp" in sets:
                    template = template_of(MCP_CATALOG, analyzer, workdir)
                    folds = mcp_folds()
                    rows.append(
                        ("MCP catalog, no learning", pooled([measure(template, workdir, [], t) for _, t in folds]))
                    )
                    rows.append(
                        (
                            f"MCP catalog, {FOLDS}-fold",
                            pooled([measure(template, workdir, train, t) for train, t in folds]),
                        )
                    )
                for name, result in rows:
                    table.add_row(
                        name,
                        analyzer,
                        f"{weight:g}",
                        str(result.queries),
                        f"{result.recall1:.3f}",
                        f"{result.recall5:.3f}",
                        f"{result.mrr:.3f}",
                        f"{result.learn_seconds:.1f}",
                    )
                    print(name, analyzer, weight, result, flush=True)
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
