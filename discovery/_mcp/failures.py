"""What an upstream's failure is: the error the model is told (``UpstreamError``), which
exceptions are a server's or its transport's (``from_server``: anything else is the gateway's
own bug, never reported as the server's), and the one line that says what went wrong."""

from __future__ import annotations

import anyio
import httpx2
from mcp import MCPError
from pydantic import ValidationError

from discovery.errors import ToolIndexError


class UpstreamError(ToolIndexError):
    """An upstream server could not be reached, failed, timed out or answered garbage; the
    message names the server. It is what the model is told, so it holds no local path;
    ``reported`` adds what only the gateway's operator sees (``detail``: paths, the server's own
    last words on stderr)."""

    def __init__(self, server: str, what: str, detail: str = "") -> None:
        super().__init__(f"server {server!r}: {what}")
        self.server = server
        self.what = what
        self.detail = detail

    @property
    def reported(self) -> str:
        return f"{self}{self.detail}"


SERVER_FAILURES: tuple[type[BaseException], ...] = (
    MCPError,
    OSError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx2.HTTPError,
    ValidationError,
)
"""What a server or its transport raises: a connection that failed or closed, a process that
could not start, an answer that is not the protocol's."""


def from_server(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's failure (every error of a group is): anything else raised
    in a call is the gateway's own error, and is never reported as the server's."""
    if isinstance(exc, BaseExceptionGroup):
        return all(from_server(inner) for inner in exc.exceptions)
    return isinstance(exc, SERVER_FAILURES)


def reason(exc: BaseException) -> str:
    """What went wrong, in one line, from the innermost exception of a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, UpstreamError):
        return exc.what
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: command not found ({exc.filename or exc})"
    if isinstance(exc, OSError):
        return f"cannot start: {exc.strerror or exc}"
    if isinstance(exc, MCPError):
        return f"connection failed: {exc}"
    # httpx2's own texts may quote the URL, which may carry a key: say what happened without them.
    if isinstance(exc, httpx2.ConnectError):
        return "cannot connect to its url"
    if isinstance(exc, httpx2.TimeoutException):
        return "its url did not answer in time"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"its url answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP error: {type(exc).__name__}"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]
