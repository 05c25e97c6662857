"""Which tools can ever be searched (SPEC §5): corpus groups and the names with special roles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from store import GROUP_FIXED, GROUP_LOCAL, GROUP_MCP

if TYPE_CHECKING:
    from discovery.models import ToolRecord

MCP_PREFIX = "mcp__"

SEARCH_TOOL_NAME = "search_tool_bm25"
INTERNAL_NAMES = frozenset({SEARCH_TOOL_NAME, "resolve", "yield", "report_finding", "report_tool_issue"})
"""Never enter a corpus, whatever their record says [fixed]."""
DEFAULT_ESSENTIAL_NAMES = ("read", "bash", "edit", "write", "glob", "eval")
"""Always active unless a session overrides the list [fixed]."""

MODE_GROUPS: dict[str, tuple[int, ...]] = {
    "mcp-only": (GROUP_MCP,),
    "all": (GROUP_LOCAL, GROUP_MCP),
}
"""The corpus groups each effective discovery mode searches."""


def is_mcp_name(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def activation_order(names: Sequence[str]) -> list[str]:
    """MCP names first, then the others, each once, rank order kept within each part."""
    unique = list(dict.fromkeys(names))
    return [name for name in unique if is_mcp_name(name)] + [name for name in unique if not is_mcp_name(name)]


def corpus_group(record: ToolRecord) -> int:
    """The group a tool is stored in; a session corpus is drawn from whole groups."""
    if record.name in INTERNAL_NAMES or record.load_mode == "essential":
        return GROUP_FIXED
    if record.is_mcp:
        return GROUP_MCP
    return GROUP_LOCAL if record.load_mode == "discoverable" else GROUP_FIXED
