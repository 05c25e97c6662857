"""The MCP gateway over stdio and streamable HTTP: what it adds to a search and to a tool call,
and how soon it answers.

    python -m bench.gateway [--rounds 300] [--starts 7] [--transport stdio|http]... [--append]

For each transport, in one run and against the same upstream process:

- search: ``search_tool_bm25`` through ``tool-index serve`` (the SDK client's round trip) against
  the library's ``session.search_tool.execute`` in this process, on the same database, both
  sessions reset before each call (untimed), so every call ranks the same corpus and activates;
- call_tool: ``call_tool`` of an activated tool through the gateway against the SDK client
  calling the same upstream tool directly;
- the floor: a no-op MCP proxy written with the same SDK (no database, no checks) that answers
  ``search_tool_bm25`` with a fixed text and forwards ``call_tool`` over a kept connection, so
  what any SDK-built gateway adds is beside what this one adds;
- start (stdio only): from launching ``tool-index serve`` to its first tools/list answer, with no
  upstream and with 10 configured, beside a naive gateway that lists every upstream first.

The timed paths of one kind take turns call by call, so a change of the machine's load meets
all of them. Prints the tables; ``--append`` adds them to bench/results.md with the machine and
commit. The catalog is the real MCP catalog (../shared/data/mcp-catalog.jsonl) when present,
plus the tools of the upstream ``tests/mcp_upstream.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
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
from discovery._mcp.upstreams import Upstreams

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
NOOP_PROXY = """
# A no-op MCP proxy: the SDK's own cost of one more hop, with nothing of tool-index in it.
# python noop_proxy.py stdio|http UPSTREAM (a command line, JSON, or a URL)
import json, sys, anyio
from mcp import Client, StdioServerParameters, types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TEXT = json.dumps({"query": "x", "activated_tools": ["mcp__up__echo"], "tools": [{"name": "mcp__up__echo"}]})

async def main() -> None:
    transport, target = sys.argv[1], sys.argv[2]
    upstream = target if target.startswith("http") else StdioServerParameters(**json.loads(target))
    async with Client(upstream, cache=None) as client:
        listed = [types.Tool(name=name, input_schema={"type": "object"})
                  for name in ("search_tool_bm25", "call_tool")]
        async def list_tools(ctx, params):
            return types.ListToolsResult(tools=listed)
        async def call_tool(ctx, params):
            if params.name == "call_tool":
                inner = params.arguments or {}
                result = await client.call_tool(inner["name"].rsplit("__", 1)[1], inner.get("arguments"))
                return result.model_copy(update={"meta": None})
            return types.CallToolResult(content=[types.TextContent(text=TEXT)])
        server = Server("noop", on_list_tools=list_tools, on_call_tool=call_tool)
        if transport == "stdio":
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        import uvicorn
        web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(host="127.0.0.1"),
                                            host="127.0.0.1", port=0, log_level="warning"))
        async with anyio.create_task_group() as group:
            async def announce():
                while not web.started:
                    await anyio.sleep(0.01)
                print(f"PORT {web.servers[0].sockets[0].getsockname()[1]}", flush=True)
            group.start_soon(announce)
            await web.serve()

anyio.run(main)
"""


def upstream_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(UPSTREAM)]}


def gateway(db: str, config: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "discovery.cli", "--db", db, "serve", "--config", str(config), *args],
    )


def cli(db: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "discovery.cli", "--db", db, *args], check=True, capture_output=True
    )


def ms(samples: list[float], pct: int) -> float:
    return percentile(samples, pct) * 1000


@contextlib.contextmanager
def announcing(command: list[str], marker: str, *, stream: str) -> Iterator[str]:
    """Start ``command``; yield what follows ``marker`` on the first line of ``stream`` that has
    it; the process's other output goes nowhere, and its pipe is drained so it never blocks."""
    import threading

    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL,
        text=True,
    )
    try:
        pipe = process.stdout if stream == "stdout" else process.stderr
        assert pipe is not None
        for line in pipe:
            if marker in line:
                threading.Thread(target=pipe.read, daemon=True).start()
                yield line.split(marker, 1)[1].strip()
                return
        raise RuntimeError(f"{command} ended before saying {marker!r}")
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.asynccontextmanager
async def targets(
    transport: str, db: str, directory: Path, stack: contextlib.ExitStack
) -> AsyncIterator[dict[str, Any]]:
    """For one transport: the upstream called directly, the gateway (one target per session) and
    the no-op proxy, all in front of the same upstream program (over HTTP, the same process)."""
    noop = directory / "noop_proxy.py"
    noop.write_text(NOOP_PROXY, encoding="utf-8")
    if transport == "stdio":
        entry: dict[str, Any] = upstream_entry()
        direct: Any = StdioServerParameters(**entry)
        noop_target: Any = StdioServerParameters(
            command=sys.executable, args=[str(noop), "stdio", json.dumps(entry)]
        )
    else:
        port = stack.enter_context(
            announcing([sys.executable, str(UPSTREAM), "--http"], "PORT ", stream="stdout")
        )
        direct = f"http://127.0.0.1:{port}/mcp"
        entry = {"type": "http", "url": direct}
        noop_port = stack.enter_context(
            announcing([sys.executable, str(noop), "http", direct], "PORT ", stream="stdout")
        )
        noop_target = f"http://127.0.0.1:{noop_port}/mcp"
    config = directory / f"mcp-{transport}.json"
    config.write_text(json.dumps({"mcpServers": {"up": entry}}), encoding="utf-8")
    cli(db, "sync", "--config", str(config))
    sessions = {kind: f"bench-{transport}-{kind}" for kind in ("search", "calls")}
    gateways: dict[str, Any]
    if transport == "stdio":
        gateways = {kind: gateway(db, config, "--session", sid) for kind, sid in sessions.items()}
    else:
        serve = gateway(db, config, "--transport", "http", "--port", "0")
        url = stack.enter_context(announcing([serve.command, *serve.args], "listening on ", stream="stderr"))
        gateways = {kind: f"{url}?session={sid}" for kind, sid in sessions.items()}
    yield {"direct": direct, "noop": noop_target, "gateways": gateways, "sessions": sessions}


async def clock(samples: list[float], work: Any) -> Any:
    started = time.perf_counter()
    result = await work
    samples.append(time.perf_counter() - started)
    return result


async def search_rounds(db: str, where: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    index = ToolIndex.open(db)
    library_session = index.session(f"{where['sessions']['search']}-library", discovery_mode="mcp-only")
    gateway_session = index.session(where["sessions"]["search"], discovery_mode="mcp-only")
    tool = library_session.search_tool
    results: dict[str, list[float]] = {"library": [], "gateway": [], "no-op proxy": []}
    async with (
        Client(where["gateways"]["search"], cache=None) as client,
        Client(where["noop"], cache=None) as noop,
    ):
        for query in QUERIES:  # warm-up, untimed
            tool.execute(uuid.uuid4().hex, {"query": query})
            await client.call_tool("search_tool_bm25", {"query": query})
            await noop.call_tool("search_tool_bm25", {"query": query})
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
            await clock(results["gateway"], client.call_tool("search_tool_bm25", {"query": query}))
            await clock(results["no-op proxy"], noop.call_tool("search_tool_bm25", {"query": query}))
    index.close()
    return results


async def call_rounds(where: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    arguments = {"text": "benchmark"}
    call = {"name": "mcp__up__echo", "arguments": arguments}
    results: dict[str, list[float]] = {"direct": [], "gateway": [], "no-op proxy": []}
    async with (
        Client(where["direct"], cache=None) as direct,
        Client(where["gateways"]["calls"], cache=None) as client,
        Client(where["noop"], cache=None) as noop,
    ):
        await client.call_tool("search_tool_bm25", {"query": "echo a text back", "limit": 1})
        for _ in range(5):  # connects the upstreams and warms every path, untimed
            await direct.call_tool("echo", arguments)
            await client.call_tool("call_tool", call)
            await noop.call_tool("call_tool", call)
        for _ in range(rounds):
            await clock(results["direct"], direct.call_tool("echo", arguments))
            answer = await clock(results["gateway"], client.call_tool("call_tool", call))
            assert not answer.is_error, answer
            await clock(results["no-op proxy"], noop.call_tool("call_tool", call))
    return results


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


def latency_table(title: str, samples: dict[str, list[float]], base: str) -> str:
    rows = [[name, f"{ms(s, 50):.2f}", f"{ms(s, 95):.2f}", str(len(s))] for name, s in samples.items()]
    for minuend, subtrahend in (("gateway", base), ("no-op proxy", base), ("gateway", "no-op proxy")):
        rows.append(
            [
                f"{minuend} − {subtrahend}",
                f"{ms(samples[minuend], 50) - ms(samples[subtrahend], 50):.2f}",
                f"{ms(samples[minuend], 95) - ms(samples[subtrahend], 95):.2f}",
                "",
            ]
        )
    return table(title, ["path", "p50", "p95", "calls"], rows)


def report(
    measured: dict[str, tuple[dict[str, list[float]], dict[str, list[float]]]], starts: dict[str, list[float]]
) -> str:
    parts = []
    for transport, (searches, calls) in measured.items():
        parts.append(
            latency_table(
                f"{transport}: search_tool_bm25, library execute vs through MCP (ms)", searches, "library"
            )
        )
        parts.append(
            latency_table(
                f"{transport}: call_tool, upstream called directly vs through a proxy (ms)", calls, "direct"
            )
        )
    if starts:
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
        parts.append(
            table(
                "stdio: from launch to the first tools/list answer (ms)",
                ["gateway", "median", "min", "max", "starts"],
                start_rows,
            )
        )
    return "\n".join(parts)


async def measure(db: str, directory: Path, transport: str, rounds: int) -> tuple[Any, Any]:
    with contextlib.ExitStack() as stack:
        async with targets(transport, db, directory, stack) as where:
            searches = await search_rounds(db, where, rounds)
            calls = await call_rounds(where, rounds)
    return searches, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="timed searches and calls per path")
    parser.add_argument("--starts", type=int, default=7, help="launches per gateway (0: none)")
    parser.add_argument(
        "--transport", action="append", choices=["stdio", "http"], help="the transports (default: both)"
    )
    parser.add_argument("--append", action="store_true", help="append the tables to bench/results.md")
    options = parser.parse_args()
    transports = options.transport or ["stdio", "http"]
    machine = machine_info()  # the load average before the run
    with tempfile.TemporaryDirectory() as workdir:
        directory = Path(workdir)
        db = f"sqlite:///{directory / 'gateway.db'}"
        if REAL_CATALOG.exists():
            cli(db, "import", str(REAL_CATALOG))
        measured = {
            transport: anyio.run(measure, db, directory, transport, options.rounds)
            for transport in transports
        }
        starts = anyio.run(start_rounds, db, directory, options.starts) if options.starts else {}
    tables = report(measured, starts)
    print(tables)
    if options.append:
        import os

        catalog = "the real MCP catalog (757 tools) + " if REAL_CATALOG.exists() else ""
        arguments = " ".join(sys.argv[1:])
        lines = [
            "",
            f"## MCP gateway overhead ({machine['date']}, commit {machine['commit']})",
            "",
            f"`python -m bench.gateway {arguments}`; catalog: {catalog}the 6 tools of "
            "`tests/mcp_upstream.py`; SQLite.",
            "",
            ", ".join(f"{key}: {value}" for key, value in machine.items() if key not in ("date", "commit"))
            + ", load average at the end: "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "",
            tables,
        ]
        with (ROOT / "bench" / "results.md").open("a", encoding="utf-8") as results:
            results.write("\n".join(lines))


if __name__ == "__main__":
    main()
