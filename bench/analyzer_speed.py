"""Search latency of the two analyzers on one generated catalog, in the same run.

    python -m bench.analyzer_speed [--size 100000] [--rounds 30] [--markdown]

The same generated catalog (``bench.generate``) is imported twice into SQLite files, once per
analyzer, and the fixed query set of ``bench.queries`` is searched through ``ToolIndex.search``
(limit 8), warm, the two indexes taking turns query by query so that the machine's load falls on
both alike. The first pass over the queries is not timed (it fills the posting caches).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.generate import DEFAULT_SEED, generate_catalog
from bench.queries import query_set
from discovery import ToolIndex

ANALYZERS = ("reference", "enhanced")


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.analyzer_speed", description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=30, help="timed passes over the query set")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    records = generate_catalog(args.size, args.seed)
    queries = [query.text for query in query_set()]
    with tempfile.TemporaryDirectory(prefix="tool-index-analyzers-") as directory:
        indexes = {}
        build_s = {}
        for name in ANALYZERS:
            start = time.perf_counter()
            index = ToolIndex.open(str(Path(directory) / f"{name}.db"), analyzer=name)
            index.upsert_tools(records)
            build_s[name] = time.perf_counter() - start
            indexes[name] = index
        for index in indexes.values():
            for query in queries:
                index.search(query, 8)
        timings: dict[str, list[float]] = {name: [] for name in ANALYZERS}
        for _ in range(args.rounds):
            for query in queries:
                for name, index in indexes.items():
                    start = time.perf_counter()
                    index.search(query, 8)
                    timings[name].append(time.perf_counter() - start)
        stats = {name: indexes[name].stats() for name in ANALYZERS}
        for index in indexes.values():
            index.close()
    rows = []
    for name in ANALYZERS:
        values = timings[name]
        rows.append(
            (
                name,
                f"{stats[name]['terms']:,}",
                f"{stats[name]['postings']:,}",
                f"{build_s[name]:.1f}",
                f"{statistics.median(values) * 1e3:.2f}",
                f"{percentile(values, 0.95) * 1e3:.2f}",
                f"{percentile(values, 0.99) * 1e3:.2f}",
            )
        )
    ratio = percentile(timings["enhanced"], 0.95) / percentile(timings["reference"], 0.95)
    columns = ("analyzer", "terms", "postings", "import s", "search p50 ms", "search p95 ms", "search p99 ms")
    if args.markdown:
        from bench.report import machine_info

        print(
            "Command: `python -m bench.analyzer_speed "
            f"--size {args.size} --rounds {args.rounds} --markdown`\n"
        )
        print("Machine: " + "; ".join(f"{key} {value}" for key, value in machine_info().items()) + "\n")
        print(
            f"**Search latency by analyzer (generated, {args.size:,} tools; {len(queries)} queries × "
            f"{args.rounds} rounds each, warm, limit 8)**\n"
        )
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print(f"\nenhanced p95 / reference p95: {ratio:.2f}× (goal ≤ 1.3×)")
        return
    for row in (columns, *rows):
        print("  ".join(cell.rjust(14) for cell in row))
    print(f"enhanced p95 / reference p95: {ratio:.2f}x")


if __name__ == "__main__":
    main()
