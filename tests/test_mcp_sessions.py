"""The gateway's session: pins kept in the log across reopenings, tool calls logged as events
that replay and ``verify`` pass over."""

from __future__ import annotations

from typing import Any

import pytest

from discovery import ToolIndex
from discovery._diagnostics.verify import verify
from discovery._mcp.sessions import GatewaySession, digest, write_pending
from discovery.errors import ToolIndexError
from tests.catalogs import ROUTE

TOOLS: list[dict[str, Any]] = [
    {
        "name": "mcp__gh__create_issue",
        "description": "Create a GitHub issue",
        "input_schema": {"type": "object"},
    },
    {"name": "mcp__gh__list_issues", "description": "List the issues of a repository"},
    {"name": "mcp__slack__post", "description": "Post a message to a Slack channel"},
]


def test_a_stored_tool_s_pin_does_not_change_between_versions(db_url: str) -> None:
    """Session logs keep the pins across versions: a tool read back from either backend must
    pin to the digest an earlier version logged, or a resumed gateway would take every pinned
    tool for changed and deactivate it."""
    with ToolIndex.open(db_url) as index:
        index.upsert_tools([ROUTE])
        tool = index.tool("mcp__atlas__find_route")
    assert digest(tool) == "e10aa98374eb19d5d9c38e68d16e50a6d2da88889c5862a9781211c6a6706cf4"


def test_pins_survive_reopening_and_a_changed_tool_is_unpinned(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(TOOLS)
        opened = GatewaySession.open(index, "g", "mcp-only")
        assert opened.created and not opened.stored and index.sessions() == []
        opened.store()  # a gateway stores it at its first change; the search below would too
        assert opened.stored and opened.session.settings.discovery_mode == "mcp-only"
        outcome = opened.search({"query": "create issue", "limit": 1})
        assert (outcome.is_error, outcome.activated) == (False, ["mcp__gh__create_issue"])
        opened.pin(outcome.activated)
        pinned = opened.pins["mcp__gh__create_issue"]
        assert pinned == digest(index.tool("mcp__gh__create_issue"))
        opened.log_call("mcp__gh__create_issue", "gh", 1.5, False, "called")

        # A search made elsewhere (the command line) activates a tool no gateway pinned.
        opened.session.search_tool.execute("cli-1", {"query": "slack message", "limit": 1})
        changed = {**TOOLS[0], "description": "Create a GitHub issue and mail it elsewhere"}
        index.upsert_tools([changed])

        reopened = GatewaySession.open(index, "g", "all")  # existing: its own settings are kept
        assert not reopened.created and reopened.session.settings.discovery_mode == "mcp-only"
        assert reopened.pins["mcp__gh__create_issue"] == pinned  # the old digest, from the log
        assert reopened.pins["mcp__slack__post"] == digest(index.tool("mcp__slack__post"))
        assert reopened.pins["mcp__gh__create_issue"] != digest(index.tool("mcp__gh__create_issue"))
        reopened.unpin_changed("mcp__gh__create_issue")
        assert "mcp__gh__create_issue" not in reopened.session.active
        found = reopened.search({"query": "create issue", "limit": 1})
        assert found.activated == ["mcp__gh__create_issue"]

        record = index.session_record("g")
        kinds = [call["kind"] for call in record["calls"]]
        assert kinds == ["create", "search", "pin", "tool_call", "search", "pin", "set_active", "search"]
        assert record["calls"][3]["params"] == {
            "tool": "mcp__gh__create_issue",
            "server": "gh",
            "duration_ms": 1.5,
            "is_error": False,
            "outcome": "called",
            "learned_from": [2],  # the search that found it
        }
        assert verify(index).ok


def test_a_search_error_is_the_spec_message(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(TOOLS)
        opened = GatewaySession.open(index, None, "mcp-only")
        assert opened.search({"query": "   "}).text == "Query is required and must not be empty."
        assert opened.search({"query": "x", "limit": True}).text == "Limit must be a positive integer."


def test_a_backlog_of_entries_is_written_in_order_and_a_deleted_session_is_named(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(TOOLS)
        first = GatewaySession.open(index, "first", "mcp-only")
        second = GatewaySession.open(index, "second", "mcp-only")
        second.store()
        first.search({"query": "create issue", "limit": 1})
        lists_before = (first.session.active, first.session.selected)
        write_pending(
            index,
            [
                (first, first.pinning(["mcp__gh__create_issue", "mcp__not_in_catalog"])),
                (second, second.call_logging("mcp__slack__post", "slack", 2.0, True, "not active")),
                (first, first.call_logging("mcp__gh__create_issue", "gh", 1.0, False, "called")),
                (first, first.pinning(["mcp__not_in_catalog"])),  # nothing to pin: no entry
            ],
        )
        calls = index.session_record("first")["calls"]
        assert [call["kind"] for call in calls] == ["create", "search", "pin", "tool_call"]
        assert [call["seq"] for call in calls] == [1, 2, 3, 4]
        assert calls[2]["params"] == {"tools": {"mcp__gh__create_issue": first.pins["mcp__gh__create_issue"]}}
        assert (first.session.active, first.session.selected) == lists_before
        assert [call["kind"] for call in index.session_record("second")["calls"]] == ["create", "tool_call"]

        index.delete_session("second")
        with pytest.raises(ToolIndexError, match="'second' was deleted"):
            write_pending(
                index,
                [
                    (second, second.call_logging("mcp__slack__post", "slack", 1.0, False, "called")),
                    (first, first.call_logging("mcp__gh__create_issue", "gh", 1.0, False, "called")),
                ],
            )
        assert [call["kind"] for call in index.session_record("first")["calls"]][-2:] == [
            "tool_call",
            "tool_call",
        ]
        assert verify(index).ok


def test_resolving_a_call_reads_once_and_writes_nothing(db_url: str) -> None:
    """What ``call_tool`` checks — the tool's record and whether it is active — comes from one
    read, stored session or not yet stored."""
    from tests.test_cli_sessions import transactions

    with ToolIndex.open(db_url) as index:
        index.upsert_tools(TOOLS)
        fresh = GatewaySession.open(index, "r", "mcp-only")
        with transactions() as begun:
            tool, active = fresh.resolve("mcp__gh__create_issue")
        assert begun == ["read"] and tool is not None and not active and not fresh.stored
        fresh.search({"query": "create issue", "limit": 1})
        with transactions() as begun:
            tool, active = fresh.resolve("mcp__gh__create_issue")
        assert begun == ["read"] and tool is not None and active
