"""Wire names: catalog names as the providers accept them, and the way back.

Anthropic and OpenAI take tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; catalog names may be
longer or hold other characters (``mcp__playwright-executeautomation__playwright_click_and_switch_tab``
is 66 characters). ``wire_name`` is a pure function of the name, so every process, host and
provider sees the same wire name for a tool without sharing any table:

- a name the providers accept, and that does not end like a mapped name (``_`` and twelve hex
  digits), is its own wire name: most names, ``search_tool_bm25`` among them, stay as they are;
- any other name becomes a readable prefix (accents dropped, every run of other characters
  made one ``_``, cut to fit) plus ``_`` and the first twelve hex digits of the SHA-256 of its
  UTF-8 bytes.

The two kinds cannot meet (mapped names always end with the digest, kept names never do), so two
names share a wire name only if their truncated digests and prefixes agree; ``WireNames`` turns
that 48-bit accident into a clear error instead of a call routed to the wrong tool. The way back
needs the candidates: ``WireNames`` over the names a request exposed maps each wire name to its
catalog name.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping

from discovery.adapters.errors import WireNameCollision

MAX_LENGTH = 64
"""The longest tool name Anthropic and OpenAI accept."""
DIGEST_LENGTH = 12
"""Hex digits of the name's SHA-256 kept in a mapped name (48 bits)."""

_VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_MAPPED_TAIL = re.compile(rf"_[0-9a-f]{{{DIGEST_LENGTH}}}\Z")
_OTHER_CHARACTERS = re.compile(r"[^a-zA-Z0-9_-]+")
_PREFIX_LENGTH = MAX_LENGTH - 1 - DIGEST_LENGTH


def is_wire_name(text: str) -> bool:
    """Whether the providers accept ``text`` as a tool name."""
    return _VALID.fullmatch(text) is not None


def wire_name(name: str) -> str:
    """The provider-valid name of catalog tool ``name``: the same in every process."""
    if is_wire_name(name) and not _looks_mapped(name):
        return name
    # ``surrogatepass``: a catalog name may hold a lone surrogate (contract §9), which plain UTF-8
    # refuses; it still names one tool and must get one stable digest.
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_LENGTH]
    return f"{_readable_prefix(name)}_{digest}"


def _looks_mapped(name: str) -> bool:
    return _MAPPED_TAIL.search(name) is not None


def _readable_prefix(name: str) -> str:
    decomposed = unicodedata.normalize("NFKD", name)
    unaccented = "".join(char for char in decomposed if not unicodedata.combining(char))
    return _OTHER_CHARACTERS.sub("_", unaccented)[:_PREFIX_LENGTH] or "tool"


class WireNames(Mapping[str, str]):
    """Wire names of a set of catalog names, both ways: ``names[wire]`` is the catalog name.

    Raises ``WireNameCollision`` when two of the names share a wire name, so that a call can
    never reach the wrong tool.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._wire: dict[str, str] = {}
        self._catalog: dict[str, str] = {}
        for name in names:
            if name in self._wire:
                continue
            wire = wire_name(name)
            other = self._catalog.get(wire)
            if other is not None:
                raise WireNameCollision(wire, other, name)
            self._wire[name] = wire
            self._catalog[wire] = name

    def wire(self, name: str) -> str:
        """The wire name of a catalog name (computed for a name outside the set too)."""
        return self._wire.get(name) or wire_name(name)

    def catalog(self, wire: str) -> str | None:
        """The catalog name behind ``wire``; ``None`` when no name of the set has it."""
        return self._catalog.get(wire)

    def __getitem__(self, wire: str) -> str:
        return self._catalog[wire]

    def __iter__(self) -> Iterator[str]:
        return iter(self._catalog)

    def __len__(self) -> int:
        return len(self._catalog)
