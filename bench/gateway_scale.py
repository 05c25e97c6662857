"""Many MCP servers: ``tool-index sync --config`` and the first start of ``tool-index serve``
in front of a config of 80 stdio servers.

    python -m bench.gateway_scale [--servers 80] [--max-starting 8,2,16] [--serve 8] [--append]

Each server is a process of its own, ``tests/mcp_upstream.py`` with its 6 base tools and
``--extra`` tools whose names are its own. For each ``--max-starting`` value, on a fresh SQLite
database, the real CLI runs ``sync --config`` as a process; the benchmark then counts each
server's tools in the database (a server is synced completely when it has them all), and reads
how many upstream processes ran at once (``mcp_upstream.py --live-dir``: each process, as it
starts, records how many are alive, itself included).

``--serve N`` (repeatable as a list) does the same through ``serve --config --refresh``, the way
``serve`` syncs servers it has never seen: a stdio client sends initialize and tools/list at
once (the time to that answer is the first start a host sees), then waits until the gateway's
stderr has reported every server's sync. It also counts the upstream processes still alive at
that moment and their resident memory (``serve`` keeps its connections open).

Wall times are from launching the CLI; CPU is user + system of the CLI and of every process it
started and waited for. Prints a table; ``--append`` adds it to bench/results.md with the machine
and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from bench.report import machine_info
from discovery import ToolIndex

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "mcp_upstream.py"
BASE_TOOLS = 6
"""``mcp_upstream.py``'s tools without options: echo, fail, crash, grow, token_digest, stall."""
PROTOCOL_VERSION = "2025-06-18"
EXIT_WAIT = 30.0
"""How long a gateway whose client left may take to end before it is terminated."""
SAID = "tool-index serve: "
"""How each line the gateway says on stderr begins."""


COLUMNS = (
    "command",
    "--max-starting",
    "complete",
    "tools",
    "first tools/list s",
    "all synced s",
    "CPU s",
    "peak servers at once",
    "alive after",
    "their RSS MiB",
    "exit s",
    "failures",
)
LEFT = ("command", "failures")


@dataclass
class Run:
    """One run of ``sync`` or of ``serve``'s first start over a fresh database."""

    command: str
    max_starting: int
    servers: int
    complete: int
    """Servers whose every tool is in the database."""
    tools: int
    wall_s: float
    """sync: until the process ended; serve: until its stderr reported every server's sync."""
    cpu_s: float
    peak: int
    """The most upstream processes alive at once."""
    first_answer_s: float | None = None
    """serve: from launch to the first tools/list answer."""
    alive_after: int | None = None
    alive_rss_mb: float | None = None
    exit_s: float | None = None
    """serve: from its client closing stdin to the process's end; ``inf`` when it had to be
    terminated."""
    failures: str = ""


def server_name(number: int) -> str:
    return f"s{number:03d}"


def write_config(directory: Path, servers: int, extra: int, live: Path) -> Path:
    entries: dict[str, Any] = {}
    for number in range(servers):
        name = server_name(number)
        extras = [arg for k in range(extra) for arg in ("--tool", f"{name}_tool_{k}")]
        entries[name] = {
            "command": sys.executable,
            "args": [str(UPSTREAM), "--live-dir", str(live), *extras],
        }
    config = directory / "mcp.json"
    config.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    return config


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tool_counts(db: str, servers: int) -> dict[str, int]:
    index = ToolIndex.open(db)
    try:
        return {server_name(n): len(index.tools(server=server_name(n))) for n in range(servers)}
    finally:
        index.close()


def peak_alive(live: Path) -> int:
    counts = live / "counts"
    if not counts.exists():
        return 0
    return max((int(line) for line in counts.read_text(encoding="utf-8").split()), default=0)


def alive(live: Path) -> tuple[int, float]:
    """The upstream processes running now (their marker files are named by pid), and their RSS."""
    pids = [int(marker.stem) for marker in live.glob("*.live")]
    rss_kb = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
        except OSError:
            continue
        rss_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return len(pids), rss_kb / 1024


def cli(db: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "discovery.cli", "--db", db, *args]


def summarise(
    command: str, max_starting: int, db: str, servers: int, extra: int, live: Path
) -> tuple[Run, list[str]]:
    counts = tool_counts(db, servers)
    expected = BASE_TOOLS + extra
    incomplete = [f"{server} {count}/{expected}" for server, count in counts.items() if count != expected]
    run = Run(
        command=command,
        max_starting=max_starting,
        servers=servers,
        complete=servers - len(incomplete),
        tools=sum(counts.values()),
        wall_s=0.0,
        cpu_s=0.0,
        peak=peak_alive(live),
    )
    return run, incomplete


def run_sync(servers: int, extra: int, max_starting: int, timeout: float) -> Run:
    with tempfile.TemporaryDirectory() as workdir:
        directory = Path(workdir)
        live = directory / "live"
        live.mkdir()
        config = write_config(directory, servers, extra, live)
        db = f"sqlite:///{directory / 'scale.db'}"
        cpu = children_cpu()
        started = time.perf_counter()
        done = subprocess.run(
            cli(
                db,
                "sync",
                "--config",
                str(config),
                "--max-starting",
                str(max_starting),
                "--timeout",
                str(timeout),
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        cpu = children_cpu() - cpu
        run, incomplete = summarise("sync", max_starting, db, servers, extra, live)
        failed = [line for line in done.stdout.splitlines() if ": failed: " in line]
        run.wall_s, run.cpu_s = wall, cpu
        run.failures = "; ".join(failed[:3] or incomplete[:3])
        if done.returncode and not failed:
            run.failures = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return run


def _lines(stream: TextIO, into: queue.Queue[tuple[float, str | None]]) -> None:
    for line in stream:
        into.put((time.perf_counter(), line.rstrip("\n")))
    into.put((time.perf_counter(), None))


def _request(process: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()


def _answer(answers: queue.Queue[tuple[float, str | None]], wanted: int, deadline: float) -> float:
    """When the JSON-RPC answer of request ``wanted`` arrived."""
    while True:
        at, line = answers.get(timeout=max(0.0, deadline - time.perf_counter()))
        if line is None:
            raise RuntimeError("the gateway closed its stdout")
        message = json.loads(line)
        if message.get("id") == wanted:
            if "error" in message:
                raise RuntimeError(f"the gateway answered an error: {message['error']}")
            return at


def run_serve(servers: int, extra: int, max_starting: int, timeout: float, wait: float) -> Run:
    """``serve --refresh`` over stdio with a client that lists tools at once and stays connected
    until every server's sync is reported (or ``wait`` seconds pass)."""
    with tempfile.TemporaryDirectory() as workdir:
        directory = Path(workdir)
        live = directory / "live"
        live.mkdir()
        config = write_config(directory, servers, extra, live)
        db = f"sqlite:///{directory / 'scale.db'}"
        command = cli(
            db,
            "serve",
            "--config",
            str(config),
            "--session",
            "bench-scale",
            "--refresh",
            "86400",
            "--max-starting",
            str(max_starting),
            "--timeout",
            str(timeout),
        )
        cpu = children_cpu()
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert process.stdout is not None and process.stderr is not None
        answers: queue.Queue[tuple[float, str | None]] = queue.Queue()
        said: queue.Queue[tuple[float, str | None]] = queue.Queue()
        threading.Thread(target=_lines, args=(process.stdout, answers), daemon=True).start()
        threading.Thread(target=_lines, args=(process.stderr, said), daemon=True).start()
        deadline = started + wait
        synced: dict[str, str] = {}
        alive_after: tuple[int, float] | None = None
        first_answer: float | None = None
        last = started
        try:
            _request(
                process,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": PROTOCOL_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "bench-scale", "version": "1"},
                    },
                },
            )
            _answer(answers, 1, deadline)
            _request(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _request(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
            first_answer = _answer(answers, 2, deadline) - started
            while len(synced) < servers and time.perf_counter() < deadline:
                try:
                    at, line = said.get(timeout=max(0.0, deadline - time.perf_counter()))
                except queue.Empty:
                    break
                if line is None:
                    break
                said_line = line.removeprefix(SAID)
                if said_line.startswith("sync "):
                    server, _, outcome = said_line[len("sync ") :].partition(": ")
                    synced[server] = outcome
                    last = at
            alive_after = alive(live)
        finally:
            if process.stdin is not None:
                process.stdin.close()  # the client goes: the gateway closes its upstreams and ends
            leaving = time.perf_counter()
            try:
                process.wait(timeout=EXIT_WAIT)
                exit_s = time.perf_counter() - leaving
            except subprocess.TimeoutExpired:
                process.terminate()
                process.wait(timeout=30)
                exit_s = float("inf")
        cpu = children_cpu() - cpu
        run, incomplete = summarise("serve --refresh", max_starting, db, servers, extra, live)
        run.wall_s = last - started if len(synced) == servers else wait
        run.cpu_s = cpu
        run.first_answer_s = first_answer
        run.exit_s = exit_s
        if alive_after is not None:
            run.alive_after, run.alive_rss_mb = alive_after
        failed = [f"{server}: {outcome}" for server, outcome in synced.items() if "failed" in outcome]
        missing = servers - len(synced)
        run.failures = "; ".join(
            ([f"{missing} servers never reported"] if missing else []) + (failed[:3] or incomplete[:3])
        )
        return run


def render(runs: list[Run]) -> Table:
    table = Table(
        title=f"{runs[0].servers} stdio servers, tests/mcp_upstream.py each, a fresh SQLite database"
    )
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in LEFT else "right")
    for run in runs:
        table.add_row(*cells(run))
    return table


def cells(run: Run) -> list[str]:
    return [
        run.command,
        str(run.max_starting),
        f"{run.complete}/{run.servers}",
        str(run.tools),
        "" if run.first_answer_s is None else f"{run.first_answer_s:.2f}",
        f"{run.wall_s:.1f}",
        f"{run.cpu_s:.1f}",
        str(run.peak),
        "" if run.alive_after is None else str(run.alive_after),
        "" if run.alive_rss_mb is None else f"{run.alive_rss_mb:.0f}",
        exit_text(run.exit_s),
        run.failures or "none",
    ]


def exit_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.1f}" if seconds != float("inf") else f"did not end in {EXIT_WAIT:g} s"


def markdown(runs: list[Run]) -> str:
    aligned = ("---|" if column in LEFT else "---:|" for column in COLUMNS)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "".join(aligned)]
    lines += ["| " + " | ".join(cells(run)) + " |" for run in runs]
    return "\n".join(lines) + "\n"


def integers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=80, help="stdio servers in the config")
    parser.add_argument("--extra", type=int, default=3, help="tools of its own per server, beyond the 6 base")
    parser.add_argument(
        "--max-starting", default="8,2,16", help="sync runs, one per value (comma-separated; '' for none)"
    )
    parser.add_argument("--serve", default="8", help="serve --refresh runs, one per --max-starting value")
    parser.add_argument("--timeout", type=float, default=30.0, help="the CLI's --timeout")
    parser.add_argument("--wait", type=float, default=600.0, help="longest wait for serve to sync all")
    parser.add_argument("--append", action="store_true", help="append the table to bench/results.md")
    options = parser.parse_args()
    machine = machine_info()  # the load average before the run
    runs: list[Run] = []
    for max_starting in integers(options.max_starting):
        runs.append(run_sync(options.servers, options.extra, max_starting, options.timeout))
        Console(width=200).print(render(runs[-1:]))
    for max_starting in integers(options.serve):
        runs.append(run_serve(options.servers, options.extra, max_starting, options.timeout, options.wait))
        Console(width=200).print(render(runs[-1:]))
    Console(width=200).print(render(runs))
    if options.append:
        arguments = " ".join(sys.argv[1:])
        lines = [
            "",
            f"## Many MCP servers: sync and serve's first start "
            f"({machine['date']}, commit {machine['commit']})",
            "",
            f"`python -m bench.gateway_scale {arguments}`: {options.servers} stdio servers, each "
            f"`tests/mcp_upstream.py` with {BASE_TOOLS + options.extra} tools ({options.extra} of its own "
            "names); SQLite; `--timeout` "
            f'{options.timeout:g}. "all synced" is the process\'s wall time for sync, and for serve the '
            "time its stderr reported the last server's sync; CPU is the CLI's and its upstreams'.",
            "",
            ", ".join(f"{key}: {value}" for key, value in machine.items() if key not in ("date", "commit"))
            + ", load average at the end: "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "",
            markdown(runs),
        ]
        with (ROOT / "bench" / "results.md").open("a", encoding="utf-8") as results:
            results.write("\n".join(lines))


if __name__ == "__main__":
    main()
