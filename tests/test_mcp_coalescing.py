"""A server's change notifications, however many, run one re-sync at a time and queue at most one
more: the re-sync that starts after the last notification sees every change before it."""

from __future__ import annotations

from pathlib import Path

import anyio

from discovery._mcp.upstreams import Upstreams
from tests.mcp_helpers import upstream_entry, write_config


def test_a_burst_of_notifications_runs_one_re_sync_and_queues_one(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": upstream_entry(), "b": upstream_entry()})
    runs: list[str] = []
    release = anyio.Event()

    async def resync(server: str) -> None:
        runs.append(server)
        await release.wait()

    async def run() -> None:
        async with Upstreams.from_config(config, on_tools_changed=resync) as upstreams:
            # Notifications before the re-sync has begun are all covered by it.
            for _ in range(100):
                upstreams._tools_changed("a")
            await anyio.wait_all_tasks_blocked()
            assert runs == ["a"]
            # Those that come while it runs queue exactly one more.
            for _ in range(100):
                upstreams._tools_changed("a")
            upstreams._tools_changed("b")  # another server's re-sync does not wait for a's
            await anyio.wait_all_tasks_blocked()
            assert runs == ["a", "b"]
            release.set()
            await anyio.wait_all_tasks_blocked()
            assert runs == ["a", "b", "a"]
            # Once the queue is done, the next notification runs a re-sync at once.
            upstreams._tools_changed("a")
            await anyio.wait_all_tasks_blocked()
            assert runs == ["a", "b", "a", "a"]

    anyio.run(run)
