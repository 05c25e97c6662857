"""The gateway's write queue (``discovery._mcp.writes``): entries written in the order they were
queued, a write the gateway waits for after them in the same transaction, and a write that fails
(the database locked by another process) leaving every entry queued until a later try writes it.
Real parts: a SQLite file, another connection holding its write lock, the library's worker."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio

from discovery import ToolIndex
from discovery._mcp.sessions import GatewaySession
from discovery._mcp.sync import Library
from discovery._mcp.writes import WriteQueue
from store import SessionKey, Writer
from tests.mcp_helpers import eventually

TOOLS = [
    {"name": "mcp__gh__create_issue", "description": "Create a GitHub issue", "server_name": "gh"},
    {"name": "mcp__slack__post", "description": "Post a Slack message", "server_name": "slack"},
]


def logged(index: ToolIndex, session_id: str) -> list[str]:
    return [
        f"{call['kind']} {call['params'].get('tool', '')}".strip()
        for call in index.session_record(session_id)["calls"]
    ]


def test_a_write_that_fails_leaves_every_entry_queued_and_a_later_try_writes_them_in_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tools.db"
    with ToolIndex.open(f"sqlite:///{path}?timeout=0.2") as index:
        index.upsert_tools(TOOLS)
        session = GatewaySession.open(index, "s", "mcp-only")
        session.store()
        said: list[str] = []
        queue = WriteQueue(Library(index), said.append)

        async def run() -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(queue.drain)
                locker = sqlite3.connect(path, isolation_level=None)
                locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
                for tool in ("mcp__gh__create_issue", "mcp__slack__post"):
                    queue.later(session, session.call_logging(tool, None, 1.0, False, "called"))

                async def tried() -> bool:
                    return any("trying again" in line for line in said)

                await eventually(tried, "the queue never tried to write")
                assert len(queue) == 2  # nothing dropped
                locker.execute("ROLLBACK")
                locker.close()

                async def written() -> bool:
                    return len(queue) == 0

                await eventually(written, "the queue never wrote its entries")

                def search_mark(writer: Writer) -> int:
                    return len(writer.sessions.events(SessionKey("local", "s")))

                queue.later(
                    session, session.call_logging("mcp__gh__create_issue", None, 1.0, True, "not active")
                )
                # A write the gateway waits for comes after what was queued before it, in one transaction.
                assert await queue.write(search_mark) == 4
                group.cancel_scope.cancel()

        anyio.run(run)
        assert logged(index, "s") == [
            "create",
            "tool_call mcp__gh__create_issue",
            "tool_call mcp__slack__post",
            "tool_call mcp__gh__create_issue",
        ]
