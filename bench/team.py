"""A team on one catalog: two HTTP gateways (hosts A and B, each with its own config and tokens
file) on one database, several clients on each, searching and calling at once while host B
syncs its config again.

    python -m bench.team [--db URL] [--clients 5] [--rounds 40] [--append]

Each client is the official SDK client over streamable HTTP with a bearer token, in a session of
its own; a round is one ``search_tool_bm25`` and one ``call_tool`` of the upstream's ``echo``
(``tests/mcp_upstream.py`` as a stdio server behind each gateway). Host B's config denies the
upstream's ``filler_*`` tools, so its filters are in play while host A keeps them. Reports, per
gateway, the latency percentiles of each kind, the calls answered against the calls in the log,
and the errors. Without ``--db``, a SQLite file in a temporary directory; pass a PostgreSQL URL
(``postgresql+psycopg://...``) for the shared-catalog case.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import create_engine, text

from bench.report import machine_info

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "mcp_upstream.py"
QUERIES = ["echo a text back", "repeat what I say", "echo the message", "say it again"]


@dataclass
class Tally:
    """What the clients of one gateway saw."""

    search: list[float] = field(default_factory=list)
    call: list[float] = field(default_factory=list)
    answered_calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def cli(db: str, *args: str) -> str:
    command = [sys.executable, "-m", "discovery.cli", "--db", db, *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"tool-index {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


@contextmanager
def gateway(db: str, config: Path, tokens: Path, log: Path) -> Iterator[str]:
    """``tool-index serve --transport http --port 0 --tokens FILE``; yields its endpoint URL."""
    command = [sys.executable, "-m", "discovery.cli", "--db", db, "serve", "--config", str(config)]
    command += ["--transport", "http", "--port", "0", "--tokens", str(tokens)]
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while "listening on " not in log.read_text(encoding="utf-8"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the gateway did not start: {log.read_text(encoding='utf-8')}")
                time.sleep(0.05)
            line = next(x for x in log.read_text(encoding="utf-8").splitlines() if "listening on " in x)
            yield line.split("listening on ", 1)[1].strip()
        finally:
            process.terminate()
            process.wait(timeout=60)


async def client_run(url: str, secret: str, session_id: str, rounds: int, tally: Tally) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=120)
    where = f"{url}?session={session_id}"
    async with http, Client(streamable_http_client(where, http_client=http), cache=None) as client:
        for round_ in range(rounds):
            started = time.perf_counter()
            found = await client.call_tool("search_tool_bm25", {"query": QUERIES[round_ % len(QUERIES)]})
            tally.search.append(time.perf_counter() - started)
            if found.is_error:
                tally.errors["search"] += 1
            started = time.perf_counter()
            called = await client.call_tool(
                "call_tool", {"name": "mcp__up__echo", "arguments": {"text": f"{session_id} {round_}"}}
            )
            tally.call.append(time.perf_counter() - started)
            if called.is_error:
                tally.errors["call"] += 1
            else:
                tally.answered_calls += 1


def logged_calls(db: str, prefix: str) -> int:
    engine = create_engine(db)
    try:
        with engine.connect() as connection:
            found = connection.execute(
                text(
                    "SELECT count(*) FROM session_events WHERE kind = 'tool_call' AND session_id LIKE :prefix"
                ),
                {"prefix": f"{prefix}%"},
            )
            return int(found.scalar_one())
    finally:
        engine.dispose()


def ms(samples: list[float], pct: int) -> str:
    if not samples:
        return "-"
    ordered = sorted(samples)
    return f"{ordered[min(len(ordered) - 1, len(ordered) * pct // 100)] * 1000:.0f}"


def report(db: str, run: str, tallies: dict[str, Tally], clients: int, rounds: int, resync_s: float) -> str:
    lines = [
        f"Two gateways on one {db.split(':', 1)[0]} catalog, {clients} clients each, {rounds} rounds "
        f"(search + call) per client; host B re-synced during the run ({resync_s:.1f} s).",
        "",
        "| gateway | search p50 ms | search p95 ms | call p50 ms | call p95 ms "
        "| calls answered | calls logged | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for host, tally in tallies.items():
        errors = ", ".join(f"{kind} {n}" for kind, n in sorted(tally.errors.items())) or "none"
        lines.append(
            f"| {host} | {ms(tally.search, 50)} | {ms(tally.search, 95)} | {ms(tally.call, 50)} | "
            f"{ms(tally.call, 95)} | {tally.answered_calls} | {logged_calls(db, f'{run}-{host}-')} "
            f"| {errors} |"
        )
    return "\n".join(lines)


def prepare(directory: Path) -> dict[str, tuple[Path, Path, dict[str, str]]]:
    upstream = {"command": sys.executable, "args": [str(UPSTREAM)]}
    hosts: dict[str, tuple[Path, Path, dict[str, str]]] = {}
    for host, extra in (("A", {}), ("B", {"toolIndex": {"deny": ["up/filler_*"]}})):
        config = directory / f"{host}.json"
        config.write_text(json.dumps({"mcpServers": {"up": upstream}, **extra}), encoding="utf-8")
        secrets = {name: f"{host}-{name}-secret" for name in ("alice", "bob", "carol")}
        tokens = directory / f"{host}-tokens.json"
        tokens.write_text(json.dumps(secrets), encoding="utf-8")
        hosts[host] = (config, tokens, secrets)
    return hosts


async def run(
    db: str, run_id: str, directory: Path, clients: int, rounds: int
) -> tuple[dict[str, Tally], float]:
    hosts = prepare(directory)
    for config, _, _ in hosts.values():
        cli(db, "sync", "--config", str(config))
    tallies = {host: Tally() for host in hosts}
    resync = [0.0]
    with (
        gateway(db, *hosts["A"][:2], directory / "A.log") as url_a,
        gateway(db, *hosts["B"][:2], directory / "B.log") as url_b,
    ):
        urls = {"A": url_a, "B": url_b}

        async def resync_b() -> None:
            await anyio.sleep(1.0)
            started = time.perf_counter()
            await anyio.to_thread.run_sync(cli, db, "sync", "--config", str(hosts["B"][0]))
            resync[0] = time.perf_counter() - started

        async with anyio.create_task_group() as group:
            group.start_soon(resync_b)
            for host, (_, _, secrets) in hosts.items():
                names = sorted(secrets)
                for i in range(clients):
                    name = names[i % len(names)]
                    session = f"{run_id}-{host}-{i}"
                    group.start_soon(client_run, urls[host], secrets[name], session, rounds, tallies[host])
    return tallies, resync[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="database URL (default: a SQLite file in a temporary directory)")
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--append", action="store_true", help="add the table to bench/results.md")
    options = parser.parse_args()
    machine = machine_info()  # the load average before the run
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        db = options.db or f"sqlite:///{directory / 'team.db'}"
        run_id = f"team-{uuid.uuid4().hex[:8]}"  # this run's sessions, on a database used before too
        tallies, resync_s = anyio.run(run, db, run_id, directory, options.clients, options.rounds)
        table = report(db, run_id, tallies, options.clients, options.rounds, resync_s)
    print(table)
    if options.append:
        about = ", ".join(
            f"{key}: {value}" for key, value in machine.items() if key not in {"date", "commit"}
        )
        title = f"## Two gateways, one catalog ({machine['date']}, commit {machine['commit']})"
        with (ROOT / "bench" / "results.md").open("a", encoding="utf-8") as results:
            results.write(f"\n{title}\n\n{about}\n\n{table}\n")


if __name__ == "__main__":
    main()
