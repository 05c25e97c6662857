"""``tools/list``: the gateway's two tools, the tools it lists under their own names
(``discovery._mcp.direct``), and with ``expose_active`` the session's active tools.

The list is static between syncs — ``search_tool_bm25`` (contract §6, run in the session) and
``call_tool`` (forwards a call of an activated tool to its server) — so it works with every client,
those that ignore ``notifications/tools/list_changed`` included. Each tool the gateway lists is
defined here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp import types
from pydantic import ValidationError

from discovery._mcp.description import with_active
from discovery._mcp.names import route, split_catalog_name
from discovery._mcp.options import GatewayOptions, Served
from discovery._mcp.pool import Context, SessionPool
from discovery._mcp.sessions import GatewaySession
from discovery._mcp.sync import Library
from discovery._rules import SEARCH_TOOL_NAME
from discovery._sessions.search_tool import PARAMETERS as SEARCH_PARAMETERS
from store import StoredTool

CALL_TOOL_NAME = "call_tool"
CALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "a tool name that search_tool_bm25 activated"},
        "arguments": {
            "type": "object",
            "description": "the tool's arguments ({} for none); leave out to get its input schema",
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}
CALL_DESCRIPTION = (
    "Call a tool that search_tool_bm25 activated in this session, on the MCP server that has it.\n"
    "\n"
    "- `name` — a tool name a search listed (every tool in its `tools` is active)\n"
    "- `arguments` — the tool's arguments as an object (`{}` for none)\n"
    "\n"
    "Without `arguments`, the tool is not called: you get its description and input schema. "
    "The result is the tool's own result. Search first: only activated tools can be called."
)


class Listing:
    """What a session's ``tools/list`` holds."""

    def __init__(self, library: Library, options: GatewayOptions, served: Served, pool: SessionPool) -> None:
        self.library = library
        self.options = options
        self.served = served
        self.pool = pool

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams) -> types.ListToolsResult:
        return await self.listing(await self.pool.session_of(ctx))

    async def listing(self, gateway_session: GatewaySession) -> types.ListToolsResult:
        """The session's ``tools/list``: the gateway's tools (the search, unless every tool in
        scope is listed directly, and ``call_tool``), the tools listed directly, and with
        ``expose_active`` its active tools, each once and only those this gateway serves."""
        config, scope, direct = self.served.config, self.served.scope, self.served.direct
        description = gateway_session.description
        if not self.options.expose_active:  # else they are listed under their own names
            served = [split_catalog_name(name, config.servers) for name in gateway_session.active_at_open]
            named = [
                name
                for name, located in zip(gateway_session.active_at_open, served, strict=True)
                if name not in direct.names and located is not None and scope.admits(*located)
            ]
            description = with_active(description, named)
        search = types.Tool(
            name=SEARCH_TOOL_NAME,
            title="SearchTools",
            description=description,
            input_schema=SEARCH_PARAMETERS,
        )
        tools = [search] if direct.search else []
        tools.append(
            types.Tool(name=CALL_TOOL_NAME, description=CALL_DESCRIPTION, input_schema=CALL_PARAMETERS)
        )
        listed = [*direct.tools]
        if self.options.expose_active:
            listed += await self.library.run(gateway_session.active_tools)
        for tool in {tool.name: tool for tool in listed}.values():
            in_scope = scope.admits(tool.server_name, tool.mcp_tool_name)
            if in_scope and route(tool, config.servers) is not None:
                tools.append(listed_tool(tool))
        return types.ListToolsResult(tools=tools)


def input_schema(name: str) -> Mapping[str, Any] | None:
    """The input schema of a tool of the gateway's own, by name (what the SDK checks a call's
    ``Mcp-Param-*`` headers against); ``None`` for the tools it forwards."""
    return {SEARCH_TOOL_NAME: SEARCH_PARAMETERS, CALL_TOOL_NAME: CALL_PARAMETERS}.get(name)


def listed_tool(tool: StoredTool) -> types.Tool:
    """An active tool as ``expose_active`` lists it (and ``call_tool`` describes it): the record,
    with what its server said of it beyond the record (``mcp_meta``: title, annotations, output
    schema, icons) as the catalog keeps it."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    fields: dict[str, Any] = {
        "name": tool.name,
        "title": tool.label,
        "description": tool.description,
        "inputSchema": {"type": "object", **schema},
    }
    meta = tool.mcp_meta or {}
    try:
        return types.Tool.model_validate({**fields, **meta})
    except ValidationError:  # what a server or a file said, kept only where it is the protocol's
        for key, value in meta.items():
            try:
                types.Tool.model_validate({**fields, key: value})
            except ValidationError:
                continue
            fields[key] = value
    return types.Tool.model_validate(fields)


def described(tool: types.Tool) -> str:
    """``call_tool``'s answer without arguments: the tool as ``expose_active`` lists it."""
    shown: dict[str, Any] = {"name": tool.name}
    if tool.title is not None:
        shown["title"] = tool.title
    shown["description"] = tool.description
    shown["input_schema"] = tool.input_schema
    if tool.output_schema is not None:
        shown["output_schema"] = tool.output_schema
    if tool.annotations is not None:
        shown["annotations"] = tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
    if tool.icons is not None:
        shown["icons"] = [
            icon.model_dump(by_alias=True, mode="json", exclude_none=True) for icon in tool.icons
        ]
    shown["call"] = "call_tool with arguments"
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
