"""How a stdio upstream is started: its environment (the gateway's, less its own settings), its
program found first, a guard so it never outlives the gateway, and its stderr copied to the
upstream log with the last lines kept to say why a start failed."""

from __future__ import annotations

import codecs
import os
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

from discovery._mcp.config import StdioServer
from discovery._mcp.failures import UpstreamError

OWN_SETTINGS = ("TOOL_INDEX_", "PG")
"""Prefixes of what the gateway keeps from upstreams: its own settings (``TOOL_INDEX_DB``, its
bearer token) and every libpq variable (``PGPASSWORD``, ``PGPASSFILE``, ``PGSERVICE``, ``PGUSER``,
...), which say how to reach the catalog's database and with which credentials. A server that
needs one of them gets it from its entry's ``env``, where the config's author chose to give it."""


def upstream_environment(entry: Mapping[str, str]) -> dict[str, str]:
    """What a stdio upstream starts with: the gateway's whole environment, less its own settings and
    the database's, with the entry's ``env`` on top. The client chose the gateway's environment; an
    upstream sees it as if the client had started that server itself. The SDK's default would keep
    only a handful of variables (``HOME``, ``PATH``, ...), and lose what a machine needs to reach a
    network (proxies, a company's CA certificates): ``npx`` then hangs fetching its package until
    the start times out."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(OWN_SETTINGS)}
    return {**inherited, **entry}


STDERR_TAIL_BYTES = 4096
"""How much of a stdio server's latest stderr is kept, to say why it failed to start."""
STDERR_TAIL_LINES = 5
"""How many of its last lines a failed start is reported with (npm's 404 takes three or four)."""
STDERR_EOF_WAIT = 2.0
"""Seconds a failed start waits for the rest of the stopped server's stderr."""


class StderrTail:
    """A stdio server's stderr, through a pipe: copied to the upstream log as it comes, by a
    thread of its own (a server writing much never waits on the event loop), and its last bytes
    kept, so a server that fails to start is reported in its own words (npm's 404, the last line
    of a traceback)."""

    def __init__(self, errlog: TextIO) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w")
        self._errlog = errlog
        self._tail = b""
        self._reader = threading.Thread(target=self._copy, args=(read,), name="upstream-stderr", daemon=True)
        self._reader.start()

    def _copy(self, read: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with open(read, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                self._tail = (self._tail + chunk)[-STDERR_TAIL_BYTES:]
                try:
                    self._errlog.write(decoder.decode(chunk))
                    self._errlog.flush()
                except (OSError, ValueError):  # a full disk or a closed log never stops the copy
                    pass

    def spawned(self) -> None:
        """The process holds its own copy of the pipe's end now: ours is closed, so the reader
        sees the end of the stream once the process (and whatever it started) has gone."""
        self.writer.close()

    async def last_lines(self) -> str:
        """`` (its stderr ended: A | B)`` with its last non-blank lines, once they are all read
        (or ``STDERR_EOF_WAIT`` has passed); empty when it wrote nothing."""
        self.spawned()
        await anyio.to_thread.run_sync(self._reader.join, STDERR_EOF_WAIT)
        text = self._tail.decode("utf-8", errors="replace")
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        shown = [
            "".join(char if char.isprintable() else "\ufffd" for char in line)[:300]
            for line in lines[-STDERR_TAIL_LINES:]
        ]
        return f" (its stderr ended: {' | '.join(shown)})" if shown else ""


_ORPHAN_GUARD = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "if os.getppid()!=int(sys.argv[1]):os._exit(1)\n"  # the gateway died before the line above
    "try:os.execvp(sys.argv[2],sys.argv[2:])\n"
    "except OSError as e:sys.stderr.write(f'cannot start: {e.strerror}\\n');os._exit(127)\n"
)
"""What a stdio server is started through on Linux: the kernel kills it when the gateway's
thread that started it ends, however the gateway ends (``kill -9`` included), then it becomes the
server's own program (the same process). A gateway in front of a gateway ends the same way, so a
chain never outlives its first link. The servers' own children end when their stdin closes, or
with their process group when the gateway stops them."""


def _launch(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that start a server, guarded against outliving the gateway."""
    if not sys.platform.startswith("linux"):
        return command, args
    return sys.executable, ["-S", "-E", "-c", _ORPHAN_GUARD, str(os.getpid()), command, *args]


def _found(command: str, env: Mapping[str, str], cwd: str | None) -> bool:
    """Whether ``command`` names a program that can run, looked up as the process start would: in
    the server's ``PATH``, or relative to its working directory when it holds a ``/``."""
    if os.sep in command:
        path = Path(cwd or ".") / command
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(command, path=env.get("PATH", os.defpath)) is not None


@asynccontextmanager
async def _spawned(inner: Any, stderr: StderrTail) -> AsyncIterator[tuple[Any, Any]]:
    """``inner``'s streams, with our end of the stderr pipe closed once the process holds its own."""
    try:
        async with inner as streams:
            stderr.spawned()
            yield streams
    finally:
        stderr.spawned()


def stdio_transport(
    name: str, config: StdioServer, errlog: TextIO
) -> tuple[AbstractAsyncContextManager[tuple[Any, Any]], StderrTail]:
    """The transport that starts server ``name`` by its entry ``config``, and its stderr. A
    missing working directory or program is an ``UpstreamError`` before anything starts."""
    if config.cwd is not None and not Path(config.cwd).is_dir():
        # Checked first: starting in a missing directory fails as if the command were missing.
        what = "is not a directory" if Path(config.cwd).exists() else "not found"
        raise UpstreamError(name, f"cannot start: working directory {what}", f" ({config.cwd})")
    env = upstream_environment(config.env)
    if not _found(config.command, env, config.cwd):
        raise UpstreamError(name, "cannot start: command not found", f" ({config.command})")
    command, args = _launch(config.command, list(config.args))
    parameters = StdioServerParameters(command=command, args=args, env=env, cwd=config.cwd)
    stderr = StderrTail(errlog)
    return _spawned(stdio_client(parameters, errlog=stderr.writer), stderr), stderr
