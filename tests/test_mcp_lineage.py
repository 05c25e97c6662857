"""A gateway never fronts itself over HTTP (``discovery._mcp.lineage``): an entry whose URL is
the gateway itself, or a gateway that leads back to it, is found out by asking (the id its
answers carry), left out with one line on stderr, and the gateway goes on serving.

Real parts: ``tool-index serve --transport http`` processes, their config files rewritten while
they run, the SDK's client."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from discovery._mcp import lineage
from tests.mcp_helpers import WAIT, cli, gateway_process, search, upstream_entry

LOOP_LINE = "it is this gateway, or a gateway that leads back to it"


def test_an_answer_naming_this_gateway_leads_back_and_other_ids_are_passed_on() -> None:
    other, third = "0123456789abcdef", "fedcba9876543210"
    assert not lineage.leads_back(None) and not lineage.leads_back("")
    assert not lineage.leads_back(f"{other}, not-an-id,{'x' * 10_000}")
    assert lineage.advertised().split(",")[0] == lineage.OWN_ID
    assert other in lineage.advertised().split(",") and "not-an-id" not in lineage.advertised()
    assert lineage.leads_back(f"{third},{lineage.OWN_ID}")


def wait_for(path: Path, text: str) -> str:
    deadline = time.monotonic() + WAIT
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.1)
    return path.read_text()


def write(path: Path, servers: dict[str, object]) -> None:
    # A new size as well as new bytes, so the gateway's poll sees the change at once.
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")


async def searched(url: str, query: str) -> list[str]:
    async with Client(f"{url}?session=s", cache=None, read_timeout_seconds=WAIT) as client:
        return [tool["name"] for tool in (await search(client, query))["tools"]]


@pytest.mark.slow
def test_an_entry_that_is_the_gateway_itself_is_left_out_with_one_line(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = tmp_path / "mcp.json"
    write(config, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    stderr = tmp_path / "serve.err"
    with gateway_process(db, config, stderr) as (_, url):
        write(config, {"up": upstream_entry(), "itself": {"type": "http", "url": url}})
        said = wait_for(stderr, "sync itself:")
        assert said.count(LOOP_LINE) == 1, said
        names = anyio.run(searched, url, "search tools call")
        assert not any(name.startswith("mcp__itself__") for name in names)
        assert "mcp__up__echo" in anyio.run(searched, url, "echo a text back")


@pytest.mark.slow
def test_two_gateways_that_front_each_other_are_found_out_by_the_second(tmp_path: Path) -> None:
    a_db, b_db = (f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db"))
    a_config, b_config = tmp_path / "a.json", tmp_path / "b.json"
    write(a_config, {"up": upstream_entry()})
    assert cli(a_db, "sync", "--config", str(a_config)).returncode == 0
    a_err, b_err = tmp_path / "a.err", tmp_path / "b.err"
    with gateway_process(a_db, a_config, a_err) as (_, a_url):
        write(b_config, {"a": {"type": "http", "url": a_url}})
        with gateway_process(b_db, b_config, b_err) as (_, b_url):
            wait_for(b_err, "sync a:")  # B fronts A: A's answers named A to B
            write(a_config, {"up": upstream_entry(), "b": {"type": "http", "url": b_url}})
            said = wait_for(a_err, "sync b:")
            # B's answers name A, behind it: A leaves B out rather than call itself through it.
            assert said.count(LOOP_LINE) == 1, said
            assert LOOP_LINE not in b_err.read_text()
            assert "mcp__up__echo" in anyio.run(searched, a_url, "echo a text back")
