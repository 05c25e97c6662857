"""JSON with comments and trailing commas (VS Code's ``mcp.json``, Cursor's files) made JSON.

``//`` and ``/* */`` comments become spaces (their line breaks kept) and a comma before ``}`` or
``]`` becomes a space, so every other character keeps its line and column: ``json``'s error
positions stay those of the file. Strings pass unchanged, ``//`` and ``/*`` inside them
included. Anything else (single quotes, unquoted keys) is left for ``json`` to reject.
"""

from __future__ import annotations

import re

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


def to_json(text: str) -> str:
    """``text`` with its comments and trailing commas blanked out."""
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
            if comma is not None:
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
