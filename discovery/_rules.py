"""The session rules of contract §5 in one place: the names with special roles, the discovery
mode a session's settings amount to, its essential tools, the active list it starts with, which
tools a search can rank (the corpus), and the lists a session's log produces (replay).

Everything here is pure: sessions, the gateway, verify and explain apply these rules to what
they read from the store."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from discovery.errors import ToolIndexError
from store import GROUPS, LoggedEvent

MCP_PREFIX = "mcp__"

SEARCH_TOOL_NAME = "search_tool_bm25"
"""The search tool's name, fixed forever (contract §6): what the host, the adapters (a wire name valid
for every provider) and the gateway call it [fixed]."""
INTERNAL_NAMES = frozenset({SEARCH_TOOL_NAME, "resolve", "yield", "report_finding", "report_tool_issue"})
"""Never enter a corpus, whatever their record says [fixed]."""
DEFAULT_ESSENTIAL_NAMES = ("read", "bash", "edit", "write", "glob", "eval")
"""Always active unless a session overrides the list [fixed]."""

LOCAL_IDENTITY = "local"
"""The identity of every session that names none: a single-user host's sessions, the command
line's, a gateway's without tokens or ``--identity``."""


def session_named(identity: str, session_id: str) -> str:
    """A session as messages name it: by its id, and its identity when that is not the local one."""
    if identity == LOCAL_IDENTITY:
        return f"session {session_id!r}"
    return f"session {session_id!r} of identity {identity!r}"


AUTO_THRESHOLD = 40
"""``auto`` turns discovery on when a session registers more tools than this [fixed]."""

DiscoveryMode = Literal["auto", "off", "mcp-only", "all"]
EffectiveMode = Literal["off", "mcp-only", "all"]

MODE_GROUPS: dict[str, tuple[int, ...]] = {
    "mcp-only": (GROUPS.mcp,),
    "all": (GROUPS.local, GROUPS.mcp),
}
"""The corpus groups each effective discovery mode searches."""


@dataclass(frozen=True, slots=True)
class Corpus:
    """A corpus: whole groups, less the named documents a session excludes, as one identity sees
    it (its own learning counts for it at once, other identities' once shared)."""

    groups: tuple[int, ...]
    excluded: frozenset[str] = frozenset()
    viewer: str = LOCAL_IDENTITY


class ModeSettings(Protocol):
    """The settings the discovery mode depends on (``SessionSettings`` has them)."""

    @property
    def discovery_mode(self) -> DiscoveryMode: ...

    @property
    def mcp_discovery(self) -> bool: ...


def is_mcp_name(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def effective_mode(settings: ModeSettings, registered_tools: int) -> EffectiveMode:
    """``all``/``mcp-only`` as set win; the legacy flag means ``mcp-only``; ``auto`` is
    ``mcp-only`` above the threshold; everything else is ``off``."""
    if settings.discovery_mode in ("all", "mcp-only"):
        return settings.discovery_mode
    if settings.mcp_discovery:
        return "mcp-only"
    if settings.discovery_mode == "auto" and registered_tools > AUTO_THRESHOLD:
        return "mcp-only"
    return "off"


def registered_tools(catalog_size: int, holds_search_tool_entry: bool) -> int:
    """The tools a session registers: the catalog, less an entry named like the search tool."""
    return catalog_size - int(holds_search_tool_entry)


def essential_names(override: Sequence[str], known: Callable[[list[str]], Collection[str]]) -> list[str]:
    """The override (trimmed, blanks and names ``known`` does not find dropped — possibly empty),
    or the default list when there is none."""
    if not override:
        return list(DEFAULT_ESSENTIAL_NAMES)
    trimmed = [name.strip() for name in override]
    found = known([name for name in trimmed if name])
    return list(dict.fromkeys(name for name in trimmed if name in found))


def starting_active(
    mode: EffectiveMode,
    candidates: Iterable[tuple[str, int, str]],
    essentials: Collection[str],
    requested: Collection[str],
) -> list[str]:
    """The active list of a new (or reset) session from its ``(name, group, load mode)``
    candidates in catalog order: with discovery off, every candidate; otherwise MCP tools and
    built-ins that discovery would not find (``all`` leaves discoverable built-ins to it unless
    essential or requested), then the search tool, last."""
    if mode == "off":
        return [name for name, _, _ in candidates]
    active = [
        name
        for name, _grp, load_mode in candidates
        if is_mcp_name(name)
        or not (
            mode == "all" and load_mode == "discoverable" and name not in essentials and name not in requested
        )
    ]
    return [*dict.fromkeys(name for name in active if name != SEARCH_TOOL_NAME), SEARCH_TOOL_NAME]


def session_corpus(
    mode: str,
    active: Iterable[str],
    essentials: Iterable[str],
    out_of_scope: frozenset[str],
    viewer: str = LOCAL_IDENTITY,
) -> Corpus:
    """What a search of a session of ``viewer`` ranks: its mode's groups, less its active and
    essential tools, the internal names and what its scope leaves out."""
    excluded = frozenset(active) | frozenset(essentials) | INTERNAL_NAMES
    return Corpus(MODE_GROUPS.get(mode, ()), excluded | out_of_scope, viewer)


def read_only_corpus(mode: str, viewer: str = LOCAL_IDENTITY) -> Corpus:
    """What a fresh session of ``viewer`` with default settings and nothing requested would
    search in ``mode``."""
    if mode not in MODE_GROUPS:
        raise ToolIndexError(f"unknown search mode {mode!r}: use 'all' or 'mcp-only'")
    return session_corpus(mode, (), DEFAULT_ESSENTIAL_NAMES, frozenset(), viewer)


def activation_order(names: Sequence[str]) -> list[str]:
    """MCP names first, then the others, each once, rank order kept within each part."""
    unique = list(dict.fromkeys(names))
    return [name for name in unique if is_mcp_name(name)] + [name for name in unique if not is_mcp_name(name)]


def after_search(
    active: list[str], selected: list[str], activated: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The ``(active, selected)`` lists once a search activated ``activated``: each name is
    appended to each list that does not hold it yet."""
    return (
        [*active, *(name for name in activated if name not in active)],
        [*selected, *(name for name in activated if name not in selected)],
    )


def kept_selection(selected: Sequence[str], active: Collection[str]) -> list[str]:
    """The selection once the active list is replaced: selected tools left out are unselected."""
    return [name for name in selected if name in active]


def replay(logged: list[LoggedEvent]) -> tuple[list[str], list[str]]:
    """The ``(active, selected)`` lists that a session's log produces, event by event."""
    active: list[str] = []
    selected: list[str] = []
    for entry in logged:
        event, params = entry.event, entry.event.params or {}
        if event.kind in ("create", "reset"):
            active, selected = list(params["active"]), []
        elif event.kind == "search":
            active, selected = after_search(active, selected, event.activated)
        elif event.kind == "set_active":
            active = list(params["active"])
            selected = kept_selection(selected, active)
        elif event.kind == "restore":
            active, selected = list(params["active"]), list(params["selected"])
        # Any other kind ("tool_call", "pin", logged by ``append``) changes neither list.
    return active, selected
