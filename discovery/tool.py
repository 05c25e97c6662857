"""The ``search_tool_bm25`` tool of SPEC §6: its schema, description and ``execute``."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Connection

from discovery.corpus import SEARCH_TOOL_NAME, activation_order
from discovery.errors import (
    DiscoveryDisabled,
    DiscoveryUnavailable,
    EmptyQuery,
    InvalidLimit,
    QueryWithoutTerms,
    ToolCallError,
)
from discovery.ids import checked_id
from discovery.index import DEFAULT_LIMIT
from discovery.scoring import query_term_counts, round6
from store import StoredTool, sessions
from store.engine import write_transaction

if TYPE_CHECKING:
    # Types only: a read-only search formats its matches here without loading sessions (and
    # their pydantic settings model).
    from discovery.session import Session, SessionView

LABEL = "SearchTools"
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "tool search query"},
        "limit": {"type": "integer", "minimum": 1, "description": "max matches"},
    },
    "required": ["query"],
    "additionalProperties": False,
}

_DESCRIPTION_HEAD = (
    "Search hidden tool metadata to discover and activate tools.\n"
    "\n"
    "Activate hidden tools (MCP and built-in) when you need a capability not in your active tool set."
)
_DESCRIPTION_TAIL = """Input:
- `query` — required natural-language or keyword query
- `limit` — optional maximum number of tools to return and activate (default `8`)

Behavior:
- Matches against tool name, label, server name, description/summary, and input schema keys
- Activates the top matching tools for the rest of the current session
- Repeated searches add to the active tool set; they do not remove earlier selections
- Newly activated tools become available before the next model call in the same overall turn

Notes:
- Start with `limit` 5–10 if unsure.

Not for repository/file/code search. Tool discovery only.

Returns JSON with:
- `query`
- `activated_tools` — tools activated by this search call
- `match_count` — number of ranked matches returned by the search
- `total_tools`"""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``JSON.stringify`` output: non-ASCII kept, lone surrogates escaped, compact by default."""
    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(value, ensure_ascii=False, separators=separators, indent=indent, allow_nan=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def compact_json(value: Any) -> str:
    """``json_text`` of a call's content (text, names and counts), on every search call.

    ``orjson`` writes strings and whole numbers exactly as ``JSON.stringify`` does; what it
    refuses (a lone surrogate, an integer past 64 bits) goes the standard way."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json_text(value)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def render_description(servers: list[tuple[str, int]], builtins: list[str], total: int) -> str:
    """The tool description of SPEC §6 for a corpus overview."""
    lines = [_DESCRIPTION_HEAD]
    if servers:
        listed = ", ".join(f"{server} ({plural(count, 'tool')})" for server, count in servers)
        lines.append(f"Discoverable MCP servers in this session: {listed}.")
    if builtins:
        lines.append(f"Discoverable built-in tools: {', '.join(builtins)}.")
    if total:
        lines.append(f"Total discoverable tools available: {total}.")
    return "\n".join(lines) + "\n" + _DESCRIPTION_TAIL


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the model sees (``content``) and what hosts and UIs get (``details``)."""

    content: str
    details: dict[str, Any]


def checked_query(params: Any) -> str:
    query = params.get("query") if isinstance(params, dict) else None
    if not isinstance(query, str) or not query.strip():
        raise EmptyQuery()
    return query.strip()


def checked_limit(params: dict[str, Any]) -> int:
    """A positive integer; an integral float (``5.0``, as JSON numbers may arrive) counts."""
    limit = params.get("limit")
    if limit is None:
        return DEFAULT_LIMIT
    if isinstance(limit, bool):
        raise InvalidLimit()
    if isinstance(limit, float) and math.isfinite(limit) and limit.is_integer():
        limit = int(limit)
    if not isinstance(limit, int) or limit < 1:
        raise InvalidLimit()
    return limit


def tool_details(tool: StoredTool, score: float) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": tool.name, "label": tool.label, "description": tool.summary}
    if tool.server_name:
        entry["server_name"] = tool.server_name
    if tool.mcp_tool_name:
        entry["mcp_tool_name"] = tool.mcp_tool_name
    entry["schema_keys"] = list(tool.schema_keys)
    entry["score"] = round6(score)
    return entry


class SearchTool:
    """``search_tool_bm25`` bound to one session."""

    name = SEARCH_TOOL_NAME
    label = LABEL
    parameters = PARAMETERS

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def description(self) -> str:
        """Rendered from the session's current corpus."""
        return render_description(*self.session.describe_corpus())

    def execute(self, call_id: str, params: dict[str, Any]) -> ToolResult:
        """Run one search call: rank, activate, persist and log, all before returning.

        Raises ``ToolCallError`` with the exact message of SPEC §6; failed calls are logged
        too. A call id the session has already answered returns the logged answer; an empty
        one is never matched. A call id the store cannot keep is a ``ToolIndexError``.
        """
        index = self.session.index
        call_id = checked_id(call_id, "call id", blank=True)
        outcome: ToolResult | ToolCallError
        with write_transaction(index.engine) as connection:
            state, generation, done = sessions.lock_for_call(connection, self.session.id, call_id)
            if state is None:
                raise DiscoveryUnavailable()
            if done is not None:
                return _replayed(done, params)
            index.sync(connection, generation)
            view = self.session.view_in(connection, state, generation)
            try:
                outcome = self._search(connection, view, params)
            except ToolCallError as error:
                outcome = error
            sessions.record(connection, state, *_logged(view, call_id, params, outcome))
        if isinstance(outcome, ToolCallError):
            raise outcome
        return outcome

    def _search(self, connection: Connection, view: SessionView, params: Any) -> ToolResult:
        if view.mode == "off":
            raise DiscoveryDisabled()
        query = checked_query(params)
        limit = checked_limit(params)
        terms = query_term_counts(query)
        if not terms:
            raise QueryWithoutTerms()
        index = self.session.index
        selected = set(view.state.selected)
        corpus = view.corpus
        # Selected tools are active, so outside the corpus; rank more only for any that are not.
        rankable_selected = len(selected - corpus.excluded)
        ranking = index.rank_in(connection, terms, corpus, limit + rankable_selected)
        matches = [hit for hit in ranking.hits if hit.name not in selected][:limit]
        activated = activation_order([hit.name for hit in matches])
        active_selected = [*view.live_selected, *(n for n in activated if n not in view.live_selected)]
        tools = index.tools_in(connection, [hit.tool_id for hit in matches])
        content = compact_json(
            {
                "query": query,
                "activated_tools": activated,
                "match_count": len(matches),
                "total_tools": ranking.total_tools,
            }
        )
        details = {
            "query": query,
            "limit": limit,
            "total_tools": ranking.total_tools,
            "activated_tools": activated,
            "active_selected_tools": active_selected,
            "tools": [tool_details(tools[hit.tool_id], hit.score) for hit in matches],
        }
        return ToolResult(content=content, details=details)


def _logged(
    view: SessionView, call_id: str, params: Any, outcome: ToolResult | ToolCallError
) -> tuple[sessions.Event, list[str], list[str]]:
    """The log entry of a call and the lists it leaves behind."""
    state = view.state
    logged_params = params if isinstance(params, dict) else {"value": params}
    if isinstance(outcome, ToolCallError):
        event = sessions.Event(
            kind="search",
            tool_name=SEARCH_TOOL_NAME,
            call_id=call_id,
            params=logged_params,
            error=str(outcome),
        )
        return event, state.active, state.selected
    activated = outcome.details["activated_tools"]
    event = sessions.Event(
        kind="search",
        tool_name=SEARCH_TOOL_NAME,
        call_id=call_id,
        params=logged_params,
        content=outcome.content,
        details=outcome.details,
        activated=tuple(activated),
    )
    selected = [*state.selected, *(name for name in activated if name not in state.selected)]
    active = [*state.active, *(name for name in activated if name not in state.active)]
    return event, active, selected


def _replayed(done: sessions.LoggedEvent, params: Any) -> ToolResult:
    if done.event.params != params:
        raise ToolCallError(f"call id {done.event.call_id!r} was already used with other parameters")
    if done.event.error is not None:
        raise ToolCallError(done.event.error)
    assert done.event.content is not None and done.event.details is not None
    return ToolResult(content=done.event.content, details=done.event.details)
