"""Where ``tool-index serve --transport http`` listens and who may talk to it, checked on a real
``serve`` process: without a token, only 127.0.0.1, localhost and ::1 are served, and requests
with a foreign Host or Origin (DNS rebinding) are refused; any other spelling of any address,
loopback ones included, needs a token."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_helpers import cli, http_gateway, write_config

pytestmark = pytest.mark.slow

SECRET = "tok-5f1e0c7a22"
UNPROTECTED = [
    "127.0.0.2",
    "127.1",
    "0x7f.1",
    "2130706433",
    "::ffff:127.0.0.1",
    "0:0:0:0:0:0:0:1",
    "[::1]",
    "LOCALHOST",
    "localhost.",
    "localhost.localdomain",
    "0.0.0.0",
    "::",
    "",
]
"""Loopback under other names, and the whole machine: none gets the Host and Origin checks."""
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
POST_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def no_token_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "TOOL_INDEX_TOKEN"}


def empty_config(tmp_path: Path) -> tuple[str, Path]:
    return f"sqlite:///{tmp_path / 'tools.db'}", write_config(tmp_path, {})


@pytest.mark.parametrize("host", UNPROTECTED)
def test_serve_refuses_any_other_host_without_a_token(tmp_path: Path, host: str) -> None:
    db, config = empty_config(tmp_path)
    args = ["serve", "--config", str(config), "--transport", "http", "--port", "0", "--host", host]
    done = cli(db, *args, env=no_token_env())
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"Error: --host {host} is not 127.0.0.1, localhost or ::1, the hosts served without a token: "
        "give --token SECRET (clients send 'Authorization: Bearer SECRET'), or bind 127.0.0.1\n"
    )


def authority(url: str) -> str:
    return url.split("/")[2]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_a_tokenless_gateway_refuses_foreign_host_and_origin_headers(tmp_path: Path, host: str) -> None:
    db, config = empty_config(tmp_path)
    with http_gateway(db, config, "--host", host) as url:
        port = authority(url).rsplit(":", 1)[1]

        async def run() -> None:
            async with httpx2.AsyncClient() as http:
                hostile = [
                    ({"Host": "attacker.example"}, 421),
                    ({"Host": f"attacker.example:{port}"}, 421),
                    ({"Host": f"127.0.0.2:{port}"}, 421),
                    ({"Host": f"localhost.:{port}"}, 421),
                    ({"Origin": "http://attacker.example"}, 403),
                    ({"Origin": f"http://attacker.example:{port}"}, 403),
                    ({"Origin": "null"}, 403),
                ]
                for headers, status in hostile:
                    answer = await http.post(url, json=LIST, headers={**POST_HEADERS, **headers})
                    assert answer.status_code == status, headers
                local = {"Origin": f"http://{authority(url)}"}
                async with (
                    httpx2.AsyncClient(headers=local) as same_origin,
                    Client(
                        streamable_http_client(f"{url}?session=s", http_client=same_origin), cache=None
                    ) as client,
                ):
                    listed = await client.list_tools()
                    assert [tool.name for tool in listed.tools] == ["search_tool_bm25", "call_tool"]

        anyio.run(run)


@pytest.mark.parametrize("host", ["127.0.0.2", "127.1"])
def test_another_loopback_spelling_serves_only_with_its_token(tmp_path: Path, host: str) -> None:
    db, config = empty_config(tmp_path)
    with http_gateway(db, config, "--host", host, "--token", SECRET) as url:

        async def run() -> None:
            async with httpx2.AsyncClient() as http:
                for headers in ({}, {"Host": "attacker.example"}, {"Authorization": "Bearer nope"}):
                    answer = await http.post(url, json=LIST, headers={**POST_HEADERS, **headers})
                    assert answer.status_code == 401, headers
            authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {SECRET}"})
            async with (
                authorized as http,
                Client(streamable_http_client(f"{url}?session=s", http_client=http), cache=None) as client,
            ):
                listed = await client.list_tools()
                assert [tool.name for tool in listed.tools] == ["search_tool_bm25", "call_tool"]

        anyio.run(run)


def test_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    db, config = empty_config(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        done = cli(db, "serve", "--config", str(config), "--transport", "http", "--port", port)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == f"Error: cannot listen on 127.0.0.1 port {port}"
    assert "Traceback" not in done.stderr
