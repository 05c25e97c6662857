"""The catalog names of upstream tools (``mcp__SERVER__TOOL``) and the way back from a catalog
record to the server and tool it is called on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from discovery._rules import MCP_PREFIX
from discovery.errors import ToolIndexError

if TYPE_CHECKING:
    from store import StoredTool


class UnknownServer(ToolIndexError):
    """A tool name whose server is not in the config."""


def catalog_name(server: str, tool: str) -> str:
    """The name an upstream tool has in the catalog (as an import of its tools/list gives it)."""
    return f"{MCP_PREFIX}{server}__{tool}"


def split_catalog_name(name: str, servers: list[str] | dict[str, Any]) -> tuple[str, str] | None:
    """``(server, tool)`` of a catalog name, for one of ``servers`` (longest name first, as a
    server name may itself contain ``__``). A name two servers could give (server ``a``'s tool
    ``b__c`` and server ``a__b``'s ``c``) splits by the longer server name: only a record says
    which it is (``route``)."""
    splits = catalog_name_splits(name, servers)
    return splits[0] if splits else None


def catalog_name_splits(name: str, servers: list[str] | dict[str, Any]) -> list[tuple[str, str]]:
    """Every ``(server, tool)`` of ``servers`` whose catalog name is ``name``, longest server first."""
    if not name.startswith(MCP_PREFIX):
        return []
    rest = name[len(MCP_PREFIX) :]
    return [
        (server, rest[len(server) + 2 :])
        for server in sorted(servers, key=len, reverse=True)
        if rest.startswith(server + "__") and len(rest) > len(server) + 2
    ]


def route(tool: StoredTool, servers: list[str] | dict[str, Any]) -> tuple[str, str] | None:
    """``(server, upstream tool)`` a catalog record is called on: the server and MCP tool name the
    record itself holds (and its pin covers), never a guess from its name. A record without them
    (imported as a tool record) is routed by its name only when exactly one of ``servers`` gives
    that name. ``None``: not a tool of one of ``servers``."""
    if tool.server_name is not None and tool.mcp_tool_name is not None:
        named = (tool.server_name, tool.mcp_tool_name)
        served = tool.server_name in servers and tool.name == catalog_name(*named)
        return named if served else None
    splits = catalog_name_splits(tool.name, servers)
    if tool.server_name is not None:
        splits = [split for split in splits if split[0] == tool.server_name]
    return splits[0] if len(splits) == 1 else None
