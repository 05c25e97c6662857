"""Keys the store indexes (tool names, server names, terms, session ids, call ids) have one limit,
``MAX_KEY_BYTES``, on every backend: at the limit they are stored, past it refused with the same
error before anything is written. PostgreSQL's index entries are bounded (about 2.7 kB); text
that does not compress is what reaches that bound first, so the keys here are random."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from discovery import InvalidRecord, ToolIndex, ToolIndexError
from discovery._params import MAX_KEY_BYTES
from discovery.cli._main import main


def random_word(size: int, seed: int = 0) -> str:
    """``size`` bytes of lowercase letters (one token), chosen so that they barely compress."""
    return "".join(random.Random(seed).choices(string.ascii_lowercase, k=size))


def multibyte_word(size: int) -> str:
    """A word of ``size`` UTF-8 bytes made of three-byte CJK characters (plus ASCII padding)."""
    rng = random.Random(1)
    text = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return text + "a" * (size - len(text.encode()))


AT_LIMIT = random_word(MAX_KEY_BYTES)
PAST_LIMIT = random_word(MAX_KEY_BYTES + 1)


def records_at_limit() -> list[dict[str, object]]:
    word = random_word(MAX_KEY_BYTES, seed=2)
    return [
        {"name": AT_LIMIT, "description": "A tool with the longest name."},
        {
            "name": "mcp__" + random_word(MAX_KEY_BYTES - 5, seed=3),
            "server_name": random_word(MAX_KEY_BYTES, 4),
        },
        {"name": "wordy", "summary": f"find {word} here", "label": multibyte_word(MAX_KEY_BYTES)},
        {
            "name": "keyed",
            "input_schema": {"type": "object", "properties": {random_word(MAX_KEY_BYTES, 5): {}}},
        },
    ]


def test_keys_at_the_limit_are_stored_and_found(index: ToolIndex) -> None:
    index.upsert_tools(records_at_limit())
    assert len(index.tools()) == 4
    assert [hit.name for hit in index.search(AT_LIMIT)] == [AT_LIMIT]
    word = random_word(MAX_KEY_BYTES, seed=2)
    assert [hit.name for hit in index.search(word)] == ["wordy"]
    session_id, call_id = random_word(MAX_KEY_BYTES, 6), random_word(MAX_KEY_BYTES, 7)
    session = index.session(session_id, discovery_mode="all")
    first = session.search_tool.execute(call_id, {"query": word})
    assert first.details["activated_tools"] == ["wordy"]
    assert session.search_tool.execute(call_id, {"query": word}) == first


PAST: dict[str, tuple[dict[str, Any], str]] = {
    "name": (
        {"name": PAST_LIMIT},
        f"name: must be at most {MAX_KEY_BYTES} bytes in UTF-8, not {MAX_KEY_BYTES + 1}",
    ),
    "server name": (
        {"name": "mcp__s__t", "server_name": PAST_LIMIT},
        f"server_name: must be at most {MAX_KEY_BYTES} bytes in UTF-8",
    ),
    "word of the summary": (
        {"name": "t", "summary": f"a {PAST_LIMIT} b"},
        f"summary: holds a word of {MAX_KEY_BYTES + 1} bytes in UTF-8",
    ),
    "word of the label": (
        {"name": "t", "label": multibyte_word(MAX_KEY_BYTES + 2)},
        f"label: holds a word of {MAX_KEY_BYTES + 2} bytes in UTF-8",
    ),
    "schema key": (
        {"name": "t", "input_schema": {"type": "object", "properties": {PAST_LIMIT: {}}}},
        f"schema_keys: holds a word of {MAX_KEY_BYTES + 1} bytes",
    ),
}


@pytest.mark.parametrize("case", list(PAST))
def test_a_key_past_the_limit_is_refused_and_nothing_is_written(index: ToolIndex, case: str) -> None:
    record, message = PAST[case]
    index.upsert_tools([{"name": "kept", "description": "Already there."}])
    with pytest.raises(InvalidRecord, match="record 2: " + message.replace("(", r"\(")):
        index.upsert_tools([{"name": "fine", "description": "Would be added."}, record])
    assert [tool.name for tool in index.tools()] == ["kept"]


def test_a_long_description_is_not_a_key(index: ToolIndex) -> None:
    """The description is indexed through its summary (its first 200 UTF-16 units) only."""
    index.upsert_tools([{"name": "t", "description": "x" * 10 * MAX_KEY_BYTES}])
    assert [tool.name for tool in index.tools()] == ["t"]


@pytest.mark.parametrize("what", ["session id", "call id"])
def test_session_and_call_ids_past_the_limit_are_refused(index: ToolIndex, what: str) -> None:
    index.upsert_tools([{"name": "mcp__s__t", "description": "weather"}])
    message = f"a {what} must be at most {MAX_KEY_BYTES} bytes in UTF-8, not {MAX_KEY_BYTES + 1}"
    with pytest.raises(ToolIndexError, match=message):
        if what == "session id":
            index.session(PAST_LIMIT)
        else:
            index.session("s", discovery_mode="all").search_tool.execute(PAST_LIMIT, {"query": "weather"})
    assert [state.id for state in index.sessions()] == ([] if what == "session id" else ["s"])


def test_the_cli_refuses_a_long_name_in_one_line(db_url: str, tmp_path: Path) -> None:
    catalog = tmp_path / "long.jsonl"
    catalog.write_text(json.dumps({"name": PAST_LIMIT}) + "\n")
    result = CliRunner().invoke(main, ["--db", db_url, "import", str(catalog)], prog_name="tool-index")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"Error: {catalog}:1: name: must be at most {MAX_KEY_BYTES} bytes in UTF-8, not {MAX_KEY_BYTES + 1}"
    ]
