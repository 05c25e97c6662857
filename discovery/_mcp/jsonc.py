"""JSON with comments and trailing commas (VS Code's ``mcp.json``, Cursor's files) made JSON, and
edited in place.

``//`` and ``/* */`` comments become spaces (their line breaks kept) and a comma before ``}`` or
``]`` becomes a space, so every other character keeps its line and column: ``json``'s error
positions stay those of the file. Strings pass unchanged, ``//`` and ``/*`` inside them
included. Anything else (single quotes, unquoted keys) is left for ``json`` to reject.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from discovery.errors import ToolIndexError

_STRING = re.compile(r'"(?:[^"\\\r\n]|\\.)*"')
_PLAIN = re.compile(r'[^"/,\]}\s]+')
_SPACE = re.compile(r"\s+")
_NOT_BREAK = re.compile(r"[^\r\n]")


class UnterminatedComment(ToolIndexError):
    """A ``/*`` comment without its ``*/``; ``line`` is where it starts."""

    def __init__(self, line: int) -> None:
        super().__init__(f"a /* comment that never ends (it starts on line {line})")
        self.line = line


def to_json(text: str, *, trailing_commas: bool = False) -> str:
    """``text`` with its comments and (unless ``trailing_commas``) trailing commas blanked out."""
    out: list[str] = []
    comma: int | None = None  # where in ``out`` the last comma is, while only blanks follow it
    after_value = False  # whether the last token ended a value: only such a comma may trail
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == '"':
            match = _STRING.match(text, i)
            # An unterminated string stays as it is, for json to report where it starts.
            piece = match.group() if match else '"'
            out.append(piece)
            i += len(piece)
            comma, after_value = None, True
        elif text.startswith("//", i):
            stop = _line_end(text, i)
            out.append(" " * (stop - i))
            i = stop
        elif text.startswith("/*", i):
            stop = text.find("*/", i + 2)
            if stop < 0:
                raise UnterminatedComment(text.count("\n", 0, i) + 1)
            out.append(_NOT_BREAK.sub(" ", text[i : stop + 2]))
            i = stop + 2
        elif char == ",":
            comma = len(out) if after_value else None
            after_value = False
            out.append(",")
            i += 1
        elif char in "]}":
            if comma is not None and not trailing_commas:
                out[comma] = " "
            comma, after_value = None, True
            out.append(char)
            i += 1
        elif match := _SPACE.match(text, i):
            out.append(match.group())
            i = match.end()
        else:
            match = _PLAIN.match(text, i)
            piece = match.group() if match else char  # a lone "/" stays, for json to reject
            out.append(piece)
            i += len(piece)
            # ``[``, ``{`` and ``:`` open a value; a number, true, false or null ends one.
            comma, after_value = None, piece[-1] not in "[{:"
    return "".join(out)


def _line_end(text: str, start: int) -> int:
    ends = [found for found in (text.find("\n", start), text.find("\r", start)) if found >= 0]
    return min(ends) if ends else len(text)


@dataclass(frozen=True, slots=True)
class Member:
    """A member of a JSON object in a text: its key, where it starts (its key's quote) and where
    its value starts and ends."""

    key: str
    start: int
    value_start: int
    value_end: int


def members(text: str, start: int | None = None) -> tuple[list[Member], int]:
    """The members of the object whose ``{`` is at ``start`` (the top-level one by default) in a
    JSONC ``text`` that parses, and where its ``}`` is. Positions are the text's own, so an edit at
    them keeps every comment and blank around it."""
    blank = to_json(text)
    i = _blank_end(blank, 0) if start is None else start
    found: list[Member] = []
    i = _blank_end(blank, i + 1)
    while blank[i] != "}":
        key, colon = _DECODER.raw_decode(blank, i)
        value_start = _blank_end(blank, _blank_end(blank, colon) + 1)
        _, value_end = _DECODER.raw_decode(blank, value_start)
        found.append(Member(key, i, value_start, value_end))
        i = _blank_end(blank, value_end)
        if blank[i] == ",":
            i = _blank_end(blank, i + 1)
    return found, i


def with_member(text: str, within: int | None, key: str, value: Any) -> str:
    """``text`` with ``key`` set to ``value`` in the object at ``within`` (the top-level one by
    default): its value replaced when it has one, else added after the last member, indented as
    that member is; everything else, comments included, as it was."""
    found, end = members(text, within)
    same = next((member for member in found if member.key == key), None)
    if same is not None:
        indent = _indent(text, same.start)
        return text[: same.value_start] + _dumped(value, indent) + text[same.value_end :]
    if found:
        last = found[-1]
        indent = _indent(text, last.start)
        added = f",\n{indent}{json.dumps(key)}: {_dumped(value, indent)}"
        return text[: last.value_end] + added + text[last.value_end :]
    closing = _line_blanks(text, end)
    indent = closing + "  "
    added = f"\n{indent}{json.dumps(key)}: {_dumped(value, indent)}\n{closing}"
    return text[:end] + added + text[end:]


def without_member(text: str, key: str, within: int | None = None) -> str:
    """``text`` without the member ``key`` of the object at ``within`` (the top-level one by
    default), and the comma that went with it."""
    found, _ = members(text, within)
    index = next((i for i, member in enumerate(found) if member.key == key), None)
    if index is None:
        return text
    if index + 1 < len(found):
        return text[: found[index].start] + text[found[index + 1].start :]
    if index > 0:
        # The comma that trailed the member goes with it: the previous member is the last now.
        after = _blank_end(to_json(text, trailing_commas=True), found[index].value_end)
        cut = after + 1 if text[after] == "," else found[index].value_end
        return text[: found[index - 1].value_end] + text[cut:]
    return text[: found[index].start] + text[found[index].value_end :]


_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"\s*")


def _blank_end(blank: str, i: int) -> int:
    match = _BLANK.match(blank, i)
    assert match is not None
    return match.end()


def _line_blanks(text: str, at: int) -> str:
    """The blanks that start the line of ``at``."""
    line_start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
    before = text[line_start:at]
    return before[: len(before) - len(before.lstrip())]


def _indent(text: str, at: int) -> str:
    """How a member at ``at`` is indented: the blanks that start its line, two more when something
    comes before it on that line (an object written on one line)."""
    blanks = _line_blanks(text, at)
    return blanks if text[at - len(blanks) - 1 : at - len(blanks)] in ("\n", "\r", "") else blanks + "  "


def _dumped(value: Any, indent: str) -> str:
    return json.dumps(value, indent=2).replace("\n", "\n" + indent)
