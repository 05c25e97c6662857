"""What a newcomer meets on the command line: no database made by a read, names typed back from
the output, hidden matches and sessions explained, and no third-party character driving the
terminal (issue 21; issue 25, item 3)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import examples
from tests.test_cli import CREATE_ONE, DEMO, demo_db, fails, ok, run

__all__ = ["demo_db"]  # the fixture, shared with tests/test_cli.py

READS = [
    ("search", "foo"),
    ("tools",),
    ("show", "read"),
    ("stats",),
    ("explain", "foo", "read"),
    ("sessions",),
    ("session", "show", "s1"),
    ("session", "reset", "s1"),
    ("remove", "read"),
    ("verify",),
    ("db", "current"),
    ("db", "check"),
]


def test_reading_a_database_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    where = tmp_path / "no" / "such" / "dir" / "x.db"
    for args in READS:
        assert (
            fails(f"sqlite:///{where}", *args) == f"Error: no tool-index database at {where}; {CREATE_ONE}\n"
        )
    assert not (tmp_path / "no").exists()


def test_a_typo_d_path_in_a_real_process_creates_nothing(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "tool-index"
    done = subprocess.run(
        [str(script), "--db", "tpyo.db", "search", "foo"], cwd=tmp_path, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"Error: no tool-index database at tpyo.db; {CREATE_ONE}\n"
    assert list(tmp_path.iterdir()) == []


def test_writing_commands_still_create_it(tmp_path: Path) -> None:
    where = tmp_path / "new" / "x.db"
    assert ok(f"sqlite:///{where}", "import", str(DEMO)).startswith("added 26,")
    assert where.exists()


def test_an_empty_database_is_not_given_a_schema_by_a_read(tmp_path: Path) -> None:
    where = tmp_path / "empty.db"
    where.touch()
    assert fails(f"sqlite:///{where}", "tools").startswith("Error: no tool-index database at ")
    # Connecting switches the journal to WAL (issue 25, item 2, in store/engine.py); no table is made.
    with sqlite3.connect(where) as connection:
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_a_label_is_accepted_where_a_name_is(demo_db: str) -> None:
    shown = ok(demo_db, "show", "gitforge/create_issue")
    assert shown.startswith("name:          mcp__gitforge__create_issue\n")
    explained = ok(demo_db, "explain", "create issue", "gitforge/create_issue")
    assert explained.startswith("mcp__gitforge__create_issue  score ")
    assert ok(demo_db, "remove", "gitforge/create_issue") == "removed 1\n"


def test_a_miss_suggests_close_names(demo_db: str) -> None:
    assert fails(demo_db, "show", "gitforge/create_isue") == (
        "Error: no tool named 'gitforge/create_isue' in the catalog; did you mean "
        "'gitforge/create_issue', 'mcp__gitforge__create_issue', 'gitforge/list_issues'?\n"
    )
    assert fails(demo_db, "show", "zzzzzz") == "Error: no tool named 'zzzzzz' in the catalog\n"
    assert fails(demo_db, "remove", "ls", "grpe") == (
        "Error: not in the catalog: 'grpe'; nothing removed; did you mean 'grep'?\n"
    )


def test_hidden_matches_say_how_to_see_them(demo_db: str) -> None:
    assert ok(demo_db, "search", "create a pull request").endswith(
        "└── … 3 more tools (--expanded shows them)\n"
    )


def test_session_show_marks_tools_gone_from_the_catalog(demo_db: str) -> None:
    ok(demo_db, "search", "grep", "--session", "s1", "--mode", "all", "--limit", "1")
    ok(demo_db, "remove", "grep")
    shown = ok(demo_db, "session", "show", "s1").splitlines()
    assert shown[5] == "  selected (0 + 1 not in the catalog): grep [not in the catalog]"
    assert "grep [not in the catalog]" in shown[4]
    assert json.loads(ok(demo_db, "session", "show", "s1", "--json"))["not_in_catalog"] == ["grep"]


def test_unknown_names_in_new_session_settings_are_reported(demo_db: str) -> None:
    result = run(
        demo_db,
        "search",
        "issue",
        "--session",
        "s1",
        "--mode",
        "all",
        "--request",
        "nope",
        "--default-server",
        "nowhere",
    )
    assert result.exit_code == 0
    assert result.stderr == (
        "Warning: --request 'nope' is not in the catalog; ignored\n"
        "Warning: --default-server 'nowhere' has no tools in the catalog; ignored\n"
    )


def test_resetting_an_unknown_session_is_an_error(demo_db: str) -> None:
    assert fails(demo_db, "session", "reset", "nope") == "Error: no session 'nope' in the store\n"
    assert ok(demo_db, "sessions") == "No sessions.\n"


def test_a_fractional_limit_says_what_a_limit_is(demo_db: str) -> None:
    message = fails(demo_db, "search", "x", "--limit", "1.5", code=2)
    assert message.endswith(
        "Error: Invalid value for '--limit': '1.5' is not a positive whole number (1, 2, 3, …).\n"
    )


def test_piped_tables_respect_columns(demo_db: str) -> None:
    narrow = run(demo_db, "tools", env={"COLUMNS": "60"}).stdout.splitlines()
    wide = ok(demo_db, "tools").splitlines()
    assert max(map(len, narrow)) < max(map(len, wide)) <= 120
    # Names are never cut (they are typed back); the summaries make room, down to 20 columns.
    assert narrow[1].startswith("read  ") and narrow[1].endswith("…")


def test_a_terminal_gets_rich_tables_sized_to_it(demo_db: str) -> None:
    """A real pseudo-terminal 70 columns wide: rich's table rule, no line wider than the screen."""
    import fcntl
    import pty
    import struct
    import termios

    script = Path(sys.executable).parent / "tool-index"
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 70, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    process = subprocess.Popen([str(script), "--db", demo_db, "tools"], stdout=secondary, env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert process.wait(timeout=60) == 0
    os.close(primary)
    import re

    screen = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode()).replace("\r", "")
    lines = screen.splitlines()
    assert "─" in screen and "mcp__gitforge__create_issue" in screen
    assert max(len(line) for line in lines) <= 70


UNSAFE = st.sampled_from(
    ["\x1b]0;title\x07", "\x1b[2J", "\x9b31m", "\x7f", "\u202e", "\u2066", "\u200e", "\u061c", "\u200b",
     "\u200d", "\u2060", "\ufeff", "\x00", "\r", "\x85", "\u2028"]
)  # fmt: skip
TEXT = st.lists(
    st.one_of(UNSAFE, st.text(alphabet="abc /_", min_size=1, max_size=3)), min_size=1, max_size=5
).map("".join)


def raw_unsafe(line: str) -> list[str]:
    """Characters of ``line`` that would drive or fool a terminal, told apart by category."""
    return [char for char in line if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") and char != "\t"]


@settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=TEXT, description=TEXT, server=TEXT, key=TEXT, session=TEXT)
def test_no_printed_line_carries_an_unsafe_character(
    tmp_path: Path, name: str, description: str, server: str, key: str, session: str
) -> None:
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    record = {
        "name": f"mcp__{server.strip() or 's'}__tool{name}",
        "description": description,
        "server_name": server.strip() or "s",
        "mcp_tool_name": f"tool{name}",
        "input_schema": {"type": "object", "properties": {key: {"description": description}}},
    }
    bad = {"name": "x", "description": "d", key or "k": 1}
    results = [
        run(url, "import", "-", input=json.dumps([record, bad])),
        run(url, "import", "-", "--skip-invalid", input=json.dumps([record, bad])),
        run(url, "import", "-", input=json.dumps(record)),
    ]
    tool = str(record["name"])
    for args in (
        ("tools",), ("show", tool), ("show", name), ("stats",), ("search", f"tool {description}"),
        ("search", f"tool {description}", "--session", session or "s"), ("sessions",),
        ("session", "show", session or "s"), ("session", "show", f"x{session}"), ("explain", "tool", tool),
        ("verify",), ("remove", name),
    ):  # fmt: skip
        results.append(run(url, *args))
    for result in results:
        for line in (result.stdout + result.stderr).splitlines():
            assert raw_unsafe(line) == [], line
    if results[2].exit_code == 0:  # the record was valid and imported: piped JSON stays exact
        shown = json.loads(run(url, "show", tool, "--json").stdout)
        assert shown["input_schema"] == record["input_schema"]


def test_an_array_of_mcp_tools_says_how_to_import_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    tools = [{"name": "get", "description": "d", "inputSchema": {"type": "object"}}]
    assert fails(url, "import", "-", input=json.dumps(tools)) == (
        "Error: <stdin>:1: inputSchema: Extra inputs are not permitted; this looks like an MCP tool "
        '(inputSchema): import MCP tools as a tools/list result, {"tools": [...]}, with --server NAME; '
        "a tool record has the fields name, label, description, summary, source, server_name, "
        "mcp_tool_name, schema_keys, input_schema, load_mode, mcp_meta\n"
    )
    assert not (tmp_path / "x.db").exists()
    wrapped = json.dumps({"tools": tools})
    assert ok(url, "import", "-", "--server", "api", input=wrapped).startswith("added 1,")


def test_a_match_through_common_words_only_is_flagged_weak(db_url: str, tmp_path: Path) -> None:
    # "the" is in all four tools (idf ln 1.5), "widget" in one: only the widget tool matched more
    # than filler, and the ranking itself is unchanged (the same order as --json).
    rows = [
        {"name": "make_widget", "summary": "Build the widget."},
        *({"name": f"tool_{n}", "summary": f"Open the door number {n}."} for n in range(3)),
    ]
    catalog = tmp_path / "common.jsonl"
    catalog.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    ok(db_url, "import", str(catalog))
    output = ok(db_url, "search", "the widget", "--expanded").splitlines()
    names = [match["name"] for match in json.loads(ok(db_url, "search", "the widget", "--json"))["tools"]]
    assert [line.split()[1] for line in output[1::2]] == names
    flagged = {line.split()[1] for line in output[1::2] if line.endswith("· weak: only common words matched")}
    assert names[0] == "make_widget"
    assert flagged == {"tool_0", "tool_1", "tool_2"}
    assert "weak" not in ok(db_url, "search", "the widget", "--json")


def test_a_session_whose_discovery_is_off_says_why_and_what_to_do(demo_db: str) -> None:
    message = fails(demo_db, "search", "issue", "--session", "small")
    assert message == (
        "Error: Tool discovery is disabled. Enable tools.discoveryMode or mcp.discoveryMode to use "
        "search_tool_bm25. (session 'small' has discovery_mode auto, which is off with at most 40 "
        "registered tools; start a new session with --mode all or --mode mcp-only)\n"
    )
    assert "✔" in ok(demo_db, "search", "issue", "--session", "bigger", "--mode", "all")
