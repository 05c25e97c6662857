"""The description of ``search_tool_bm25`` (contract §6), rendered from a session's corpus."""

from __future__ import annotations

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


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


_RICH_TAIL = """Input:
- `query` — required: what you need done, in words; or `select:NAME[,NAME…]` to activate tools by name
  (full name, `server/tool` or the server's own tool name); or `+WORD words` to keep to tools whose server
  or name has WORD, ranked by the words; or a tool's name (`read_text_file`), as `select:` gives it
- `limit` — optional maximum number of tools to return (default `8`)

Behavior:
- Lists the tools that match, best first, each with its description and required arguments; those already
  active are marked `"active": true`
- Activates only tools that match by more than common words; when none does, activates nothing and says so
- Repeating a search activates nothing new; earlier selections stay active

Not for repository/file/code search. Tool discovery only.

Returns JSON with `query`, `activated_tools` (newly activated by this call), `tools` (`name`,
`description`, `required`, `active`), `match_count`, `total_tools`, and when they apply `unavailable`
(matches this host leaves out), `unknown` (names select: did not find) and `note`."""


def render_description(
    servers: list[tuple[str, int]], builtins: list[str], total: int, *, rich: bool = False
) -> str:
    """The tool description of contract §6 for a corpus overview; with ``rich``, the tail says
    what a session answering richly (``discovery._sessions.answer``) takes and returns."""
    lines = [_DESCRIPTION_HEAD]
    if servers:
        listed = ", ".join(f"{server} ({plural(count, 'tool')})" for server, count in servers)
        lines.append(f"Discoverable MCP servers in this session: {listed}.")
    if builtins:
        lines.append(f"Discoverable built-in tools: {', '.join(builtins)}.")
    if total:
        lines.append(f"Total discoverable tools available: {total}.")
    return "\n".join(lines) + "\n" + (_RICH_TAIL if rich else _DESCRIPTION_TAIL)
