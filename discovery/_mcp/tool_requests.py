"""The two requests the gateway makes of an upstream: all its tools (every page of tools/list)
and a tool call, each bounded in time (and a call's answer in size); a failure of the server or
its transport is an ``UpstreamError`` that says what happened, and marks the connection to be
opened again when it cannot be trusted."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client, MCPError, types
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from discovery._mcp.connection import CALLER, Upstream
from discovery._mcp.failures import UpstreamError, from_server, reason

MAX_PAGES = 1000
"""tools/list pages read from one server before it counts as a server that never ends its list."""


async def list_all_tools(upstream: Upstream, client: Client) -> list[types.Tool]:
    """Every tool of ``upstream`` (connected by ``client``), through every page of tools/list,
    all within its timeout: a server that answers each page in time but never finishes its list
    is not waited for."""
    server = upstream.name
    tools: list[types.Tool] = []
    cursor: str | None = None
    try:
        with anyio.fail_after(upstream.timeout):
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return tools
    except TimeoutError:
        raise UpstreamError(
            server, f"tools/list (all its pages) took longer than {upstream.timeout:g} s"
        ) from None
    except Exception as exc:
        if not from_server(exc):
            raise
        upstream.mark_broken()
        raise UpstreamError(server, f"tools/list failed: {reason(exc)}") from exc
    raise UpstreamError(server, f"tools/list did not end after {MAX_PAGES} pages")


async def call_tool(
    upstream: Upstream,
    client: Client,
    tool: str,
    arguments: dict[str, Any] | None,
    *,
    call_timeout: float,
    max_result_bytes: int,
    progress: ProgressFnT | None = None,
    caller: object | None = None,
) -> types.CallToolResult:
    """Call ``tool`` on ``upstream`` (connected by ``client``) for ``caller``, and return its
    result as it came (an ``isError`` result included). No answer within ``call_timeout``, more
    than ``max_result_bytes``, or a failure of the server or its transport is an
    ``UpstreamError``; the connection is kept only while the server is still sound."""
    key = object()
    if caller is not None:
        upstream.callers[key] = caller
    # Set only now: the connection's own tasks, started by the first call, never see it.
    token = CALLER.set(caller)
    try:
        # Cancelled here (the caller's scope, or the call timeout below), the SDK tells the
        # server with notifications/cancelled before the cancellation goes on.
        with anyio.fail_after(call_timeout):
            result = await client.call_tool(
                tool, arguments, read_timeout_seconds=call_timeout, progress_callback=progress
            )
    except TimeoutError:
        if await _still_answers(upstream, client):
            raise UpstreamError(
                upstream.name,
                f"{tool} did not answer within {call_timeout:g} s; the call was cancelled on the server",
            ) from None
        upstream.reset(client)
        raise UpstreamError(
            upstream.name,
            f"{tool} did not answer within {call_timeout:g} s, nor the server to tools/list "
            "afterwards; the server is restarted on the next call",
        ) from None
    except MCPError as exc:
        if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            upstream.mark_broken()
            raise UpstreamError(
                upstream.name,
                f"the call of {tool} failed ({reason(exc)}); the server is restarted on the next call",
            ) from exc
        # An error answer (the server's, or the client's to what the server asked): the
        # connection is sound.
        said = " ".join(exc.message.split())[:300]
        raise UpstreamError(upstream.name, f"the call of {tool} failed: error {exc.code}: {said}") from exc
    except Exception as exc:
        if not from_server(exc):
            raise  # the gateway's own error: the server and its connection are not to blame
        upstream.mark_broken()
        raise UpstreamError(
            upstream.name,
            f"the call of {tool} failed ({reason(exc)}); the server is restarted on the next call",
        ) from exc
    finally:
        CALLER.reset(token)
        upstream.callers.pop(key, None)
    size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
    if size > max_result_bytes:
        upstream.reset(client)
        raise UpstreamError(
            upstream.name,
            f"the result of {tool} was too large ({size} bytes, more than the limit of "
            f"{max_result_bytes}) and was not forwarded; the server is restarted on the next call",
        )
    return result


async def _still_answers(upstream: Upstream, client: Client) -> bool:
    """Whether a server whose call timed out (and was cancelled) still answers: its
    connection, and what the server holds for its other callers, is kept only then. A server
    that no longer reads its input would time every later call out."""
    try:
        with anyio.fail_after(upstream.timeout):
            await client.list_tools()
    except (
        TimeoutError,
        MCPError,
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        ValidationError,
    ):
        return False
    return True
