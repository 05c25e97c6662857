"""The persisted session a gateway serves: opened or resumed, its searches, the digests of the
tools it activated (pins), and the log of every tool call it forwarded.

Everything here is synchronous library work: the gateway runs it in its worker thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from discovery.errors import ToolCallError, ToolIndexError
from discovery.index import ToolIndex
from discovery.sessions.learning import CALL_EVENT, learn_from_calls, teaches
from store import StoredTool, sessions
from store.digests import json_digest
from store.engine import write_transaction
from store.reads import tools_by_names

if TYPE_CHECKING:
    from discovery.sessions.session import Scope, Session

NEW_SESSION_MODE = "mcp-only"
"""A gateway fronts MCP tools only; ``auto`` would switch discovery off for a small catalog."""
PIN_EVENT = "pin"


def digest(tool: StoredTool) -> str:
    """A digest of everything a tool claims (description, input schema, names): what is pinned.
    The pins in the session logs hold it, so it is the store's fixed ``json_digest``."""
    return json_digest(tool.as_record())


@dataclass
class SearchOutcome:
    """A search call's answer: the model-visible text, whether it is an error, what it activated."""

    text: str
    is_error: bool
    activated: list[str] = field(default_factory=list)


@dataclass
class GatewaySession:
    """A session of the store, with the digest each of its activated tools had when activated."""

    index: ToolIndex
    session: Session
    created: bool
    pins: dict[str, str] = field(default_factory=dict)
    description: str = ""
    _digests: dict[str, tuple[StoredTool, str]] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        return self.session.id

    @classmethod
    def open(
        cls,
        index: ToolIndex,
        session_id: str | None,
        mode: str = NEW_SESSION_MODE,
        scope: Scope | None = None,
    ) -> GatewaySession:
        """Resume ``session_id`` with its own settings, or create it (a new id when ``None``) in
        ``mode``; the active tools are pinned as the log last saw them. With ``scope``, its
        searches rank and activate only the tools ``scope`` admits."""
        known = session_id is not None and any(summary.id == session_id for summary in index.sessions())
        session = index.session(session_id) if known else index.session(session_id, discovery_mode=mode)
        if scope is not None:
            session = session.scoped(scope)
        opened = cls(index, session, created=not known)
        opened.load_pins()
        opened.description = session.search_tool.description
        return opened

    def load_pins(self) -> None:
        """The pins of the log: a tool activated by a search that no gateway pinned (a search on
        the command line) is pinned as it is now."""
        pins: dict[str, str | None] = {}
        for call in self.index.session_record(self.id)["calls"]:
            if call["kind"] == "search":
                pins.update(dict.fromkeys(call["activated"]))
            elif call["kind"] == PIN_EVENT:
                pins.update((call.get("params") or {}).get("tools", {}))
        active = set(self.session.active)
        unpinned = [name for name, pin in pins.items() if pin is None and name in active]
        unpinned += [name for name in self.session.active if name.startswith("mcp__") and name not in pins]
        self.pins = {name: pin for name, pin in pins.items() if pin is not None}
        if unpinned:
            self.pin(unpinned)

    def pin(self, names: list[str]) -> None:
        """Pin the current digest of each of ``names`` (in the log, so a restart keeps it)."""
        write_pending(self.index, [(self, self.pinning(names))])

    def pinning(self, names: list[str]) -> Pending:
        """``pin`` as a write of ``write_pending``: the digests are those the writer's
        transaction reads."""

        def pin_event(connection: Connection) -> sessions.Event | None:
            found = tools_by_names(connection, names)
            pinned = {name: digest(found[name]) for name in names if name in found}
            if not pinned:
                return None
            self.pins.update(pinned)
            return sessions.Event(kind=PIN_EVENT, params={"tools": pinned})

        return pin_event

    def search(self, arguments: dict[str, Any]) -> SearchOutcome:
        """One ``search_tool_bm25`` call (contract §6); the caller pins what it activated."""
        try:
            result = self.session.search_tool.execute(f"mcp-{uuid.uuid4().hex}", arguments)
        except ToolCallError as error:
            return SearchOutcome(str(error), is_error=True)
        activated = list(result.details["activated_tools"])
        return SearchOutcome(result.content, is_error=False, activated=activated)

    def resolve(self, name: str) -> tuple[StoredTool | None, bool]:
        """The catalog record of ``name`` (``None`` when it is not there) and whether it is active,
        from one snapshot: every forwarded call starts here."""
        active, found = self.session.lookup([name])
        return found.get(name), name in active

    def changed(self, name: str, tool: StoredTool) -> bool:
        """Whether ``tool`` differs from what ``name`` was pinned as (``False`` when unpinned)."""
        pinned = self.pins.get(name)
        if pinned is None:
            return False
        # A record read again is the same object until the catalog changes: hash it once.
        known = self._digests.get(name)
        if known is None or known[0] is not tool:
            known = (tool, digest(tool))
            self._digests[name] = known
        return pinned != known[1]

    def unpin_changed(self, name: str) -> None:
        """Deactivate a tool whose record changed since it was pinned: only a new search that finds
        it (and pins it again) makes it callable."""
        self.pins.pop(name, None)
        self.session.set_active([active for active in self.session.active if active != name])

    def active_tools(self) -> list[StoredTool]:
        return self.session.active_tools()

    def log_call(
        self, name: str, server: str | None, duration_ms: float, is_error: bool, outcome: str
    ) -> None:
        """Log one call_tool: never its arguments or result, which may hold secrets."""
        write_pending(self.index, [(self, self.call_logging(name, server, duration_ms, is_error, outcome))])

    def call_logging(
        self, name: str, server: str | None, duration_ms: float, is_error: bool, outcome: str
    ) -> Pending:
        """``log_call`` as a write of ``write_pending``."""
        params = {
            "tool": name,
            "server": server,
            "duration_ms": round(duration_ms, 3),
            "is_error": is_error,
            "outcome": outcome,
        }
        event = sessions.Event(kind=CALL_EVENT, tool_name=name, params=params)
        return lambda connection: event


Pending = Callable[[Connection], "sessions.Event | None"]
"""A log entry to write, made in the writer's transaction (``None``: nothing to write after all)."""


def write_pending(index: ToolIndex, writes: list[tuple[GatewaySession, Pending]]) -> None:
    """Write log entries of gateway sessions, in order, in one transaction: a burst of calls
    costs one commit. A session deleted meanwhile is named in the error; the other sessions'
    entries are written."""
    by_session: dict[str, list[sessions.Event]] = {}
    gone: list[str] = []
    with write_transaction(index.engine) as connection:
        for gateway_session, pending in writes:
            event = pending(connection)
            if event is not None:
                by_session.setdefault(gateway_session.id, []).append(event)
        for session_id, events in by_session.items():
            if not sessions.append(connection, session_id, *events):
                gone.append(session_id)
                continue
            taught = [
                event.tool_name
                for event in events
                if event.kind == CALL_EVENT and event.tool_name is not None and teaches(event)
            ]
            if taught:
                learn_from_calls(connection, index.ranker.analyzer(connection), session_id, taught)
    if gone:
        shown = ", ".join(repr(session_id) for session_id in gone)
        raise ToolIndexError(f"session {shown} was deleted while the gateway served it")
