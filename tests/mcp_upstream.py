"""An upstream MCP server for the gateway tests, written with the SDK's low-level server and run
as a process of its own: ``python tests/mcp_upstream.py [--http] [--tools N] [--page K] [--state FILE]``.

Over HTTP it listens on 127.0.0.1 on a free port and prints ``PORT <n>`` on stdout once it does.
Its tools: ``echo`` (text and structured content), ``fail`` (an ``isError`` result), ``crash`` (the
process dies during the call), ``grow`` (adds the tool ``grown`` and says its list changed),
``token_digest`` (the SHA-256 of the ``API_TOKEN`` it was started with, or of the variable its
``variable`` argument names, or of the request's ``Authorization`` header over HTTP), ``stall``
(never answers), and ``filler_<i>`` tools to make the list long; each ``--tool NAME`` adds a tool of
that name (a call answers ``NAME: done``). With
``--state FILE``, a JSON object there replaces tool descriptions by name on every tools/list.
``--page-delay S`` waits S seconds before each page of tools/list. ``--live-dir DIR`` keeps a
file in DIR while the process runs and, when it starts, appends to ``DIR/counts`` how many such
files there are (itself included): how many servers ran at once. ``--start-delay S`` waits S
seconds before serving. ``--bounds`` adds ``big`` (a text of ``size`` characters) and ``flood``
(adds the tool ``flooded``, then says its list changed ``count`` times in a burst). ``--slow``
adds ``slow`` (answers after ``steps`` steps of ``interval`` seconds, 1 unless given, reporting its
progress after each when the caller asked for it) and ``described`` (with a title, annotations, an
output schema and icons).
``--relay`` adds ``ask_sampling``, ``ask_elicitation`` and ``ask_roots`` (ask the client after
``delay`` seconds, and answer what it said or the error it gave; ``ask_sampling`` is listed only
to a client that declared sampling), ``log`` (a log message ``text`` at ``level``, during the
call or, with ``later``, after it on the connection) and ``freeze`` (blocks the whole process).
``--events FILE`` appends a line to FILE for each cancelled call (``cancelled NAME``) and each
roots change notification (``roots changed``). ``--legacy`` refuses 2026-07-28 (its
``server/discover``), so a client falls back to the initialize handshake.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import ErrorData, JSONRPCError, JSONRPCRequest
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

OBJECT: dict[str, Any] = {"type": "object"}


def base_tools(count: int) -> list[types.Tool]:
    tools = [
        types.Tool(
            name="echo",
            description="Echo a text back, as text and as structured content",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        ),
        types.Tool(name="fail", description="A tool that always reports a failure", input_schema=OBJECT),
        types.Tool(
            name="crash", description="Kill the server process in the middle of a call", input_schema=OBJECT
        ),
        types.Tool(name="grow", description="Add the tool grown to the list of tools", input_schema=OBJECT),
        types.Tool(name="token_digest", description="Digest of the credential received", input_schema=OBJECT),
        types.Tool(name="stall", description="Wait a long time before answering", input_schema=OBJECT),
    ]
    tools += [
        types.Tool(
            name=f"filler_{i:03d}", description=f"Filler tool number {i} for long lists", input_schema=OBJECT
        )
        for i in range(count)
    ]
    return tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--state")
    parser.add_argument("--tool", action="append", default=[])
    parser.add_argument("--page-delay", type=float, default=0.0)
    parser.add_argument("--live-dir")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--bounds", action="store_true")
    parser.add_argument("--slow", action="store_true")
    parser.add_argument("--relay", action="store_true")
    parser.add_argument("--events")
    parser.add_argument("--legacy", action="store_true")
    options = parser.parse_args()
    if options.live_dir:
        marker = Path(options.live_dir) / f"{os.getpid()}.live"
        marker.touch()
        running = len(list(Path(options.live_dir).glob("*.live")))
        with open(Path(options.live_dir) / "counts", "a", encoding="utf-8") as counts:
            counts.write(f"{running}\n")
        # Terminated rather than ended by its stdin closing: the marker goes all the same.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            serve(options)
        finally:
            marker.unlink()
    else:
        serve(options)


def serve(options: argparse.Namespace) -> None:
    time.sleep(options.start_delay)
    tools = base_tools(options.tools)
    tools += [
        types.Tool(name=name, description=f"Extra tool {name} of this server", input_schema=OBJECT)
        for name in options.tool
    ]
    if options.bounds:
        tools += [
            types.Tool(
                name="big", description="Answer a very large text of size characters", input_schema=OBJECT
            ),
            types.Tool(
                name="flood",
                description="Say the tool list changed many times in a burst",
                input_schema=OBJECT,
            ),
        ]
    if options.slow:
        tools += [
            types.Tool(
                name="slow", description="Answer slowly, reporting progress at each step", input_schema=OBJECT
            ),
            types.Tool(
                name="described",
                title="A Described Tool",
                description="A tool with every optional field a tool can have",
                input_schema=OBJECT,
                output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
                annotations=types.ToolAnnotations(read_only_hint=True, title="Described"),
                icons=[types.Icon(src="https://example.com/icon.png", mime_type="image/png")],
            ),
        ]
    if options.relay:
        tools += [
            types.Tool(name=name, description=description, input_schema=OBJECT)
            for name, description in [
                ("ask_sampling", "Ask the client's model to sample a message"),
                ("ask_elicitation", "Ask the user for a value through the client"),
                ("ask_roots", "Ask the client for its roots"),
                ("log", "Send a log message to the client"),
                ("freeze", "Block the whole server process"),
            ]
        ]
    bus = InMemorySubscriptionBus()
    connections: list[Any] = []
    later: list[Any] = []

    def record(event: str) -> None:
        if options.events:
            with open(options.events, "a", encoding="utf-8") as events:
                events.write(f"{event}\n")

    def listed() -> list[types.Tool]:
        if not options.state or not Path(options.state).exists():
            return tools
        overrides = json.loads(Path(options.state).read_text(encoding="utf-8"))
        return [
            tool.model_copy(update={"description": overrides.get(tool.name, tool.description)})
            for tool in tools
        ]

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if ctx.session not in connections:
            connections.append(ctx.session)
        await anyio.sleep(options.page_delay)
        start = int(params.cursor) if params and params.cursor else 0
        everything = listed()
        capabilities = ctx.session.client_capabilities
        if capabilities is None or capabilities.sampling is None:
            # Listed only to a client that can sample, as server-everything does.
            everything = [tool for tool in everything if tool.name != "ask_sampling"]
        end = start + options.page
        return types.ListToolsResult(
            tools=everything[start:end], next_cursor=str(end) if end < len(everything) else None
        )

    async def changed() -> None:
        for connection in connections:
            # A 2026-07-28 connection has no channel for it (the bus serves those): whatever fails.
            with contextlib.suppress(Exception):
                await connection.send_tool_list_changed()
        await bus.publish(ToolsListChanged())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        arguments = params.arguments or {}
        if params.name == "echo":
            text = str(arguments.get("text", ""))
            return types.CallToolResult(
                content=[types.TextContent(text=f"echo: {text}")], structured_content={"echo": text}
            )
        if params.name == "fail":
            return types.CallToolResult(
                content=[types.TextContent(text="the tool failed on purpose")], is_error=True
            )
        if params.name == "crash":
            os._exit(3)
        if params.name == "grow":
            if all(tool.name != "grown" for tool in tools):
                tools.append(
                    types.Tool(name="grown", description="A tool that appeared later", input_schema=OBJECT)
                )
            await changed()
            return types.CallToolResult(content=[types.TextContent(text="grown")])
        if params.name == "flood":
            if all(tool.name != "flooded" for tool in tools):
                tools.append(
                    types.Tool(name="flooded", description="A tool announced by a flood", input_schema=OBJECT)
                )
            for _ in range(int(arguments.get("count", 100))):
                await changed()
            return types.CallToolResult(content=[types.TextContent(text="flooded")])
        if params.name == "slow":
            steps = int(arguments.get("steps", 3))
            interval = float(arguments.get("interval", 1))
            try:
                for step in range(1, steps + 1):
                    await anyio.sleep(interval)
                    await ctx.session.report_progress(step, steps, f"step {step}")
            except anyio.get_cancelled_exc_class():
                record("cancelled slow")
                raise
            return types.CallToolResult(content=[types.TextContent(text=f"slow: {steps} steps")])
        if params.name.startswith("ask_"):
            return await ask(ctx, params)
        if params.name == "log":
            entry = {
                "level": arguments.get("level", "info"),
                "data": arguments.get("text", ""),
                "logger": "up",
            }
            if arguments.get("later"):
                later.append((ctx.session._connection, entry))
            else:
                with warnings.catch_warnings():  # deprecated in 2026-07-28, still what 2025 servers do
                    warnings.simplefilter("ignore")
                    await ctx.session.send_log_message(entry["level"], entry["data"], "up", ctx.request_id)
            return types.CallToolResult(content=[types.TextContent(text="logged")])
        if params.name == "freeze":
            time.sleep(3600)
        if params.name == "described":
            return types.CallToolResult(
                content=[types.TextContent(text='{"ok": true}')], structured_content={"ok": True}
            )
        if params.name == "big":
            return types.CallToolResult(content=[types.TextContent(text="x" * int(arguments.get("size", 0)))])
        if params.name == "stall":
            await anyio.sleep(3600)
        if params.name == "token_digest":
            request = ctx.request
            credential = (
                request.headers.get("authorization", "")
                if request is not None
                else os.environ.get(str(arguments.get("variable", "API_TOKEN")), "")
            )
            return types.CallToolResult(
                content=[types.TextContent(text=hashlib.sha256(credential.encode()).hexdigest())]
            )
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name}: done")])

    async def ask(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Ask the client as the protocol of the connection has it: a request of its own before
        2026-07-28, an input request in the call's result (answered in its retry) since."""
        request: types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest
        if params.name == "ask_sampling":
            request = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(
                    messages=[
                        types.SamplingMessage(role="user", content=types.TextContent(text="say something"))
                    ],
                    max_tokens=20,
                )
            )
        elif params.name == "ask_elicitation":
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message="your name?",
                    requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
                )
            )
        else:
            request = types.ListRootsRequest()
        await anyio.sleep(float((params.arguments or {}).get("delay", 0)))
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if not params.input_responses or "asked" not in params.input_responses:
                return types.InputRequiredResult(input_requests={"asked": request}, request_state="asked")
            answer: dict[str, Any] = params.input_responses["asked"].model_dump(
                mode="json", exclude_none=True
            )
        else:
            try:
                answer = await ctx.session._connection.send_raw_request(
                    request.method,
                    request.model_dump(by_alias=True, mode="json", exclude_none=True).get("params"),
                )
            except MCPError as exc:
                answer = {"error": exc.code, "message": exc.message}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(answer, sort_keys=True))])

    async def send_later(task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await anyio.sleep(0.2)
            while later:
                connection, entry = later.pop(0)
                await connection.notify("notifications/message", entry)

    async def roots_changed(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        record("roots changed")

    server: Server[Any] = Server(
        "upstream",
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(bus),
    )
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )
    if options.http:
        anyio.run(serve_http, server)
    else:
        anyio.run(serve_stdio, server, send_later, options.legacy)


async def serve_stdio(server: Server[Any], send_later: Any, legacy: bool = False) -> None:
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
        await group.start(send_later)
        if legacy:
            read_stream = await group.start(without_discover, read_stream, write_stream)
        await server.run(
            read_stream,
            write_stream,
            server.create_initialization_options(NotificationOptions(tools_changed=True)),
        )
        group.cancel_scope.cancel()


async def without_discover(
    read_stream: Any, write_stream: Any, *, task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED
) -> None:
    """The messages of ``read_stream`` but ``server/discover``, answered "method not found" as a
    server older than 2026-07-28 does (the SDK's server takes any first discover as 2026-07-28)."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    task_status.started(receive)
    async with send:
        async for message in read_stream:
            request = message.message if isinstance(message, SessionMessage) else None
            if isinstance(request, JSONRPCRequest) and request.method == "server/discover":
                error = ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                await write_stream.send(
                    SessionMessage(JSONRPCError(jsonrpc="2.0", id=request.id, error=error))
                )
                continue
            await send.send(message)


async def serve_http(server: Server[Any]) -> None:
    import uvicorn

    config = uvicorn.Config(
        server.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=0, log_level="warning"
    )
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as group:

        async def announce() -> None:
            while not web.started:
                await anyio.sleep(0.01)
            print(f"PORT {web.servers[0].sockets[0].getsockname()[1]}", flush=True)

        group.start_soon(announce)
        await web.serve()


if __name__ == "__main__":
    main()
