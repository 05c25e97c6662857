"""The Anthropic Messages API: the ``tools`` parameter and the answers to search calls.

Plain dicts in the API's shapes (``ToolParam``, ``ToolResultBlockParam``, ``ToolReferenceBlockParam``
of the ``anthropic`` SDK); the SDK itself is not needed. Two ways to expose tools:

- ``tools(session)``: the search tool and the session's active tools; after a search the next
  request simply carries the newly active ones.
- ``tools(session, deferred=True)``: client-side tool search for catalogs of up to 10,000 tools.
  Every tool a search can reach is sent with ``defer_loading: true``, so its definition stays out
  of the model's context until a search answers with a ``tool_reference`` to it; the search tool
  and the tools active from the start are not deferred. Tools a search activated stay deferred
  on later requests: the API requires a referenced tool to be deferred, and the reference in the
  conversation is what loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from discovery._rules import SEARCH_TOOL_NAME
from discovery.adapters._common import (
    HostCall,
    SearchAnswer,
    ToolSpec,
    arguments,
    catalog_name,
    exposed,
    field,
    listed,
    record_call,
    run_host_tool,
    run_search,
    search_spec,
    tool_spec,
    wire_names,
)
from discovery.adapters.errors import TooManyTools

if TYPE_CHECKING:
    from discovery._sessions.session import Session

MAX_TOOLS = 10_000
"""The most tool definitions one Messages request may carry, deferred ones included."""

__all__ = ["MAX_TOOLS", "catalog_name", "handle", "record_call", "run_tool", "tools"]


def tools(session: Session, *, deferred: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` parameter for the session's next request.

    The search tool is there while the session exposes it (not with discovery ``off``), and
    deferral only with it: nothing else can load a deferred tool. Raises ``TooManyTools`` when
    the deferred list would pass the API's limit.
    """
    if deferred and SEARCH_TOOL_NAME in session.active:
        return _deferred_tools(session)
    return [_definition(tool) for tool in listed(*exposed(session))]


def handle(session: Session, block: Any, *, deferred: bool = False) -> dict[str, Any] | None:
    """The ``tool_result`` block answering a ``tool_use`` block of ``search_tool_bm25``.

    ``block`` is the SDK's ``ToolUseBlock`` or its dict. A refused call is a result with
    ``is_error`` and contract §6's message. Any other block gives ``None``: the host runs that tool
    (``catalog_name(session, block.name)`` names it in the catalog). With ``deferred`` (as the
    tools were sent), the result also holds one ``tool_reference`` per activated tool.
    """
    if field(block, "type") != "tool_use" or field(block, "name") != SEARCH_TOOL_NAME:
        return None
    call_id = str(field(block, "id") or "")
    answer = run_search(session, call_id, arguments(field(block, "input")))
    return _tool_result(call_id, answer, deferred=deferred)


def run_tool(session: Session, block: Any, call: HostCall) -> dict[str, Any]:
    """The ``tool_result`` of a ``tool_use`` block the host runs: ``call(catalog_name, input)`` for
    a tool the session offers under ``block.name``; for any other name an ``is_error`` result
    saying so, and ``call`` is never given a name the adapter could not map back."""
    content, is_error = run_host_tool(session, str(field(block, "name")), field(block, "input"), call)
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": str(field(block, "id") or ""),
        "content": content,
    }
    if is_error:
        result["is_error"] = True
    return result


def _tool_result(call_id: str, answer: SearchAnswer, *, deferred: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    if answer.refused:
        result["content"] = answer.text
        result["is_error"] = True
    elif deferred:
        references = [{"type": "tool_reference", "tool_name": tool.wire} for tool in answer.activated]
        result["content"] = [{"type": "text", "text": answer.text}, *references]
    else:
        result["content"] = answer.text
    return result


def _definition(tool: ToolSpec, *, deferred: bool = False) -> dict[str, Any]:
    definition: dict[str, Any] = {
        "name": tool.wire,
        "description": tool.description,
        "input_schema": tool.schema,
    }
    if deferred:
        definition["defer_loading"] = True
    return definition


def _deferred_tools(session: Session) -> list[dict[str, Any]]:
    active = [name for name in session.active if name != SEARCH_TOOL_NAME]
    selected = set(session.selected)
    active_tools = session.tools_by_names(active)
    # Every tool a search could activate now: sent deferred, so that a reference can load it.
    reachable = session.corpus_tools()
    names = wire_names([*active_tools, *(tool.name for tool in reachable)])
    offered = [name for name in active if name in active_tools and names.offers(name)]
    loaded = [active_tools[name] for name in offered if name not in selected]
    hidden = [active_tools[name] for name in offered if name in selected]
    hidden.extend(tool for tool in reachable if names.offers(tool.name))
    count = 1 + len(loaded) + len(hidden)
    if count > MAX_TOOLS:
        raise TooManyTools(count, MAX_TOOLS, "Anthropic Messages API")
    return [
        _definition(search_spec(session)),
        *(_definition(tool_spec(tool, names)) for tool in loaded),
        *(_definition(tool_spec(tool, names), deferred=True) for tool in hidden),
    ]
