"""What a session's stored state and settings amount to against the live catalog (contract §5):
the rules a session's settings give, the view one transaction has of a session, the active
tools a new session opens with, and what its corpus holds by server."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from discovery._rules import (
    SEARCH_TOOL_NAME,
    Corpus,
    EffectiveMode,
    effective_mode,
    essential_names,
    registered_tools,
    session_corpus,
    starting_active,
)
from discovery._sessions.settings import SessionSettings, stored_settings
from discovery._text.collation import collation_key, utf16_sort_key
from store import GROUPS, Reader, SessionState

if TYPE_CHECKING:
    from discovery._ranking.ranker import Ranker


@dataclass(frozen=True, slots=True)
class SessionRules:
    """What a session's settings amount to against one catalog generation."""

    settings: SessionSettings
    mode: EffectiveMode
    essentials: list[str]
    out_of_scope: frozenset[str] = frozenset()
    reported: frozenset[str] = frozenset()
    """The tools out of scope that a search names as not available here (``Scope.reports``)."""


@dataclass(frozen=True)
class SessionView:
    """A session as one transaction sees it: the rules of contract §5 applied to the live catalog."""

    state: SessionState
    settings: SessionSettings
    mode: EffectiveMode
    essentials: list[str]
    live_active: list[str]
    live_selected: list[str]
    out_of_scope: frozenset[str] = frozenset()
    reported: frozenset[str] = frozenset()

    @cached_property
    def corpus(self) -> Corpus:
        return session_corpus(
            self.mode, self.state.active, self.essentials, self.out_of_scope, self.state.identity
        )


class Scope(Protocol):
    """Which catalog tools a session handle may search and activate, by the MCP server and tool
    name each came from (``None`` for a tool of no server): a gateway's config and its filters.
    A tool out of scope is outside the corpus, as an active tool is, so ``total_tools``, the
    statistics and the description count only what is in scope."""

    def admits(self, server: str | None, tool: str | None) -> bool: ...

    def reports(self, server: str | None, tool: str | None) -> bool:
        """Whether a tool it does not admit is named to the model as not available here (one
        its filters leave out), rather than left unseen (one of a server it does not front)."""
        ...


def essentials_of(ranker: Ranker, reader: Reader, settings: SessionSettings) -> list[str]:
    return essential_names(settings.essential_override, lambda names: ranker.known_names(reader, names))


def mode_of(ranker: Ranker, reader: Reader, settings: SessionSettings) -> EffectiveMode:
    holds_search_tool = bool(ranker.known_names(reader, [SEARCH_TOOL_NAME]))
    return effective_mode(settings, registered_tools(ranker.catalog_size(reader), holds_search_tool))


def rules_of(
    ranker: Ranker,
    reader: Reader,
    session_id: str,
    stored: dict[str, Any],
    scope: Scope | None = None,
) -> SessionRules:
    settings = stored_settings(session_id, stored)
    mode = mode_of(ranker, reader, settings)
    out_of_scope: frozenset[str] = frozenset()
    reported: frozenset[str] = frozenset()
    if scope is not None:
        left_out = [
            (name, server, tool)
            for name, server, tool in reader.catalog.tool_origins()
            if not scope.admits(server, tool)
        ]
        out_of_scope = frozenset(name for name, _, _ in left_out)
        reported = frozenset(name for name, server, tool in left_out if scope.reports(server, tool))
    return SessionRules(settings, mode, essentials_of(ranker, reader, settings), out_of_scope, reported)


def view_of(ranker: Ranker, reader: Reader, state: SessionState, rules: SessionRules) -> SessionView:
    known = ranker.known_names(reader, [*state.active, *state.selected])
    live = known | {SEARCH_TOOL_NAME}
    return SessionView(
        state=state,
        settings=rules.settings,
        mode=rules.mode,
        essentials=rules.essentials,
        live_active=[name for name in state.active if name in live],
        live_selected=[name for name in state.selected if name in known],
        out_of_scope=rules.out_of_scope,
        reported=rules.reported,
    )


def opening_active(ranker: Ranker, reader: Reader, settings: SessionSettings) -> list[str]:
    """The active list of a new (or reset) session, in catalog order (contract §5)."""
    mode = mode_of(ranker, reader, settings)
    if mode == "off":
        candidates = reader.catalog.opening_candidates(everything=True, servers=(), names=())
        return starting_active(mode, candidates, (), ())
    candidates = reader.catalog.opening_candidates(
        everything=False, servers=settings.default_servers, names=settings.requested
    )
    essentials = set(essentials_of(ranker, reader, settings))
    return starting_active(mode, candidates, essentials, set(settings.requested))


CorpusOverview = tuple[list[tuple[str, int]], list[str], int]
"""``(servers with counts, built-in names, corpus size)``: what the search tool's description says."""


def corpus_overview(ranker: Ranker, reader: Reader, corpus: Corpus) -> CorpusOverview:
    if not corpus.groups:
        return [], [], 0
    excluded = corpus.excluded
    servers: dict[str, int] = {}
    builtins: list[str] = []
    total = 0
    if GROUPS.mcp in corpus.groups:
        counts = reader.catalog.group_server_counts(GROUPS.mcp)
        for doc in ranker.excluded_documents(reader, Corpus((GROUPS.mcp,), excluded)):
            counts[doc.server_name] -= 1
        total += sum(counts.values())
        servers = {server: n for server, n in counts.items() if server is not None and n > 0}
    if GROUPS.local in corpus.groups:
        builtins = [name for name, _ in reader.catalog.group_members(GROUPS.local) if name not in excluded]
        total += len(builtins)
    ordered_servers = sorted(servers.items(), key=lambda item: (collation_key(item[0]), item[0]))
    return ordered_servers, sorted(builtins, key=utf16_sort_key), total
