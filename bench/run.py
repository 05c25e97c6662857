"""The benchmark harness: every engine on every catalog, side by side, in one run.

    python -m bench.run --sizes 1000,10000,100000 [--write-history]

For each catalog (generated ones of the given sizes, plus the real 757-tool catalog in
``../shared/data`` when it is there) and each engine, two fresh processes: one imports the
catalog and times one-tool upserts and removals; one opens the index cold and answers the
fixed query set. Each engine runs alone, so its peak RSS is its own. Then, untimed, every engine
answers MetaTool's labelled queries (``bench.quality``) when they are there. Prints rich tables, writes
``bench/results.md`` and, with ``--write-history``, the section between ``<!-- bench:start -->``
and ``<!-- bench:end -->`` of ``bench/history.md``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import quality, report
from bench.engines import ENGINES, SERVER_ENGINES, default_engines
from bench.generate import DEFAULT_SEED, generate_catalog, write_jsonl
from bench.peers import PG_SERVER_VARIABLE, read_catalog
from bench.queries import query_set

ROOT = Path(__file__).resolve().parent.parent
REAL_CATALOG = ROOT / ".." / "shared" / "data" / "mcp-catalog.jsonl"
NOTES = (
    "Times are wall-clock on a warm OS page cache. Import = building the index from records "
    "already in memory: tool-index validates raw dicts inside `upsert_tools`; the peers get "
    "validated records (FTS5 pays only for its SQL), so the import ratio is strict.",
    "Cold start = a new process: imports of the engine's libraries, open, first answer "
    "(interpreter start excluded; every package loads byte-compiled, ours compiled before the "
    "run as installing it would). `memory` reads the catalog JSONL, validates, tokenizes and "
    "builds postings: what a host without a persistent index does at every session start.",
    "Latency = `search(query, 8)` over the fixed query set (`bench/queries.py`: short/long, "
    "common/rare), after one warm-up pass; rounds stop early when an engine exceeds its budget. "
    "`1st pass` = that warm-up pass: each query's first time in the process (tool-index keeps "
    "the postings of queried terms in memory, so this is its cold-cache latency).",
    "`fts5` indexes the raw fields with FTS5's unicode61 tokenizer, which does not split "
    "camelCase (`createIssue` is one token) and folds differently; queries are our tokens, "
    "quoted and OR-ed, ranked by `bm25(tools_fts, 6, 4, 4, 2, 2, 1)`. `fts5-ourtok` indexes the "
    "fields pre-split by our tokenizer, so it sees our tokens. Both keep whole records in a "
    "`tools` table, as tool-index does.",
    "`rank_bm25` (BM25Plus) and `bm25s` (method bm25+) use k1 1.2, b 0.75, δ 1 over token lists "
    "with each field's tokens repeated by its weight; their idf formulas differ from ours and "
    "they add δ·idf to documents without the term. They cannot update in place (upsert —).",
    "Upsert = `upsert_tools([one record])` committed: new tools and changed descriptions, "
    "median; remove = `remove_tools([name])`, median.",
    "`session·50 execute` = `search_tool_bm25.execute()` (limit 8) in a mode-`all` session "
    "whose active set is 50 catalog tools plus the search tool; it persists the selection and "
    "the call log (a write), and `set_active` restores the 50 after each call, untimed; timed "
    "after one untimed pass, like the rest. "
    "`session·50 rank` = the read part alone: `session.preview(query, 8)`. "
    "Each session call is timed beside a read-only search of the same query "
    "(`read-only beside …`), first and second in turn, and the session targets compare with those.",
    "Peak RSS = the process's VmHWM: import process and serving process separately. `RSS import` "
    "is the peak, then (+) how much the import added to a process already holding the parsed "
    "catalog. The "
    "peers' import processes load our library to validate records; their serving processes "
    "load only our tokenizer module.",
    "Retrieval quality = `bench.quality`: every engine indexes MetaTool's 199 tools (a name and a "
    "description each) and answers its 21,060 model-written queries with a top 8; Recall@k is the "
    "share of queries with a labelled tool in the first k, MRR@8 the mean of 1/rank of the first. "
    "Our ranking is contract §4's, fixed, so this shows how it compares, not something tuned.",
    "Top-8 overlap = the mean share of our ranking's top 8 (the `memory` engine, which runs "
    "our scoring code) that an engine also returns, over the query set: 100% for tool-index "
    "means the same tools; the peers show how much their tokenization and idf change results.",
)


LARGEST_CATALOG = {"rank_bm25": 300_000, "memory": 300_000}
"""Engines skipped above a catalog size, and said so in the table: ``rank_bm25`` scores every
document in Python for each query term (hours of query passes at a million tools), and
``memory`` rebuilds its whole index in every serving process."""


def skipped(engine: str, size: int) -> str | None:
    """Why ``engine`` is not run on a catalog of ``size`` tools, or ``None``."""
    largest = LARGEST_CATALOG.get(engine)
    if largest is None or size <= largest:
        return None
    return f"skipped above {largest:,} tools (would take hours here)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="comma-separated generated catalog sizes"
    )
    parser.add_argument(
        "--engines",
        default=",".join(default_engines()),
        help=f"comma-separated subset of {','.join(ENGINES + SERVER_ENGINES)} "
        f"(tool-index-pg: on the server ${PG_SERVER_VARIABLE} names; by default when it is set)",
    )
    parser.add_argument(
        "--no-real", action="store_true", help="skip the real data: the MCP catalog and MetaTool's queries"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--rounds", type=int, default=5, help="passes over the query set")
    parser.add_argument(
        "--budget", type=float, default=60.0, help="seconds of query passes per engine before stopping early"
    )
    parser.add_argument("--upserts", type=int, default=20, help="one-tool upserts to time")
    parser.add_argument("--workdir", type=Path, help="keep databases here (default: temp)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results.md")
    parser.add_argument("--write-history", action="store_true")
    parser.add_argument("--history", type=Path, default=ROOT / "bench" / "history.md")
    return parser.parse_args(argv)


def catalogs(args: argparse.Namespace, workdir: Path) -> list[tuple[str, Path, list[Any]]]:
    """``(title, JSONL path, records)`` of every catalog in this run."""
    found: list[tuple[str, Path, list[Any]]] = []
    if not args.no_real and REAL_CATALOG.exists():
        path = REAL_CATALOG.resolve()
        records = read_catalog(path)
        found.append((f"real MCP catalog ({len(records)} tools)", path, records))
    for size in (int(s) for s in args.sizes.split(",") if s.strip()):
        path = workdir / f"generated-{size}.jsonl"
        records = generate_catalog(size, args.seed)
        write_jsonl(records, str(path))
        found.append((f"generated, {size:,} tools", path, records))
    return found


def write_plan(args: argparse.Namespace, directory: Path, path: Path, records: list[dict[str, Any]]) -> Path:
    """The worker's instructions: queries, the 50 session tools, the upsert records."""
    rng = random.Random(args.seed)
    names = [r["name"] for r in records if r["name"].startswith("mcp__")]
    count = min(args.upserts, len(records))
    originals = rng.sample(records, count)
    updated = [
        {**r, "description": f"{r.get('description') or ''} Updated by the benchmark."} for r in originals
    ]
    new = [
        {
            "name": f"mcp__bench_upsert__tool_{i}",
            "label": f"bench_upsert/tool_{i}",
            "description": f"Benchmark tool {i} that exports a quarterly ledger report.",
            "server_name": "bench_upsert",
            "mcp_tool_name": f"tool_{i}",
            "input_schema": {"type": "object", "properties": {"ledger_id": {"type": "string"}}},
        }
        for i in range(count)
    ]
    plan = {
        "size": len(records),
        "catalog": str(path),
        "workdir": str(directory),
        "queries": [{"text": q.text, "kind": q.kind} for q in query_set()],
        "session_active": rng.sample(names, min(50, len(names))),
        "new_records": new,
        "updated_records": updated,
        "original_records": originals,
        "rounds": args.rounds,
        "budget_s": args.budget,
        "limit": 8,
    }
    plan_path = directory / "plan.json"
    plan_path.write_text(json.dumps(plan, ensure_ascii=False), encoding="utf-8")
    return plan_path


def compile_sources() -> None:
    """Byte-compile the project's packages, as installing a package does. An editable checkout
    in an environment that forbids writing bytecode (``PYTHONDONTWRITEBYTECODE``) would
    otherwise compile them in every worker, and cold starts would time the compiler (some
    30 ms for ``discovery`` and ``store``) where the peers' libraries load compiled."""
    for package in ("discovery", "store", "bench"):
        compileall.compile_dir(ROOT / package, quiet=1)


def run_worker(phase: str, engine: str, plan: Path) -> dict[str, Any]:
    out = plan.parent / f"{engine}-{phase}.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.worker", phase, engine, str(plan), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit code " + str(done.returncode)])[-1]
        return {"error": last[:200]}
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def rich_table(title: str, rows: Sequence[report.Row]) -> Table:
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(report.COLUMNS):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*report.cells(row))
    return table


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    engines = [e for e in args.engines.split(",") if e]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tool-index-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, list[report.Row]]] = []
    machine = report.machine_info()  # before the run: its load average, and a clean tree
    compile_sources()
    try:
        for title, path, records in catalogs(args, workdir):
            directory = workdir / f"catalog-{len(results)}"
            directory.mkdir(exist_ok=True)
            plan = write_plan(args, directory, path, records)
            rows: list[report.Row] = []
            for engine in engines:
                reason = skipped(engine, len(records))
                if reason is not None:
                    console.print(f"{title}: {engine} {reason}")
                    rows.extend(report.make_rows(title, engine, {"error": reason, "tools": len(records)}, {}))
                    continue
                with console.status(f"{title}: {engine}"):
                    build = run_worker("build", engine, plan)
                    serve = run_worker("serve", engine, plan) if "error" not in build else {}
                rows.extend(report.make_rows(title, engine, build, serve))
            report.set_overlaps(rows)
            console.print(rich_table(title, rows))
            results.append((title, rows))
        quality_lines = measure_quality(args, engines, workdir / "quality", console)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    finish(args, argv, results, machine, console, quality_lines)


def measure_quality(
    args: argparse.Namespace, engines: Sequence[str], workdir: Path, console: Console
) -> list[str]:
    """Recall on MetaTool's labelled queries for every engine (``bench.quality``), as markdown;
    nothing with ``--no-real`` or without the data. Untimed, so it runs after the timed work."""
    if args.no_real or not quality.available():
        return []
    rows = []
    for engine in engines:
        with console.status(f"MetaTool: {engine}"):
            rows.append(quality.evaluate(engine, quality.METATOOL, workdir / engine))
    heading = quality.title()
    console.print(quality.rich_table(rows, heading))
    return quality.markdown(rows, heading)


def finish(
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    results: list[tuple[str, list[report.Row]]],
    machine: dict[str, str],
    console: Console,
    quality_lines: Sequence[str],
) -> None:
    target_table = Table(title="Targets", title_justify="left")
    for column in ("catalog", "target", "measured", "met"):
        target_table.add_column(column)
    for title, rows in results:
        for check in report.checks(title, rows):
            target_table.add_row(
                check.dataset, check.target, check.measured, {True: "yes", False: "NO", None: "n/a"}[check.ok]
            )
    console.print(target_table)
    command = " ".join(["python -m bench.run", *(sys.argv[1:] if argv is None else argv)])
    text = report.markdown(results, machine, command, NOTES, quality=quality_lines)
    args.results.write_text("# Benchmark results\n\n" + text, encoding="utf-8")
    console.print(f"wrote {args.results}")
    if args.write_history:
        summary = report.markdown(results, machine, command, NOTES, quality=quality_lines, detailed=False)
        report.replace_section(args.history, summary)
        console.print(f"updated {args.history}")


if __name__ == "__main__":
    main()
