"""The persisted session a gateway serves: opened or resumed, its searches, the digests of the
tools it activated (pins), and the log of every tool call it forwarded.

Everything here is synchronous library work: the gateway runs it in its worker thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from discovery._index import ToolIndex
from discovery._mcp.description import gateway_description
from discovery._params import checked_id, checked_identity
from discovery._rules import LOCAL_IDENTITY
from discovery._sessions.learning import CALL_EVENT, call_params, learn_from_calls
from discovery._sessions.listing import CALL_START_EVENT
from discovery.errors import ToolCallError, ToolIndexError
from store import Event, Reader, SessionKey, StoredTool, Writer

if TYPE_CHECKING:
    from discovery._sessions.session import Session
    from discovery._sessions.settings import AnswerStyle
    from discovery._sessions.view import Scope

NEW_SESSION_MODE = "mcp-only"
"""A gateway fronts MCP tools only; ``auto`` would switch discovery off for a small catalog."""
ANSWER: AnswerStyle = "rich"
"""A gateway's searches answer richly (``discovery._sessions.answer``): its model sees only the
answer, never the activated tools themselves (without ``--expose-active``)."""
PIN_EVENT = "pin"


def digest(tool: StoredTool) -> str:
    """A digest of everything a tool claims (description, input schema, names): what is pinned.
    The pins in the session logs hold it, so it is the store's fixed one."""
    return tool.pin_digest()


@dataclass
class SearchOutcome:
    """A search call's answer: the model-visible text, whether it is an error, what it activated."""

    text: str
    is_error: bool
    activated: list[str] = field(default_factory=list)
    structured: dict[str, Any] | None = None
    """The answer as data (``structuredContent``); ``None`` for an error."""


@dataclass
class GatewaySession:
    """A session of the store, with the digest each of its activated tools had when activated.

    A session named for the first time is not stored until it first changes (a search, or a call
    that must be logged): until then its read-only requests are answered from what a new session
    would be (``Session.as_new``), so a client naming sessions at random fills nothing."""

    index: ToolIndex
    session: Session
    created: bool
    pins: dict[str, str] = field(default_factory=dict)
    description: str = ""
    stored: bool = True
    mode: str = NEW_SESSION_MODE
    on_created: Callable[[GatewaySession], None] | None = field(default=None, repr=False)
    """Called (in the worker) once the gateway has stored the session it named."""
    _digests: dict[str, tuple[StoredTool, str]] = field(default_factory=dict, repr=False)

    opened_by: str | None = None
    """What the session records as having opened it, when this gateway stores it."""
    active_at_open: list[str] = field(default_factory=list)
    """The session's active tools when the gateway opened it (or synced its servers since): what
    its search's description names for a model starting a new conversation on it, with no read
    of the database at each ``tools/list``, and the same description throughout."""

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def identity(self) -> str:
        return self.session.identity

    @property
    def key(self) -> SessionKey:
        return self.session.key

    @classmethod
    def open(
        cls,
        index: ToolIndex,
        session_id: str | None,
        mode: str = NEW_SESSION_MODE,
        scope: Scope | None = None,
        identity: str = LOCAL_IDENTITY,
        opened_by: str | None = None,
    ) -> GatewaySession:
        """Resume ``identity``'s session ``session_id`` with its own settings, or prepare it (a
        new id when ``None``) in ``mode``, stored when it first changes (``opened_by`` saying
        who opened it); the active tools are pinned as the log last saw them. With ``scope``,
        its searches rank and activate only the tools ``scope`` admits. Reads this session's
        row, never another's: ids are per identity, so another identity's session of the same
        id is simply not this one."""
        from discovery._sessions.session import Session

        session_id = checked_id(session_id, "session id") if session_id is not None else uuid.uuid4().hex
        key = SessionKey(checked_identity(identity), session_id)
        with index.store.reading() as reader:
            exists = reader.sessions.load(key) is not None
        session = Session(index.store, index.ranker, session_id, scope, answer=ANSWER, identity=key.identity)
        opened = cls(index, session, created=not exists, opened_by=opened_by)
        opened.mode = mode
        opened.stored = exists
        if exists:
            opened.load_pins()
        opened.describe()
        return opened

    def describe(self) -> None:
        """Render the search tool's description (the gateway's own) from the servers and tool
        counts of what the session can search, active tools included."""
        if self.stored:
            servers, _, total = self.session.describe_catalog()
            self.active_at_open = self.session.active
        else:
            servers, _, total = self.session.as_new(self.settings())[1]
        self.description = gateway_description(servers, total)

    def settings(self) -> dict[str, Any]:
        return {"discovery_mode": self.mode, "answer": ANSWER}

    def store(self) -> None:
        """Store the session if it is not yet; another caller may have made it just before (the
        same identity's, as the key says), and then it is resumed."""
        if self.stored:
            return
        from discovery._sessions.session import created_or_locked, opener
        from discovery._sessions.settings import parsed_settings

        settings = parsed_settings(self.settings())
        with self.index.store.writing() as writer:
            opened_by = self.opened_by or opener(self.index.store)
            _, made = created_or_locked(writer, self.index.ranker, self.session.key, settings, opened_by)
        if not made:
            self.stored = True
            self.load_pins()
            return
        self.stored = True
        if self.on_created is not None:
            self.on_created(self)

    def load_pins(self) -> None:
        """The pins of the log: a tool activated by a search that no gateway pinned (a search on
        the command line) is pinned as it is now."""
        pins: dict[str, str | None] = {}
        for call in self.index.session_record(self.id, identity=self.identity)["calls"]:
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
        self.store()
        write_pending(self.index, [(self, self.pinning(names))])

    def pin_missing(self, name: str) -> None:
        """Pin ``name`` unless it is pinned: an active tool no pin covers (activated outside a
        gateway, as by a search on the command line) is pinned as it is now."""
        if name not in self.pins:
            self.pin([name])

    def pinning(self, names: list[str]) -> Pending:
        """``pin`` as a write of ``write_pending``: the digests are those the writer's
        transaction reads."""

        def pin_event(reader: Reader) -> Event | None:
            found = reader.catalog.tools_by_names(names)
            pinned = {name: digest(found[name]) for name in names if name in found}
            if not pinned:
                return None
            self.pins.update(pinned)
            return Event(kind=PIN_EVENT, params={"tools": pinned})

        return pin_event

    def search(self, arguments: dict[str, Any]) -> SearchOutcome:
        """One ``search_tool_bm25`` call (contract §6); the caller pins what it activated. Every
        search is logged, so the session is stored first."""
        self.store()
        with self.index.store.writing() as writer:
            return self.search_in(writer, arguments)

    def search_in(self, writer: Writer, arguments: dict[str, Any]) -> SearchOutcome:
        """``search`` in the caller's write transaction, the session stored before."""
        search_tool = self.session.search_tool
        call_id, params = search_tool.checked(f"mcp-{uuid.uuid4().hex}", arguments)
        try:
            outcome, _ = search_tool.execute_in(writer, call_id, params)
        except ToolCallError as error:  # the session is gone: nothing was written
            return SearchOutcome(str(error), is_error=True)
        if isinstance(outcome, ToolCallError):
            return SearchOutcome(str(outcome), is_error=True)
        activated = list(outcome.details["activated_tools"])
        return SearchOutcome(
            outcome.content, is_error=False, activated=activated, structured=outcome.structured
        )

    def load_in(self, writer: Writer, names: Collection[str]) -> list[str]:
        """Make ``names`` (tools the gateway lists under their own names, as ``alwaysLoad``
        servers') active in the caller's write transaction, the session stored before, so its
        searches mark them active instead of activating them again. Returns those that were not
        active yet (logged as a ``set_active`` that keeps the others, and pinned)."""
        state = writer.sessions.lock(self.key)
        if state is None:
            return []
        loaded = sorted(name for name in names if name not in state.active)
        if loaded:
            active = [*state.active, *loaded]
            event = Event(kind="set_active", params={"names": active, "active": active})
            writer.sessions.record(state, event, active, state.selected)
            self.pin_in(writer, loaded)
        return loaded

    def pin_in(self, writer: Writer, names: list[str]) -> None:
        """``pin`` in the caller's write transaction, the session stored before."""
        pinned = self.pinning(names)(writer)
        if pinned is not None:
            writer.sessions.append(self.session.key, pinned)

    def resolve(self, name: str) -> tuple[StoredTool | None, bool]:
        """The catalog record of ``name`` (``None`` when it is not there) and whether it is active,
        from one snapshot: every forwarded call starts here."""
        active, found = self.session.lookup([name], as_new=None if self.stored else self.settings())
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
        self.store()
        self.pins.pop(name, None)
        self.session.set_active([active for active in self.session.active if active != name])

    def active_tools(self) -> list[StoredTool]:
        if not self.stored:
            active = self.session.as_new(self.settings())[0]
            found = self.session.tools_by_names(active)
            return [found[name] for name in active if name in found]
        return self.session.active_tools()

    def log_call(
        self, name: str, server: str | None, duration_ms: float, is_error: bool, outcome: str
    ) -> None:
        """Log one call_tool: never its arguments or result, which may hold secrets."""
        write_pending(self.index, [(self, self.call_logging(name, server, duration_ms, is_error, outcome))])

    def call_logging(
        self,
        name: str,
        server: str | None,
        duration_ms: float,
        is_error: bool,
        outcome: str,
        call: str | None = None,
    ) -> Pending:
        """``log_call`` as a write of ``write_pending``; ``call`` names the forwarded call whose
        start was logged (``start_in``)."""
        params: dict[str, Any] = {
            "tool": name,
            "server": server,
            "duration_ms": round(duration_ms, 3),
            "is_error": is_error,
            "outcome": outcome,
        }
        if call is not None:
            params["call"] = call
        key, store = self.key, self.index.store
        return lambda reader: Event(
            kind=CALL_EVENT, tool_name=name, params=call_params(reader, store, key, name, params)
        )

    def start_in(self, name: str, server: str, call: str, writer: Writer) -> None:
        """In the caller's write transaction: log that the call ``call`` of ``name`` is about to be
        forwarded, so a gateway killed before its answer leaves a trace of a call that may have
        had effects (its outcome, logged after the answer, names the same ``call``). It teaches
        nothing: only an outcome does."""
        params = {"tool": name, "server": server, "call": call}
        writer.sessions.append(self.key, Event(kind=CALL_START_EVENT, tool_name=name, params=params))


Pending = Callable[[Reader], "Event | None"]
"""A log entry to write, made in the writer's transaction (``None``: nothing to write after all)."""


def write_pending(index: ToolIndex, writes: list[tuple[GatewaySession, Pending]]) -> None:
    """Write log entries of gateway sessions, in order, in one transaction: a burst of calls
    costs one commit. A session deleted meanwhile is named in the error; the other sessions'
    entries are written."""
    with index.store.writing() as writer:
        gone = write_pending_in(writer, index, writes)
    if gone:
        shown = ", ".join(repr(session_id) for session_id in gone)
        raise ToolIndexError(f"session {shown} was deleted while the gateway served it")


def write_pending_in(
    writer: Writer, index: ToolIndex, writes: list[tuple[GatewaySession, Pending]]
) -> list[str]:
    """``write_pending`` in the caller's transaction; the sessions deleted meanwhile, whose
    entries have no log to go to."""
    by_session: dict[SessionKey, list[Event]] = {}
    gone: list[str] = []
    for gateway_session, pending in writes:
        event = pending(writer)
        if event is not None:
            by_session.setdefault(gateway_session.session.key, []).append(event)
    for key, events in by_session.items():
        if not writer.sessions.append(key, *events):
            gone.append(key.id)
            continue
        learn_from_calls(writer, index.ranker.analyzer(writer), key, events)
    return gone
