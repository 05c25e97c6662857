"""What a session's stored state and settings amount to against the live catalog (contract §5):
the rules a session's settings give, and the view one transaction has of a session."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from discovery._rules import Corpus, EffectiveMode, session_corpus
from discovery._sessions.settings import SessionSettings
from store import SessionState


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
        return session_corpus(self.mode, self.state.active, self.essentials, self.out_of_scope)
