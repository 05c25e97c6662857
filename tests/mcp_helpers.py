"""Real parts for the gateway tests: upstream servers (``tests/mcp_upstream.py``) run as
processes over stdio or HTTP on 127.0.0.1, the ``tool-index`` command line as a process (or, for
the syncs that fill a test's database, in the test's own), and the gateway as a ``tool-index
serve`` process driven by the SDK's ``Client``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client

UPSTREAM = Path(__file__).resolve().parent / "mcp_upstream.py"
WAIT = 60.0
"""Longest wait for something that should happen (a process answering, a re-sync landing)."""


def upstream_entry(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": sys.executable, "args": [str(UPSTREAM), *args]}
    if env:
        entry["env"] = env
    return entry


def write_config(directory: Path, servers: dict[str, Any], *, key: str = "mcpServers") -> Path:
    path = directory / "mcp.json"
    path.write_text(json.dumps({key: servers}), encoding="utf-8")
    return path


def cli(db: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tool-index --db DB ARGS...`` as a process."""
    return subprocess.run(
        [sys.executable, "-m", "discovery.cli", "--db", db, *args],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        env=env,
        check=False,
    )


def sync(db: str, config: Path) -> None:
    """``tool-index --db DB sync --config CONFIG`` run in this process: the real command and real
    upstream processes, without a new interpreter for a database a test only starts from."""
    from click.testing import CliRunner

    from discovery.cli._main import main

    done = CliRunner().invoke(main, ["--db", db, "sync", "--config", str(config)], catch_exceptions=False)
    assert done.exit_code == 0 and ": added " in done.output, done.output


def synced_into(db: str, directory: Path, servers: dict[str, Any] | None = None) -> Path:
    """The config of ``servers`` (one test upstream, ``up``, by default), written in
    ``directory`` and synced into ``db`` by ``tool-index sync``."""
    config = write_config(directory, servers or {"up": upstream_entry()})
    sync(db, config)
    return config


HANDSHAKE: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]
"""What a client without a library writes first to a stdio server: the handshake, then
tools/list (request id 2)."""


def serve_parameters(
    db: str, config: Path, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "discovery.cli", "--db", db, "serve", "--config", str(config), *args],
        env=env,
    )


@asynccontextmanager
async def stdio_gateway(
    db: str,
    config: Path,
    *args: str,
    errlog: TextIO | None = None,
    mode: str = "auto",
    env: dict[str, str] | None = None,
    on_message: Callable[[IncomingMessage], None] | None = None,
) -> AsyncIterator[Client]:
    """A ``tool-index serve`` process over stdio, and the SDK client connected to it."""

    async def handler(message: IncomingMessage) -> None:
        if on_message is not None:
            on_message(message)

    transport = stdio_client(serve_parameters(db, config, *args, env=env), errlog=errlog or sys.stderr)
    async with Client(
        transport, mode=mode, message_handler=handler, cache=None, read_timeout_seconds=WAIT
    ) as client:
        yield client


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def search(client: Client, query: str, limit: int = 8) -> dict[str, Any]:
    result = await client.call_tool("search_tool_bm25", {"query": query, "limit": limit})
    assert not result.is_error, text_of(result)
    found: dict[str, Any] = json.loads(text_of(result))
    return found


async def call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
    wrapped: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    return await client.call_tool("call_tool", wrapped)


async def eventually(check: Callable[[], Any], what: str) -> Any:
    """Poll the coroutine function ``check`` until it returns something true; a slow machine only
    waits longer."""
    with anyio.fail_after(WAIT):
        while True:
            found = await check()
            if found:
                return found
            await anyio.sleep(0.1)
    raise AssertionError(what)  # pragma: no cover


@contextmanager
def process_announcing(
    command: list[str], marker: str, *, stream: str = "stdout"
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``command``; yield it with the rest of the first line of ``stream`` holding ``marker``."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    try:
        pipe = process.stdout if stream == "stdout" else process.stderr
        assert pipe is not None
        seen: list[str] = []
        while True:
            line = pipe.readline()
            if not line:
                raise AssertionError(f"{command} ended before saying {marker!r}: {seen}")
            seen.append(line)
            if marker in line:
                yield process, line.split(marker, 1)[1].strip()
                return
    finally:
        process.terminate()
        try:
            process.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@contextmanager
def http_upstream(*args: str) -> Iterator[str]:
    """``tests/mcp_upstream.py --http`` on 127.0.0.1; yields its endpoint URL."""
    with process_announcing([sys.executable, str(UPSTREAM), "--http", *args], "PORT ") as (_, port):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def http_gateway(db: str, config: Path, *args: str) -> Iterator[str]:
    """``tool-index serve --transport http --port 0``; yields its endpoint URL."""
    command = [
        sys.executable,
        "-m",
        "discovery.cli",
        "--db",
        db,
        "serve",
        "--config",
        str(config),
        "--transport",
        "http",
        "--port",
        "0",
        *args,
    ]
    with process_announcing(command, "listening on ", stream="stderr") as (_, url):
        yield url


@contextmanager
def gateway_process(db: str, config: Path, stderr: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``tool-index serve --transport http`` with its stderr in a file; yields it and its
    endpoint, and ends it, if it still runs, with SIGTERM as a client would."""
    command = [sys.executable, "-m", "discovery.cli", "--db", db, "serve", "--config", str(config)]
    with stderr.open("w") as sink:
        process = subprocess.Popen(
            [*command, "--transport", "http", "--port", "0"], stdin=subprocess.DEVNULL, stderr=sink
        )
    try:
        deadline = time.monotonic() + WAIT
        while "listening on " not in stderr.read_text():
            assert process.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        yield process, stderr.read_text().split("listening on ", 1)[1].split()[0]
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=WAIT) == 0, stderr.read_text()
