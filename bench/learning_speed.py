"""What the learned field costs a search: p50 and p95 at 100k tools, learning off and on, in one run.

    python -m bench.learning_speed [--size 100000] [--taught 0.2] [--sessions 5] [--rounds 20]

The catalog is ``bench.generate``'s. The learned field is of the size heavy use would give: a
share of the tools (``--taught``) each taught by ``--sessions`` sessions, each request 3 to 8
words drawn as the catalog's descriptions draw theirs (so common request words are learned by
thousands of tools, as common description words are held by thousands). It is written straight
into the learned tables (what the rule would have stored for such logs), since only its size
matters here. The fixed query set (``bench.queries``) is then searched ``--rounds`` times with
learning off and on, alternately, after a warm-up round each, with the limit an agent uses (8).
The last two rows put a real call before every search: a new session searches a request of two
words and records an ok call of a taught tool, which with learning on credits those words to it
(what another agent's work does to a shared index); only the search after it is timed. Learning
off, the same calls are logged and teach nothing: that row is what the same work costs a search
without learning (the session's writes in this process leave its caches colder), so the two rows
together show what learning adds to it.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.generate import generate_catalog, vocabulary, word_weights
from bench.queries import query_set
from discovery import ToolIndex
from store import _learning as stored_learning
from store._engine import write_transaction

LIMIT = 8


def learned_credits(names: list[str], share: float, sessions: int, seed: int) -> list[tuple[str, str, str]]:
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
                credits.append((f"bench-{number}-{session}", words[index].lower(), name))
    return credits


def timed(
    index: ToolIndex, queries: list[str], rounds: int, *, callers: list[tuple[str, str]] | None = None
) -> list[float]:
    """Seconds of each search; with ``callers`` (request, tool), a new session's call before each."""
    for query in queries:  # warm: postings cached, as in a long-lived process
        index.search(query, LIMIT)
    seconds: list[float] = []
    for _ in range(rounds):
        for query in queries:
            if callers:
                request, tool = callers[len(seconds) % len(callers)]
                session = index.session(f"bench-call-{next(CALLS)}", discovery_mode="mcp-only")
                session.search_tool.execute("search", {"query": request, "limit": 1})
                session.record_call(tool)
            started = time.perf_counter()
            index.search(query, LIMIT)
            seconds.append(time.perf_counter() - started)
    return seconds


CALLS = itertools.count()
"""Every timed call is a new session, so each one teaches (a session credits a term to a tool once)."""


def callers(credits: list[tuple[str, str, str]], seed: int) -> list[tuple[str, str]]:
    """Requests of two learned words, each with a tool that learned other words: a call teaches
    the tool new terms and so moves its learned length, as real calls do."""
    rng = random.Random(seed)
    words = sorted({word for _, word, _ in credits})
    tools = sorted({tool for _, _, tool in credits})
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
            with write_transaction(index.store.engine) as connection:
                stored_learning.replace_all(connection, credits)
            summary = index.stats()["learning"]
            calls = callers(credits, args.seed)
            off_between = "off, another session's call between searches"
            on_between = "on, another session's call between searches"
            results: dict[str, list[float]] = {"off": [], "on": [], off_between: [], on_between: []}
            for _ in range(2):  # alternate, so neither side has the machine's quieter minutes
                for state in results:
                    # Off drops the learned tables (the logs keep what they came from; here the
                    # field has no logs), so on writes them again.
                    learning = state.startswith("on")
                    index.set_learning(learning)
                    if learning:
                        with write_transaction(index.store.engine) as connection:
                            stored_learning.replace_all(connection, credits)
                    chosen = calls if "between" in state else None
                    results[state] += timed(index, queries, args.rounds // 2, callers=chosen)
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
    print(f"p95 on / off: {p95['on'] / p95['off']:.2f}x")
    print(f"p95 with a call between searches, on / off: {p95[on_between] / p95[off_between]:.2f}x")


if __name__ == "__main__":
    main()
