"""Wire names: catalog names as the providers accept them, and the way back.

Anthropic and OpenAI take tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; catalog names may be
longer or hold other characters (``mcp__playwright-executeautomation__playwright_click_and_switch_tab``
is 66 characters). ``wire_name`` is a pure function of the name, so every process, host and
provider sees the same wire name for a tool without sharing any table:

- a name the providers accept, and that does not end like a mapped name (``_`` and twelve hex
  digits), is its own wire name: most names, ``search_tool_bm25`` among them, stay as they are;
- any other name becomes a readable prefix (accents dropped, every run of other characters
  made one ``_``, cut to fit) plus ``_`` and the first sixteen hex digits of the SHA-256 of its
  UTF-8 bytes.

The two kinds cannot meet (mapped names always end with the digest, kept names never do), so two
names share a wire name only if their truncated digests and prefixes agree. Finding a name that
shares another's 64-bit digest is out of reach; a catalog crafted with two names of its own that
collide is not. So ``WireNames`` never routes a call on a shared wire name: it refuses the set
(``strict``) or, as the adapters use it, leaves every name of the shared wire name out, so those
tools are not offered and a call of that name reaches no tool, while the rest of the session works
on. The way back needs the candidates: ``WireNames`` over the names a request exposed maps each
wire name to its catalog name.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping

from discovery.adapters.errors import WireNameCollision

MAX_LENGTH = 64
"""The longest tool name Anthropic and OpenAI accept."""
DIGEST_LENGTH = 16
"""Hex digits of the name's SHA-256 kept in a mapped name (64 bits): a name made to share a given
name's digest would take about 2**64 tries."""

_VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_OTHER_CHARACTERS = re.compile(r"[^a-zA-Z0-9_-]+")
_HEX = frozenset("0123456789abcdef")


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
    tail = name[-DIGEST_LENGTH - 1 :]
    return (
        len(tail) == DIGEST_LENGTH + 1 and tail[0] == "_" and all(c in "0123456789abcdef" for c in tail[1:])
    )


def _readable_prefix(name: str) -> str:
    decomposed = unicodedata.normalize("NFKD", name)
    unaccented = "".join(char for char in decomposed if not unicodedata.combining(char))
    return _OTHER_CHARACTERS.sub("_", unaccented)[: MAX_LENGTH - 1 - DIGEST_LENGTH] or "tool"


class WireNames(Mapping[str, str]):
    """Wire names of a set of catalog names, both ways: ``names[wire]`` is the catalog name.

    When two of the names share a wire name, a call of it could reach the wrong tool: ``strict``
    raises ``WireNameCollision``; otherwise every name of that wire name is left out (whatever
    the order of ``names``), ``offers`` is false for it and ``collisions`` lists it.
    """

    def __init__(self, names: Iterable[str], *, strict: bool = True) -> None:
        by_wire: dict[str, list[str]] = {}
        for name in dict.fromkeys(names):
            by_wire.setdefault(wire_name(name), []).append(name)
        self._wire: dict[str, str] = {}
        self._catalog: dict[str, str] = {}
        self.collisions: dict[str, tuple[str, ...]] = {}
        """Each wire name two or more of the names share, and those names (non-strict only)."""
        for wire, sharing in by_wire.items():
            if len(sharing) > 1:
                if strict:
                    raise WireNameCollision(wire, sharing[0], sharing[1])
                self.collisions[wire] = tuple(sharing)
                continue
            self._wire[sharing[0]] = wire
            self._catalog[wire] = sharing[0]

    def offers(self, name: str) -> bool:
        """Whether catalog name ``name`` is in the set and has a wire name of its own."""
        return name in self._wire

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
