"""Host JSONL session files: the selection in force, and files that cannot be read as one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from discovery._sessions.host_files import (
    UnreadableSessionFile,
    read_entries,
    selection_from_file,
    selection_in_force,
)


def write(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    return path


def selection(entry_id: str, parent: str | None, names: list[str]) -> dict[str, Any]:
    return {"id": entry_id, "parentId": parent, "type": "mcp_tool_selection", "selectedToolNames": names}


def message(entry_id: str, parent: str | None) -> dict[str, Any]:
    return {"id": entry_id, "parentId": parent, "type": "message"}


def test_the_last_selection_on_the_path_from_the_last_entry_is_in_force(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        message("a", None),
        selection("b", "a", ["mcp__x"]),
        selection("c", "b", ["mcp__y"]),  # a branch the last entry does not descend from
        message("d", "b"),
    )
    assert selection_from_file(path) == ["mcp__x"]


def test_an_empty_selection_is_a_selection_and_no_selection_is_none(tmp_path: Path) -> None:
    assert selection_from_file(write(tmp_path / "e.jsonl", selection("a", None, []))) == []
    assert selection_from_file(write(tmp_path / "n.jsonl", message("a", None), message("b", "a"))) is None
    (tmp_path / "blank.jsonl").write_text("\n  \n", encoding="utf-8")
    assert selection_from_file(tmp_path / "blank.jsonl") is None


def test_a_missing_or_non_text_parent_ends_the_path(tmp_path: Path) -> None:
    before = selection("a", None, ["mcp__x"])
    assert selection_from_file(write(tmp_path / "m.jsonl", before, message("b", "gone"))) is None
    assert selection_from_file(write(tmp_path / "i.jsonl", before, {"id": "b", "parentId": 7})) is None


def test_a_cycle_of_parents_ends_instead_of_looping(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", message("a", "b"), message("b", "a"))
    assert selection_from_file(path) is None


@pytest.mark.parametrize(
    ("content", "message_text"),
    [
        (b'{"id": "a"}\nnot json\n', ":2: invalid JSON: Expecting value (column 1)"),
        (b"[1]\n", ":1: an entry must be a JSON object"),
        (b'"text"\n', ":1: an entry must be a JSON object"),
        (b"\xff\xfe{}\n", ": not UTF-8 text (invalid byte at offset 0)"),
        (b"[" * 100_000 + b"\n", ":1: JSON nested too deeply"),
    ],
    ids=["bad-json", "array", "string", "not-utf8", "deeply-nested"],
)
def test_unreadable_files_name_the_file_and_line(tmp_path: Path, content: bytes, message_text: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(UnreadableSessionFile) as raised:
        read_entries(path)
    assert str(raised.value).startswith(f"{path}{message_text}")


def test_a_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableSessionFile, match="cannot read"):
        read_entries(tmp_path)


@pytest.mark.parametrize("names", ["mcp__x", None, [1], ["mcp__x", None]])
def test_selected_names_must_be_a_list_of_text(tmp_path: Path, names: object) -> None:
    path = write(tmp_path / "s.jsonl", {"id": "a", "type": "mcp_tool_selection", "selectedToolNames": names})
    with pytest.raises(UnreadableSessionFile) as raised:
        selection_from_file(path)
    assert str(raised.value) == f"{path}: entry 'a': selectedToolNames must be a list of names"


def in_force_by_walking(entries: list[dict[str, Any]]) -> list[str] | None:
    """The reference: from the last entry, step to the parent as many times as there are entries
    (enough to see every entry the path can reach, cycles included) and stop at a selection."""
    by_id = {entry["id"]: entry for entry in entries}
    current = entries[-1] if entries else None
    for _ in range(len(entries) + 1):
        if current is None:
            return None
        if current.get("type") == "mcp_tool_selection":
            return list(current["selectedToolNames"])
        current = by_id.get(current.get("parentId"))
    return None


@st.composite
def session_files(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(0, 12))
    ids = [f"e{index}" for index in range(count)]
    entries = []
    for entry_id in ids:
        parent = draw(st.none() | st.sampled_from([*ids, "gone"]))
        if draw(st.booleans()):
            entries.append(selection(entry_id, parent, [f"mcp__{entry_id}"]))
        else:
            entries.append(message(entry_id, parent))
    return entries


@given(session_files())
def test_the_selection_in_force_matches_walking_the_parents(entries: list[dict[str, Any]]) -> None:
    assert selection_in_force(entries) == in_force_by_walking(entries)
