"""How much one session can make the database grow through learning.

    python -m bench.learning_growth [--words 250000] [--calls 5,757]

The real MCP catalog (``../shared/data/mcp-catalog.jsonl``) in a fresh SQLite file, learning
on. One session searches a request of ``--words`` distinct words (about 1.8 MB at 250,000) with
the catalog's own words among them, then records a call of each of the first N tools the
catalog holds (N from ``--calls``; 757 is every tool, whether the search showed it or not).
Reported: the file's growth through the search (the log keeps the request) and through the
calls (what learning adds: credits, sums, journal), with the learned rows, after a checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from discovery import ToolIndex

ROOT = Path(__file__).resolve().parent.parent
MCP_CATALOG = ROOT / ".." / "shared" / "data" / "mcp-catalog.jsonl"


def file_size(path: Path) -> int:
    """The database's size once its write-ahead log is written back."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def learned_rows(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as connection:
        return {
            table: int(connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in ("learned_credits", "learned_terms", "learned_journal")
        }


def one_session(workdir: Path, words: int, calls: int) -> None:
    path = workdir / f"growth-{calls}.db"
    records = [json.loads(line) for line in MCP_CATALOG.read_text().splitlines() if line.strip()]
    with ToolIndex.open(str(path), learning=True) as index:
        index.upsert_tools(records)
        names = [record["name"] for record in records][:calls]
        start = file_size(path)
        session = index.session("growth", discovery_mode="all")
        request = " ".join(["send", "message", "file", *(f"w{i:06d}" for i in range(words))])
        started = time.perf_counter()
        session.search_tool.execute("c1", {"query": request, "limit": 5})
        searched_s = time.perf_counter() - started
        searched = file_size(path)
        started = time.perf_counter()
        for name in names:
            session.record_call(name)
        called_s = time.perf_counter() - started
        called = file_size(path)
    rows = learned_rows(path)
    print(
        f"{len(request.encode()) / 1e6:.2f} MB request, {calls} calls: "
        f"search +{(searched - start) / 1e6:.2f} MB "
        f"({searched_s:.1f} s), calls +{(called - searched) / 1e3:.0f} KB ({called_s:.1f} s), "
        f"learned rows {rows}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--words", type=int, default=250_000)
    parser.add_argument("--calls", default="5,757")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tool-index-growth-") as directory:
        for calls in (int(n) for n in args.calls.split(",")):
            one_session(Path(directory), args.words, calls)


if __name__ == "__main__":
    main()
