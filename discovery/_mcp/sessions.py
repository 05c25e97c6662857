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
from discovery._params import checked_id
from discovery._sessions.learning import CALL_EVENT, call_params, learn_from_calls
from discovery._sessions.listing import CALL_START_EVENT
from discovery.errors import ToolCallError, ToolIndexError
from store import Event, Reader, StoredTool, Writer

if TYPE_CHECKING:
    from discovery._sessions.session import Scope, Session
    from discovery._sessions.settings import AnswerStyle

NEW_SESSION_MODE = "mcp-only"
"""A gateway fronts MCP tools only; ``auto`` would switch discovery off for a small catalog."""
ANSWER: AnswerStyle = "rich"
"""A gateway's searches answer richly (``discovery._sessions.answer``): its model sees only the
answer, never the activated tools themselves (without ``--expose-active``)."""
PIN_EVENT = "pin"
OWNER_EVENT = "owner"
"""Logged right after ``create`` by a gateway with identities: ``{"identity": NAME}``, never a secret."""


def owner_of(reader: Reader, session_id: str) -> str | None:
    """The identity a stored session belongs to (its ``owner`` entry), or ``None``."""
    logged = reader.sessions.first_of_kind(session_id, OWNER_EVENT)
    identity = (logged.event.params or {}).get("identity") if logged is not None else None
    return identity if isinstance(identity, str) else None


def refusal(session_id: str, owner: str | None) -> str:
    """Why an identity may not use ``session_id``; it never names the identity that may."""
    if owner is None:
        return (
            f"session {session_id!r} was made without an identity (over stdio, on the command line or "
            "by a gateway without --tokens), and this gateway serves only the sessions of its "
            "identities: name a session of your own (?session=NEW)"
        )
    return (
        f"session {session_id!r} belongs to another identity of this gateway: it is not yours to read "
        "or change; name a session of your own (?session=NEW)"
    )


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


class NotYourSession(ToolIndexError):
    """A gateway with identities (``serve --tokens``) was asked for a session another identity
    made, or one made without an identity: it is refused, never read or changed."""


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
    owner: str | None = None
    """The identity the session belongs to (``serve --tokens``); ``None``: every local client."""
    stored: bool = True
    mode: str = NEW_SESSION_MODE
    on_created: Callable[[GatewaySession], None] | None = field(default=None, repr=False)
    """Called (in the worker) once the gateway has stored the session it named."""
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
        owner: str | None = None,
    ) -> GatewaySession:
        """Resume ``session_id`` with its own settings, or prepare it (a new id when ``None``) in
        ``mode``, stored when it first changes; the active tools are pinned as the log last saw
        them. With ``scope``, its searches rank and activate only the tools ``scope`` admits.
        With ``owner`` (the identity asking), a stored session must belong to that identity
        (``NotYourSession``). Reads this session's row, never the others'."""
        from discovery._sessions.session import Session

        session_id = checked_id(session_id, "session id") if session_id is not None else uuid.uuid4().hex
        with index.store.reading() as reader:
            exists = reader.sessions.load(session_id) is not None
            stored_owner = owner_of(reader, session_id) if exists else None
        if exists and owner is not None and stored_owner != owner:
            raise NotYourSession(refusal(session_id, stored_owner))
        session = Session(index.store, index.ranker, session_id, scope, answer=ANSWER)
        opened = cls(index, session, created=not exists, owner=stored_owner if exists else owner)
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
        else:
            servers, _, total = self.session.as_new(self.settings())[1]
        self.description = gateway_description(servers, total)

    def settings(self) -> dict[str, Any]:
        return {"discovery_mode": self.mode, "answer": ANSWER}

    def store(self) -> None:
        """Store the session if it is not yet (in one transaction with its owner, so a session
        never exists without the identity that made it); another caller may have made it just
        before, and then it must be this identity's."""
        if self.stored:
            return
        from discovery._sessions.session import opening_active
        from discovery._sessions.settings import parsed_settings

        settings = parsed_settings(self.settings())
        with self.index.store.writing() as writer:
            made = writer.sessions.lock(self.id) is None
            if made:
                active = opening_active(self.index.ranker, writer, settings)
                stored = settings.model_dump(mode="json")
                made = writer.sessions.create(self.id, stored, active) is not None
                if made and self.owner is not None:
                    owned = Event(kind=OWNER_EVENT, params={"identity": self.owner})
                    writer.sessions.append(self.id, owned)
            found_owner = None if made else owner_of(writer, self.id)
        if not made:
            if self.owner is not None and found_owner != self.owner:
                raise NotYourSession(refusal(self.id, found_owner))
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
        search is logged, so the session is stored first (``NotYourSession`` when another
        identity made it meanwhile)."""
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
        state = writer.sessions.lock(self.id)
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
            writer.sessions.append(self.id, pinned)

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
        session_id, store = self.id, self.index.store
        return lambda reader: Event(
            kind=CALL_EVENT, tool_name=name, params=call_params(reader, store, session_id, name, params)
        )

    def start_in(self, name: str, server: str, call: str, writer: Writer) -> None:
        """In the caller's write transaction: log that the call ``call`` of ``name`` is about to be
        forwarded, so a gateway killed before its answer leaves a trace of a call that may have
        had effects (its outcome, logged after the answer, names the same ``call``). It teaches
        nothing: only an outcome does."""
        params = {"tool": name, "server": server, "call": call}
        writer.sessions.append(self.id, Event(kind=CALL_START_EVENT, tool_name=name, params=params))


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
    by_session: dict[str, list[Event]] = {}
    gone: list[str] = []
    for gateway_session, pending in writes:
        event = pending(writer)
        if event is not None:
            by_session.setdefault(gateway_session.id, []).append(event)
    for session_id, events in by_session.items():
        if not writer.sessions.append(session_id, *events):
            gone.append(session_id)
            continue
        learn_from_calls(writer, index.ranker.analyzer(writer), session_id, events)
    return gone
