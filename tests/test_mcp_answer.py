"""What a model behind ``tool-index serve`` meets (issue 54), each with a real ``serve`` process
and the MCP SDK's client: the rich answer, the query forms, the gateway's own description, a
search while servers sync, tools the filters leave out, ``alwaysLoad`` and ``--mode auto``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from discovery._mcp.description import with_active
from tests.mcp_helpers import call, eventually, stdio_gateway, sync, text_of, upstream_entry, write_config

THREE = {"up": upstream_entry("--tools", "3")}
"""The servers most tests serve: one upstream with three filler tools beside its own."""


def synced(tmp_path: Path, servers: dict[str, Any]) -> tuple[str, Path]:
    """A database holding ``servers``' tools, and the config naming them."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    path = write_config(tmp_path, servers)
    sync(db, path)
    return db, path


@pytest.fixture(scope="module")
def three_synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database synced from ``THREE`` once per module: the config each test writes names the
    same server with the same arguments, so its gateway serves a copy without syncing again."""
    db, _ = synced(tmp_path_factory.mktemp("three"), THREE)
    return Path(db.removeprefix("sqlite:///"))


def three(tmp_path: Path, three_synced: Path) -> tuple[str, Path]:
    """A copy of the database synced from ``THREE`` in ``tmp_path``, and its config there."""
    shutil.copyfile(three_synced, tmp_path / "tools.db")
    return f"sqlite:///{tmp_path / 'tools.db'}", write_config(tmp_path, THREE)


async def searched(client: Client, query: str, limit: int = 5) -> dict[str, Any]:
    result = await client.call_tool("search_tool_bm25", {"query": query, "limit": limit})
    assert not result.is_error, text_of(result)
    answer: dict[str, Any] = json.loads(text_of(result))
    assert result.structured_content == answer
    return answer


def names(answer: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in answer["tools"]]


async def listed(client: Client) -> dict[str, types.Tool]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


def test_the_answer_names_what_a_model_needs_and_a_resumed_session_finds_its_tools(
    tmp_path: Path, three_synced: Path
) -> None:
    db, config = three(tmp_path, three_synced)

    async def first() -> list[str]:
        async with stdio_gateway(db, config, "--session", "mine") as client:
            assert "Active in this session" not in (
                (await listed(client))["search_tool_bm25"].description or ""
            )
            answer = await searched(client, "echo a text back")
            assert answer["tools"][0] == {
                "name": "mcp__up__echo",
                "description": "Echo a text back, as text and as structured content",
                "required": ["text"],
            }
            assert answer["activated_tools"] == names(answer)
            assert len(text_of(await client.call_tool("search_tool_bm25", {"query": "echo"}))) < 2500
            again = await searched(client, "echo a text back")
            assert names(again) == names(answer) and again["activated_tools"] == []
            echoed = await call(client, "mcp__up__echo", {"text": "hi"})
            assert text_of(echoed) == "echo: hi"
            return names(answer)

    async def resumed(expected: list[str]) -> None:
        async with stdio_gateway(db, config, "--session", "mine") as client:
            # A new conversation on the session is told what it can call already.
            description = (await listed(client))["search_tool_bm25"].description or ""
            said = f"Active in this session already (call them with call_tool): {', '.join(expected)}."
            assert description.endswith(said)
            answer = await searched(client, "echo a text back")
            assert names(answer) == expected and answer["activated_tools"] == []
            assert all(tool["active"] for tool in answer["tools"])
            assert text_of(await call(client, "mcp__up__echo", {"text": "again"})) == "echo: again"

    expected = anyio.run(first)
    anyio.run(resumed, expected)


def test_query_forms_through_the_gateway(tmp_path: Path) -> None:
    # A new database: the gateway syncs both servers, and the first search waits for them.
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(
        tmp_path, {"up": upstream_entry("--tools", "3"), "other": upstream_entry("--tool", "echo_twice")}
    )

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s") as client:
            selected = await searched(client, "select:up/fail,stall,mcp__up__grow,missing")
            # A bare tool name two servers have selects both (in the order the catalog has them).
            assert set(selected["activated_tools"]) == {
                "mcp__up__fail",
                "mcp__up__stall",
                "mcp__other__stall",
                "mcp__up__grow",
            }
            assert selected["unknown"] == ["missing"]
            # call_tool takes a name as select: does, when it is one tool's.
            failed = await call(client, "up/fail")
            assert (text_of(failed), failed.is_error) == ("the tool failed on purpose", True)
            both = await call(client, "stall")
            assert both.is_error and text_of(both).startswith("'stall' is the name of 2 tools")
            # Written as a name, a query asks for the tools of that name alone.
            assert set(names(await searched(client, "token_digest"))) == {
                "mcp__up__token_digest",
                "mcp__other__token_digest",
            }
            # Both servers have token_digest: the name ranks one of them first, whichever the
            # catalog holds first (the order their syncs wrote them).
            first = names(await searched(client, "token digest"))[0]
            assert first in {"mcp__up__token_digest", "mcp__other__token_digest"}
            kept = names(await searched(client, "+other echo"))
            assert "mcp__other__echo_twice" in kept and all(name.startswith("mcp__other__") for name in kept)

    anyio.run(run)


def test_a_request_nothing_serves_activates_nothing(tmp_path: Path, three_synced: Path) -> None:
    db, config = three(tmp_path, three_synced)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s") as client:
            answer = await searched(client, "can you do it for me")
            assert answer["activated_tools"] == [] and answer["tools"] == []
            assert "up (" in answer["note"]

    anyio.run(run)


def test_the_description_is_the_gateways_own(tmp_path: Path, three_synced: Path) -> None:
    db, config = three(tmp_path, three_synced)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s") as client:
            description = (await listed(client))["search_tool_bm25"].description or ""
            assert "call_tool" in description and "select:" in description and "+WORD" in description
            assert "Servers: up (9 tools); 9 tools in all." in description
            assert "before the next model call" not in description

    anyio.run(run)


def test_a_search_while_servers_sync_waits_for_them(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"late": upstream_entry("--start-delay", "1")})

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s") as client:
            answer = await searched(client, "echo a text back")
            assert "mcp__late__echo" in names(answer), answer
            assert answer["total_tools"] > 0

    anyio.run(run)


def test_a_tool_the_filters_leave_out_is_reported_and_not_replaced(
    tmp_path: Path, three_synced: Path
) -> None:
    db, config = three(tmp_path, three_synced)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s", "--deny", "up/echo") as client:
            answer = await searched(client, "echo a text back", limit=5)
            assert answer["unavailable"] == ["mcp__up__echo"]
            assert answer["activated_tools"] == [] and answer["tools"] == []
            assert "not available here" in answer["note"]
            # Its own name does not reach it through call_tool either, nor say what it is.
            refused = await call(client, "echo", {"text": "x"})
            assert refused.is_error and "mcp__up__echo" not in text_of(refused)

    anyio.run(run)


def test_an_always_loaded_server_is_listed_and_callable_directly(tmp_path: Path) -> None:
    servers = {"up": upstream_entry("--tools", "50"), "pinned": {**upstream_entry(), "alwaysLoad": True}}
    db, config = synced(tmp_path, servers)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "s") as client:
            tools = await listed(client)
            assert {"search_tool_bm25", "call_tool", "mcp__pinned__echo", "mcp__pinned__fail"} <= set(tools)
            assert not any(name.startswith("mcp__up__") for name in tools)
            direct = await client.call_tool("mcp__pinned__echo", {"text": "hi"})
            assert (text_of(direct), direct.is_error) == ("echo: hi", False)
            assert text_of(await call(client, "mcp__pinned__echo", {"text": "again"})) == "echo: again"
            refused = await client.call_tool("mcp__up__echo", {"text": "no"})
            assert refused.is_error
            # Active in the session already: a search marks them active and never activates them.
            answer = await searched(client, "+pinned echo a text back")
            assert answer["tools"][0] == {**answer["tools"][0], "name": "mcp__pinned__echo", "active": True}
            assert not any(name.startswith("mcp__pinned__") for name in answer["activated_tools"])
            # Listed under their own names, they are not named again as active in the description.
            assert "mcp__pinned__" not in ((await listed(client))["search_tool_bm25"].description or "")

    anyio.run(run)


def test_mode_auto_lists_a_small_catalog_whole_and_no_search(tmp_path: Path, three_synced: Path) -> None:
    db, config = three(tmp_path, three_synced)

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "small", "--mode", "auto") as client:
            tools = await listed(client)
            assert "search_tool_bm25" not in tools and "mcp__up__echo" in tools and len(tools) == 10
            direct = await client.call_tool("mcp__up__echo", {"text": "hi"})
            assert text_of(direct) == "echo: hi"

    anyio.run(run)


def test_mode_auto_keeps_a_large_catalog_behind_the_search(tmp_path: Path) -> None:
    db, config = synced(tmp_path, {"up": upstream_entry("--tools", "40")})

    async def run() -> None:
        async with stdio_gateway(db, config, "--session", "large", "--mode", "auto") as client:
            assert set(await listed(client)) == {"search_tool_bm25", "call_tool"}

            async def found() -> bool:
                return "mcp__up__echo" in names(await searched(client, "echo a text back"))

            await eventually(found, "a search in auto mode over 46 tools finds echo")

    anyio.run(run)


def test_a_description_names_at_most_24_active_tools() -> None:
    active = [f"mcp__up__tool_{number}" for number in range(30)]
    said = with_active("Find tools.", active)
    assert said.startswith("Find tools.\n\nActive in this session already (call them with call_tool): ")
    assert said.endswith(", mcp__up__tool_23, and 6 more.") and "tool_24" not in said
    assert with_active("Find tools.", []) == "Find tools."
