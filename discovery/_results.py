"""What a search returns: ranked names with scores, the details of contract §6, and their JSON.

Loaded by every search, so it pulls in neither the record models nor the sessions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import orjson

from discovery._ranking.bm25 import round6
from store import StoredTool


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A ranked tool: ``score`` is the unrounded double of contract §4."""

    name: str
    score: float


class MatchDetails(TypedDict):
    """One match in a search's details (contract §6); ``description`` is the indexed summary."""

    name: str
    label: str
    description: str
    server_name: NotRequired[str]
    mcp_tool_name: NotRequired[str]
    schema_keys: list[str]
    score: float


class SearchDetails(TypedDict):
    """The details of a search call for hosts and UIs (contract §6), keys in this order."""

    query: str
    limit: int
    total_tools: int
    activated_tools: list[str]
    active_selected_tools: list[str]
    tools: list[MatchDetails]


def match_details(tool: StoredTool, score: float) -> MatchDetails:
    entry: dict[str, Any] = {"name": tool.name, "label": tool.label, "description": tool.summary}
    if tool.server_name:
        entry["server_name"] = tool.server_name
    if tool.mcp_tool_name:
        entry["mcp_tool_name"] = tool.mcp_tool_name
    entry["schema_keys"] = list(tool.schema_keys)
    entry["score"] = round6(score)
    return entry  # type: ignore[return-value]  # built key by key to keep contract §6's order


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
