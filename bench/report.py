"""Turn raw worker results into rows, target checks, rich tables and the markdown report."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sqlite3
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

START_MARKER = "<!-- bench:start -->"
END_MARKER = "<!-- bench:end -->"
KINDS = ("short-common", "short-rare", "long-common", "long-rare")


def percentile(samples: Sequence[float], pct: int) -> float:
    """The ``pct``-th percentile (inclusive method); the sample itself when there is one."""
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[pct - 1]


@dataclass
class Row:
    """One engine on one catalog; times in seconds, sizes in bytes, RSS in MiB."""

    dataset: str
    engine: str
    tools: int
    build_s: float | None = None
    size_bytes: int | None = None
    upsert_s: list[float] = field(default_factory=list)
    remove_s: list[float] = field(default_factory=list)
    cold_s: float | None = None
    cold_parts_s: dict[str, float] = field(default_factory=dict)
    latency_s: list[float] = field(default_factory=list)
    first_pass_s: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    rss_build_mb: float | None = None
    rss_before_build_mb: float | None = None
    rss_serve_mb: float | None = None
    answers: list[list[str]] = field(default_factory=list)
    overlap: float | None = None
    """Mean share of the reference's top-k (``memory``: our ranking) this engine also returns."""
    error: str | None = None

    def latency(self, pct: int) -> float | None:
        return percentile(self.latency_s, pct) if self.latency_s else None

    def kind_p50(self, kind: str) -> float | None:
        rounds = len(self.latency_s) // max(1, len(self.kinds))
        samples = [
            s
            for i, s in enumerate(self.latency_s[: rounds * len(self.kinds)])
            if self.kinds[i % len(self.kinds)] == kind
        ]
        return statistics.median(samples) if samples else None


def make_rows(dataset: str, engine: str, build: dict[str, Any], serve: dict[str, Any]) -> list[Row]:
    """The engine's row, plus a session row for results that carry session latencies."""
    row = Row(
        dataset=dataset,
        engine=engine,
        tools=build.get("tools", 0),
        build_s=build.get("build_s"),
        size_bytes=build.get("size_bytes"),
        upsert_s=build.get("upsert_s", []),
        remove_s=build.get("remove_s", []),
        cold_s=serve.get("cold_s"),
        cold_parts_s=serve.get("cold_parts_s", {}),
        latency_s=serve.get("latency_s", []),
        first_pass_s=serve.get("first_pass_s", []),
        kinds=serve.get("kinds", []),
        rss_build_mb=build.get("rss_mb"),
        rss_before_build_mb=build.get("rss_before_mb"),
        rss_serve_mb=serve.get("rss_mb"),
        answers=serve.get("answers", []),
        error=build.get("error") or serve.get("error"),
    )
    rows = [row]
    for path, samples in serve.get("session_latency_s", {}).items():
        rows.append(
            Row(
                dataset=dataset,
                engine=f"{engine} session·50 {path}",
                tools=row.tools,
                latency_s=samples,
                kinds=row.kinds,
            )
        )
    return rows


def set_overlaps(rows: Sequence[Row], reference: str = "memory") -> None:
    """Fill ``overlap`` of each row against the reference engine's answers."""
    ref = next((r for r in rows if r.engine == reference and r.answers), None)
    if ref is None:
        return
    for row in rows:
        if not row.answers:
            continue
        shares = [
            len(set(got) & set(want)) / len(want)
            for got, want in zip(row.answers, ref.answers, strict=True)
            if want
        ]
        row.overlap = sum(shares) / len(shares) if shares else None


def format_ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    ms = seconds * 1000
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def _median(samples: Sequence[float]) -> float | None:
    return statistics.median(samples) if samples else None


COLUMNS = (
    "engine",
    "import s",
    "tools/s",
    "bytes/tool",
    "cold start ms",
    "upsert ms",
    "remove ms",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "1st pass p50 ms",
    "RSS import MB",
    "RSS serve MB",
    "top-8 overlap",
)


def _rss_growth(row: Row) -> str:
    """Peak RSS of the import, and how much of it the import added to the loaded records."""
    if row.rss_build_mb is None:
        return "—"
    if row.rss_before_build_mb is None:
        return _num(row.rss_build_mb)
    return f"{row.rss_build_mb:,.0f} (+{row.rss_build_mb - row.rss_before_build_mb:,.0f})"


def cells(row: Row) -> list[str]:
    if row.error:
        return [row.engine, f"error: {row.error}", *[""] * (len(COLUMNS) - 2)]
    rate = row.tools / row.build_s if row.build_s else None
    per_tool = row.size_bytes / row.tools if row.size_bytes and row.tools else None
    return [
        row.engine,
        _num(row.build_s, "{:.2f}"),
        _num(rate),
        _num(per_tool),
        format_ms(row.cold_s),
        format_ms(_median(row.upsert_s)),
        format_ms(_median(row.remove_s)),
        format_ms(row.latency(50)),
        format_ms(row.latency(95)),
        format_ms(row.latency(99)),
        format_ms(_median(row.first_pass_s)),
        _rss_growth(row),
        _num(row.rss_serve_mb),
        _num(row.overlap, "{:.0%}"),
    ]


@dataclass(frozen=True)
class Check:
    dataset: str
    target: str
    measured: str
    ok: bool | None


def _find(rows: Sequence[Row], engine: str) -> Row | None:
    return next((r for r in rows if r.engine == engine and not r.error), None)


def _ratio_check(dataset: str, target: str, ours: float | None, peer: float | None, limit: float) -> Check:
    if ours is None or peer is None or peer == 0:
        return Check(dataset, target, "n/a", None)
    ratio = ours / peer
    return Check(dataset, target, f"{ratio:.2f}× (limit {limit:g}×)", ratio <= limit)


def checks(dataset: str, rows: Sequence[Row]) -> list[Check]:
    """The issue's targets, as ratios within this run (they are set for 100k tools)."""
    ours, fts5 = _find(rows, "tool-index"), _find(rows, "fts5")
    bm25s, memory = _find(rows, "bm25s"), _find(rows, "memory")
    session = _find(rows, "tool-index session·50 execute")
    session_rank = _find(rows, "tool-index session·50 rank")
    # Each session path is compared with the read-only searches timed beside it.
    beside_execute = _find(rows, "tool-index session·50 read-only beside execute")
    beside_rank = _find(rows, "tool-index session·50 read-only beside rank")
    if ours is None:
        return []

    def lat(row: Row | None, pct: int) -> float | None:
        return row.latency(pct) if row else None

    upsert = _median(ours.upsert_s)
    return [
        _ratio_check(dataset, "query p50 ≤ FTS5", lat(ours, 50), lat(fts5, 50), 1),
        _ratio_check(dataset, "query p95 ≤ FTS5", lat(ours, 95), lat(fts5, 95), 1),
        _ratio_check(dataset, "query p95 ≤ 3× bm25s", lat(ours, 95), lat(bm25s, 95), 3),
        _ratio_check(
            dataset,
            "cold start ≤ 1/20 in-memory rebuild",
            ours.cold_s,
            memory.cold_s if memory else None,
            1 / 20,
        ),
        Check(
            dataset,
            "one-tool upsert ≤ 20 ms",
            f"{format_ms(upsert)} ms",
            None if upsert is None else upsert <= 0.020,
        ),
        _ratio_check(dataset, "full import ≤ 5× FTS5 build", ours.build_s, fts5.build_s if fts5 else None, 5),
        Check(
            dataset,
            "peak RSS serving ≤ 200 MB",
            f"{_num(ours.rss_serve_mb)} MB",
            None if ours.rss_serve_mb is None else ours.rss_serve_mb <= 200,
        ),
        _ratio_check(
            dataset,
            "session execute (50 active) p50 ≤ 1.2× read-only",
            lat(session, 50),
            lat(beside_execute, 50),
            1.2,
        ),
        _ratio_check(
            dataset,
            "session execute (50 active) p95 ≤ 1.2× read-only",
            lat(session, 95),
            lat(beside_execute, 95),
            1.2,
        ),
        _ratio_check(
            dataset,
            "session rank only (50 active) p50 ≤ 1.2× read-only",
            lat(session_rank, 50),
            lat(beside_rank, 50),
            1.2,
        ),
    ]


def machine_info() -> dict[str, str]:
    import psutil

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "CPU": cpu,
        "cores": f"{os.cpu_count()} logical, {psutil.cpu_count(logical=False)} physical",
        "RAM": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "SQLite": sqlite3.sqlite_version,
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
    }


WRITTEN = ("bench/history.md", "bench/results.md")
"""What a run writes (the default paths): a run right after another still measures its commit."""


def _commit() -> str:
    """The checked-out commit, with ``+changes`` when the tree differs from it (other than in
    the results a previous run wrote)."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{p}" for p in WRITTEN))
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read only: never refresh the index
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def _md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(cells_) + " |" for cells_ in body)
    return lines


def _mark(ok: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "n/a"}[ok]


def markdown(
    datasets: Sequence[tuple[str, Sequence[Row]]],
    machine: dict[str, str],
    command: str,
    notes: Sequence[str],
    *,
    quality: Sequence[str] = (),
    detailed: bool = True,
) -> str:
    """The report: machine, one table per catalog, targets, the ``quality`` lines (markdown, from
    ``bench.quality``); when ``detailed``, also latency by query kind, the cold-start breakdown
    and the notes on method."""
    lines = [f"Command: `{command}`", "", "Machine: " + "; ".join(f"{k} {v}" for k, v in machine.items()), ""]
    for title, rows in datasets:
        lines += [f"**{title}**", "", *_md_table(COLUMNS, [cells(r) for r in rows]), ""]
    target_rows = [
        [c.dataset, c.target, c.measured, _mark(c.ok)]
        for title, rows in datasets
        for c in checks(title, rows)
    ]
    if target_rows:
        lines += [
            "**Targets** (set for 100k tools on 2 cores; smaller catalogs for reference)",
            "",
            *_md_table(("catalog", "target", "measured", "met"), target_rows),
            "",
        ]
    lines += quality
    if not detailed:
        return "\n".join(
            [
                *lines,
                "Method, latency by query kind and the cold-start breakdown: "
                "`bench/results.md`; how to run: `bench/README.md`.",
                "",
            ]
        )
    kind_rows = [
        [title, r.engine, *(format_ms(r.kind_p50(k)) for k in KINDS)]
        for title, rows in datasets
        for r in rows
        if r.latency_s
    ]
    lines += ["**p50 ms by query kind**", "", *_md_table(("catalog", "engine", *KINDS), kind_rows), ""]
    parts = ("import", "open", "first answer")
    cold_rows = [
        [title, r.engine, format_ms(r.cold_s), *(format_ms(r.cold_parts_s.get(p)) for p in parts)]
        for title, rows in datasets
        for r in rows
        if r.cold_parts_s
    ]
    lines += ["**Cold start, ms**", "", *_md_table(("catalog", "engine", "total", *parts), cold_rows), ""]
    lines += ["Notes:", "", *(f"- {note}" for note in notes), ""]
    return "\n".join(lines)


def replace_section(document: Path, section: str) -> None:
    """Put ``section`` between the bench markers of ``document`` (appending them when absent)."""
    text = document.read_text(encoding="utf-8") if document.exists() else ""
    block = f"{START_MARKER}\n{section.rstrip()}\n{END_MARKER}"
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start != -1 and end > start:
        text = text[:start] + block + text[end + len(END_MARKER) :]
    else:
        text = text.rstrip() + ("\n\n" if text else "") + "## Benchmarks\n\n" + block + "\n"
    document.write_text(text, encoding="utf-8")
