"""Many hosts, one catalog (issue 56): what a host's config filters and which servers it syncs stay
its own. Two real ``tool-index serve`` processes over HTTP with ``--tokens``, each with its own
config, on one database (each backend; PostgreSQL is what hosts share), driven by the official SDK
client; upstreams are small servers written for the tests, run as processes on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_helpers import (
    call,
    cli,
    eventually,
    http_gateway,
    search,
    stdio_gateway,
    text_of,
    upstream_entry,
)

pytestmark = pytest.mark.slow

SECRET = "host-secret-5b7e21"
TIME_SERVER = """\
import sys
from datetime import datetime
from zoneinfo import ZoneInfo

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="get_current_time",
    description="Get the current time in a timezone",
    input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):
    zone = (params.arguments or {}).get("timezone", "UTC")
    return types.CallToolResult(content=[types.TextContent(text=datetime.now(ZoneInfo(zone)).isoformat())])


async def main():
    server = Server("time", version=sys.argv[1] if len(sys.argv) > 1 else "1", on_list_tools=list_tools,
                    on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
"""


def host_config(directory: Path, servers: dict[str, Any], **filters: list[str]) -> Path:
    """``directory/mcp.json``: one host's config, with its ``toolIndex`` filters."""
    directory.mkdir(exist_ok=True)
    document: dict[str, Any] = {"mcpServers": servers}
    if filters:
        document["toolIndex"] = filters
    path = directory / "mcp.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def tokens(directory: Path) -> Path:
    path = directory / "tokens.json"
    path.write_text(json.dumps({"alice": SECRET}), encoding="utf-8")
    return path


def time_entry(directory: Path, *args: str) -> dict[str, Any]:
    script = directory / "time_server.py"
    script.write_text(TIME_SERVER, encoding="utf-8")
    return {"command": sys.executable, "args": [str(script), *args]}


@asynccontextmanager
async def client_of(url: str, session: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {SECRET}"})
    endpoint = f"{url}?session={session}"
    async with http, Client(streamable_http_client(endpoint, http_client=http), cache=None) as client:
        yield client


def synced(db: str, config: Path, *args: str) -> list[str]:
    done = cli(db, "sync", "--config", str(config), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def tool_names(db: str, server: str) -> list[str]:
    done = cli(db, "tools", "--server", server, "--json")
    assert done.returncode == 0, done.stderr
    return sorted(record["name"] for record in json.loads(done.stdout))


def test_one_hosts_filters_never_take_tools_from_another(db_url: str, tmp_path: Path) -> None:
    """Host B denies ``files/echo`` with ``sync --deny``, then also ``files/fail`` by a hot reload of
    its config's filters, and the two hosts sync in turn: host A's gateway finds and calls both
    all along, and B's offers neither."""
    entry = upstream_entry()
    a = host_config(tmp_path / "a", {"files": entry})
    b = host_config(tmp_path / "b", {"files": entry})
    every = sorted(
        f"mcp__files__{tool}" for tool in ("echo", "fail", "crash", "grow", "token_digest", "stall")
    )
    assert synced(db_url, a) == ["files: added 6, updated 0, unchanged 0, removed 0"]
    assert synced(db_url, b, "--deny", "files/echo") == [
        "files: added 0, updated 0, unchanged 6, removed 0; 1 not offered by this config's filters"
    ]
    assert tool_names(db_url, "files") == every
    gateway_a = http_gateway(db_url, a, "--tokens", str(tokens(tmp_path / "a")))
    gateway_b = http_gateway(db_url, b, "--tokens", str(tokens(tmp_path / "b")), "--deny", "files/echo")
    with gateway_a as url_a, gateway_b as url_b:

        async def run() -> None:
            async with client_of(url_a, "on-a") as on_a, client_of(url_b, "on-b") as on_b:
                found = await search(on_a, "echo a text back", limit=1)
                assert found["activated_tools"] == ["mcp__files__echo"]
                assert text_of(await call(on_a, "mcp__files__echo", {"text": "a"})) == "echo: a"
                assert (
                    "mcp__files__echo"
                    not in (await search(on_b, "echo a text back", limit=3))["activated_tools"]
                )
                refused = await call(on_b, "mcp__files__echo", {"text": "b"})
                assert refused.is_error and "not allowed by this gateway's tool filters" in text_of(refused)

                # B's config now denies fail as well: applied while B runs, with no sync.
                host_config(tmp_path / "b", {"files": entry}, deny=["files/fail"])

                async def fail_refused_on_b() -> bool:
                    result = await call(on_b, "mcp__files__fail")
                    return "not allowed by this gateway's tool filters" in text_of(result)

                await eventually(fail_refused_on_b, "B's new filters are in force")
                assert (await search(on_a, "always reports a failure", limit=1))["activated_tools"] == [
                    "mcp__files__fail"
                ]
                failed = await call(on_a, "mcp__files__fail")
                assert failed.is_error and text_of(failed) == "the tool failed on purpose"

                # The two hosts sync in turn; A's session keeps both tools, callable.
                for config, args in ((b, ("--deny", "files/echo")), (a, ()), (b, ("--deny", "files/*"))):
                    synced(db_url, config, *args)
                    assert tool_names(db_url, "files") == every
                    echoed = await call(on_a, "mcp__files__echo", {"text": "again"})
                    assert (text_of(echoed), echoed.is_error) == ("echo: again", False)
                    assert text_of(await call(on_a, "mcp__files__fail")) == "the tool failed on purpose"

        anyio.run(run)
    assert cli(db_url, "verify").returncode == 0


def test_a_server_name_another_config_holds_is_refused(db_url: str, tmp_path: Path) -> None:
    """Host C's config gives the name ``time`` to another server: its sync of ``time`` is refused
    with an error naming both, its other server syncs, host A's gateway keeps calling its real time
    server, and C's gateway does not offer the catalog's ``time`` tools. What synced each server
    is shown; A may move its own server to a new version, and C may take the name over only when
    told to."""
    a = host_config(tmp_path / "a", {"time": time_entry(tmp_path)})
    c = host_config(tmp_path / "c", {"time": upstream_entry(), "files": upstream_entry("--tools", "1")})
    host = socket.gethostname()
    assert synced(db_url, a) == ["time: added 1, updated 0, unchanged 0, removed 0"]
    done = cli(db_url, "sync", "--config", str(c))
    assert done.returncode == 1
    refused, files = done.stdout.splitlines()
    assert refused.startswith(
        f"time: refused: server 'time' of {c.resolve()} is not the catalog's 'time': that one is stdio "
        f"{sys.executable!r} (fingerprint "
    )
    assert f") of {a.resolve()} on host {host!r}, last synced " in refused
    assert refused.endswith(
        "Its tools were left as they are: give this server another name in this config, or replace the "
        "other with sync --take-over time"
    )
    assert files == "files: added 7, updated 0, unchanged 0, removed 0"
    assert tool_names(db_url, "time") == ["mcp__time__get_current_time"]

    shown = cli(db_url, "tools", "--server", "time").stdout.splitlines()[0]
    assert shown.startswith(f"server time: stdio {sys.executable!r} (")
    assert f") of {a.resolve()} on {host}, synced " in shown and shown.endswith(" UTC")
    origins = json.loads(cli(db_url, "stats", "--json").stdout)["server_origins"]
    assert {name: (origin["config"], origin["host"]) for name, origin in origins.items()} == {
        "files": (str(c.resolve()), host),
        "time": (str(a.resolve()), host),
    }
    stats = cli(db_url, "stats").stdout
    assert f"  time   1  stdio {sys.executable!r} (" in stats

    errlog_c = tmp_path / "c" / "serve-stderr.txt"
    gateway_a = http_gateway(db_url, a, "--tokens", str(tokens(tmp_path / "a")))
    gateway_c = http_gateway(
        db_url, c, "--tokens", str(tokens(tmp_path / "c")), "--upstream-log", str(errlog_c)
    )
    with gateway_a as url_a, gateway_c as url_c:

        async def run() -> None:
            async with client_of(url_a, "on-a") as on_a, client_of(url_c, "on-c") as on_c:
                found = await search(on_a, "what time is it in Tokyo", limit=1)
                assert found["activated_tools"] == ["mcp__time__get_current_time"]
                told = await call(on_a, "mcp__time__get_current_time", {"timezone": "Asia/Tokyo"})
                assert not told.is_error and text_of(told).endswith("+09:00")
                on_c_found = await search(on_c, "what time is it in Tokyo; echo a text", limit=8)
                assert not [name for name in on_c_found["activated_tools"] if name.startswith("mcp__time__")]
                not_here = await call(on_c, "mcp__time__get_current_time", {"timezone": "UTC"})
                assert not_here.is_error
                assert text_of(not_here) == (
                    "'mcp__time__get_current_time' is not offered here: the catalog's server 'time' is "
                    "another config's, not the 'time' of this gateway's config (its sync was refused)."
                )

        anyio.run(run)

    # Another config's time server that lists the same tools (another root, say) changes nothing.
    d = host_config(tmp_path / "d", {"time": time_entry(tmp_path, "elsewhere")})
    assert synced(db_url, d) == ["time: added 0, updated 0, unchanged 1, removed 0"]
    assert json.loads(cli(db_url, "stats", "--json").stdout)["server_origins"]["time"]["config"] == str(
        a.resolve()
    )
    # A new version of A's own server is an update; C's server is still refused until it takes over.
    a = host_config(tmp_path / "a", {"time": time_entry(tmp_path, "2")})
    assert synced(db_url, a) == ["time: added 0, updated 0, unchanged 1, removed 0"]
    assert cli(db_url, "sync", "--config", str(c), "--server", "time").returncode == 1
    assert synced(db_url, c, "--server", "time", "--take-over", "time") == [
        "time: added 6, updated 0, unchanged 0, removed 1"
    ]
    assert cli(db_url, "sync", "--config", str(a)).stdout.startswith(
        f"time: refused: server 'time' of {a.resolve()} is not the catalog's 'time'"
    )
    origins = json.loads(cli(db_url, "stats", "--json").stdout)["server_origins"]
    assert origins["time"]["config"] == str(c.resolve())
    unknown = cli(db_url, "sync", "--config", str(c), "--server", "files", "--take-over", "time")
    assert (unknown.returncode, unknown.stderr.splitlines()[-1]) == (
        2,
        "Error: --take-over time: not a server this sync syncs",
    )


def test_a_gateway_syncs_its_own_changed_server_and_refuses_another_configs(
    db_url: str, tmp_path: Path
) -> None:
    """At start, from the recorded fingerprints: a server this config changed since its sync (a
    new version) is synced again in the background; one the catalog holds as another config's is
    out of scope while a sync checks it, and stays out when refused, said once on stderr."""
    a = host_config(tmp_path / "a", {"time": time_entry(tmp_path)})
    c = host_config(tmp_path / "c", {"time": upstream_entry(), "files": upstream_entry()})
    synced(db_url, a)
    synced(db_url, c, "--server", "files")
    before = json.loads(cli(db_url, "stats", "--json").stdout)["server_origins"]["time"]["fingerprint"]
    a = host_config(tmp_path / "a", {"time": time_entry(tmp_path, "2")})
    errlog = tmp_path / "serve-stderr.txt"

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(db_url, a, "--session", "a", errlog=stream) as on_a:
                assert (await search(on_a, "what time is it in Tokyo", limit=1))["activated_tools"] == [
                    "mcp__time__get_current_time"
                ]

                async def resynced() -> bool:
                    return "tool-index serve: sync time: added 0, updated 0, unchanged 1, removed 0" in (
                        errlog.read_text().splitlines()
                    )

                await eventually(resynced, "the changed server is synced again")
            async with stdio_gateway(db_url, c, "--session", "c", errlog=stream) as on_c:
                found = await search(on_c, "what time is it; echo a text back", limit=8)
                assert not [name for name in found["activated_tools"] if name.startswith("mcp__time__")]

    anyio.run(run)
    lines = errlog.read_text().splitlines()
    assert (
        "tool-index serve: not the servers the catalog recorded under their names, synced again: time"
        in lines
    )
    warnings = [line for line in lines if "is not the catalog's 'time'" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        f"tool-index serve: Warning: sync time: refused: server 'time' of {c.resolve()} is not the catalog's "
        "'time'"
    )
    assert warnings[0].endswith("; its tools are not offered here")
    after = json.loads(cli(db_url, "stats", "--json").stdout)["server_origins"]["time"]
    assert after["fingerprint"] != before and after["config"] == str(a.resolve())
