"""Errors of the adapters."""

from __future__ import annotations

from discovery.errors import ToolIndexError


class AdapterError(ToolIndexError):
    """Base class of the errors an adapter raises on purpose."""


class TooManyTools(AdapterError):
    """A request would carry more tool definitions than the provider accepts."""

    def __init__(self, count: int, limit: int, provider: str) -> None:
        super().__init__(
            f"{count} tool definitions exceed the {provider} limit of {limit:,} tools in one request; "
            "narrow the session (discovery_mode='mcp-only', fewer catalog tools) or send the active "
            "tools only (deferred=False)"
        )
        self.count = count
        self.limit = limit


class WireNameCollision(AdapterError):
    """Two catalog names got the same wire name (a truncated-digest collision)."""

    def __init__(self, wire: str, first: str, second: str) -> None:
        super().__init__(
            f"catalog names {first!r} and {second!r} both map to the wire name {wire!r}; "
            "rename one of them in the catalog"
        )
        self.wire = wire
