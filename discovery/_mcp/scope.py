"""Which tools a gateway offers: those of the servers in its config that its filters allow.

Filters are shell-style globs over ``server/tool`` labels (``github/delete_*``), from ``--allow``
and ``--deny`` and from the config's ``"toolIndex": {"allow": [...], "deny": [...]}``. A deny
pattern wins over every allow pattern; with any allow pattern, only tools that match one are
allowed. Matching is case-sensitive, as tool names are.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase


@dataclass(frozen=True, slots=True)
class ToolFilter:
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.allow or self.deny)

    def joined(self, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> ToolFilter:
        """This filter with more patterns (the command line's beside the config's)."""
        return ToolFilter(
            tuple(dict.fromkeys((*self.allow, *allow))), tuple(dict.fromkeys((*self.deny, *deny)))
        )

    def refusal(self, server: str, tool: str) -> str | None:
        """Why ``server/tool`` is not allowed, or ``None`` when it is."""
        label = f"{server}/{tool}"
        for pattern in self.deny:
            if fnmatchcase(label, pattern):
                return f"the deny pattern {pattern!r} matches {label!r}"
        if self.allow and not any(fnmatchcase(label, pattern) for pattern in self.allow):
            return f"no allow pattern matches {label!r} (allowed: {', '.join(map(repr, self.allow))})"
        return None

    def allows(self, server: str, tool: str) -> bool:
        return self.refusal(server, tool) is None


@dataclass(frozen=True, slots=True)
class GatewayScope:
    """The tools of ``servers`` that ``tool_filter`` allows (a ``discovery._sessions`` scope)."""

    servers: Collection[str]
    tool_filter: ToolFilter = field(default_factory=ToolFilter)

    def reports(self, server: str | None, tool: str | None) -> bool:
        """A tool of a server it fronts that the filters leave out is named as not available."""
        return server is not None and tool is not None and server in self.servers

    def admits(self, server: str | None, tool: str | None) -> bool:
        return (
            server is not None
            and tool is not None
            and server in self.servers
            and (self.tool_filter.allows(server, tool))
        )
