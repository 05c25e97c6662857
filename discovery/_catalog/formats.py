"""Catalog files to tool records (contract §2): a JSON array or JSON lines of tool records, or an MCP
``tools/list`` result plus a server name.

The format is read from the content, never from the file name. Every bad record is reported as
``<file>:<line>: <reason>``; a file that is not a catalog at all is one error naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from discovery._catalog.models import MCP_META_KEYS, ToolRecord
from discovery._files import (
    MAX_NESTING,
    STDIN,
    bounded_lines,
    invalid_reason,
    loads,
    read_bounded,
    too_deep,
)
from discovery._rules import MCP_PREFIX
from discovery.errors import InvalidRecord, ToolIndexError, describe_validation_error

NOT_A_CATALOG = (
    'expected a JSON array or JSON lines of tool records, or an MCP tools/list result {"tools": [...]}'
)


class UnreadableCatalog(ToolIndexError):
    """A catalog file cannot be read or is not a catalog: missing, not UTF-8, not JSON, empty."""


class McpTool(BaseModel):
    """One tool of an MCP ``tools/list`` result; the fields the index does not use are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    description: str | None = None
    inputSchema: dict[str, Any] | None = None  # the MCP wire names
    title: str | None = None
    annotations: dict[str, Any] | None = None
    outputSchema: dict[str, Any] | None = None
    icons: list[Any] | None = None

    def record(self, server: str) -> ToolRecord:
        meta = {key: getattr(self, key) for key in MCP_META_KEYS if getattr(self, key) is not None}
        return ToolRecord(
            name=f"{MCP_PREFIX}{server}__{self.name}",
            label=f"{server}/{self.name}",
            description=self.description or "",
            source="mcp",
            server_name=server,
            mcp_tool_name=self.name,
            input_schema=self.inputSchema,
            mcp_meta=meta or None,
        )


@dataclass(frozen=True, slots=True)
class IngestResult:
    """The valid records of every input, in order, and one message per skipped bad record."""

    records: list[ToolRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_catalog(
    paths: Sequence[str | Path],
    *,
    server: str | None = None,
    skip_invalid: bool = False,
    stdin: BinaryIO | None = None,
) -> IngestResult:
    """Read every catalog in ``paths`` (``-`` is standard input) into validated tool records.

    ``server`` names the MCP server of ``tools/list`` results (default: the file's stem; required
    on standard input); for files of tool records, it is the server every record must belong to.
    A bad record raises ``InvalidRecord``, unless ``skip_invalid``, which collects its message.
    """
    if server is not None and not server.strip():
        raise UnreadableCatalog("--server must not be empty")
    if sum(str(path) == STDIN for path in paths) > 1:
        raise UnreadableCatalog("standard input ('-') can be read only once")
    result = IngestResult()
    for path in paths:
        where, text = read_bounded(path, UnreadableCatalog, what="catalog", stdin=stdin)
        default_server = None if str(path) == STDIN else Path(path).stem
        parse_catalog(
            text,
            where=where,
            server=server,
            default_server=default_server,
            skip_invalid=skip_invalid,
            into=result,
        )
    return result


def parse_catalog(
    text: str,
    *,
    where: str,
    server: str | None = None,
    default_server: str | None = None,
    skip_invalid: bool = False,
    into: IngestResult | None = None,
) -> IngestResult:
    """Parse one catalog's ``text``, named ``where`` in messages; appends to ``into`` when given."""
    result = into if into is not None else IngestResult()
    try:
        _collect(_records(text, where, server, default_server), result, skip_invalid=skip_invalid)
    except RecursionError:
        raise UnreadableCatalog(f"{where}: JSON nested too deeply") from None
    return result


def listed_tools(tools: Sequence[Any], *, where: str, server: str) -> IngestResult:
    """The records of ``server``'s MCP ``tools/list`` result given as values (each tool as its
    JSON object), checked as ``parse_catalog`` checks such a result in a file; a bad tool raises
    ``InvalidRecord`` naming ``where`` and its index."""
    result = IngestResult()
    items = (_Item(value, index) for index, value in enumerate(tools))
    _collect(_mcp_records(items, where, server), result, skip_invalid=False)
    return result


def _collect(records: Iterable[ToolRecord | str], into: IngestResult, *, skip_invalid: bool) -> None:
    for record in records:
        if isinstance(record, ToolRecord):
            into.records.append(record)
        elif skip_invalid:
            into.skipped.append(record)
        else:
            raise InvalidRecord(record)


@dataclass(frozen=True, slots=True)
class _Item:
    """One record of a file, with its position: its line when known, else its index."""

    value: Any
    index: int
    line: int | None = None
    locate: Callable[[int], int | None] | None = None
    """Finds the line of an array element, only when a message needs it."""


def _records(
    text: str, where: str, server: str | None, default_server: str | None
) -> Iterator[ToolRecord | str]:
    """Each record of ``text`` validated, or the message saying why it is bad."""
    if not text.strip():
        raise UnreadableCatalog(f"{where}: empty file; {NOT_A_CATALOG}")
    document = _whole_document(text, where)
    if document is None:
        yield from _tool_records(_json_lines(text, where), where, server)
    elif isinstance(document, list):
        yield from _tool_records(_array_items(text, document, []), where, server)
    elif (tools_path := _tools_list_path(document)) is not None:
        server_name = server or default_server
        if server_name is None:
            raise UnreadableCatalog(f"{where}: an MCP tools/list result needs --server NAME")
        tools = document[tools_path[0]] if len(tools_path) == 1 else document["result"]["tools"]
        yield from _mcp_records(_array_items(text, tools, tools_path), where, server_name)
    elif isinstance(document, dict) and "name" in document:
        yield from _tool_records([_Item(document, 0, _first_line(text))], where, server)
    else:
        raise UnreadableCatalog(f"{where}: not a catalog; {NOT_A_CATALOG}")


def _whole_document(text: str, where: str) -> Any:
    """The file as one JSON value, or ``None`` for JSON lines (the first line parses alone)."""
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        first_line = text.lstrip().split("\n", 1)[0]
        if exc.msg == "Extra data" or _parses(first_line):
            return None
        raise UnreadableCatalog(
            f"{where}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
        ) from exc
    except ValueError as exc:  # NaN, or an integer too long to convert
        raise UnreadableCatalog(f"{where}: invalid JSON: {invalid_reason(exc)}") from exc


def _json_lines(text: str, where: str) -> Iterator[_Item | str]:
    """Each non-blank line as a record, or ``<line>: <why it is not JSON>``."""
    lines = bounded_lines(text, where, UnreadableCatalog, what="record")
    for index, (number, line) in enumerate(lines):
        try:
            yield _Item(loads(line), index, number)
        except json.JSONDecodeError as exc:
            yield f"{number}: invalid JSON: {exc.msg} (column {exc.colno})"
        except ValueError as exc:
            yield f"{number}: invalid JSON: {invalid_reason(exc)}"
        except RecursionError:
            yield f"{number}: JSON nested too deeply"


def _array_items(text: str, array: list[Any], path: list[str]) -> Iterator[_Item]:
    """The elements of ``array``; their lines are computed once, for the first bad element."""
    lines: list[int] | None = None

    def locate(index: int) -> int | None:
        nonlocal lines
        if lines is None:
            lines = _element_lines(text, path)
        return lines[index] if index < len(lines) else None

    yield from (_Item(value, index, locate=locate) for index, value in enumerate(array))


def _tool_records(items: Iterable[_Item | str], where: str, server: str | None) -> Iterator[ToolRecord | str]:
    for item in items:
        if isinstance(item, str):
            yield f"{where}:{item}"
            continue
        if too_deep(item.value):
            yield f"{_location(where, item)}: nested deeper than {MAX_NESTING} levels"
            continue
        try:
            record = ToolRecord.model_validate(item.value)
        except ValidationError as exc:
            yield f"{_location(where, item)}: {describe_validation_error(exc)}{_hint(item.value)}"
            continue
        if server is not None and record.server_name != server:
            yield f"{_location(where, item)}: server_name is {record.server_name!r}, not --server {server!r}"
            continue
        yield record


def _mcp_records(items: Iterable[_Item], where: str, server: str) -> Iterator[ToolRecord | str]:
    for item in items:
        if too_deep(item.value):
            yield f"{_location(where, item)}: nested deeper than {MAX_NESTING} levels"
            continue
        try:
            yield McpTool.model_validate(item.value).record(server)
        except ValidationError as exc:
            yield f"{_location(where, item)}: {describe_validation_error(exc)}"


def _location(where: str, item: _Item) -> str:
    line = item.line if item.locate is None else item.locate(item.index)
    return f"{where}:{line}" if line is not None else f"{where}:[{item.index}]"


def _tools_list_path(document: Any) -> list[str] | None:
    """Where the tools of an MCP ``tools/list`` result are: at the top, or in a JSON-RPC reply."""
    if not isinstance(document, dict) or "name" in document:
        return None
    if isinstance(document.get("tools"), list):
        return ["tools"]
    result = document.get("result")
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        return ["result", "tools"]
    return None


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _element_lines(text: str, path: list[str]) -> list[int]:
    """The line on which each element of the array at ``path`` starts (``text`` is valid JSON).

    Walks the document with ``raw_decode``, skipping every value it does not descend into; an
    object key given twice resolves to its last value, as ``json.loads`` does.
    """
    decoder = json.JSONDecoder()

    def skip(pos: int) -> int:
        match = _WHITESPACE.match(text, pos)
        return match.end() if match else pos

    def members(pos: int) -> Iterator[tuple[str, int]]:
        """``(key, value position)`` of the object at ``pos``."""
        pos = skip(pos + 1)
        while text[pos] != "}":
            key, pos = decoder.raw_decode(text, pos)
            start = skip(skip(pos) + 1)
            yield key, start
            _, pos = decoder.raw_decode(text, start)
            pos = skip(pos)
            if text[pos] == ",":
                pos = skip(pos + 1)

    try:
        pos = skip(0)
        for key in path:
            pos = [start for name, start in members(pos) if name == key][-1]
        starts = []
        pos = skip(pos + 1)
        while text[pos] != "]":
            starts.append(pos)
            _, pos = decoder.raw_decode(text, pos)
            pos = skip(pos)
            if text[pos] == ",":
                pos = skip(pos + 1)
    except (ValueError, IndexError, RecursionError):
        return []
    lines, line, previous = [], 1, 0
    for start in starts:
        line += text.count("\n", previous, start)
        lines.append(line)
        previous = start
    return lines


def _first_line(text: str) -> int:
    return text.count("\n", 0, len(text) - len(text.lstrip())) + 1


MCP_TOOL_HINT = (
    "; this looks like an MCP tool (inputSchema): import MCP tools as a tools/list result, "
    '{"tools": [...]}, with --server NAME; a tool record has the fields '
)


def _hint(value: Any) -> str:
    """What to do when a record is an MCP tool, whose ``inputSchema`` no tool record has."""
    if not isinstance(value, dict) or "inputSchema" not in value:
        return ""
    return MCP_TOOL_HINT + ", ".join(ToolRecord.model_fields)


def _parses(text: str) -> bool:
    try:
        loads(text)
    except (ValueError, RecursionError):
        return False
    return True
