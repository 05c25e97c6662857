"""The asyncio face: the loop runs on while a call waits on the database, and the calls do what
the synchronous ones do."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from discovery import ToolIndex
from discovery.aio import AsyncToolIndex
from discovery.errors import EmptyQuery
from tests.providers import CATALOG


def test_other_tasks_run_while_a_search_waits_for_the_database(tmp_path: Path) -> None:
    """Another connection holds the write lock, so the search cannot finish until a task on the
    loop releases it: the search succeeds only if the loop kept running while it waited (a
    blocking call would sit out the busy timeout and fail, with no tick in between)."""
    path = tmp_path / "tools.db"

    async def main() -> tuple[list[bool], list[str]]:
        async with await AsyncToolIndex.open(f"sqlite:///{path}") as index:
            await index.upsert_tools(CATALOG)
            session = await index.session("chat", discovery_mode="all")
            blocker = sqlite3.connect(path, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")
            search = asyncio.create_task(session.search("call-1", {"query": "github issue"}))
            done_at_each_tick = []
            for _ in range(50):
                await asyncio.sleep(0)
                done_at_each_tick.append(search.done())
            blocker.execute("ROLLBACK")
            blocker.close()
            result = await search
            return done_at_each_tick, result.details["activated_tools"]

    ticks, activated = asyncio.run(main())
    assert ticks == [False] * 50
    assert activated == ["mcp__github__create_issue"]


def test_searches_from_many_tasks_at_once_all_land(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], int]:
        async with await AsyncToolIndex.open(f"sqlite:///{tmp_path / 'tools.db'}") as index:
            await index.upsert_tools(CATALOG)
            session = await index.session("many", discovery_mode="all")
            queries = ["github issue", "slack message", "switch tab", "documentation pages", "calendar"]
            await asyncio.gather(
                *(
                    session.search(f"call-{n}", {"query": query, "limit": 1})
                    for n, query in enumerate(queries)
                )
            )
            record = await index.session_record("many")
            return await session.selected(), len(
                [call for call in record["calls"] if call["kind"] == "search"]
            )

    selected, calls = asyncio.run(main())
    assert calls == 5
    assert len(selected) == 5


def test_the_async_calls_match_the_synchronous_ones(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tools.db'}"

    async def main() -> None:
        index = await AsyncToolIndex.open(url)
        report = await index.upsert_tools(CATALOG)
        assert len(report.added) == len(CATALOG)
        assert [hit.name for hit in await index.search("github issue")] == ["mcp__github__create_issue"]
        assert (await index.search_details("github issue"))["tools"][0]["name"] == "mcp__github__create_issue"
        assert (await index.tool("bash")).description == "Run a shell command"
        assert len(await index.tools(source="mcp")) == 4
        assert (await index.stats())["tools"] == len(CATALOG)
        session = await index.session("s", discovery_mode="mcp-only")
        assert session.id == "s" and await session.effective_mode() == "mcp-only"
        assert "Total discoverable tools available: 4." in await session.search_description()
        assert [hit.name for hit in await session.preview("slack")] == ["mcp__slack__post_message"]
        with pytest.raises(EmptyQuery):
            await session.search("c0", {"query": ""})
        await session.search("c1", {"query": "slack"})
        assert [tool.name for tool in await session.active_tools()][-1] == "mcp__slack__post_message"
        assert await session.set_active(["read", "search_tool_bm25"]) == ["read", "search_tool_bm25"]
        assert await session.active() == ["read", "search_tool_bm25"]
        assert "mcp__slack__post_message" not in await session.reset()
        assert await index.remove_tools(["calendar_lookup"]) == ["calendar_lookup"]
        await index.delete_session("s")
        assert index.url == url
        await index.close()
        stemmed = await AsyncToolIndex.open(f"sqlite:///{tmp_path / 'stemmed.db'}", analyzer="enhanced")
        await stemmed.upsert_tools(CATALOG)
        assert (await stemmed.stats())["analyzer"].startswith("enhanced")
        assert await stemmed.reindex("reference") == len(CATALOG)
        assert (await stemmed.stats())["analyzer"] == "reference"
        await stemmed.close()

    asyncio.run(main())
    with ToolIndex.open(url) as index:
        assert index.sessions() == []
        assert len(index.tools()) == len(CATALOG) - 1
