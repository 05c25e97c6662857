"""What a gateway starts ends with it, however it ends: its client leaving, a signal, ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.mcp_helpers import WAIT, upstream_entry, write_config

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
