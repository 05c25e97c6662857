"""The one way a user's file is read: catalogs, MCP configs, labelled query files and host session
files all go through here, so each is bounded the same way.

A file is read up to ``TOOL_INDEX_MAX_INPUT_BYTES`` (an endless one such as ``/dev/zero`` is
refused, not read into memory), a line of a JSON-lines file up to ``TOOL_INDEX_MAX_LINE_BYTES``,
and JSON nested deeper than ``MAX_NESTING`` levels is refused. Every failure is one
``<file>: <reason>`` message, raised as the caller's own error class.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from discovery.errors import ToolIndexError

STDIN = "-"
STDIN_NAME = "<stdin>"
MAX_NESTING = 128
"""Deepest JSON nesting a value may have: pydantic cannot serialize (hash, store) much deeper ones."""
MAX_INPUT_ENV = "TOOL_INDEX_MAX_INPUT_BYTES"
MAX_INPUT_BYTES = 512 * 1024 * 1024
"""Largest input file read (``TOOL_INDEX_MAX_INPUT_BYTES`` sets another): an endless input such
as ``/dev/zero`` is refused instead of filling memory."""
MAX_LINE_ENV = "TOOL_INDEX_MAX_LINE_BYTES"
MAX_LINE_BYTES = 16 * 1024 * 1024
"""Largest line of a JSON-lines file, so one record (``TOOL_INDEX_MAX_LINE_BYTES`` sets another)."""
_CHUNK = 1024 * 1024

ErrorClass = type[ToolIndexError]


def size_limit(variable: str, default: int, error: ErrorClass = ToolIndexError) -> int:
    """A byte limit: ``variable`` from the environment when it holds a positive integer."""
    raw = os.environ.get(variable)
    if raw is None:
        return default
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise error(f"{variable}={raw!r} is not a positive number of bytes")
    return int(raw)


def read_bounded(
    path: str | Path, error: ErrorClass, *, what: str = "file", stdin: BinaryIO | None = None
) -> tuple[str, str]:
    """The name to quote and the UTF-8 text (a BOM dropped) of ``path`` (``-``: standard input),
    at most ``TOOL_INDEX_MAX_INPUT_BYTES`` of it; ``what`` names the kind of file in messages."""
    where = STDIN_NAME if str(path) == STDIN else str(path)
    limit = size_limit(MAX_INPUT_ENV, MAX_INPUT_BYTES, error)
    too_large = error(
        f"{where}: larger than {limit} bytes, the most a {what} may hold; "
        f"split it, or set {MAX_INPUT_ENV} to allow more"
    )
    try:
        if str(path) == STDIN:
            data = _read_at_most(stdin or sys.stdin.buffer, limit + 1)
        else:
            with Path(path).open("rb") as file:
                # A regular file's size is known: one too large is refused before it is read.
                if os.fstat(file.fileno()).st_size > limit:
                    raise too_large
                data = _read_at_most(file, limit + 1)
    except OSError as exc:
        raise error(f"{where}: cannot read: {exc.strerror or exc}") from exc
    except MemoryError:
        raise error(f"{where}: too large to read into memory") from None
    if len(data) > limit:
        raise too_large
    try:
        return where, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (invalid byte at offset {exc.start})") from exc


def read_regular(path: str | Path, error: ErrorClass, *, what: str = "file") -> tuple[str, str]:
    """As ``read_bounded``, for a file that must be a regular one (a config, a tokens file, read
    again while a gateway serves): a FIFO, a device such as ``/dev/zero`` or a directory is
    refused without waiting on it, and so is a file that changed size while it was read (one still
    being written, or truncated meanwhile), rather than giving half of it."""
    where = str(path)
    limit = size_limit(MAX_INPUT_ENV, MAX_INPUT_BYTES, error)
    try:
        # Non-blocking: opening a FIFO nobody writes would otherwise wait for a writer forever.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{where}: cannot read: {exc.strerror or exc}") from exc
    before = os.fstat(descriptor)
    if not stat.S_ISREG(before.st_mode):  # checked first: a directory cannot even be wrapped
        os.close(descriptor)
        raise error(f"{where}: cannot read: not a regular file")
    with os.fdopen(descriptor, "rb") as file:
        if before.st_size > limit:
            raise error(
                f"{where}: larger than {limit} bytes, the most a {what} may hold; "
                f"split it, or set {MAX_INPUT_ENV} to allow more"
            )
        data = _read_at_most(file, before.st_size + 1)
        after = os.fstat(descriptor)
    if (
        len(data) != before.st_size
        or after.st_size != before.st_size
        or after.st_mtime_ns != before.st_mtime_ns
    ):
        raise error(f"{where}: cannot read: it changed while it was read")
    try:
        return where, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (invalid byte at offset {exc.start})") from exc


def _read_at_most(stream: BinaryIO, count: int) -> bytes:
    """Up to ``count`` bytes, read a chunk at a time so an endless stream costs ``count`` at most."""
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def bounded_lines(
    text: str, where: str, error: ErrorClass, *, what: str = "line"
) -> Iterator[tuple[int, str]]:
    """Each non-blank line of ``text`` and its number; one longer than ``TOOL_INDEX_MAX_LINE_BYTES``
    raises ``error`` (``what`` names what a line holds)."""
    limit = size_limit(MAX_LINE_ENV, MAX_LINE_BYTES, error)
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if len(line) > limit and len(line.encode("utf-8", "surrogatepass")) > limit:
            raise error(
                f"{where}, line {number}: longer than {limit} bytes, the most one {what} may take; "
                f"set {MAX_LINE_ENV} to allow more"
            )
        yield number, line.removesuffix("\r")


def loads(text: str) -> Any:
    """JSON as Python reads it, without NaN and Infinity; raises ``ValueError`` or ``RecursionError``."""
    return json.loads(text, parse_constant=_reject_constant)


def load_json(text: str, where: str, error: ErrorClass, *, one_line: bool = False) -> Any:
    """One JSON document no deeper than ``MAX_NESTING``, or ``error`` saying why it is not;
    ``one_line`` when ``text`` is a line of a file whose ``where`` already names the line."""
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        line = "" if one_line else f":{exc.lineno}"
        raise error(f"{where}{line}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:  # NaN, or an integer too long to convert
        raise error(f"{where}: invalid JSON: {invalid_reason(exc)}") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply") from None
    if too_deep(value):
        raise error(f"{where}: JSON nested deeper than {MAX_NESTING} levels")
    return value


def too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and objects more than ``MAX_NESTING`` levels (no recursion)."""
    level: list[Any] = [value]
    for _ in range(MAX_NESTING + 1):
        level = [
            child
            for node in level
            if isinstance(node, dict | list)
            for child in (node.values() if isinstance(node, dict) else node)
        ]
        if not level:
            return False
    return True


def invalid_reason(exc: ValueError) -> str:
    # Python's own advice ("use sys.set_int_max_str_digits()") is no help to a user.
    return str(exc).split(";")[0]


def _reject_constant(name: str) -> Any:
    # Python reads NaN and Infinity; JSON (and PostgreSQL's json type) does not.
    raise ValueError(f"{name} is not valid JSON")
