"""pydantic-ai: a toolset whose tools are ``search_tool_bm25`` and the session's active tools.

pydantic-ai asks a toolset for its tools (``get_tools``) before every model request, so an agent
given ``DiscoveryToolset(session, call)`` sees its tools grow as it searches: a tool a search
activates is offered from the next step on. The search runs here; every other tool runs through
``call``, the host's callable, with the tool's catalog name and its arguments, for instance a
call through the MCP connections the tool came from. Tools are offered under their wire names
(``discovery.adapters._names``), which every model provider accepts.

The session's storage calls run in a worker thread, so the event loop never waits on the
database.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from discovery._rules import SEARCH_TOOL_NAME
from discovery.adapters._common import ToolSpec, exposed, listed, run_search

if TYPE_CHECKING:
    from discovery._sessions.session import Session
    from discovery.aio import AsyncSession

ToolCall = Callable[[str, dict[str, Any]], Awaitable[Any] | Any]
"""``call(catalog_name, arguments)``: runs an activated tool and returns what the model sees.
A coroutine function is awaited; a plain function is called on the event loop, so one that waits
on I/O should be a coroutine function."""

_ARGUMENTS = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
"""Arguments are a JSON object; the tool itself (the search tool, or the host's) checks the rest."""

__all__ = ["DiscoveryToolset", "ToolCall"]


class DiscoveryToolset(AbstractToolset[Any]):
    """``search_tool_bm25`` plus the session's active tools, read anew at every step."""

    def __init__(
        self,
        session: Session | AsyncSession,
        call: ToolCall,
        *,
        id: str | None = None,
        max_retries: int | None = None,
    ) -> None:
        from discovery.aio import AsyncSession

        self.session: Session = session.session if isinstance(session, AsyncSession) else session
        self.call = call
        self._id = id
        self._max_retries = max_retries

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        search, active = await asyncio.to_thread(exposed, self.session)
        retries = self._max_retries if self._max_retries is not None else ctx.max_retries
        return {tool.wire: self._toolset_tool(tool, retries) for tool in listed(search, active)}

    def _toolset_tool(self, tool: ToolSpec, max_retries: int) -> ToolsetTool[Any]:
        definition = ToolDefinition(
            name=tool.wire,
            description=tool.description,
            parameters_json_schema=tool.schema,
            metadata={"catalog_name": tool.name},
        )
        return ToolsetTool(
            toolset=self, tool_def=definition, max_retries=max_retries, args_validator=_ARGUMENTS
        )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the search here (a refusal is a failed tool result with contract §6's message), and
        any other tool through the host's ``call`` under its catalog name."""
        if name == SEARCH_TOOL_NAME:
            answer = await asyncio.to_thread(run_search, self.session, ctx.tool_call_id or "", tool_args)
            if answer.refused:
                raise ToolFailed(answer.text)
            return answer.text
        catalog = (tool.tool_def.metadata or {}).get("catalog_name")
        if not isinstance(catalog, str):
            # Not a tool of this toolset's listing: the host is never asked to run a name it
            # cannot know.
            raise ToolFailed(f"Unknown tool {name!r}: call search_tool_bm25 to find tools.")
        # Every call is recorded in the session (a failed one as failed), so that learning from
        # use sees what the agent called after its searches.
        try:
            outcome = self.call(catalog, tool_args)
            result = await outcome if inspect.isawaitable(outcome) else outcome
        except BaseException:
            await asyncio.to_thread(self.session.record_call, catalog, ok=False)
            raise
        await asyncio.to_thread(self.session.record_call, catalog)
        return result
