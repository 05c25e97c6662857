"""The OpenAI Chat Completions and Responses APIs: tool lists and the answers to search calls.

Plain dicts in the API's shapes (``ChatCompletionFunctionToolParam``, ``FunctionToolParam``,
``ToolSearchToolParam`` and the input items of the ``openai`` SDK); the SDK is not needed.

- Chat Completions: ``chat_tools(session)`` and ``handle_chat(session, tool_call)``.
- Responses: ``responses_tools(session)`` and ``handle_response(session, item)``.
- Responses with client-executed tool search: ``responses_tools(session, tool_search=True)``
  declares ``search_tool_bm25``'s parameters as a ``tool_search`` tool; ``handle_response``
  answers its ``tool_search_call`` with a ``tool_search_output`` carrying the definitions of the
  tools the search activated. Those definitions reach the model through the conversation, so
  this tool list leaves the activated tools out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from discovery._rules import SEARCH_TOOL_NAME
from discovery.adapters._common import (
    HostCall,
    ToolSpec,
    arguments,
    catalog_name,
    exposed,
    field,
    listed,
    record_call,
    run_host_tool,
    run_search,
)

if TYPE_CHECKING:
    from discovery._sessions.session import Session

__all__ = [
    "catalog_name",
    "chat_tools",
    "handle_chat",
    "handle_response",
    "record_call",
    "responses_tools",
    "run_chat_tool",
    "run_response_tool",
]


def chat_tools(session: Session) -> list[dict[str, Any]]:
    """The ``tools`` parameter of ``chat.completions.create``: the search tool (while the session
    exposes it) and the active tools."""
    return [_chat_definition(tool) for tool in listed(*exposed(session))]


def handle_chat(session: Session, tool_call: Any) -> dict[str, Any] | None:
    """The ``tool`` message answering a ``search_tool_bm25`` call; ``None`` for another tool.

    ``tool_call`` is an entry of the assistant message's ``tool_calls`` (SDK object or dict).
    A refused call answers with contract §6's message as the content (the API has no error flag).
    """
    function = field(tool_call, "function")
    if field(tool_call, "type") != "function" or field(function, "name") != SEARCH_TOOL_NAME:
        return None
    call_id = str(field(tool_call, "id") or "")
    answer = run_search(session, call_id, arguments(field(function, "arguments")))
    return {"role": "tool", "tool_call_id": call_id, "content": answer.text}


def responses_tools(session: Session, *, tool_search: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` parameter of ``responses.create``.

    Without ``tool_search``: the search tool as a function, then the active tools. With it: a
    client-executed ``tool_search`` tool, then the active tools that no search activated.
    """
    search, active = exposed(session)
    if not tool_search or search is None:
        return [_function(tool) for tool in listed(search, active)]
    activated = set(session.selected)
    declared = {
        "type": "tool_search",
        "execution": "client",
        "description": search.description,
        "parameters": search.schema,
    }
    return [declared, *(_function(tool) for tool in active if tool.name not in activated)]


def handle_response(session: Session, item: Any) -> dict[str, Any] | None:
    """The input item answering an output item of ``search_tool_bm25``; ``None`` for another.

    A ``function_call`` of the search tool gets a ``function_call_output`` (the compact JSON, or
    contract §6's message when refused); a client ``tool_search_call`` gets a ``tool_search_output``
    with the definitions of the tools it activated (none when refused: the item has no place
    for a message).
    """
    kind = field(item, "type")
    call_id = str(field(item, "call_id") or "")
    if kind == "function_call" and field(item, "name") == SEARCH_TOOL_NAME:
        answer = run_search(session, call_id, arguments(field(item, "arguments")))
        return {"type": "function_call_output", "call_id": call_id, "output": answer.text}
    if kind == "tool_search_call" and field(item, "execution") == "client":
        answer = run_search(session, call_id, arguments(field(item, "arguments")))
        return {
            "type": "tool_search_output",
            "call_id": call_id,
            "execution": "client",
            "status": "completed",
            "tools": [_function(tool) for tool in answer.activated],
        }
    return None


def run_chat_tool(session: Session, tool_call: Any, call: HostCall) -> dict[str, Any]:
    """The ``tool`` message of a tool call the host runs: ``call(catalog_name, arguments)`` for a
    tool the session offers under that name; for any other name, or arguments that are not a JSON
    object, a message saying so, and ``call`` is never given a name the adapter could not map back."""
    function = field(tool_call, "function")
    wire = str(field(function, "name"))
    content, _ = run_host_tool(session, wire, field(function, "arguments"), call)
    return {"role": "tool", "tool_call_id": str(field(tool_call, "id") or ""), "content": content}


def run_response_tool(session: Session, item: Any, call: HostCall) -> dict[str, Any]:
    """The ``function_call_output`` of a Responses ``function_call`` the host runs, as
    ``run_chat_tool`` does for Chat Completions."""
    content, _ = run_host_tool(session, str(field(item, "name")), field(item, "arguments"), call)
    return {"type": "function_call_output", "call_id": str(field(item, "call_id") or ""), "output": content}


def _chat_definition(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.wire, "description": tool.description, "parameters": tool.schema},
    }


def _function(tool: ToolSpec) -> dict[str, Any]:
    # Not strict: strict mode wants every property required and no additional ones, which
    # neither the search tool (``limit`` is optional) nor most catalog schemas are.
    return {
        "type": "function",
        "name": tool.wire,
        "description": tool.description,
        "parameters": tool.schema,
        "strict": False,
    }
