"""A damaged database is found by ``verify``; every other command says so in one ``Error:`` line
that points to ``verify``, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from discovery import CorruptIndex, ToolIndex
from discovery.cli.main import main

DEMO = Path(__file__).resolve().parent.parent / "discovery" / "examples" / "demo-catalog.jsonl"

DAMAGE = {
    "catalog_state row deleted": "DELETE FROM catalog_state",
    "group_stats row deleted": "DELETE FROM group_stats",
}
FOUND_BY_VERIFY = {
    "catalog_state row deleted": "catalog_state holds 0 rows",
    "group_stats row deleted": "group 2 (mcp): no group_stats row",
}


def cli(db: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", db, *args], catch_exceptions=False, prog_name="tool-index")


def damaged(url: str, statement: str) -> None:
    assert cli(url, "import", str(DEMO)).exit_code == 0
    with ToolIndex.open(url) as index, index.engine.begin() as connection:
        connection.execute(text(statement))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_verify_finds_the_damage(db_url: str, damage: str) -> None:
    damaged(db_url, DAMAGE[damage])
    result = cli(db_url, "verify")
    assert result.exit_code == 1
    assert FOUND_BY_VERIFY[damage] in result.output


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", [("search", "weather"), ("stats",), ("remove",)])
def test_other_commands_give_one_error_line_pointing_to_verify(
    db_url: str, damage: str, command: tuple[str, ...]
) -> None:
    damaged(db_url, DAMAGE[damage])
    if command == ("remove",):  # a write that changes the aggregates
        with ToolIndex.open(db_url) as index:
            command = ("remove", index.tools()[0].name)
    result = cli(db_url, *command)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: the database is damaged ("), result.stderr
    assert lines[0].endswith("run `tool-index verify` to see every problem")


def test_a_session_search_on_a_damaged_catalog_is_not_reported_as_disabled(db_url: str) -> None:
    damaged(db_url, DAMAGE["group_stats row deleted"])
    with ToolIndex.open(db_url) as index, pytest.raises(CorruptIndex, match="tool-index verify"):
        index.session("s1").search_tool.execute("c1", {"query": "weather"})
