"""Tool names as people type them back: a name, or a label that names one tool (contract §2).

``search`` shows labels (``weather/get_forecast``); ``show``, ``explain`` and ``remove`` accept
them too. A miss suggests the closest names and labels of the catalog.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from discovery._index import ToolIndex
from discovery.errors import ToolIndexError, ToolNotFound
from store import StoredTool

SUGGESTIONS = 3
SIMILARITY = 0.6
"""difflib's ratio a name or label must reach to be suggested (its own default)."""


def resolved_names(index: ToolIndex, given: Sequence[str]) -> list[str]:
    """Each of ``given`` as a catalog name: names as they are, a label as the one tool it names.

    Names that are neither are returned unchanged, for the caller to report.
    """
    found = index.tools_by_names(list(given))
    unknown = [item for item in given if item not in found]
    if not unknown:
        return list(given)
    by_label: dict[str, list[str]] = {}
    for tool in index.tools():
        by_label.setdefault(tool.label, []).append(tool.name)
    resolved = []
    for item in given:
        names = by_label.get(item, []) if item in unknown else [item]
        if len(names) > 1:
            raise ToolIndexError(
                f"the label {item!r} names {len(names)} tools: {', '.join(names)}; give one of the names"
            )
        resolved.append(names[0] if names else item)
    return resolved


def resolved_name(index: ToolIndex, given: str) -> str:
    """``given`` as a catalog name, or ``ToolNotFound`` suggesting close names and labels."""
    (name,) = resolved_names(index, [given])
    if not index.tools_by_names([name]):
        raise ToolNotFound(f"no tool named {given!r} in the catalog{did_you_mean(index.tools(), [given])}")
    return name


def did_you_mean(tools: Sequence[StoredTool], missing: Sequence[str]) -> str:
    """``"; did you mean 'a', 'b'?"`` for the catalog names and labels closest to ``missing``."""
    candidates = list(dict.fromkeys([tool.name for tool in tools] + [tool.label for tool in tools]))
    close: list[str] = []
    for item in missing:
        close += difflib.get_close_matches(item, candidates, n=SUGGESTIONS, cutoff=SIMILARITY)
    close = list(dict.fromkeys(close))[:SUGGESTIONS]
    return f"; did you mean {', '.join(repr(name) for name in close)}?" if close else ""
