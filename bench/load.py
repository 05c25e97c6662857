"""The load run: many processes searching one index at once.

    python -m bench.load [--db URL] [--size 10000] [--procs 8] [--seconds 60] [--mode search]

The catalog (generated, ``--size`` tools) is upserted first (unchanged tools are not rewritten, so
a second run on the same database starts at once). Then ``--procs`` fresh processes each open the
index, wait for the others, and for ``--seconds`` run random queries from the fixed set:
``--mode search`` is the read-only ``ToolIndex.search``; ``--mode session`` runs
``search_tool_bm25`` in a session per process (each call a write: selection and call log), with a
reset every ``--reset-every`` calls so the corpus does not run dry. Reports throughput, latency
percentiles and errors, per process and in total. Without ``--db``, a SQLite file in a temporary
directory; pass a PostgreSQL URL (``postgresql+psycopg://...``) to load a server.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.generate import DEFAULT_SEED, generate_catalog
from bench.queries import query_set
from bench.report import format_ms, percentile


@dataclass
class WorkerResult:
    worker: int
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_sample: str = ""


@dataclass(frozen=True)
class LoadConfig:
    url: str
    seconds: float
    mode: str
    limit: int
    seed: int
    reset_every: int


def _one_call(index: Any, session: Any, config: LoadConfig, text: str, call_no: int) -> None:
    if session is None:
        index.search(text, limit=config.limit)
    else:
        session.search_tool.execute(f"load-{call_no}", {"query": text, "limit": config.limit})


def worker(number: int, config: LoadConfig, barrier: Any, results: Any) -> None:
    """One process: open, wait for all, search until the deadline, send the samples back."""
    from discovery import ToolIndex

    result = WorkerResult(number)
    texts = [query.text for query in query_set()]
    rng = random.Random(config.seed + number)
    index = ToolIndex.open(config.url)
    session = None
    if config.mode == "session":
        session = index.session(f"load-{number}-{config.seed}-{time.time_ns()}", discovery_mode="all")
    barrier.wait()
    deadline = time.perf_counter() + config.seconds
    call_no = 0
    while (start := time.perf_counter()) < deadline:
        try:
            _one_call(index, session, config, rng.choice(texts), call_no)
            result.latencies.append(time.perf_counter() - start)
            if session is not None and call_no % config.reset_every == config.reset_every - 1:
                session.reset()
        except Exception as exc:  # noqa: BLE001 - a load run counts every failure, whatever it is
            result.errors[type(exc).__name__] += 1
            result.error_sample = result.error_sample or f"{type(exc).__name__}: {exc}"[:300]
        call_no += 1
    index.close()
    results.put(result)


def prepare_catalog(url: str, size: int, seed: int) -> tuple[str, dict[str, int]]:
    """Upsert the generated catalog; returns the displayable URL and the import counts."""
    from discovery import ToolIndex

    with ToolIndex.open(url) as index:
        report = index.upsert_tools(generate_catalog(size, seed))
        return index.url, report.counts()


def run(config: LoadConfig, procs: int) -> list[WorkerResult]:
    context = mp.get_context("spawn")
    barrier = context.Barrier(procs)
    results = context.Queue()
    processes = [context.Process(target=worker, args=(i, config, barrier, results)) for i in range(procs)]
    for process in processes:
        process.start()
    collected = [results.get() for _ in processes]
    for process in processes:
        process.join()
    return sorted(collected, key=lambda r: r.worker)


def _row(label: str, latencies: Sequence[float], errors: int, seconds: float) -> list[str]:
    if not latencies:
        return [label, "0", "0", "—", "—", str(errors)]
    ordered = sorted(latencies)
    return [
        label,
        f"{len(ordered):,}",
        f"{len(ordered) / seconds:,.0f}",
        format_ms(percentile(ordered, 50)),
        format_ms(percentile(ordered, 99)),
        str(errors),
    ]


def table(results: Sequence[WorkerResult], seconds: float, title: str) -> Table:
    out = Table(title=title, title_justify="left")
    for column in ("process", "calls", "calls/s", "p50 ms", "p99 ms", "errors"):
        out.add_column(column, justify="left" if column == "process" else "right")
    for result in results:
        out.add_row(*_row(str(result.worker), result.latencies, sum(result.errors.values()), seconds))
    every = [s for r in results for s in r.latencies]
    out.add_row(*_row("all", every, sum(sum(r.errors.values()) for r in results), seconds))
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--db", help="SQLAlchemy URL (default: SQLite in a temp directory)")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--mode", choices=("search", "session"), default="search")
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--reset-every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    console = Console()
    workdir = None if args.db else Path(tempfile.mkdtemp(prefix="tool-index-load-"))
    url = args.db or f"sqlite:///{workdir}/tools.db"
    try:
        with console.status(f"importing {args.size:,} tools"):
            shown, counts = prepare_catalog(url, args.size, args.seed)
        console.print(f"{shown}: {counts}")
        config = LoadConfig(url, args.seconds, args.mode, args.limit, args.seed, args.reset_every)
        with console.status(f"{args.procs} processes × {args.seconds:g} s ({args.mode})"):
            results = run(config, args.procs)
        title = f"load: {args.procs} processes, {args.seconds:g} s, mode {args.mode}, {args.size:,} tools"
        console.print(table(results, args.seconds, title))
        for result in results:
            if result.error_sample:
                console.print(f"process {result.worker}: {dict(result.errors)}; {result.error_sample}")
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
