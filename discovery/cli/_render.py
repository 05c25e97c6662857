"""Text for people: a ``search_tool_bm25`` result rendered with rich (contract §6).

Pure: no I/O beyond the in-memory console of :func:`render_to_text`. The CLI prints the
renderable of :func:`render_result` straight to its own console.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import wcwidth
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.text import Text
from rich.tree import Tree

from discovery.cli._sanitize import escaped

TABLE_GAP = "  "
"""Between the columns of a table."""

TITLE = "Tool Discovery"
COLLAPSED_MATCHES = 5
LABEL_COLUMNS = 72
SUMMARY_COLUMNS = 96
FALLBACK_LINE_COLUMNS = 110
FALLBACK_EMPTY = "Tool discovery completed"
EXPAND_HINT = "--expanded shows them"
"""How to see the matches a collapsed result hides (the search command's flag)."""
NO_TOOLS_LOADED = "No discoverable tools are currently loaded."
NO_MATCHES = "No matching tools found."
WEAK_MATCH = "weak: only common words matched"
"""Flags a match whose every matched query term is held by at least half of the corpus."""
ELLIPSIS = "…"
# rich expands a tab to the next tab stop of the screen, a width truncation cannot know.
TAB = "    "
META_SEP = " · "
GROUP_SEP = "  "


def truncate(text: str, columns: int) -> str:
    """Cut ``text`` to at most ``columns`` display columns, ending with ``…`` when cut.

    Widths come from wcwidth (wide characters count 2) and the cut falls between grapheme
    clusters, so an emoji sequence or a combining mark is never split. Control characters
    count as zero columns; callers escape them first (see :func:`printable`).
    """
    if columns <= 0:
        return ""
    room = columns - _cells(ELLIPSIS)
    used = fits = end = 0
    for grapheme in wcwidth.iter_graphemes(text):
        used += _cells(grapheme)
        if used > columns:
            return text[:fits] + ELLIPSIS
        end += len(grapheme)
        if used <= room:
            fits = end
    return text


def render_result(
    details: Mapping[str, Any] | None,
    *,
    text: str = "",
    expanded: bool = False,
    weak: Collection[str] = (),
) -> RenderableType:
    """The renderable for one result: its ``details``, or its content ``text`` without them.

    Matches named in ``weak`` are flagged: only very common words of the query matched them."""
    if details is None:
        return _render_fallback(text)
    tools: Sequence[Mapping[str, Any]] = details["tools"]
    header = _header(details)
    if not tools:
        message = NO_TOOLS_LOADED if details["total_tools"] == 0 else NO_MATCHES
        return Text.assemble(header, "\n", (GROUP_SEP + message, "dim"))
    tree = Tree(header, guide_style="dim")
    shown = tools if expanded else tools[:COLLAPSED_MATCHES]
    for match in shown:
        tree.add(_match_lines(match, weak=match["name"] in weak))
    hidden = len(tools) - len(shown)
    if hidden:
        tree.add(Text(f"{ELLIPSIS} {_count(hidden, 'more tool')} ({EXPAND_HINT})", style="dim"))
    return tree


def render_to_text(
    details: Mapping[str, Any] | None,
    *,
    text: str = "",
    expanded: bool = False,
    width: int = 120,
    color: bool = False,
    weak: Collection[str] = (),
) -> str:
    """:func:`render_result` as a string ``width`` columns wide; ANSI styles only if ``color``."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system="standard" if color else None,
        force_terminal=color,
        # Tests and logs must not depend on the environment the process happens to run in.
        force_jupyter=False,
        legacy_windows=False,
        emoji=False,
        highlight=False,
    )
    console.print(render_result(details, text=text, expanded=expanded, weak=weak))
    return buffer.getvalue()


def _header(details: Mapping[str, Any]) -> Text:
    tools: Sequence[Any] = details["tools"]
    icon = ("✔ ", "green") if tools else ("⚠ ", "yellow")
    meta = META_SEP.join(
        [
            _count(len(tools), "match", "matches"),
            f"{len(details['active_selected_tools'])} active",
            f"{details['total_tools']} total",
            f"limit:{details['limit']}",
        ]
    )
    query = truncate(one_line(details["query"]), LABEL_COLUMNS)
    header = Text.assemble(icon, (TITLE, "bold"))
    if query:
        header.append(GROUP_SEP + query, style="cyan")
    header.append(GROUP_SEP + meta, style="dim")
    return header


def _match_lines(match: Mapping[str, Any], *, weak: bool = False) -> Text:
    """``label  server · score 1.410``, then the summary on its own line when there is one."""
    meta = []
    server = one_line(match.get("server_name") or "")
    if server:
        meta.append(server)
    meta.append(f"score {match['score']:.3f}")
    lines = Text.assemble(
        (truncate(one_line(match["label"]), LABEL_COLUMNS), "bold cyan"),
        (GROUP_SEP + META_SEP.join(meta), "dim"),
    )
    if weak:
        lines.append(META_SEP + WEAK_MATCH, style="yellow")
    summary = one_line(match["description"])
    if summary:
        lines.append("\n" + truncate(summary, SUMMARY_COLUMNS), style="dim")
    return lines


def _render_fallback(text: str) -> Text:
    header = Text.assemble(("⚠ ", "yellow"), (TITLE, "bold yellow"))
    lines = (text or FALLBACK_EMPTY).split("\n")
    body = [truncate(printable(line.replace("\t", TAB)), FALLBACK_LINE_COLUMNS) for line in lines]
    return Text.assemble(header, *(("\n" + line, "dim") for line in body))


def one_line(text: str) -> str:
    """``text`` on one line: every whitespace run one space, control characters escaped.

    Labels, server names and summaries come from third-party MCP servers: newlines and tabs
    would break a one-line layout.
    """
    return printable(" ".join(text.split()))


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with control and invisible characters escaped (except those in ``keep``, e.g.
    ``"\n"``): see :mod:`discovery.cli._sanitize`."""
    return escaped(text, keep=keep)


def indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def table(rows: list[tuple[str, ...]], width: int) -> str:
    """Aligned columns under a header row; only the last column is cut, to fit ``width``."""
    # Leading spaces are kept: they indent a row under the one above.
    cleaned = [[" " * (len(cell) - len(cell.lstrip(" "))) + one_line(cell) for cell in row] for row in rows]
    widths = [max(cell_len(row[column]) for row in cleaned) for column in range(len(rows[0]) - 1)]
    room = max(width - sum(widths) - len(widths) * len(TABLE_GAP), 20)
    lines = []
    for row in cleaned:
        cells = [cell + " " * (widths[i] - cell_len(cell)) for i, cell in enumerate(row[:-1])]
        lines.append(TABLE_GAP.join([*cells, truncate(row[-1], room)]).rstrip())
    return "\n".join(lines)


def _cells(grapheme: str) -> int:
    # wcswidth is -1 for a control character; it occupies no column on the screen.
    return max(wcwidth.wcswidth(grapheme), 0)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"
