"""The MCP gateway over stdio: what it adds to a search and to a tool call, and how soon it answers.

    python -m bench.gateway [--rounds 200] [--starts 7] [--append]

- search: ``search_tool_bm25`` through ``tool-index serve`` (the SDK client's round trip) against
  the library's ``session.search_tool.execute`` in this process, on the same database and
  session, reset before each call (untimed), so every call ranks the same corpus and activates;
- call_tool: ``call_tool`` of an activated tool through the gateway against the SDK client
  calling the same upstream tool directly;
- start: from launching ``tool-index serve`` to its first tools/list answer, with no upstream
  and with 10 configured, beside a naive gateway that lists every upstream before it answers.

Prints the tables; ``--append`` adds them to bench/results.md with the machine and commit.
The catalog is the real MCP catalog (../shared/data/mcp-catalog.jsonl) when present, plus the
tools of the upstream ``tests/mcp_upstream.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from bench.report import machine_info, percentile
from discovery import ToolIndex

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "mcp_upstream.py"
REAL_CATALOG = ROOT.parent / "shared" / "data" / "mcp-catalog.jsonl"
QUERIES = [
    "create a github issue",
    "list pull requests",
    "send a slack message",
    "read a file",
    "search the web",
    "query the database",
    "echo a text back",
    "schedule a calendar event",
]
NAIVE_GATEWAY = """
import sys, anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from discovery.mcp.config import load_config
from discovery.mcp.sync import sync_servers
from discovery.mcp.upstreams import Upstreams

async def main() -> None:
    async with Upstreams.from_config(sys.argv[1]) as upstreams:
        tools = []
        async with anyio.create_task_group() as group:
            for server in upstreams.servers:
                async def one(server=server):
                    tools.extend(await upstreams.list_tools(server))
                group.start_soon(one)
        async def list_tools(ctx, params):
            return types.ListToolsResult(tools=tools)
        server = Server("naive", on_list_tools=list_tools)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""


def upstream_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(UPSTREAM)]}


def gateway(db: str, config: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "discovery.cli", "--db", db, "serve", "--config", str(config), *args],
    )


def ms(samples: list[float], pct: int) -> float:
    return percentile(samples, pct) * 1000


async def timed(
    work: Callable[[], Awaitable[Any]], rounds: int, before: Callable[[], None] | None = None
) -> list[float]:
    samples = []
    for _ in range(rounds):
        if before is not None:
            before()
        started = time.perf_counter()
        await work()
        samples.append(time.perf_counter() - started)
    return samples


def prepare(directory: Path) -> tuple[str, Path]:
    db = f"sqlite:///{directory / 'gateway.db'}"
    config = directory / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"up": upstream_entry()}}), encoding="utf-8")
    run = [sys.executable, "-m", "discovery.cli", "--db", db]
    if REAL_CATALOG.exists():
        subprocess.run([*run, "import", str(REAL_CATALOG)], check=True, capture_output=True)
    subprocess.run([*run, "sync", "--config", str(config)], check=True, capture_output=True)
    return db, config


async def search_rounds(db: str, config: Path, rounds: int) -> dict[str, list[float]]:
    index = ToolIndex.open(db)
    library_session = index.session("bench-library", discovery_mode="mcp-only")
    gateway_session = index.session("bench-gateway", discovery_mode="mcp-only")
    tool = library_session.search_tool
    results: dict[str, list[float]] = {"library": [], "gateway": []}
    async with Client(gateway(db, config, "--session", "bench-gateway"), cache=None) as client:
        for query in QUERIES:  # warm-up, untimed
            tool.execute(uuid.uuid4().hex, {"query": query})
            await client.call_tool("search_tool_bm25", {"query": query})
        for round_ in range(rounds):
            query = QUERIES[round_ % len(QUERIES)]
            # The gateway writes its pin after answering: let it land, so the reset below does not
            # wait for the database's write lock inside the next timed call.
            await anyio.sleep(0.005)
            library_session.reset()
            started = time.perf_counter()
            tool.execute(uuid.uuid4().hex, {"query": query})
            results["library"].append(time.perf_counter() - started)
            gateway_session.reset()
            started = time.perf_counter()
            await client.call_tool("search_tool_bm25", {"query": query})
            results["gateway"].append(time.perf_counter() - started)
    index.close()
    return results


async def call_rounds(db: str, config: Path, rounds: int) -> dict[str, list[float]]:
    arguments = {"text": "benchmark"}
    async with Client(StdioServerParameters(**upstream_entry()), cache=None) as direct:
        await direct.list_tools()
        direct_samples = await timed(lambda: direct.call_tool("echo", arguments), rounds)
    async with Client(gateway(db, config, "--session", "bench-calls"), cache=None) as client:
        await client.call_tool("search_tool_bm25", {"query": "echo a text back", "limit": 1})
        call = {"name": "mcp__up__echo", "arguments": arguments}
        await client.call_tool("call_tool", call)  # connects the upstream, untimed
        gateway_samples = await timed(lambda: client.call_tool("call_tool", call), rounds)
    return {"direct": direct_samples, "gateway": gateway_samples}


async def first_answer(parameters: StdioServerParameters) -> float:
    started = time.perf_counter()
    async with Client(parameters, cache=None) as client:
        await client.list_tools()
        return time.perf_counter() - started


async def start_rounds(db: str, directory: Path, starts: int) -> dict[str, list[float]]:
    none = directory / "none.json"
    none.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    ten = directory / "ten.json"
    ten.write_text(
        json.dumps({"mcpServers": {f"up{i}": upstream_entry() for i in range(10)}}), encoding="utf-8"
    )
    naive = directory / "naive_gateway.py"
    naive.write_text(NAIVE_GATEWAY, encoding="utf-8")
    runs = {
        "tool-index serve, no upstream": gateway(db, none, "--session", "bench-start"),
        "tool-index serve, 10 upstreams": gateway(db, ten, "--session", "bench-start"),
        "naive gateway, 10 upstreams": StdioServerParameters(
            command=sys.executable, args=[str(naive), str(ten)]
        ),
    }
    results: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(starts):
        for name, parameters in runs.items():
            results[name].append(await first_answer(parameters))
    return results


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def report(
    searches: dict[str, list[float]], calls: dict[str, list[float]], starts: dict[str, list[float]]
) -> str:
    search_rows = [
        [name, f"{ms(s, 50):.2f}", f"{ms(s, 95):.2f}", str(len(s))] for name, s in searches.items()
    ]
    search_rows.append(
        [
            "overhead (gateway − library)",
            f"{ms(searches['gateway'], 50) - ms(searches['library'], 50):.2f}",
            f"{ms(searches['gateway'], 95) - ms(searches['library'], 95):.2f}",
            "",
        ]
    )
    call_rows = [[name, f"{ms(s, 50):.2f}", f"{ms(s, 95):.2f}", str(len(s))] for name, s in calls.items()]
    call_rows.append(
        [
            "overhead (gateway − direct)",
            f"{ms(calls['gateway'], 50) - ms(calls['direct'], 50):.2f}",
            f"{ms(calls['gateway'], 95) - ms(calls['direct'], 95):.2f}",
            "",
        ]
    )
    start_rows = [
        [
            name,
            f"{statistics.median(s) * 1000:.0f}",
            f"{min(s) * 1000:.0f}",
            f"{max(s) * 1000:.0f}",
            str(len(s)),
        ]
        for name, s in starts.items()
    ]
    return "\n".join(
        [
            table(
                "search_tool_bm25: library execute vs through the gateway (ms)",
                ["path", "p50", "p95", "calls"],
                search_rows,
            ),
            table(
                "call_tool: upstream called directly vs through the gateway (ms)",
                ["path", "p50", "p95", "calls"],
                call_rows,
            ),
            table(
                "From launch to the first tools/list answer (ms)",
                ["gateway", "median", "min", "max", "starts"],
                start_rows,
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="timed searches and calls per path")
    parser.add_argument("--starts", type=int, default=7, help="launches per gateway")
    parser.add_argument("--append", action="store_true", help="append the tables to bench/results.md")
    options = parser.parse_args()
    machine = machine_info()  # the load average before the run
    with tempfile.TemporaryDirectory() as workdir:
        directory = Path(workdir)
        db, config = prepare(directory)
        searches = anyio.run(search_rounds, db, config, options.rounds)
        calls = anyio.run(call_rounds, db, config, options.rounds)
        starts = anyio.run(start_rounds, db, directory, options.starts)
    tables = report(searches, calls, starts)
    print(tables)
    if options.append:
        catalog = "the real MCP catalog (757 tools) + " if REAL_CATALOG.exists() else ""
        lines = [
            "",
            f"## MCP gateway over stdio ({machine['date']}, commit {machine['commit']})",
            "",
            f"`python -m bench.gateway --rounds {options.rounds} --starts {options.starts}`; "
            f"catalog: {catalog}the 6 tools of `tests/mcp_upstream.py`; SQLite.",
            "",
            ", ".join(f"{key}: {value}" for key, value in machine.items() if key not in ("date", "commit")),
            "",
            tables,
            "Notes:",
            "",
            "- search: the gateway's path is the SDK client's stdio round trip and "
            "`session.search_tool.execute` in its worker thread (the pin of what it activated is written "
            "after the answer); the library's is the `execute` call alone. Both sessions are reset "
            "(untimed) before each call.",
            "- call_tool: the gateway checks the tool (catalog read, session read, pin), forwards over its "
            "kept stdio connection, answers, then logs the call (a write).",
            "- start: a new process each time (interpreter start included); the naive gateway connects "
            "to and lists every upstream (concurrently) before it answers tools/list.",
            "",
        ]
        with (ROOT / "bench" / "results.md").open("a", encoding="utf-8") as results:
            results.write("\n".join(lines))


if __name__ == "__main__":
    main()
