"""What every adapter does with a session: describe its tools, run a search call, read a call.

Everything here goes through the session's public surface (``search_tool``, ``active``,
``selected``, ``active_tools()``), so the adapters see exactly what any host sees.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from discovery._results import json_text
from discovery._rules import SEARCH_TOOL_NAME
from discovery.adapters._names import WireNames
from discovery.errors import ToolCallError

if TYPE_CHECKING:
    from discovery._sessions.session import Session
    from store import StoredTool

EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as the adapters expose it: wire name, description and an object schema."""

    name: str
    wire: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """A search call's answer for the model: its text, the tools it activated, and whether the
    search tool refused the call (then ``text`` is contract §6's message)."""

    text: str
    activated: list[ToolSpec]
    refused: bool


def object_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's input schema as the providers take it: an object schema.

    A schema without ``type`` is an object schema by intent (its ``properties`` say so); one of
    another type, or none, cannot describe tool arguments, so the tool takes any object.
    """
    if not isinstance(schema, dict):
        return dict(EMPTY_OBJECT_SCHEMA)
    if "type" not in schema:
        return {"type": "object", **schema}
    return schema if schema.get("type") == "object" else dict(EMPTY_OBJECT_SCHEMA)


def tool_spec(tool: StoredTool, names: WireNames) -> ToolSpec:
    return ToolSpec(tool.name, names.wire(tool.name), tool.description, object_schema(tool.input_schema))


def search_spec(session: Session) -> ToolSpec:
    tool = session.search_tool
    # A copy: hosts may annotate the definitions they send, and the schema is the library's own.
    return ToolSpec(tool.name, tool.name, tool.description, copy.deepcopy(tool.parameters))


def wire_names(names: Iterable[str]) -> WireNames:
    """The wire names of a session's tools. Names that share a wire name are left out rather than
    raised about: a crafted catalog must not stop a session, and a call of a shared wire name must
    reach no tool rather than the wrong one."""
    return WireNames([SEARCH_TOOL_NAME, *names], strict=False)


def exposed(session: Session) -> tuple[ToolSpec | None, list[ToolSpec]]:
    """The search tool (``None`` when the session does not expose it: discovery ``off``, or left
    out by ``set_active``) and every active catalog tool with a wire name of its own, in active
    order."""
    offers_search = SEARCH_TOOL_NAME in session.active
    tools = [tool for tool in session.active_tools() if tool.name != SEARCH_TOOL_NAME]
    names = wire_names(tool.name for tool in tools)
    offered = [tool_spec(tool, names) for tool in tools if names.offers(tool.name)]
    return (search_spec(session) if offers_search else None), offered


def listed(search: ToolSpec | None, active: list[ToolSpec]) -> list[ToolSpec]:
    return [search, *active] if search is not None else active


def session_names(session: Session) -> WireNames:
    """The wire names of the session's active tools, for routing a call back to its tool."""
    return wire_names(session.active)


def catalog_name(session: Session, wire: str) -> str | None:
    """The catalog name of the active tool the model called as ``wire`` (``None``: no such tool)."""
    return session_names(session).catalog(wire)


def record_call(session: Session, wire: str, *, ok: bool = True) -> str | None:
    """Tell the session that the host called the tool the model named ``wire`` (``ok=False``: the
    call failed), so that learning from use sees it; the tool's catalog name, or ``None`` when
    ``wire`` names no active catalog tool (then nothing is recorded)."""
    name = catalog_name(session, wire)
    if name is None or name == SEARCH_TOOL_NAME:
        return None
    session.record_call(name, ok=ok)
    return name


HostCall = Callable[[str, dict[str, Any]], Any]
"""``call_tool(catalog_name, arguments)``: the host's own code that runs a catalog tool."""


def run_host_tool(session: Session, wire: str, raw_arguments: Any, call: HostCall) -> tuple[Any, bool]:
    """``(content, is_error)`` of the model's call of ``wire``: ``call(catalog_name, arguments)``
    for the active catalog tool offered under that wire name, recorded in the session as any call
    (a failure as failed). A name that maps back to no such tool (made up, not active, shared by
    two tools), or arguments that are not an object, never reach ``call``: the content says why."""
    name = catalog_name(session, wire)
    if name is None or name == SEARCH_TOOL_NAME:
        return (
            f"Unknown tool {wire!r}: it is not one of this session's tools; call {SEARCH_TOOL_NAME} "
            "to find tools, then call one it activated.",
            True,
        )
    parsed = arguments(raw_arguments)
    if not isinstance(parsed, dict):
        return f"{wire}: the arguments must be a JSON object.", True
    try:
        content = call(name, parsed)
    except BaseException:
        session.record_call(name, ok=False)
        raise
    session.record_call(name)
    return content, False


def run_search(session: Session, call_id: str, params: Any) -> SearchAnswer:
    """Run one ``search_tool_bm25`` call; a refusal becomes an answer, not an exception.

    The text is the call's compact JSON (contract §6) with each activated name written as its wire
    name: the names the model reads are the names it can call. When no name needed mapping the
    text is the logged content itself, byte for byte.
    """
    try:
        result = session.search_tool.execute(call_id, params)
    except ToolCallError as refusal:
        return SearchAnswer(str(refusal), [], refused=True)
    activated_names: list[str] = result.details["activated_tools"]
    # Checked against every active tool, as the next request's tools and the way back are.
    names = session_names(session)
    offered = [name for name in activated_names if names.offers(name)]
    found = session.tools_by_names(offered)
    activated = [tool_spec(found[name], names) for name in offered if name in found]
    return SearchAnswer(
        _model_text(result.content, names, activated_names, offered), activated, refused=False
    )


def _model_text(content: str, names: WireNames, activated: list[str], offered: list[str]) -> str:
    wires = [names.wire(name) for name in offered]
    if wires == activated:
        return content
    payload = json.loads(content)
    payload["activated_tools"] = wires
    return json_text(payload)  # as the library writes content: a lone surrogate stays escaped


def arguments(raw: Any) -> Any:
    """A call's arguments: a JSON object given as text (OpenAI) or as a value (Anthropic).

    Text that is not JSON is passed on as it is: the search tool logs it and refuses the call
    with its own message, as for any other argument that is not an object.
    """
    if isinstance(raw, str | bytes):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
            return raw
    return raw


def field(item: Any, key: str) -> Any:
    """``item[key]`` of a dict, or ``item.key`` of an SDK model; ``None`` when absent."""
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)
