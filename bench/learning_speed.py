"""What the learned field costs a search: p50 and p95 at 100k tools, learning off and on, in one run.

    python -m bench.learning_speed [--size 100000] [--taught 0.2] [--sessions 5] [--rounds 20]

The catalog is ``bench.generate``'s. The learned field is of the size heavy use would give: a
share of the tools (``--taught``) each taught by ``--sessions`` sessions, each request 3 to 8
words drawn as the catalog's descriptions draw theirs (so common request words are learned by
thousands of tools, as common description words are held by thousands). It is written straight
into the learned tables (what the rule would have stored for such logs), since only its size
matters here. The fixed query set (``bench.queries``) is then searched ``--rounds`` times with
learning off and on, alternately, after a warm-up round each, with the limit an agent uses (8).
The other rows put a real call before every search: a new session searches a request of two
words and records an ok call of a taught tool, which with learning on credits those words to it;
only the search after it is timed. The call is made by another process (another agent sharing
the database: this process catches up from the journal) or by this one (a gateway serving many
sessions: the call's own work leaves this process's caches colder too). Learning off, the same
calls are logged and teach nothing: each pair of rows shows what learning adds to a search.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.generate import generate_catalog, vocabulary, word_weights
from bench.queries import query_set
from discovery import ToolIndex

LIMIT = 8


def learned_credits(
    names: list[str], share: float, sessions: int, seed: int
) -> list[tuple[str, str, str, str]]:
    """Credits (identity, session, term, tool) of ``sessions`` sessions of the local identity, as a
    single-user host's (every learned pair is then its own, none shared)."""
    words, real = vocabulary()
    weights = word_weights(len(words), real)
    rng = random.Random(seed)
    draw = np.random.default_rng(seed)
    taught = rng.sample(names, int(len(names) * share))
    credits = []
    for number, name in enumerate(taught):
        for session in range(sessions):
            count = rng.randint(3, 8)
            for index in draw.choice(len(words), size=count, p=weights):
                credits.append(("local", f"bench-{number}-{session}", words[index].lower(), name))
    return credits


def timed(
    index: ToolIndex, queries: list[str], rounds: int, *, call: Callable[[int], None] | None = None
) -> list[float]:
    """Seconds of each search; with ``call``, ``call(n)`` before the n-th."""
    for query in queries:  # warm: postings cached, as in a long-lived process
        index.search(query, LIMIT)
    seconds: list[float] = []
    for _ in range(rounds):
        for query in queries:
            if call is not None:
                call(len(seconds))
            started = time.perf_counter()
            index.search(query, LIMIT)
            seconds.append(time.perf_counter() - started)
    return seconds


CALLS = itertools.count()
"""Every timed call is a new session, so each one teaches (a session credits a term to a tool once)."""


def make_call(index: ToolIndex, request: str, tool: str) -> None:
    """A new session searches ``request`` and records an ok call of ``tool``."""
    session = index.session(f"bench-call-{next(CALLS)}", discovery_mode="mcp-only")
    session.search_tool.execute("search", {"query": request, "limit": 1})
    session.record_call(tool)


def serve_calls() -> None:
    """The other process: for each line ``request<TAB>tool`` on stdin, ``make_call``, then a line
    on stdout once it has committed."""
    with ToolIndex.open(sys.argv[1]) as index:
        for line in sys.stdin:
            request, tool = line.rstrip("\n").split("\t")
            make_call(index, request, tool)
            print("done", flush=True)


class OtherProcess:
    """Calls made by another process on the same database, one at a time."""

    def __init__(self, url: str, calls: list[tuple[str, str]]) -> None:
        self.calls = calls
        code = "from bench.learning_speed import serve_calls; serve_calls()"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )

    def __call__(self, number: int) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        request, tool = self.calls[number % len(self.calls)]
        self.process.stdin.write(f"{request}\t{tool}\n")
        self.process.stdin.flush()
        if self.process.stdout.readline() != "done\n":
            raise RuntimeError("the calling process stopped")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def callers(credits: list[tuple[str, str, str, str]], seed: int) -> list[tuple[str, str]]:
    """Requests of two learned words, each with a tool that learned other words: a call teaches
    the tool new terms, as real calls do, without making a new tool learned (which would lay out
    every learned part anew, as happens only while a catalog's use is young)."""
    rng = random.Random(seed)
    words = sorted({word for _, _, word, _ in credits})
    tools = sorted({tool for _, _, _, tool in credits})
    return [(" ".join(rng.sample(words, 2)), rng.choice(tools)) for _ in range(200)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--taught", type=float, default=0.2)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    queries = [query.text for query in query_set()]
    with tempfile.TemporaryDirectory(prefix="tool-index-learning-speed-") as directory:
        url = str(Path(directory) / "catalog.db")
        records = generate_catalog(args.size, args.seed)
        with ToolIndex.open(url) as index:
            index.upsert_tools(records)
            credits = learned_credits([r["name"] for r in records], args.taught, args.sessions, args.seed)
            index.set_learning(True)
            with index.store.writing() as writer:
                writer.learning.replace_all(credits)
            summary = index.stats()["learning"]
            calls = callers(credits, args.seed)
            other = OtherProcess(url, calls)

            def here(number: int) -> None:
                make_call(index, *calls[number % len(calls)])

            ways: dict[str, Callable[[int], None] | None] = {
                "": None,
                ", a call in another process before each search": other,
                ", a call in this process before each search": here,
            }
            results: dict[str, list[float]] = {f"{state}{way}": [] for way in ways for state in ("off", "on")}
            try:
                for _ in range(2):  # alternate, so no row has the machine's quieter minutes
                    for way, call in ways.items():
                        for state in ("off", "on"):
                            # Off drops the learned tables (the logs keep what they came from;
                            # here the field has no logs), so on writes them again.
                            index.set_learning(state == "on")
                            if state == "on":
                                with index.store.writing() as writer:
                                    writer.learning.replace_all(credits)
                            results[f"{state}{way}"] += timed(index, queries, args.rounds // 2, call=call)
            finally:
                other.close()
    table = Table(title=f"Search at {args.size:,} tools, limit {LIMIT}: learning off and on")
    for column in ("learning", "learned tools", "learned pairs", "searches", "p50 ms", "p95 ms"):
        table.add_column(column, justify="right")
    p95 = {state: statistics.quantiles(seconds, n=20)[-1] for state, seconds in results.items()}
    for state, seconds in results.items():
        table.add_row(
            state,
            f"{summary['tools']:,}" if state.startswith("on") else "0",
            f"{summary['terms']:,}" if state.startswith("on") else "0",
            str(len(seconds)),
            f"{statistics.median(seconds) * 1000:.2f}",
            f"{p95[state] * 1000:.2f}",
        )
    Console(width=120).print(table)
    for way in ways:
        print(f"p95 on / off{way}: {p95['on' + way] / p95['off' + way]:.2f}x")


if __name__ == "__main__":
    main()
