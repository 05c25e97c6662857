"""How soon a host sees tools: from launching ``tool-index serve`` to its first tools/list answer,
beside launching servers that are not gateways, in one run.

    python -m bench.gateway_start [--starts 9] [--no-npx] [--importtime] [--append]

Each start launches the server as a host would (a process on stdio), writes ``initialize``,
``notifications/initialized`` and ``tools/list`` at once, and stops the clock when the
``tools/list`` answer arrives: no client library in the path, the same bytes for every server.
The servers, one start of each per round so that a change of the machine's load meets them all:

- ``tool-index serve`` with 10 configured stdio upstreams (``tests/mcp_upstream.py``, synced
  before), and with none — the console script a host runs, with the same config and session
  at each start, as a host starts it;
- ``tests/mcp_upstream.py`` launched directly: a server written with the same Python SDK, the
  floor of any SDK-built server in Python;
- ``npx -y @modelcontextprotocol/server-everything``: the reference third-party server, as its
  README tells hosts to launch it (``--no-npx`` leaves it out).

The database holds the real MCP catalog (../shared/data/mcp-catalog.jsonl) when present, plus the
10 upstreams' tools. ``--importtime`` then starts the gateway once more under ``python -X
importtime`` and sums the import time by package. Prints the tables; ``--append``
adds them to bench/results.md with the machine and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import machine_info
from tests.mcp_helpers import HANDSHAKE

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "mcp_upstream.py"
REAL_CATALOG = ROOT.parent / "shared" / "data" / "mcp-catalog.jsonl"
GOAL_S = 0.7
"""The first tools/list answer of a gateway with 10 upstreams, p50 ..."""
GOAL_RATIO = 1.3
"""... or at most this times the p50 of the bare SDK server in the same run."""
SDK_SERVER = "Python SDK server (tests/mcp_upstream.py)"
MESSAGES = "".join(json.dumps(message) + "\n" for message in HANDSHAKE)


def tool_index() -> list[str]:
    """The console script a host runs, next to this interpreter (else the module)."""
    script = Path(sys.executable).parent / "tool-index"
    return [str(script)] if script.exists() else [sys.executable, "-m", "discovery.cli"]


SESSION = "bench-start"
UPSTREAMS = [f"up{i}" for i in range(10)]


def first_answer(command: list[str], *, timeout: float = 120.0) -> float:
    """Seconds from launching ``command`` to its answer to tools/list (request id 2)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(MESSAGES)
        process.stdin.flush()
        for line in process.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue  # a server that logs on stdout: not an answer
            if isinstance(message, dict) and message.get("id") == 2:
                elapsed = time.perf_counter() - started
                if "result" not in message:
                    raise RuntimeError(f"{command[0]} answered tools/list with {message}")
                return elapsed
            if time.perf_counter() - started > timeout:
                break
        raise RuntimeError(f"{' '.join(command)} gave no tools/list answer")
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait(timeout=30)


def cli(db: str, *args: str) -> None:
    subprocess.run([*tool_index(), "--db", db, *args], check=True, capture_output=True)


def prepare(directory: Path, db: str) -> dict[str, list[str]]:
    none = directory / "none.json"
    none.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    ten = directory / "ten.json"
    upstream = {"command": sys.executable, "args": [str(UPSTREAM)]}
    ten.write_text(json.dumps({"mcpServers": dict.fromkeys(UPSTREAMS, upstream)}), encoding="utf-8")
    if REAL_CATALOG.exists():
        cli(db, "import", str(REAL_CATALOG))
    cli(db, "sync", "--config", str(ten))
    serve = [*tool_index(), "--db", db, "serve", "--session", SESSION, "--config"]
    return {
        "tool-index serve, 10 upstreams": [*serve, str(ten)],
        "tool-index serve, no upstream": [*serve, str(none)],
        SDK_SERVER: [sys.executable, str(UPSTREAM)],
    }


def importtime(command: list[str], top: int) -> tuple[float, list[tuple[str, float]]]:
    """One start of ``command`` (a Python program) under ``-X importtime``: the seconds spent in
    imports, and the ``top`` packages by the time their own modules took (children excluded, so
    the shares add up)."""
    environment = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    _, err = process.communicate(MESSAGES, timeout=120)
    packages: dict[str, float] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        if own.strip().isdigit():
            package = name.strip().split(".")[0]
            packages[package] = packages.get(package, 0.0) + int(own) / 1e6
    ranked = sorted(packages.items(), key=lambda item: -item[1])
    return sum(packages.values()), ranked[:top]


def markdown(title: str, header: list[str], rows: list[list[str]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=9, help="launches of each server")
    parser.add_argument("--no-npx", action="store_true", help="leave out server-everything")
    parser.add_argument("--importtime", action="store_true", help="list the gateway's slowest imports")
    parser.add_argument("--append", action="store_true", help="append the tables to bench/results.md")
    options = parser.parse_args()
    machine = machine_info()  # the load average before the run
    with tempfile.TemporaryDirectory() as workdir:
        db = f"sqlite:///{Path(workdir) / 'start.db'}"
        runs = prepare(Path(workdir), db)
        if not options.no_npx:
            npx = shutil.which("npx")
            if npx is None:
                raise SystemExit("npx is not on PATH: give --no-npx")
            runs["server-everything (npx -y)"] = [npx, "-y", "@modelcontextprotocol/server-everything"]
            first_answer(runs["server-everything (npx -y)"])  # fetched into npx's cache, untimed
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(options.starts):
            for name, command in runs.items():
                samples[name].append(first_answer(command))
        imported, imports = (
            importtime(runs["tool-index serve, 10 upstreams"], 12) if options.importtime else (0.0, [])
        )
    rows = [
        [
            name,
            f"{statistics.median(s) * 1000:.0f}",
            f"{min(s) * 1000:.0f}",
            f"{max(s) * 1000:.0f}",
            str(len(s)),
        ]
        for name, s in samples.items()
    ]
    goal = statistics.median(samples["tool-index serve, 10 upstreams"])
    ratio = goal / statistics.median(samples[SDK_SERVER])
    met = "met" if goal <= GOAL_S or ratio <= GOAL_RATIO else "not met"
    verdict = (
        f"tool-index with 10 upstreams, p50 {goal:.3f} s, {ratio:.2f}x the SDK server's: "
        f"goal {GOAL_S} s or {GOAL_RATIO}x {met}"
    )
    tables = markdown(
        "stdio: from launch to the first tools/list answer (ms)",
        ["server", "p50", "min", "max", "starts"],
        rows,
    )
    if imports:
        tables += "\n" + markdown(
            f"One gateway start under -X importtime: {imported * 1000:.0f} ms of imports; "
            "the packages that took most (their own modules' time, ms)",
            ["package", "ms", "share"],
            [
                [f"`{name}`", f"{seconds * 1000:.0f}", f"{seconds / imported:.0%}"]
                for name, seconds in imports
            ],
        )
    print(tables)
    print(verdict)
    if options.append:
        catalog = "the real MCP catalog (757 tools) + " if REAL_CATALOG.exists() else ""
        lines = [
            "",
            f"## MCP gateway start beside other servers ({machine['date']}, commit {machine['commit']})",
            "",
            f"`python -m bench.gateway_start {' '.join(sys.argv[1:])}`; database: {catalog}the 10 "
            "upstreams' tools; SQLite. Each start writes initialize, initialized and tools/list at "
            f"once on stdio and times the tools/list answer. Node {node_version()}.",
            "",
            ", ".join(f"{key}: {value}" for key, value in machine.items() if key not in ("date", "commit"))
            + ", load average at the end: "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "",
            tables,
            verdict + ".",
            "",
        ]
        with (ROOT / "bench" / "results.md").open("a", encoding="utf-8") as results:
            results.write("\n".join(lines))


def node_version() -> str:
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "absent"
    return done.stdout.strip()


if __name__ == "__main__":
    main()
