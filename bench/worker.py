"""One measurement phase of one engine, run by ``bench.run`` in its own process.

    python -m bench.worker build|serve ENGINE PLAN.json RESULT.json

``build``: import the catalog (timed), database size, one-tool upserts and removals, peak RSS.
``serve``: a fresh process opens the index and answers the first query (cold start, timed from
before the engine's imports), then one warm-up pass over the fixed query set (timed apart: caches
are cold; its answers are kept, to compare rankings), then the query set for some rounds (latencies), then for
``tool-index`` the same queries inside a session with 50 active tools; peak RSS of the process.

Peak RSS is the kernel's high-water mark for this process (``VmHWM``), not ``ru_maxrss``, which
after a fork can report the parent's size.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB."""
    peak = _status_mb("VmHWM:")
    if peak is not None:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float | None:
    """This process's resident set size now, in MiB (Linux only)."""
    return _status_mb("VmRSS:")


def directory_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


SESSION_PATHS = ("execute", "read-only beside execute", "rank", "read-only beside rank")
"""The session measurements, each a row of the table (``tool-index session·50 <path>``)."""


def timed(action: Callable[[], object]) -> float:
    """Seconds ``action`` took."""
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def build_phase(engine: str, plan: dict[str, Any], directory: Path) -> dict[str, Any]:
    from bench.engines import make_peer
    from bench.peers import read_catalog

    peer = make_peer(engine, directory, Path(plan["catalog"]))
    raw = read_catalog(Path(plan["catalog"]))
    prepared = peer.prepare(raw)
    rss_before = rss_mb()
    start = time.perf_counter()
    peer.build(prepared)
    build_s = time.perf_counter() - start
    del prepared, raw
    result: dict[str, Any] = {"tools": plan["size"], "build_s": build_s, "rss_before_mb": rss_before}
    if peer.persistent:
        peer.close()
        measure = getattr(peer, "size_bytes", None)
        result["size_bytes"] = measure() if measure is not None else directory_bytes(directory)
        peer.open()
    if peer.incremental:
        new, updated = plan["new_records"], plan["updated_records"]
        result["upsert_s"] = [timed(partial(peer.upsert, r)) for r in [*new, *updated]]
        result["remove_s"] = [timed(partial(peer.remove, r["name"])) for r in new]
        for record in plan["original_records"]:
            peer.upsert(record)
    peer.close()
    result["rss_mb"] = peak_rss_mb()
    return result


def query_rounds(
    search: Callable[[str], object], texts: Sequence[str], rounds: int, budget_s: float
) -> list[float]:
    """Latencies of ``rounds`` passes over ``texts`` (at least one; fewer when over budget)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + budget_s
    for _ in range(rounds):
        latencies.extend(timed(partial(search, text)) for text in texts)
        if time.perf_counter() > deadline:
            break
    return latencies


def session_latencies(index: Any, plan: dict[str, Any], texts: Sequence[str]) -> dict[str, Any]:
    """Searches in a session with 50 active tools: ``session.preview()``, the ranking of the
    session's corpus without activating or logging; and ``search_tool_bm25.execute()`` (ranks,
    activates, logs: a write), with the active set put back (untimed) after each call so every
    call ranks the same corpus. Each is timed beside a read-only search of the same query, and
    those read-only searches are kept too: the ratios compare samples taken side by side, so a
    machine that slows down between two phases does not move them. Which of the pair runs first
    alternates from query to query: the second runs on the CPU caches the first just warmed
    with the same postings (worth some 0.04 ms at 100k tools), and neither side gets that always.
    """
    active = [*plan["session_active"], "search_tool_bm25"]
    session = index.session("bench-50-active", discovery_mode="all")
    session.set_active(active)
    tool = session.search_tool
    limit = plan["limit"]
    samples: dict[str, list[float]] = {key: [] for key in SESSION_PATHS}

    def read_only(text: str) -> object:
        return index.search(text, limit=limit)

    def rank_only(text: str) -> object:
        return session.preview(text, limit)

    # Ranking only first, with nothing written in between: one untimed pass, then timed passes.
    for text in texts:
        read_only(text)
        rank_only(text)
    deadline = time.perf_counter() + plan["budget_s"]
    for round_no in range(plan["rounds"]):
        for i, text in enumerate(texts):
            pair = [("read-only beside rank", partial(read_only, text)), ("rank", partial(rank_only, text))]
            for key, action in pair if (round_no + i) % 2 == 0 else reversed(pair):
                samples[key].append(timed(action))
        if time.perf_counter() > deadline:
            break
    for i, text in enumerate(texts):  # one untimed pass, as for every other measurement
        tool.execute(f"bench-warm-{i}", {"query": text, "limit": limit})
        session.set_active(active)
    deadline = time.perf_counter() + plan["budget_s"]
    for round_no in range(plan["rounds"]):
        for i, text in enumerate(texts):
            params = {"query": text, "limit": limit}
            execute = partial(tool.execute, f"bench-{round_no}-{i}", params)
            if (round_no + i) % 2 == 0:
                samples["read-only beside execute"].append(timed(partial(read_only, text)))
                samples["execute"].append(timed(execute))
                session.set_active(active)
            else:
                samples["execute"].append(timed(execute))
                session.set_active(active)
                samples["read-only beside execute"].append(timed(partial(read_only, text)))
        if time.perf_counter() > deadline:
            break
    return samples


def serve_phase(engine: str, plan: dict[str, Any], directory: Path) -> dict[str, Any]:
    start = time.perf_counter()
    from bench.engines import make_peer
    from bench.peers import Hit, ToolIndexPeer

    texts = [query["text"] for query in plan["queries"]]
    limit = plan["limit"]
    peer = make_peer(engine, directory, Path(plan["catalog"]))
    imported = time.perf_counter()
    peer.open()
    opened = time.perf_counter()
    first = peer.search(texts[0], limit)
    answered = time.perf_counter()
    answers: list[list[str]] = []

    def search(text: str) -> list[Hit]:
        return peer.search(text, limit)

    def search_and_keep(text: str) -> None:
        answers.append([name for name, _ in search(text)])

    first_pass = [timed(partial(search_and_keep, text)) for text in texts]
    latencies = query_rounds(search, texts, plan["rounds"], plan["budget_s"])
    result: dict[str, Any] = {
        "cold_s": answered - start,
        "cold_parts_s": {
            "import": imported - start,
            "open": opened - imported,
            "first answer": answered - opened,
        },
        "first_hits": len(first),
        "answers": answers,
        "first_pass_s": first_pass,
        "latency_s": latencies,
        "kinds": [query["kind"] for query in plan["queries"]],
    }
    if isinstance(peer, ToolIndexPeer) and plan.get("session_active"):
        result["session_latency_s"] = session_latencies(peer.index, plan, texts)
    peer.close()
    result["rss_mb"] = peak_rss_mb()
    return result


def main(argv: Sequence[str]) -> None:
    phase, engine, plan_path, out_path = argv
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    directory = Path(plan["workdir"]) / engine
    if phase == "build":  # from nothing: a kept ``--workdir`` holds the last run's database
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    run = build_phase if phase == "build" else serve_phase
    result = run(engine, plan, directory)
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
