"""The session rules of contract §5 in one place: the names with special roles, which tools a
search can rank (the corpus), and the lists a session's log produces (replay).

Everything here is pure: sessions, the gateway, verify and explain apply these rules to what
they read from the store."""

from __future__ import annotations

from dataclasses import dataclass

from discovery.errors import ToolIndexError
from store import GROUP_LOCAL, GROUP_MCP, LoggedEvent

MCP_PREFIX = "mcp__"

SEARCH_TOOL_NAME = "search_tool_bm25"
"""The search tool's name, fixed forever (contract §6): what the host, the adapters (a wire name valid
for every provider) and the gateway call it [fixed]."""
INTERNAL_NAMES = frozenset({SEARCH_TOOL_NAME, "resolve", "yield", "report_finding", "report_tool_issue"})
"""Never enter a corpus, whatever their record says [fixed]."""
DEFAULT_ESSENTIAL_NAMES = ("read", "bash", "edit", "write", "glob", "eval")
"""Always active unless a session overrides the list [fixed]."""

MODE_GROUPS: dict[str, tuple[int, ...]] = {
    "mcp-only": (GROUP_MCP,),
    "all": (GROUP_LOCAL, GROUP_MCP),
}
"""The corpus groups each effective discovery mode searches."""


@dataclass(frozen=True, slots=True)
class Corpus:
    """A corpus: whole groups, less the named documents a session excludes."""

    groups: tuple[int, ...]
    excluded: frozenset[str] = frozenset()


def is_mcp_name(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def read_only_corpus(mode: str) -> Corpus:
    """What a fresh session with default settings and nothing requested would search in ``mode``."""
    if mode not in MODE_GROUPS:
        raise ToolIndexError(f"unknown search mode {mode!r}: use 'all' or 'mcp-only'")
    return Corpus(MODE_GROUPS[mode], frozenset(DEFAULT_ESSENTIAL_NAMES) | INTERNAL_NAMES)


def replay(logged: list[LoggedEvent]) -> tuple[list[str], list[str]]:
    """The ``(active, selected)`` lists that a session's log produces, event by event."""
    active: list[str] = []
    selected: list[str] = []
    for entry in logged:
        event, params = entry.event, entry.event.params or {}
        if event.kind in ("create", "reset"):
            active, selected = list(params["active"]), []
        elif event.kind == "search":
            selected += [name for name in event.activated if name not in selected]
            active += [name for name in event.activated if name not in active]
        elif event.kind == "set_active":
            active = list(params["active"])
            selected = [name for name in selected if name in active]
        elif event.kind == "restore":
            active, selected = list(params["active"]), list(params["selected"])
        # Any other kind ("tool_call", "pin", logged by ``append``) changes neither list.
    return active, selected
