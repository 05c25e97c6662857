"""The gateway's own description of ``search_tool_bm25``: what a model behind ``tool-index serve``
can do with it (contract §6's says the host exposes activated tools, which a gateway does not)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from discovery._sessions.description import plural

_HEAD = (
    "Find tools on the MCP servers behind this gateway, and activate them for call_tool.\n"
    "\n"
    "You see two tools: this one and call_tool. Search for what you need done; the answer lists the "
    "matching tools, best first, each with `name`, a one-line `description` and the `required` "
    "arguments. Every listed tool is active: call it with call_tool "
    '{"name": <name>, "arguments": {...}} (without `arguments`, call_tool returns its full input '
    "schema). Tools an earlier search activated stay active, in later conversations on this "
    'session too, and are listed again, marked `"active": true`, when a search matches them.'
)

_FORMS = """Query forms:
- plain words: what you need done ("read a text file", "current time in Tokyo")
- a tool's name (`read_text_file`, `filesystem/read_text_file`): that tool, as `select:` gives it
- `select:NAME[,NAME…]`: activates exactly those tools (full names, `server/tool` or a server's own
  tool names), no ranking; unknown names are listed under `unknown`
- `+WORD words`: only tools whose server or name has WORD (`+github list issues`)
- `limit`: at most this many tools (default 8)

A search activates only tools that match by more than common words: when none does, nothing is
activated and `note` says where to look. Matches this gateway's filters leave out are listed under
`unavailable`; none is activated in their place. Not for searching files or code: tool discovery
only."""


def gateway_description(servers: Sequence[tuple[str, int]], total: int) -> str:
    """The description for a session whose corpus has ``servers`` (name, tool count) and
    ``total`` tools."""
    lines = [_HEAD, ""]
    if servers:
        listed = ", ".join(f"{server} ({plural(count, 'tool')})" for server, count in servers)
        lines.append(f"Servers: {listed}; {plural(total, 'tool')} in all.")
    else:
        lines.append("No server's tools are indexed yet.")
    return "\n".join([*lines, "", _FORMS])


ACTIVE_NAMED = 24
"""At most this many of a session's active tools are named in its description."""


def with_active(description: str, active: Sequence[str]) -> str:
    """The description of a session that has active tools (one resumed, in a new conversation):
    it names them, so the model knows what it can call without searching for it again."""
    if not active:
        return description
    named = ", ".join(active[:ACTIVE_NAMED])
    more = f", and {len(active) - ACTIVE_NAMED} more" if len(active) > ACTIVE_NAMED else ""
    return f"{description}\n\nActive in this session already (call them with call_tool): {named}{more}."


def still_syncing(answer: dict[str, Any], syncing: Sequence[str]) -> dict[str, Any]:
    """A search answer given while ``syncing`` servers are still being indexed: it names them
    and says to search again, so an empty answer is not taken for an empty catalog."""
    if not syncing:
        return answer
    said = (
        f"Still indexing {', '.join(syncing)}: their tools are not searchable yet; search again in a "
        "few seconds."
    )
    note = answer.get("note")
    return {**answer, "syncing": list(syncing), "note": said if note is None else f"{said} {note}"}
