"""One sanitizer for every piece of third-party text the CLI prints to a terminal.

Tool names, descriptions, schemas, server names, session ids and the record fields quoted in
error lines come from third parties (MCP servers, catalog files, host session files). Printed
raw, their control characters would drive the reader's terminal (an OSC sequence sets the window
title or writes the clipboard, U+009B starts a CSI sequence) and their invisible characters
would mislead the reader (``read\\u200b`` looks like ``read``; a bidi override reorders a line).
Every such character is shown escaped, as ``\\u200b``, which reads the same in text and is a
valid JSON escape of the same character inside a JSON string.
"""

from __future__ import annotations

import unicodedata

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Controls (C0, DEL, C1), format characters (bidi controls, zero-width characters, the BOM),
lone surrogates and the line and paragraph separators: none of them is safe to print raw."""


ZWJ = "\u200d"


def is_unsafe(char: str) -> bool:
    return unicodedata.category(char) in UNSAFE_CATEGORIES


def is_pictograph(char: str) -> bool:
    """Whether ``char`` can stand on either side of the joiner inside an emoji sequence
    (emoji and their skin tones, symbols and dingbats, the emoji variation selector)."""
    code = ord(char)
    return code >= 0x1F000 or 0x2300 <= code <= 0x27BF or code == 0xFE0F


def escaped(text: str, *, keep: str = "\n") -> str:
    """``text`` with every unsafe character except those in ``keep`` written as ``\\uXXXX``.

    A zero-width joiner between two pictographs is kept: it joins an emoji sequence (a family,
    a flag) that the reader sees as one picture, not hidden text. Characters beyond the BMP are
    written as their UTF-16 surrogate pair, as JSON writes them. Idempotent: what it writes is
    plain ASCII.
    """
    if text.isascii() and text.isprintable():
        return text  # the common case, without a walk over every character
    out = []
    for i, char in enumerate(text):
        safe = char in keep or not is_unsafe(char) or _joins_emoji(text, i)
        out.append(char if safe else _escape(char))
    return "".join(out)


def _joins_emoji(text: str, i: int) -> bool:
    return (
        text[i] == ZWJ and 0 < i < len(text) - 1 and is_pictograph(text[i - 1]) and is_pictograph(text[i + 1])
    )


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
