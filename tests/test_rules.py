"""The session rules of contract §5 as pure functions, on worked examples (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

from discovery._rules import (
    DEFAULT_ESSENTIAL_NAMES,
    INTERNAL_NAMES,
    SEARCH_TOOL_NAME,
    Corpus,
    essential_names,
    read_only_corpus,
    registered_tools,
    replay,
    session_corpus,
    starting_active,
)
from store import GROUPS, Event, LoggedEvent

CANDIDATES = [
    ("read", GROUPS.fixed, "essential"),
    ("grep", GROUPS.local, "discoverable"),
    ("notes", GROUPS.local, "discoverable"),
    ("mcp__github__create_issue", GROUPS.mcp, "discoverable"),
    (SEARCH_TOOL_NAME, GROUPS.fixed, "essential"),
]


def test_essentials_are_the_default_or_the_known_part_of_the_override() -> None:
    assert essential_names((), lambda names: set()) == list(DEFAULT_ESSENTIAL_NAMES)
    known = {"grep", "notes"}
    asked: list[list[str]] = []

    def lookup(names: list[str]) -> set[str]:
        asked.append(names)
        return known & set(names)

    assert essential_names([" grep ", "", "missing", "grep", "notes"], lookup) == ["grep", "notes"]
    assert asked == [["grep", "missing", "grep", "notes"]]  # trimmed, blanks never looked up
    assert essential_names(["missing"], lookup) == []  # an override of unknown names: none


def test_a_new_session_starts_with_what_discovery_would_not_find_and_the_search_tool_last() -> None:
    assert starting_active("all", CANDIDATES, {"read"}, set()) == [
        "read",
        "mcp__github__create_issue",
        SEARCH_TOOL_NAME,
    ]
    assert starting_active("all", CANDIDATES, {"read"}, {"notes"}) == [
        "read",
        "notes",
        "mcp__github__create_issue",
        SEARCH_TOOL_NAME,
    ]
    # mcp-only leaves built-ins to the host: all of them start active.
    assert starting_active("mcp-only", CANDIDATES, set(), set()) == [
        "read",
        "grep",
        "notes",
        "mcp__github__create_issue",
        SEARCH_TOOL_NAME,
    ]
    assert starting_active("off", CANDIDATES[:3], set(), set()) == ["read", "grep", "notes"]


def test_the_corpus_leaves_out_active_essential_internal_and_out_of_scope_tools() -> None:
    corpus = session_corpus("mcp-only", ["mcp__a"], ["read"], frozenset({"mcp__b"}))
    assert corpus == Corpus((GROUPS.mcp,), frozenset({"mcp__a", "read", "mcp__b"}) | INTERNAL_NAMES)
    assert session_corpus("off", [], [], frozenset()).groups == ()
    assert read_only_corpus("all") == Corpus(
        (GROUPS.local, GROUPS.mcp), frozenset(DEFAULT_ESSENTIAL_NAMES) | INTERNAL_NAMES
    )


def test_a_catalog_entry_named_like_the_search_tool_is_not_registered() -> None:
    assert registered_tools(41, holds_search_tool_entry=True) == 40
    assert registered_tools(41, holds_search_tool_entry=False) == 41


def test_replaying_a_log_gives_the_lists_event_by_event() -> None:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)

    def logged(
        seq: int, kind: str, params: dict[str, object], activated: tuple[str, ...] = ()
    ) -> LoggedEvent:
        return LoggedEvent(seq, Event(kind=kind, params=params, activated=activated), stamp)

    log = [
        logged(1, "create", {"active": ["read", SEARCH_TOOL_NAME]}),
        logged(2, "search", {"query": "issue"}, ("mcp__a", "mcp__b")),
        logged(3, "tool_call", {"tool": "mcp__a"}),
        logged(4, "search", {"query": "again"}, ("mcp__b", "mcp__c")),
        logged(5, "set_active", {"active": ["mcp__b", "read"]}),
    ]
    assert replay(log[:4]) == (
        ["read", SEARCH_TOOL_NAME, "mcp__a", "mcp__b", "mcp__c"],
        ["mcp__a", "mcp__b", "mcp__c"],
    )
    assert replay(log) == (["mcp__b", "read"], ["mcp__b"])
    restored = logged(6, "restore", {"active": ["x", "y"], "selected": ["y"]})
    assert replay([*log, restored]) == (["x", "y"], ["y"])
    assert replay([*log, logged(7, "reset", {"active": ["read"]})]) == (["read"], [])
