"""What a gateway starts ends with it, however it ends (its client leaving, a signal, ``kill -9``),
and a gateway never starts itself."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from discovery._mcp.config import load_config
from discovery._mcp.loops import without_loops
from tests.mcp_helpers import (
    WAIT,
    call,
    cli,
    process_announcing,
    search,
    stdio_gateway,
    upstream_entry,
    write_config,
)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="the kernel's guard")]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@contextmanager
def starting_upstream(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A gateway whose background sync is starting an upstream that takes minutes to start, and
    the upstream's pid; whatever still runs at the end is killed."""
    live = tmp_path / "live"
    live.mkdir()
    config = write_config(tmp_path, {"slow": upstream_entry("--live-dir", str(live), "--start-delay", "600")})
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "discovery.cli",
            "--db",
            f"sqlite:///{tmp_path / 'tools.db'}",
            "serve",
            "--config",
            str(config),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: list[int] = []
    try:
        wait_for(lambda: any(live.glob("*.live")), "the upstream started")
        pids.append(int(next(live.glob("*.live")).stem))
        yield gateway, pids[0]
    finally:
        for pid in [gateway.pid, *pids]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        gateway.wait(WAIT)


@pytest.mark.parametrize("end", ["kill -9", "SIGTERM", "client gone"])
def test_an_upstream_ends_with_its_gateway(tmp_path: Path, end: str) -> None:
    with starting_upstream(tmp_path) as (gateway, upstream):
        assert alive(upstream)
        if end == "kill -9":
            gateway.kill()
        elif end == "SIGTERM":
            gateway.terminate()
        else:
            assert gateway.stdin is not None
            gateway.stdin.close()
        gateway.wait(WAIT)
        wait_for(lambda: not alive(upstream), f"the upstream ended after {end} of its gateway")


def gateway_entry(config: Path, *, cwd: Path | None = None) -> dict[str, Any]:
    """What ``tool-index client`` writes (the module form: the same program)."""
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": ["-m", "discovery.cli", "--db", "/tmp/elsewhere.db", "serve", "--config", str(config)],
    }
    if cwd is not None:
        entry["cwd"] = str(cwd)
    return entry


def test_a_gateway_of_the_same_config_or_one_leading_back_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    first, second, third = tmp_path / "a" / "mcp.json", tmp_path / "b.json", tmp_path / "c.json"
    link = tmp_path / "link.json"
    link.symlink_to(first)
    first.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "up": upstream_entry(),
                    "self": gateway_entry(Path("mcp.json"), cwd=tmp_path / "a"),
                    "linked": gateway_entry(link),
                    "chain": gateway_entry(second),
                    "other": gateway_entry(third),
                    "named": {"command": "tool-index", "args": ["serve", f"--config={first}"]},
                }
            }
        )
    )
    second.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "back": {"command": "uvx", "args": ["tool-index", "serve", "--config", str(first)]}
                }
            }
        )
    )
    third.write_text(json.dumps({"mcpServers": {"up": upstream_entry()}}))
    config = without_loops(load_config(first))
    assert list(config.servers) == ["up", "other"]
    same = "it runs a tool-index gateway of this same config, which would start itself"
    assert config.skipped == {
        "self": same,
        "linked": same,
        "chain": f"it runs a tool-index gateway of {second}, whose gateways lead back to this config",
        "named": same,
    }


def test_sync_and_serve_never_start_a_gateway_of_their_own_config(tmp_path: Path) -> None:
    """The one-file setup of the issue: the gateway's entry beside the servers it fronts."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry(), "tools": gateway_entry(tmp_path / "mcp.json")})
    skipped = (
        f"{config}: server 'tools' is skipped: it runs a tool-index gateway of this same config, "
        "which would start itself"
    )
    done = cli(db, "sync", "--config", str(config))
    added = "up: added 6, updated 0, unchanged 0, removed 0\n"
    assert (done.returncode, done.stdout, done.stderr) == (0, added, f"Warning: {skipped}\n")
    listed = cli(db, "tools", "--json")
    assert {tool["server_name"] for tool in json.loads(listed.stdout)} == {"up"}
    errlog = tmp_path / "gateway-stderr.txt"

    async def run() -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(db, config, "--session", "s", errlog=stream) as client:
                found = await search(client, "echo a text back", limit=3)
                assert found["total_tools"] == 6

    anyio.run(run)
    lines = errlog.read_text().splitlines()
    assert [line for line in lines if "skipped" in line] == [f"Warning: {skipped}"]


def stopped_after_calls(
    command: list[str], session: str, stop: signal.Signals, calls: int
) -> tuple[int, int]:
    """A new HTTP gateway's answered calls in ``session`` and its exit status, ``stop`` sent right
    after the last answer while the client is still connected."""
    answered = 0
    with process_announcing(command, "listening on ", stream="stderr") as (gateway, url):

        async def run() -> None:
            nonlocal answered
            async with Client(f"{url}?session={session}", cache=None) as client:
                await search(client, "echo a text back", limit=1)
                for i in range(calls):
                    answered += not (await call(client, "mcp__up__echo", {"text": str(i)})).is_error
                gateway.send_signal(stop)
                await anyio.to_thread.run_sync(gateway.wait, WAIT)

        with contextlib.suppress(Exception):  # the client's goodbye finds the gateway gone
            anyio.run(run)
        return answered, gateway.wait(WAIT)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_an_http_gateway_with_every_answered_call_logged(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """As over stdio: the process exits 0 with every call it answered logged, its pins written and
    what the calls taught credited, however soon after the last answer the signal comes."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    assert cli(db, "learning", "on").returncode == 0
    command = [sys.executable, "-m", "discovery.cli", "--db", db, "serve", "--config", str(config)]
    command += ["--transport", "http", "--port", "0"]
    rounds, calls = 3, 5
    for round_ in range(rounds):
        assert stopped_after_calls(command, f"s{round_}", stop, calls) == (calls, 0)
        shown = json.loads(cli(db, "session", "show", f"s{round_}", "--json").stdout)
        logged = [entry for entry in shown["calls"] if entry["kind"] == "tool_call"]
        assert len(logged) == calls, round_
        assert "mcp__up__echo" in shown["active"]
    learned = json.loads(cli(db, "learned", "mcp__up__echo", "--json").stdout)
    assert learned["sessions"] == rounds
