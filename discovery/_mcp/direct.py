"""The tools a gateway lists under their own names, callable without a search.

Those of a server whose config entry says ``"alwaysLoad": true`` (Claude Code's key: its tools
are never deferred), and with ``--mode auto`` every tool in scope when there are at most 40 of
them, as the reference's rule says (contract §5: discovery is off up to that many); the search
tool is then not listed at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from discovery._index import ToolIndex
from discovery._mcp.config import McpConfig
from discovery._mcp.scope import GatewayScope
from discovery._rules import AUTO_THRESHOLD
from store import StoredTool


@dataclass(frozen=True, slots=True)
class Direct:
    """What a gateway lists besides its two tools, and whether it lists the search tool."""

    tools: tuple[StoredTool, ...] = ()
    search: bool = True

    @property
    def names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.tools)


def direct_tools(index: ToolIndex, config: McpConfig, scope: GatewayScope, mode: str) -> Direct:
    """The tools listed directly under ``config`` and ``scope`` for a gateway in ``mode`` (in the
    worker: it reads the catalog)."""
    servers = list(config.servers) if mode == "auto" else sorted(config.always_load & set(config.servers))
    tools = [
        tool
        for server in servers
        for tool in index.tools(server=server)
        if scope.admits(tool.server_name, tool.mcp_tool_name)
    ]
    if mode == "auto" and len(tools) <= AUTO_THRESHOLD:
        return Direct(tuple(tools), search=False)
    return Direct(tuple(tool for tool in tools if tool.server_name in config.always_load))
