"""The MCP server a gateway answers on, up before the library behind it has loaded.

Loading the index (SQLAlchemy, numpy, the store, the ranking) takes a while, and a host waits
for the first ``tools/list`` before it shows the gateway's tools. So ``serve`` over stdio starts
this front first, with the MCP SDK alone, and loads the gateway in a worker meanwhile: the first
``tools/list`` of the process's session is answered from the answer a previous process stored
(``store.stored_first_answer``, read as that request comes: given only while the catalog and the
session are as they were when it was made), and every other request waits until the gateway
is attached, then is the gateway's. Without a stored answer, the first ``tools/list`` waits
too, and is answered exactly as every later one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.connection import Connection
from pydantic import ValidationError

from discovery._mcp.scope import ToolFilter

LOG_LEVEL = "tool_index.log_level"
"""The key of a client connection's state where the level it set (logging/setLevel) is kept."""
IDENTITY = "tool_index.identity"
"""The key of the ASGI scope where ``serve --tokens`` puts the identity whose token a request
carried (``discovery._mcp.serve``)."""
FIRST_ANSWER_FORMAT = 1
"""Bumped when what a first answer's key covers changes meaning."""
INSTRUCTIONS = "Call search_tool_bm25 to find tools, then call_tool to call them."


class Handlers(Protocol):
    """What the front hands its requests to once the gateway is attached (``Gateway``)."""

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult: ...
    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult: ...
    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult: ...
    async def roots_changed(self) -> None: ...
    def input_schema(self, name: str) -> Mapping[str, Any] | None: ...
    async def seen(self, ctx: ServerRequestContext[Any, Any]) -> None: ...


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The client's connection a request came on (over HTTP, its ``Mcp-Session-Id``): the SDK
    gives each request a ``ServerSession`` of its own, over the connection's one object, which
    lives as long as the connection does and no longer."""
    connection: Connection = ctx.session._connection
    return connection


class FrontServer(Server[Any]):
    """A ``Server`` whose capabilities say whether its tools/list changes, on every transport:
    the HTTP session manager asks for the initialization options itself, with no arguments."""

    def __init__(self, notification_options: NotificationOptions, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notification_options = notification_options

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        return super().create_initialization_options(
            notification_options or self.notification_options, experimental_capabilities, extensions
        )


class Front:
    """The server of one gateway process; ``attach`` hands it the gateway once loaded.

    ``first_answer``: what reads the stored ``tools/list`` answer for the process's own session
    (its JSON, or ``None`` when none holds now), called for the first ``tools/list`` that comes
    before the gateway is attached, and only then (stdio only: over HTTP each client has a
    session of its own)."""

    def __init__(self, *, expose_active: bool, first_answer: Callable[[], str | None] | None = None) -> None:
        self.server = FrontServer(
            NotificationOptions(tools_changed=expose_active),
            "tool-index",
            version=_version(),
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            get_tool_input_schema=self._input_schema,
        )
        # Registered apart: the constructor's arguments for them warn that they are deprecated in
        # 2026-07-28, and handshake-era clients (most of them) still use both.
        self.server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_level)
        self.server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._roots_changed
        )
        self.first_answer = first_answer
        self.answered_first = False
        """Whether the stored first answer was given (before the gateway was attached)."""
        self._gateway: Handlers | None = None
        self._attached = anyio.Event()
        self._early: list[ServerRequestContext[Any, Any]] = []

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()

    async def attach(self, gateway: Handlers) -> None:
        """From now on requests are ``gateway``'s; the requests answered before are shown to it
        (the client whose ``tools/list`` the front answered is the gateway's client too)."""
        self._gateway = gateway
        for ctx in self._early:
            await gateway.seen(ctx)
        self._early.clear()
        self._attached.set()

    async def _ready(self) -> Handlers:
        await self._attached.wait()
        assert self._gateway is not None
        return self._gateway

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        read, self.first_answer = self.first_answer, None
        if read is not None and self._gateway is None and (params is None or params.cursor is None):
            # As the database is now, not as it was at the start. Read here, in the event loop: a
            # read of a WAL database waits for no writer, and a thread's hop would let a client's
            # end of input (a pipe closed at once) come first and cancel this answer.
            first = read()
            try:
                answer = None if first is None else types.ListToolsResult.model_validate_json(first)
            except ValidationError:  # a row that is not an answer: the gateway's own, then
                answer = None
            if answer is not None:
                self.answered_first = True
                self._early.append(ctx)
                return answer
        return await (await self._ready()).list_tools(ctx, params)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await (await self._ready()).call_tool(ctx, params)

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await (await self._ready()).listen(ctx, params)

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        return None if self._gateway is None else self._gateway.input_schema(name)

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        # The connection's own state: answered at once, even before the gateway is attached.
        connection_of(ctx).state[LOG_LEVEL] = params.level
        return types.EmptyResult()

    async def _roots_changed(
        self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams
    ) -> None:
        await (await self._ready()).roots_changed()


def first_answer_key(
    servers: Sequence[str], tool_filter: ToolFilter, *, session_id: str | None, mode: str, expose_active: bool
) -> str:
    """The key of a stored first answer: everything the answer depends on besides the database
    (whose state the stamp covers): the code that makes it, the config's servers and filters, the
    session asked for (``None``: a new one each start) and the options that shape the listing."""
    described = {
        "format": FIRST_ANSWER_FORMAT,
        "code": code_digest(),
        "servers": list(servers),
        "allow": list(tool_filter.allow),
        "deny": list(tool_filter.deny),
        "session": session_id,
        "mode": mode,
        "expose_active": expose_active,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


@functools.cache
def code_digest() -> str:
    """The version of the code of the packages that make an answer: the installed version and the
    size and modification time of each of their modules, so that an edited checkout never gives an
    answer an older version of its code made. Taken once, when the process first asks: the code
    it runs is what it loaded then, even if the files change before it stores its answer."""
    root = Path(__file__).resolve().parents[2]
    listed: list[str] = [_version()]
    for package in ("discovery", "store"):
        for directory, folders, files in os.walk(root / package):
            folders[:] = sorted(folder for folder in folders if folder != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    try:
                        status = os.stat(os.path.join(directory, name))
                    except OSError:  # gone between the listing and now (an upgrade under way)
                        listed.append(f"{directory}/{name}:gone")
                        continue
                    listed.append(f"{directory}/{name}:{status.st_size}:{status.st_mtime_ns}")
    return hashlib.sha256("\n".join(listed).encode()).hexdigest()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tool-index")
    except PackageNotFoundError:
        return "0"
