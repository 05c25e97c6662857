"""Selections persisted by agent hosts as JSONL session files (resume interop).

Each entry has ``id``, ``parentId`` and ``timestamp``; a selection is an entry of type
``mcp_tool_selection`` with ``selectedToolNames``. The selection in force is the last one on
the path from the file's last entry back to the root through ``parentId``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from discovery._files import bounded_lines, load_json, read_bounded
from discovery.errors import ToolIndexError

SELECTION_TYPE = "mcp_tool_selection"


class UnreadableSessionFile(ToolIndexError):
    """The session file is not JSONL of entries with ids."""


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every entry of the JSONL session file at ``path``, read within the bounds of every input."""
    entries: list[dict[str, Any]] = []
    where, text = read_bounded(path, UnreadableSessionFile, what="session file")
    for number, line in bounded_lines(text, where, UnreadableSessionFile, what="entry"):
        entry = load_json(line, f"{where}:{number}", UnreadableSessionFile, one_line=True)
        if not isinstance(entry, dict):
            raise UnreadableSessionFile(f"{where}:{number}: an entry must be a JSON object")
        entries.append(entry)
    return entries


def selection_in_force(entries: list[dict[str, Any]], *, where: str = "session file") -> list[str] | None:
    """The ``selectedToolNames`` in force at the file's last entry, or ``None`` when none is.

    An empty list is a real selection: nothing selected.
    """
    if not entries:
        return None
    by_id = {entry["id"]: entry for entry in entries if isinstance(entry.get("id"), str)}
    entry: dict[str, Any] | None = entries[-1]
    seen: set[str] = set()
    while entry is not None:
        if entry.get("type") == SELECTION_TYPE:
            names = entry.get("selectedToolNames")
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise UnreadableSessionFile(
                    f"{where}: entry {entry.get('id')!r}: selectedToolNames must be a list of names"
                )
            return list(names)
        parent = entry.get("parentId")
        if not isinstance(parent, str) or parent in seen:
            return None
        seen.add(parent)
        entry = by_id.get(parent)
    return None


def selection_from_file(path: Path) -> list[str] | None:
    return selection_in_force(read_entries(path), where=str(path))
