"""A catalog crafted so that two tools share a wire name never wedges a session: every adapter
still lists the session's tools (those of a shared wire name left out), a search still answers,
and a shared wire name maps back to no tool, so no call reaches the wrong one.

A 64-bit digest collision cannot be found here; with one hex digit kept, seventeen names that
share their readable prefix must collide (and some stay apart), on each backend."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_ai.models.test import TestModel

from discovery import ToolIndex
from discovery._sessions.session import Session
from discovery.adapters import _names as names_module
from discovery.adapters import anthropic, openai
from discovery.adapters._names import wire_name
from discovery.adapters.pydantic_ai import DiscoveryToolset
from tests.providers import tool_names, tool_use

PREFIX = "mcp__playwright-executeautomation__playwright_" + "x" * 20
CRAFTED = [f"{PREFIX}{n}" for n in range(17)]
SEARCH = "search_tool_bm25"


@pytest.fixture
def crafted(index: ToolIndex, monkeypatch: pytest.MonkeyPatch) -> tuple[ToolIndex, list[str], list[str]]:
    """The index with the crafted tools; the names whose wire name is their own, and the others."""
    monkeypatch.setattr(names_module, "DIGEST_LENGTH", 1)
    index.upsert_tools(
        [{"name": name, "description": f"Switch the browser tab {n}"} for n, name in enumerate(CRAFTED)]
    )
    wires = [wire_name(name) for name in CRAFTED]
    unique = [name for name, wire in zip(CRAFTED, wires, strict=True) if wires.count(wire) == 1]
    shared = [name for name in CRAFTED if name not in unique]
    assert unique and shared
    return index, unique, shared


def offered_everywhere(session: Session) -> dict[str, list[str]]:
    """The tool names each adapter would send now."""
    from pydantic_ai import RunContext
    from pydantic_ai.usage import RunUsage

    context: RunContext[Any] = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    toolset = asyncio.run(DiscoveryToolset(session, lambda name, args: None).get_tools(context))
    return {
        "anthropic": tool_names(anthropic.tools(session)),
        "anthropic deferred": sorted(tool_names(anthropic.tools(session, deferred=True))),
        "chat": [tool["function"]["name"] for tool in openai.chat_tools(session)],
        "responses": tool_names(openai.responses_tools(session)),
        "pydantic-ai": list(toolset),
    }


def test_active_tools_sharing_a_wire_name_are_left_out_and_the_rest_offered(
    crafted: tuple[ToolIndex, list[str], list[str]],
) -> None:
    index, unique, shared = crafted
    session = index.session("crafted", discovery_mode="all")
    session.set_active([SEARCH, *CRAFTED])
    expected = [SEARCH, *(wire_name(name) for name in unique)]
    offered = offered_everywhere(session)
    assert offered.pop("anthropic deferred") == sorted(expected)
    assert offered == dict.fromkeys(offered, expected)
    for name in unique:
        assert anthropic.catalog_name(session, wire_name(name)) == name
    for name in shared:
        assert anthropic.catalog_name(session, wire_name(name)) is None
        assert openai.catalog_name(session, wire_name(name)) is None


def test_a_search_that_activates_them_answers_and_lists_only_the_offered_ones(
    crafted: tuple[ToolIndex, list[str], list[str]],
) -> None:
    index, unique, _ = crafted
    session = index.session("search", discovery_mode="all")
    answer = anthropic.handle(session, tool_use("t1", SEARCH, {"query": "switch browser tab", "limit": 20}))
    assert answer is not None and "is_error" not in answer
    listed = json.loads(answer["content"])["activated_tools"]
    assert sorted(listed) == sorted(wire_name(name) for name in unique)
    assert set(CRAFTED) <= set(session.active)
    assert offered_everywhere(session)["anthropic"] == [SEARCH, *listed]
    other = index.session("deferred", discovery_mode="all")
    deferred = anthropic.handle(
        other, tool_use("t2", SEARCH, {"query": "switch browser tab", "limit": 20}), deferred=True
    )
    assert deferred is not None
    references = [block["tool_name"] for block in deferred["content"][1:]]
    assert sorted(references) == sorted(listed)
