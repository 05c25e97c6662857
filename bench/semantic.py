"""The semantic signal: what it finds, what it costs, measured through the real index.

    python -m bench.semantic --model DIR [--parts quality,weights,speed,memory] [--size 100000]
                             [--rounds 5] [--workdir DIR]

- quality: Recall@1/5 and MRR@10 (``tool-index eval``'s measure) of lexical, semantic alone
  (weight 1) and fused (the shipped weight) on MetaTool (199 tools, 21,060 queries), the real
  757-tool MCP catalog with our labelled requests (``bench/queries/mcp-catalog.jsonl``) and our
  harder recurring requests (``bench/queries/mcp-recurring.jsonl``), under ``enhanced``.
- weights: the fused weight swept on the MCP catalog requests, the set the weight is chosen on.
- speed: p50/p95 of a read-only search (limit 8), lexical and fused, at 757 tools (the MCP
  catalog) and at ``--size`` tools (``bench.generate``'s catalog); the query's embedding and the
  vector scan are timed apart. At ``--size`` the stored vectors are random unit vectors written
  straight into the table (the scan costs the same whatever they hold; embedding 100k synthetic
  tools would measure nothing more), the queries' vectors are the model's.
- memory: a fresh process's resident memory at ``--size`` tools, lexical and fused (the model, the
  4-bit vectors and the scan's buffers), after three searches, then once every request of our
  query files has been searched too (caches filled, the model's pages read in).
- embed: tools embedded per second for the MCP catalog, all cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.generate import generate_catalog
from bench.queries import query_set
from discovery import ToolIndex
from discovery._catalog.embedding import DEFAULT_WEIGHT
from discovery._quality.evaluate import evaluate, read_queries
from discovery._ranking.fusion import cosines
from discovery._semantic.model import EmbeddingModel, load
from discovery._semantic.vectors import packed
from store import EmbeddingState, VectorRow

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
SETS = {
    "MetaTool": (DATA / "metatool" / "catalog.jsonl", DATA / "metatool" / "queries.jsonl"),
    "MCP catalog": (DATA / "mcp-catalog.jsonl", ROOT / "bench" / "queries" / "mcp-catalog.jsonl"),
    "MCP recurring": (DATA / "mcp-catalog.jsonl", ROOT / "bench" / "queries" / "mcp-recurring.jsonl"),
}
KS = (1, 5, 10)
LIMIT = 8
SWEEP = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def read_jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def embedded_copy(catalog: Path, model: str, workdir: Path) -> Path:
    """An enhanced index of ``catalog`` with vectors, made once per run."""
    path = workdir / f"{catalog.parent.name}-{catalog.stem}.db"
    if not path.exists():
        with ToolIndex.open(str(path), analyzer="enhanced") as index:
            index.upsert_tools(read_jsonl(catalog))
            started = time.perf_counter()
            report = index.embed(model)
            seconds = time.perf_counter() - started
            print(f"embedded {report.embedded} tools of {catalog.name} in {seconds:.1f} s", flush=True)
    return path


def with_weight(template: Path, workdir: Path, weight: float | None, model: str) -> ToolIndex:
    """A copy of ``template`` at ``weight`` (``None``: the vectors removed, lexical)."""
    copy = workdir / "copy.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, copy)
    index = ToolIndex.open(str(copy))
    if weight is None:
        index.embedding_off()
    else:
        index.embed(model, weight=weight)
    return index


def quality(model: str, workdir: Path, console: Console) -> None:
    table = Table(title="Semantic signal: Recall and MRR through the real index (enhanced)")
    for column in ("set", "queries", "ranking", "Recall@1", "Recall@5", "Recall@10", "MRR@10"):
        table.add_column(column, justify="left" if column in ("set", "ranking") else "right")
    for name, (catalog, queries_path) in SETS.items():
        if not queries_path.is_file():
            continue
        queries = read_queries(queries_path)
        template = embedded_copy(catalog, model, workdir)
        rankings = (("lexical", None), ("semantic alone", 1.0), (f"fused {DEFAULT_WEIGHT:g}", DEFAULT_WEIGHT))
        for label, weight in rankings:
            with with_weight(template, workdir, weight, model) as index:
                result = evaluate(index, queries, KS)
            row = [f"{result.recall[k]:.3f}" for k in KS]
            table.add_row(name, str(result.queries), label, *row, f"{result.mrr:.3f}")
            print(name, label, row, f"{result.mrr:.3f}", flush=True)
    console.print(table)


def weights(model: str, workdir: Path, console: Console) -> None:
    catalog, queries_path = SETS["MCP catalog"]
    queries = read_queries(queries_path)
    template = embedded_copy(catalog, model, workdir)
    table = Table(title="The fused weight on our MCP catalog requests (the set it is chosen on)")
    for column in ("weight", "Recall@1", "Recall@5", "Recall@10", "MRR@10"):
        table.add_column(column, justify="right")
    for weight in SWEEP:
        with with_weight(template, workdir, weight, model) as index:
            result = evaluate(index, queries, KS)
        table.add_row(f"{weight:g}", *(f"{result.recall[k]:.3f}" for k in KS), f"{result.mrr:.3f}")
    console.print(table)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, int(len(ordered) * 0.95) - 1)]


def timed_searches(
    index: ToolIndex, queries: list[str], rounds: int, model: EmbeddingModel | None = None
) -> list[float]:
    """Search times; with ``model``, each query as if never seen (its vector computed anew)."""
    for query in queries:  # warm-up: caches, the model, the vectors
        index.search(query, LIMIT)
    samples = []
    for _ in range(rounds):
        for query in queries:
            if model is not None:
                model.forget_queries()
            started = time.perf_counter()
            index.search(query, LIMIT)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def random_vectors(index: ToolIndex, model: str, dimensions: int, seed: int = 7) -> None:
    """A random unit vector for every tool, written straight into the table."""
    loaded = load(model)
    rng = np.random.default_rng(seed)
    with index.store.writing() as writer:
        writer.vectors.set_state(
            EmbeddingState(loaded.spec, loaded.files.digest(), dimensions, DEFAULT_WEIGHT),
        )
        pending = writer.vectors.missing()
        for start in range(0, len(pending), 10_000):
            part = pending[start : start + 10_000]
            raw = rng.standard_normal((len(part), dimensions)).astype(np.float32)
            rows, scales = packed(raw / np.linalg.norm(raw, axis=1, keepdims=True))
            writer.vectors.write(
                [
                    VectorRow(name, digest, float(scale), row.tobytes())
                    for (name, digest), row, scale in zip(part, rows, scales, strict=True)
                ],
            )


def speed(model: str, size: int, rounds: int, workdir: Path, console: Console) -> None:
    table = Table(title=f"Search time, limit {LIMIT}: lexical and fused (ms)")
    for column in ("tools", "ranking", "p50", "p95", "query embedding p50", "vector scan p50"):
        table.add_column(column, justify="left" if column == "ranking" else "right")
    loaded = load(model)
    mcp_queries = [query.query for query in read_queries(SETS["MCP catalog"][1])][:100]
    cases = [("757", embedded_copy(SETS["MCP catalog"][0], model, workdir), mcp_queries)]
    big = workdir / f"generated-{size}.db"
    if not big.exists():
        with ToolIndex.open(str(big), analyzer="enhanced") as index:
            index.upsert_tools(generate_catalog(size))
            random_vectors(index, model, loaded.dimensions)
    cases.append((f"{size:,}", big, [query.text for query in query_set()]))
    for label, path, queries in cases:
        with ToolIndex.open(str(path)) as index:
            fused = timed_searches(index, queries, rounds, loaded)
            repeated = timed_searches(index, queries, rounds)
            embedding = []
            for query in queries:
                started = time.perf_counter()
                loaded.embed([query])
                embedding.append((time.perf_counter() - started) * 1000)
            with index.store.reading() as reader:
                vectors = reader.vectors.current(loaded.dimensions)
            query_vector = loaded.embed_query(queries[0])
            scans = []
            for _ in range(50):
                started = time.perf_counter()
                cosines(vectors, query_vector)
                scans.append((time.perf_counter() - started) * 1000)
        lexical_copy = workdir / "lexical.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{lexical_copy}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(path, lexical_copy)
        with ToolIndex.open(str(lexical_copy)) as index:
            index.embedding_off()
            lexical = timed_searches(index, queries, rounds)
        for name, samples in (
            ("lexical", lexical),
            ("fused, new query", fused),
            ("fused, repeated", repeated),
        ):
            p50, p95 = percentiles(samples)
            extra = (
                (f"{statistics.median(embedding):.2f}", f"{statistics.median(scans):.2f}")
                if name == "fused, new query"
                else ("", "")
            )
            table.add_row(label, name, f"{p50:.2f}", f"{p95:.2f}", *extra)
            print(label, name, f"{p50:.2f} {p95:.2f}", *extra, flush=True)
    console.print(table)


def memory(model: str, size: int, workdir: Path, console: Console) -> None:
    big = workdir / f"generated-{size}.db"
    if not big.exists():
        with open(os.devnull, "w") as nowhere:
            speed(model, size, 1, workdir, Console(file=nowhere))
    lexical_copy = workdir / "memory-lexical.db"
    shutil.copyfile(big, lexical_copy)
    with ToolIndex.open(str(lexical_copy)) as index:
        index.embedding_off()
    # The requests of our query files, each once: a serving process's memory once its caches,
    # the model's pages and the allocator have seen varied queries, not only its first three.
    requests = list(
        dict.fromkeys(
            query.query for name in ("MCP catalog", "MCP recurring") for query in read_queries(SETS[name][1])
        )
    )
    queries_file = workdir / "memory-queries.json"
    queries_file.write_text(json.dumps(requests), encoding="utf-8")
    script = (
        "import json, sys, psutil\n"
        "from discovery import ToolIndex\n"
        "index = ToolIndex.open(sys.argv[1])\n"
        "for query in ('create an issue', 'list pods', 'delete the invoice'):\n"
        "    index.search(query, 8)\n"
        "print(psutil.Process().memory_info().rss / 2**20)\n"
        "for query in json.loads(open(sys.argv[2], encoding='utf-8').read()):\n"
        "    index.search(query, 8)\n"
        "print(psutil.Process().memory_info().rss / 2**20)\n"
    )
    measured = {}
    for label, path in (("lexical", lexical_copy), ("fused", big)):
        output = subprocess.run(
            [sys.executable, "-c", script, str(path), str(queries_file)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        measured[label] = [float(value) for value in output.split()[-2:]]
    table = Table(title=f"Resident memory of a process, {size:,} tools (MiB)")
    for column in ("after", "lexical", "fused", "extra"):
        table.add_column(column, justify="left" if column == "after" else "right")
    for at, label in enumerate(("three searches", f"{len(requests)} more, each a new request")):
        lexical, fused = measured["lexical"][at], measured["fused"][at]
        table.add_row(label, f"{lexical:.0f}", f"{fused:.0f}", f"{fused - lexical:.0f}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="a model directory or hub name, as for embed")
    parser.add_argument("--parts", default="quality,weights,speed,memory")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="keep the databases here between runs")
    args = parser.parse_args()
    parts = args.parts.split(",")
    console = Console(width=140)
    console.print(f"cores: {os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="tool-index-semantic-") as directory:
        workdir = args.workdir or Path(directory)
        workdir.mkdir(parents=True, exist_ok=True)
        if "quality" in parts:
            quality(args.model, workdir, console)
        if "weights" in parts:
            weights(args.model, workdir, console)
        if "speed" in parts:
            speed(args.model, args.size, args.rounds, workdir, console)
        if "memory" in parts:
            memory(args.model, args.size, workdir, console)


if __name__ == "__main__":
    main()
