"""Whose learning counts, seen and undone: K (the identities a (term, tool) needs before it
ranks for others), what a tool learned from whom, and forgetting what one identity taught.

The rule itself is ``learning``'s (which calls teach what) and the ranker's (``_ranking.sharing``:
who sees it); this is what ``ToolIndex`` offers of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from discovery._params import checked_identity
from discovery._ranking.sharing import MIN_IDENTITIES, sharing_threshold
from discovery._sessions.learning import FORGOTTEN, destructive, forget, set_learning
from discovery.errors import ToolIndexError
from store import Reader, Store, Writer

if TYPE_CHECKING:
    from discovery._ranking.ranker import Ranker

MIN_IDENTITIES_ALLOWED = 2
"""The smallest K: with 1, what any identity taught would rank for every other at once."""


def configure(store: Store, ranker: Ranker, enabled: bool | None, min_identities: int | None) -> bool:
    """``ToolIndex.set_learning``: the switch and K (``None``: left as they are); whether either
    changed."""
    with store.writing() as writer:
        writer.catalog.lock()  # the catalog's write lock: no reindex meanwhile
        changed = min_identities is not None and set_min_identities(writer, min_identities)
        if enabled is not None:
            changed = set_learning(writer, ranker.analyzer(writer), enabled) or changed
        return changed


def forgotten(store: Store, names: Sequence[str] | None, identity: str | None) -> int:
    """``ToolIndex.forget_learning``: what tools ``names`` learned (every tool when neither is
    given) or what ``identity`` taught; how many credits went."""
    if identity is not None and names is not None:
        raise ToolIndexError("forget the learning of tools or of an identity, not both at once")
    with store.writing() as writer:
        if identity is not None:
            return forget_identity(writer, checked_identity(identity))
        return forget(writer, None if names is None else list(dict.fromkeys(names)))


def summary_of(store: Store, name: str, identity: str | None) -> LearnedSummary:
    """``ToolIndex.learned``."""
    identity = None if identity is None else checked_identity(identity)
    with store.reading() as reader:
        return LearnedSummary.read(reader, name, identity)


def forget_identity(writer: Writer, identity: str) -> int:
    """Forget what ``identity`` taught: its logged calls are marked so that they never teach
    again, and its credits go; how many credits went. The rankings are then those of an index
    where it never called anything."""
    writer.learning.locked_state()
    writer.sessions.flag_calls(None, FORGOTTEN, identity=identity)
    return writer.learning.remove_credits(identity=identity)


def set_min_identities(writer: Writer, min_identities: int) -> bool:
    """Set K, the identities a (term, tool) needs to rank for others; whether it changed."""
    if isinstance(min_identities, bool) or not isinstance(min_identities, int):
        raise ToolIndexError(f"min_identities must be a whole number, not {min_identities!r}")
    if min_identities < MIN_IDENTITIES_ALLOWED:
        raise ToolIndexError(
            f"min_identities must be at least {MIN_IDENTITIES_ALLOWED}, not {min_identities}: "
            "below that one identity's evidence would rank for every other"
        )
    if writer.learning.locked_state().min_identities == min_identities:
        return False
    writer.learning.set_min_identities(min_identities)
    return True


class TaughtTerm(NamedTuple):
    """One term a tool learned: how many sessions and distinct identities taught it, whether it
    is shared (ranks for identities that did not teach it), and whether the identity asked about
    taught it (``None``: none was asked about)."""

    term: str
    sessions: int
    identities: int
    shared: bool
    yours: bool | None = None


@dataclass(frozen=True, slots=True)
class LearnedSummary:
    """What one tool learned: its ``terms``, taught by most identities first, and how many
    sessions and identities taught it anything; ``destructive`` when its MCP annotations say it
    may destroy (``destructiveHint``), which makes what it learned worth a closer look and raises
    the identities its terms need to be shared to ``threshold`` (2K)."""

    name: str
    enabled: bool
    terms: list[TaughtTerm]
    sessions: int
    identities: int = 0
    destructive: bool = False
    min_identities: int = MIN_IDENTITIES
    threshold: int = MIN_IDENTITIES
    identity: str | None = None

    @classmethod
    def read(cls, reader: Reader, name: str, identity: str | None = None) -> LearnedSummary:
        state = reader.learning.state()
        destroys = destructive(reader.catalog.tools_by_names([name]).get(name))
        threshold = sharing_threshold(state.min_identities, destroys)
        own = None if identity is None else reader.learning.terms_taught_by(identity, name)
        counts = reader.learning.teaching(name)
        return cls(
            name=name,
            enabled=state.enabled,
            terms=[
                TaughtTerm(
                    item.term,
                    item.sessions,
                    item.identities,
                    item.identities >= threshold,
                    None if own is None else item.term in own,
                )
                for item in reader.learning.learned_of(name)
            ],
            sessions=counts[0].sessions if counts else 0,
            identities=counts[0].identities if counts else 0,
            destructive=destroys,
            min_identities=state.min_identities,
            threshold=threshold,
            identity=identity,
        )

    def as_dict(self) -> dict[str, object]:
        found: dict[str, object] = {
            "name": self.name,
            "learning": "on" if self.enabled else "off",
            "destructive": self.destructive,
            "min_identities": self.min_identities,
            "threshold": self.threshold,
            "sessions": self.sessions,
            "identities": self.identities,
            "terms": [self._term_dict(term) for term in self.terms],
        }
        if self.identity is not None:
            found["identity"] = self.identity
        return found

    def _term_dict(self, term: TaughtTerm) -> dict[str, object]:
        found: dict[str, object] = {
            "term": term.term,
            "sessions": term.sessions,
            "identities": term.identities,
            "shared": term.shared,
        }
        if term.yours is not None:
            found["taught_by_identity"] = term.yours
        return found
