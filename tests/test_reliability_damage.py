"""A damaged database is found by ``verify``; every other command says so in one ``Error:`` line
that points to ``verify``, on both backends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from discovery import CorruptIndex, ToolIndex
from discovery.cli._main import main
from tests.conftest import scratch_database

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
    with ToolIndex.open(url) as index, index.store.engine.begin() as connection:
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


# Damage either backend can hold: ``verify`` names it.
FOUND_ON_BOTH = {
    "posting_blocks.size changed": (
        "UPDATE posting_blocks SET size = size + 1 WHERE term_id = (SELECT MIN(term_id) FROM posting_blocks)",
        r"posting block of term id \d+, group \d: size (\d+), it holds \d+ postings",
    ),
    "posting_blocks.widths unknown": (
        "UPDATE posting_blocks SET widths = 999 WHERE term_id = (SELECT MIN(term_id) FROM posting_blocks)",
        r"posting block of term id \d+, group \d: unknown widths 999",
    ),
    "session setting outside its values": (
        """UPDATE sessions SET settings = '{"discovery_mode": "sometimes"}' WHERE id = 's1'""",
        r"session 's1': stored settings are invalid: discovery_mode: Input should be 'auto', 'off', "
        r"'mcp-only' or 'all'",
    ),
}
FOUND_ON_BOTH["sessions.active not a list"] = (
    """UPDATE sessions SET active = '{"read": 1}' WHERE id = 's1'""",
    r"session 's1' of identity 'local': its active cannot be read \(not a JSON array of names\)",
)
# Damage only SQLite can hold: PostgreSQL's json and timestamptz columns refuse such values.
FOUND_ON_SQLITE = {
    "tools.input_schema not JSON": (
        "UPDATE tools SET input_schema = '{\"type\": ' WHERE name = 'read'",
        r"tool 'read': its input_schema is not JSON",
    ),
    "tools.schema_keys not JSON": (
        "UPDATE tools SET schema_keys = 'path' WHERE name = 'read'",
        r"tool 'read': its schema_keys is not JSON",
    ),
    "sessions.active not JSON": (
        "UPDATE sessions SET active = '[\"read\", ' WHERE id = 's1'",
        r"session 's1' of identity 'local': its active cannot be read \(not JSON\)",
    ),
    "session_events.details not JSON": (
        "UPDATE session_events SET details = '{oops' WHERE session_id = 's1' AND seq = 2",
        r"session 's1' of identity 'local', log entry 2: its details cannot be read \(not JSON\)",
    ),
    "sessions.created_at not a date": (
        "UPDATE sessions SET created_at = 'someday' WHERE id = 's1'",
        r"session 's1' of identity 'local': its created_at cannot be read "
        r"\(Invalid isoformat string: 'someday'\)",
    ),
    "session_events.created_at not a date": (
        "UPDATE session_events SET created_at = 'soon' WHERE session_id = 's1' AND seq = 1",
        r"session 's1' of identity 'local', log entry 1: its created_at cannot be read "
        r"\(Invalid isoformat string: 'soon'\)",
    ),
}
READS = [
    ("search", "weather forecast"),
    ("search", "weather forecast", "--session", "s1"),
    ("search", "weather forecast", "--session", "s1", "--json"),
    ("stats",),
    ("tools",),
    ("show", "read"),
    ("explain", "weather forecast", "mcp__calendar__list_events"),
    ("sessions",),
    ("session", "show", "s1"),
    ("session", "reset", "s1"),
    ("remove", "grep"),
]


def with_session(url: str, statement: str) -> None:
    """The demo catalog, session ``s1`` with two searches logged, then ``statement``."""
    assert cli(url, "import", str(DEMO)).exit_code == 0
    for query in ("weather forecast", "open a pull request"):
        assert cli(url, "search", query, "--session", "s1", "--mode", "all").exit_code == 0
    with ToolIndex.open(url) as index, index.store.engine.begin() as connection:
        assert connection.execute(text(statement)).rowcount >= 1


def assert_damage_reported(url: str, found: str) -> None:
    result = cli(url, "verify")
    assert result.exit_code == 1, result.output
    assert re.search(found, result.output), result.output
    failed = 0
    for command in READS:
        result = cli(url, *command)  # catch_exceptions=False: a traceback fails the test here
        if result.exit_code == 0:
            continue  # a command that never reads the damaged value
        failed += 1
        lines = result.stderr.splitlines()
        assert result.exit_code == 1 and len(lines) == 1, (command, result.output)
        assert lines[0].startswith("Error: the database is damaged ("), (command, lines)
        assert lines[0].endswith("run `tool-index verify` to see every problem"), (command, lines)
    assert failed or found.startswith("posting block"), "the damage went unnoticed by every command"


@pytest.mark.parametrize("damage", list(FOUND_ON_BOTH))
def test_verify_names_damage_either_backend_can_hold(db_url: str, damage: str) -> None:
    statement, found = FOUND_ON_BOTH[damage]
    with_session(db_url, statement)
    assert_damage_reported(db_url, found)


@pytest.mark.parametrize("damage", list(FOUND_ON_SQLITE))
def test_verify_names_values_only_sqlite_can_hold(sqlite_db_url: str, damage: str) -> None:
    statement, found = FOUND_ON_SQLITE[damage]
    with_session(sqlite_db_url, statement)
    assert_damage_reported(sqlite_db_url, found)


def test_a_wrong_block_size_still_gives_the_right_postings_after_a_write(db_url: str) -> None:
    """The size only steers when a write merges; verify finds it, searches stay exact."""
    statement, _ = FOUND_ON_BOTH["posting_blocks.size changed"]
    with_session(db_url, statement)
    before = cli(db_url, "search", "weather forecast", "--json").stdout
    assert cli(db_url, "import", str(DEMO)).exit_code == 0
    assert cli(db_url, "search", "weather forecast", "--json").stdout == before


def test_postgresql_refuses_the_values_sqlite_can_hold(tmp_path: Path) -> None:
    """Why the JSON and time cases above run on SQLite only: PostgreSQL's columns refuse them."""
    with scratch_database("postgresql", tmp_path) as url:
        with_session(url, "SELECT 1 FROM sessions")
        for statement, _ in FOUND_ON_SQLITE.values():
            with (
                ToolIndex.open(url) as index,
                pytest.raises(DBAPIError),
                index.store.engine.begin() as connection,
            ):
                connection.execute(text(statement))
