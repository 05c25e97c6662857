"""The ``tool-index`` command line (contract §7): exact outputs, exit codes, and what reaches the database."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

import discovery
import discovery.cli._app
import discovery.cli._main
from discovery import ToolIndex
from discovery.cli._main import main
from discovery.cli._render import render_to_text
from store import _migrate as migrate
from store._urls import display_url, parse_url
from tests.catalogs import generated_catalog
from tests.conftest import shared_path

DEMO = Path(discovery.__file__).parent / "examples" / "demo-catalog.jsonl"
DEMO_SIZE = 26
REPO = Path(__file__).resolve().parent.parent
CREATE_ONE = (
    "create one with tool-index import PATH (tool-index import --example imports a small demo catalog)"
)
EMPTY_CATALOG = (
    "The catalog is empty: add tools with tool-index import PATH (or tool-index import --example)."
)


def run(
    db_url: str, *args: str, input: str | bytes | None = None, env: dict[str, str | None] | None = None
) -> Result:
    """The CLI in process, with stdout and stderr apart; an unexpected exception fails the test.

    ``COLUMNS`` is unset (pytest-xdist sets it), so piped output has its stable 120 columns."""
    return CliRunner(env={"COLUMNS": None, **(env or {})}).invoke(
        main, ["--db", db_url, *args], input=input, catch_exceptions=False, prog_name="tool-index"
    )


def ok(db_url: str, *args: str, input: str | None = None) -> str:
    result = run(db_url, *args, input=input)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    return result.stdout


def fails(db_url: str, *args: str, input: str | None = None, code: int = 1) -> str:
    result = run(db_url, *args, input=input)
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    return result.stderr


def stats(db_url: str) -> dict[str, Any]:
    with ToolIndex.open(db_url) as index:
        return index.stats()


def records(db_url: str) -> dict[str, dict[str, Any]]:
    with ToolIndex.open(db_url) as index:
        return {tool.name: tool.as_record() for tool in index.tools()}


def demo_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def demo_db(db_url: str) -> str:
    """A database holding the demo catalog."""
    ok(db_url, "import", str(DEMO))
    return db_url


# import ---------------------------------------------------------------------------------------


def test_import_twice_rewrites_nothing(db_url: str) -> None:
    assert ok(db_url, "import", str(DEMO)) == f"added {DEMO_SIZE}, updated 0, unchanged 0, removed 0\n"
    before = stats(db_url)
    assert ok(db_url, "import", str(DEMO)) == f"added 0, updated 0, unchanged {DEMO_SIZE}, removed 0\n"
    assert stats(db_url) == before


def test_real_catalog_import_is_idempotent_and_both_formats_agree(db_url: str) -> None:
    catalog = shared_path("data/mcp-catalog.jsonl")
    tools_lists = sorted(str(p) for p in shared_path("data/mcp-tools-list").glob("*.json"))
    assert ok(db_url, "import", str(catalog)) == "added 757, updated 0, unchanged 0, removed 0\n"
    before, stored = stats(db_url), records(db_url)
    assert ok(db_url, "import", str(catalog)) == "added 0, updated 0, unchanged 757, removed 0\n"
    # The tools/list files (server = file stem) give the very same records: nothing to rewrite.
    assert ok(db_url, "import", "--replace", *tools_lists) == "added 0, updated 0, unchanged 757, removed 0\n"
    assert stats(db_url) == before
    assert records(db_url) == stored


def test_a_changed_record_is_updated(demo_db: str, tmp_path: Path) -> None:
    changed = write_jsonl(tmp_path / "c.jsonl", [{"name": "find", "description": "Find files by glob"}])
    assert ok(demo_db, "import", str(changed)) == "added 0, updated 1, unchanged 0, removed 0\n"
    assert records(demo_db)["find"]["description"] == "Find files by glob"


def test_replace_with_server_syncs_only_that_server(demo_db: str, tmp_path: Path) -> None:
    post = next(row for row in demo_lines() if row["name"] == "mcp__chatops__post_message")
    tools_list = {
        "tools": [
            {"name": "post_message", "description": post["description"], "inputSchema": post["input_schema"]},
            {
                "name": "archive_channel",
                "description": "Archive a channel",
                "inputSchema": {"type": "object"},
            },
        ]
    }
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(tools_list), encoding="utf-8")
    output = ok(demo_db, "import", str(path), "--server", "chatops", "--replace")
    assert output == "added 1, updated 0, unchanged 1, removed 2\n"
    names = set(records(demo_db))
    assert {name for name in names if name.startswith("mcp__chatops__")} == {
        "mcp__chatops__post_message",
        "mcp__chatops__archive_channel",
    }
    assert len(names) == DEMO_SIZE - 1
    assert "mcp__gitforge__create_issue" in names


def test_replace_without_server_replaces_the_catalog(demo_db: str, tmp_path: Path) -> None:
    keep = write_jsonl(
        tmp_path / "keep.jsonl", [row for row in demo_lines() if row["name"] in ("find", "grep")]
    )
    assert (
        ok(demo_db, "import", "--replace", str(keep))
        == f"added 0, updated 0, unchanged 2, removed {DEMO_SIZE - 2}\n"
    )
    assert sorted(records(demo_db)) == ["find", "grep"]


def test_a_bad_record_writes_nothing(demo_db: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"name": "find", "description": "changed"}, {"name": ""}])
    before = stats(demo_db)
    assert fails(demo_db, "import", str(path)) == (
        f"Error: {path}:2: name: String should have at least 1 character\n"
    )
    assert stats(demo_db) == before
    assert records(demo_db)["find"]["description"] != "changed"


def test_a_bad_record_in_a_json_array_names_its_line(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"name": "a"},\n  {"name": "b",\n   "source": "cloud"}\n]\n', encoding="utf-8")
    assert fails(db_url, "import", str(path)) == (
        f"Error: {path}:3: source: Input should be 'builtin', 'mcp', 'extension' or 'custom'\n"
    )
    assert stats(db_url)["tools"] == 0


def test_records_of_another_server_than_server_are_refused(demo_db: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"name": "mcp__a__x", "server_name": "a", "source": "mcp"}])
    before = stats(demo_db)
    assert fails(demo_db, "import", str(path), "--server", "b") == (
        f"Error: {path}:1: server_name is 'a', not --server 'b'\n"
    )
    assert stats(demo_db) == before


def test_non_json_numbers_and_too_deep_schemas_are_refused(db_url: str, tmp_path: Path) -> None:
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"name": "x", "description": NaN}\n', encoding="utf-8")
    assert fails(db_url, "import", str(nan)) == f"Error: {nan}: invalid JSON: NaN is not valid JSON\n"
    schema: dict[str, Any] = {}
    for _ in range(130):
        schema = {"a": schema}
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps({"tools": [{"name": "ok"}, {"name": "deep", "inputSchema": schema}]}))
    assert fails(db_url, "import", str(deep), "--server", "s") == (
        f"Error: {deep}:1: nested deeper than 128 levels\n"
    )
    assert stats(db_url)["tools"] == 0


def test_skip_invalid_warns_and_keeps_going(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"name": "a"}\n{"name": "b", "colour": "red"}\nnot json\n{"name": "c"}\n', encoding="utf-8"
    )
    result = run(db_url, "import", "--skip-invalid", str(path))
    assert result.exit_code == 0
    assert result.stdout == "added 2, updated 0, unchanged 0, removed 0, skipped 2\n"
    assert result.stderr == (
        f"Warning: skipped {path}:2: colour: Extra inputs are not permitted\n"
        f"Warning: skipped {path}:3: invalid JSON: Expecting value (column 1)\n"
    )
    assert sorted(records(db_url)) == ["a", "c"]


def test_skip_invalid_with_replace_refuses_to_remove_skipped_tools(demo_db: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mixed.jsonl", [{"name": "find"}, {"name": 5}])
    result = run(demo_db, "import", "--skip-invalid", "--replace", str(path))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Warning: skipped {path}:2: name: Input should be a valid string\n"
        "Error: 1 invalid records: --replace would remove their tools; fix them or import without --replace\n"
    )
    assert len(records(demo_db)) == DEMO_SIZE


def test_import_from_stdin(db_url: str) -> None:
    jsonl = '{"name": "read"}\n{"name": "bash"}\n'
    assert ok(db_url, "import", "-", input=jsonl) == "added 2, updated 0, unchanged 0, removed 0\n"
    tools_list = json.dumps({"tools": [{"name": "create_issue", "inputSchema": {"type": "object"}}]})
    assert ok(db_url, "import", "-", "--server", "gh", input=tools_list) == (
        "added 1, updated 0, unchanged 0, removed 0\n"
    )
    assert records(db_url)["mcp__gh__create_issue"]["label"] == "gh/create_issue"
    assert fails(db_url, "import", "-", input=tools_list) == (
        "Error: <stdin>: an MCP tools/list result needs --server NAME\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "",
            "Error: {path}: empty file; expected a JSON array or JSON lines of tool records, "
            'or an MCP tools/list result {{"tools": [...]}}\n',
        ),
        ('{"a": 1,\n "b": }', "Error: {path}:2: invalid JSON: Expecting value (column 7)\n"),
        ("[" * 50_000 + "]" * 50_000, "Error: {path}: JSON nested too deeply\n"),
    ],
    ids=["empty", "invalid-json", "deep"],
)
def test_files_that_are_not_catalogs(db_url: str, tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content, encoding="utf-8")
    assert fails(db_url, "import", str(path)) == message.format(path=path)


def test_import_arguments_are_checked(db_url: str, tmp_path: Path) -> None:
    assert fails(db_url, "import", "missing.json", code=2) == (
        "Usage: tool-index import [OPTIONS] PATH...\n"
        "Try 'tool-index import --help' for help.\n"
        "\n"
        "Error: Invalid value for 'PATH...': File 'missing.json' does not exist.\n"
    )
    assert "Error: give at least one PATH, or --example" in fails(db_url, "import", code=2)
    assert "is a directory" in fails(db_url, "import", str(tmp_path), code=2)


def test_progress_bar_on_a_terminal_leaves_stdout_alone(db_url: str, tmp_path: Path) -> None:
    """An import of thousands of tools, its stderr a terminal and its stdout a pipe: the bar is
    drawn on the terminal, stdout holds the summary alone."""
    catalog = tmp_path / "many.jsonl"
    catalog.write_text("".join(json.dumps(record) + "\n" for record in generated_catalog(2000)))
    controller, terminal = pty.openpty()
    drawn = bytearray()

    def read_terminal() -> None:  # drained all along, so the child never blocks on a full terminal
        with contextlib.suppress(OSError):  # EIO once the child's side is closed
            while chunk := os.read(controller, 65536):
                drawn.extend(chunk)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "discovery.cli._main", "--db", db_url, "import", str(catalog)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            cwd=REPO,
            env={**os.environ, "TERM": "xterm"},
            timeout=120,
            check=False,
        )
    finally:
        os.close(terminal)
        reader.join(timeout=60)
        os.close(controller)
    assert (process.returncode, process.stdout) == (0, "added 2000, updated 0, unchanged 0, removed 0\n")
    assert b"Indexing tools" in drawn or b"Writing to the database" in drawn, bytes(drawn)


def test_no_progress_bar_when_piped_or_small() -> None:
    with discovery.cli._app.progress_bar(10_000) as advance:
        assert advance is None  # pytest's stderr is not a terminal


# search ---------------------------------------------------------------------------------------


def test_search_json_on_the_real_catalog(db_url: str) -> None:
    ok(db_url, "import", str(shared_path("data/mcp-catalog.jsonl")))
    details = json.loads(ok(db_url, "search", "  create a pull request ", "--limit", "5", "--json"))
    assert list(details) == [
        "query",
        "limit",
        "total_tools",
        "activated_tools",
        "active_selected_tools",
        "tools",
    ]
    assert details["query"] == "create a pull request"
    assert (details["limit"], details["total_tools"]) == (5, 757)
    assert details["activated_tools"] == details["active_selected_tools"] == []
    assert len(details["tools"]) == 5
    top = details["tools"][0]
    assert list(top) == [
        "name",
        "label",
        "description",
        "server_name",
        "mcp_tool_name",
        "schema_keys",
        "score",
    ]
    assert top["name"] == "mcp__github__create_pull_request"
    assert (top["label"], top["server_name"], top["mcp_tool_name"]) == (
        "github/create_pull_request",
        "github",
        "create_pull_request",
    )
    assert top["score"] == round(top["score"], 6)
    scores = [tool["score"] for tool in details["tools"]]
    assert scores == sorted(scores, reverse=True)


def test_search_json_of_a_built_in_has_no_server_fields(demo_db: str) -> None:
    details = json.loads(ok(demo_db, "search", "find files matching a glob", "--limit", "1", "--json"))
    assert details["total_tools"] == DEMO_SIZE - 4  # read, bash, edit, write are essential
    (top,) = details["tools"]
    assert list(top) == ["name", "label", "description", "schema_keys", "score"]
    assert (top["name"], top["schema_keys"]) == ("find", ["path", "pattern"])


def test_search_mcp_only(demo_db: str) -> None:
    details = json.loads(ok(demo_db, "search", "find files", "--mode", "mcp-only", "--json"))
    assert details["total_tools"] == 17
    assert all(tool["name"].startswith("mcp__") for tool in details["tools"])


def test_search_for_people_is_the_shared_rendering(demo_db: str) -> None:
    details = json.loads(ok(demo_db, "search", "create a pull request", "--json"))
    output = ok(demo_db, "search", "create a pull request")
    assert output == render_to_text(details, width=120)
    assert (
        output.splitlines()[0]
        == "✔ Tool Discovery  create a pull request  8 matches · 0 active · 22 total · limit:8"
    )
    assert output.splitlines()[1] == "├── gitforge/create_pull_request  gitforge · score " + (
        f"{details['tools'][0]['score']:.3f}"
    )
    assert output.endswith("└── … 3 more tools (--expanded shows them)\n")
    # The last three share only "a" with the query: the display flags them, the ranking stays.
    weak = {
        "mcp__chatops__post_message",
        "mcp__gitforge__get_file_contents",
        "mcp__warehouse__describe_table",
    }
    assert {match["name"] for match in details["tools"][-3:]} == weak
    assert ok(demo_db, "search", "create a pull request", "--expanded") == render_to_text(
        details, width=120, expanded=True, weak=weak
    )


def test_search_empty_catalog_and_no_match(db_url: str, demo_db: str) -> None:
    assert "No matching tools found." in ok(demo_db, "search", "zzzz")


def test_search_of_an_empty_catalog(db_url: str) -> None:
    ToolIndex.open(db_url).close()
    output = ok(db_url, "search", "anything")
    assert "No discoverable tools are currently loaded." in output
    assert output.endswith(f"\n{EMPTY_CATALOG}\n")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "Error: Query is required and must not be empty.\n"),
        (" \t ", "Error: Query is required and must not be empty.\n"),
        ("!!! ---", "Error: Query must contain at least one letter or number.\n"),
    ],
)
def test_search_query_errors(demo_db: str, query: str, message: str) -> None:
    assert fails(demo_db, "search", query) == message


@pytest.mark.parametrize("limit", ["0", "-1", "1.5", "abc", "nan"])
def test_search_limit_must_be_a_positive_integer(demo_db: str, limit: str) -> None:
    assert "Invalid value for '--limit'" in fails(demo_db, "search", "x", "--limit", limit, code=2)


def test_search_huge_limit_and_sql_metacharacters(demo_db: str) -> None:
    details = json.loads(
        ok(demo_db, "search", "'; DROP TABLE tools; -- issue", "--limit", str(10**30), "--json")
    )
    assert details["limit"] == 10**30
    assert details["tools"][0]["name"] == "mcp__gitforge__create_issue"
    assert len(records(demo_db)) == DEMO_SIZE


def test_search_mode_is_checked(demo_db: str) -> None:
    assert "Invalid value for '--mode'" in fails(demo_db, "search", "x", "--mode", "off", code=2)


# tools, show, remove, stats -------------------------------------------------------------------


def test_tools_table(demo_db: str) -> None:
    lines = ok(demo_db, "tools").splitlines()
    assert lines[0].split() == ["name", "source", "server", "summary"]
    assert len(lines) == 1 + DEMO_SIZE
    assert lines[1].split()[:2] == ["read", "builtin"]
    assert all(len(line) <= 120 for line in lines)
    chat = ok(demo_db, "tools", "--server", "chatops").splitlines()
    assert [line.split()[0] for line in chat[1:]] == [
        "mcp__chatops__post_message",
        "mcp__chatops__list_channels",
        "mcp__chatops__search_messages",
    ]
    assert len(ok(demo_db, "tools", "--source", "builtin").splitlines()) == 1 + 9
    assert ok(demo_db, "tools", "--server", "nope") == "No tools match.\n"


def test_tools_of_an_empty_catalog(db_url: str) -> None:
    ToolIndex.open(db_url).close()
    assert ok(db_url, "tools") == f"{EMPTY_CATALOG}\n"
    assert ok(db_url, "tools", "--json") == "[]\n"


def test_tools_json_imports_back_to_the_same_catalog(demo_db: str, tmp_path: Path) -> None:
    exported = tmp_path / "export.json"
    exported.write_text(ok(demo_db, "tools", "--json"), encoding="utf-8")
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    assert ok(copy, "import", str(exported)) == f"added {DEMO_SIZE}, updated 0, unchanged 0, removed 0\n"
    assert records(copy) == records(demo_db)
    assert ok(demo_db, "import", str(exported)) == f"added 0, updated 0, unchanged {DEMO_SIZE}, removed 0\n"


def test_show(demo_db: str) -> None:
    record = json.loads(ok(demo_db, "show", "mcp__gitforge__create_issue", "--json"))
    assert record == records(demo_db)["mcp__gitforge__create_issue"]
    assert record["input_schema"]["required"] == ["owner", "repo", "title"]
    text_output = ok(demo_db, "show", "mcp__gitforge__create_issue")
    assert text_output.startswith(
        "name:          mcp__gitforge__create_issue\nlabel:         gitforge/create_issue\n"
    )
    assert "schema_keys:   body, labels, owner, repo, title\n" in text_output
    assert '  "required": [\n' in text_output
    assert fails(demo_db, "show", "nope") == "Error: no tool named 'nope' in the catalog\n"


def test_show_escapes_control_characters(db_url: str) -> None:
    ok(db_url, "import", "-", input=json.dumps({"name": "evil", "description": "a\x1b[31mred\x07"}))
    assert "description:\n  a\\u001b[31mred\\u0007\n" in ok(db_url, "show", "evil")


def test_remove(demo_db: str) -> None:
    assert ok(demo_db, "remove", "find", "grep") == "removed 2\n"
    assert len(records(demo_db)) == DEMO_SIZE - 2
    assert fails(demo_db, "remove", "ls", "nope", "grep") == (
        "Error: not in the catalog: 'nope', 'grep'; nothing removed\n"
    )
    assert "ls" in records(demo_db)


def test_stats(demo_db: str) -> None:
    summary = json.loads(ok(demo_db, "stats", "--json"))
    assert summary["tools"] == DEMO_SIZE
    assert summary["sources"] == {"builtin": 9, "mcp": 17}
    assert summary["servers"] == {"calendar": 3, "chatops": 3, "gitforge": 5, "notes": 3, "warehouse": 3}
    lines = ok(demo_db, "stats").splitlines()
    assert lines[1] == f"tools:      {DEMO_SIZE}"
    assert "  gitforge   5" in lines


# explain, verify ------------------------------------------------------------------------------


def test_explain_gives_the_search_score(demo_db: str) -> None:
    details = json.loads(ok(demo_db, "search", "create a pull request", "--limit", "1", "--json"))
    explained = json.loads(
        ok(demo_db, "explain", "create a pull request", "mcp__gitforge__create_pull_request", "--json")
    )
    assert explained["score6"] == details["tools"][0]["score"]
    assert [term["term"] for term in explained["terms"]] == ["create", "a", "pull", "request"]
    lines = ok(demo_db, "explain", "create a pull request", "mcp__gitforge__create_pull_request").splitlines()
    assert lines[0] == f"mcp__gitforge__create_pull_request  score {details['tools'][0]['score']}  (mode all)"
    assert lines[2].split() == ["term", "/", "field", "qtf", "df", "idf", "tf", "score"]
    assert lines[4].split()[:2] == ["name", "×6"]


def test_explain_errors(demo_db: str) -> None:
    assert fails(demo_db, "explain", " ", "find") == "Error: Query is required and must not be empty.\n"
    assert fails(demo_db, "explain", "x", "nope") == "Error: no tool named 'nope' in the catalog\n"
    assert fails(demo_db, "explain", "read", "read") == (
        "Error: 'read' is never ranked in mode 'all': it is not discoverable there\n"
    )


def test_verify(demo_db: str) -> None:
    assert ok(demo_db, "verify").startswith(f"ok: checked {DEMO_SIZE} tools, ")
    engine = create_engine(parse_url(demo_db))
    with engine.begin() as connection:
        connection.execute(text("UPDATE group_stats SET doc_count = doc_count + 1"))
    engine.dispose()
    result = run(demo_db, "verify")
    assert result.exit_code == 1
    assert result.stdout != ""
    assert result.stderr.startswith("Error: the index disagrees with its tool records: ")


# databases --------------------------------------------------------------------------------------


def test_db_commands(empty_db_url: str) -> None:
    head = migrate.head_revision()
    assert ok(empty_db_url, "db", "upgrade") == f"upgraded an empty database to {head} (head)\n"
    assert ok(empty_db_url, "db", "upgrade") == f"already at head {head}\n"
    assert ok(empty_db_url, "db", "current") == f"{head} (head)\n"
    assert ok(empty_db_url, "db", "check") == f"ok: {head} (head), the schema matches the models\n"


def test_db_commands_on_an_older_schema(empty_db_url: str) -> None:
    head = migrate.head_revision()
    older = ScriptDirectory.from_config(migrate.alembic_config()).get_revision(head).down_revision
    assert isinstance(older, str)
    engine = create_engine(parse_url(empty_db_url))
    migrate.upgrade(engine, older)
    engine.dispose()
    assert ok(empty_db_url, "db", "current") == f"{older} (behind head {head}: run `tool-index db upgrade`)\n"
    assert (
        fails(empty_db_url, "db", "check")
        == f"Error: the schema is at {older}, head is {head}: run `tool-index db upgrade`\n"
    )
    assert ok(empty_db_url, "db", "upgrade") == f"upgraded {older} to {head} (head)\n"
    assert ok(empty_db_url, "db", "check") == f"ok: {head} (head), the schema matches the models\n"


def test_db_check_names_each_difference_from_the_models(empty_db_url: str) -> None:
    ok(empty_db_url, "db", "upgrade")
    engine = create_engine(parse_url(empty_db_url))
    with engine.begin() as connection:
        connection.execute(text("DROP INDEX ix_tools_server_name"))
    engine.dispose()
    head = migrate.head_revision()
    assert fails(empty_db_url, "db", "check") == (
        f"Error: the schema at {head} differs from the models: "
        "the database lacks index ix_tools_server_name on tools\n"
    )


def test_db_commands_on_a_missing_file_create_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    url = f"sqlite:///{path}"
    for command in ("current", "check"):
        assert fails(url, "db", command) == f"Error: no tool-index database at {path}; {CREATE_ONE}\n"
    assert not path.exists()


def set_revision(db_url: str, revision: str) -> None:
    engine = create_engine(parse_url(db_url))
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :rev"), {"rev": revision})
    engine.dispose()


def test_a_database_from_a_newer_tool_index(demo_db: str) -> None:
    set_revision(demo_db, "ffff_future")
    head = migrate.head_revision()
    message = fails(demo_db, "stats")
    assert message.startswith(
        "Error: the database schema is at revision ffff_future, newer than this tool-index"
    )
    assert (
        ok(demo_db, "db", "current")
        == f"ffff_future (unknown: newer than this tool-index, whose head is {head})\n"
    )
    assert (
        fails(demo_db, "db", "check")
        == f"Error: the schema is at ffff_future, head is {head}: upgrade tool-index\n"
    )


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    garbage = bytes(range(256)) * 64
    path.write_bytes(garbage)
    url = f"sqlite:///{path}"
    expected = (
        f"Error: {url} is not a usable SQLite database (file is not a database); point --db at another file\n"
    )
    for args in (["stats"], ["search", "x"], ["import", str(DEMO)], ["db", "current"], ["db", "upgrade"]):
        assert fails(url, *args) == expected, args
    assert path.read_bytes() == garbage


def test_passwords_are_never_shown() -> None:
    stderr = fails("postgresql://user:s3cret@127.0.0.1:1/tools", "stats")
    assert stderr.startswith("Error: cannot reach postgresql+psycopg://user:***@127.0.0.1:1/tools")
    assert "s3cret" not in stderr


def test_database_from_the_environment(demo_db: str) -> None:
    result = CliRunner(env={"TOOL_INDEX_DB": demo_db}).invoke(
        main, ["stats", "--json"], catch_exceptions=False
    )
    assert json.loads(result.stdout)["tools"] == DEMO_SIZE


def test_the_example_goes_into_a_database_of_its_own(tmp_path: Path) -> None:
    """Without --db or TOOL_INDEX_DB, the made-up tools never reach the default database, the one
    sync and serve fill with a user's servers; a named database takes them as asked."""
    data = tmp_path / "data"
    env = {"XDG_DATA_HOME": str(data), "TOOL_INDEX_DB": None, "COLUMNS": None}
    result = CliRunner(env=env).invoke(main, ["import", "--example"], catch_exceptions=False)
    example_db = data / "tool-index" / "example.db"
    assert (result.exit_code, result.stdout) == (0, f"added {DEMO_SIZE}, updated 0, unchanged 0, removed 0\n")
    assert result.stderr == (
        f"The example is in a database of its own: tool-index --db sqlite:///{example_db} search QUERY\n"
    )
    assert example_db.exists() and not (data / "tool-index" / "tool-index.db").exists()
    named = tmp_path / "named.db"
    result = CliRunner(env={**env, "TOOL_INDEX_DB": str(named)}).invoke(
        main, ["import", "--example"], catch_exceptions=False
    )
    assert (result.exit_code, result.stderr) == (0, "")
    assert named.exists()


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"tool-index, version {version('tool-index')}\n")


# a real process ---------------------------------------------------------------------------------


def cli_process(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "discovery.cli._main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_a_real_process(db_url: str) -> None:
    imported = cli_process("--db", db_url, "import", "-", stdin=DEMO.read_text(encoding="utf-8"))
    assert (imported.returncode, imported.stdout, imported.stderr) == (
        0,
        f"added {DEMO_SIZE}, updated 0, unchanged 0, removed 0\n",
        "",
    )
    searched = cli_process("--db", db_url, "search", "post a chat message", "--json")
    assert searched.returncode == 0
    assert json.loads(searched.stdout)["tools"][0]["name"] == "mcp__chatops__post_message"
    failed = cli_process("--db", db_url, "search", "   ")
    assert (failed.returncode, failed.stdout, failed.stderr) == (
        1,
        "",
        "Error: Query is required and must not be empty.\n",
    )
    usage = cli_process("--db", db_url, "search", "x", "--limit", "0")
    assert usage.returncode == 2
    assert "Traceback" not in usage.stderr


def test_the_installed_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "tool-index"
    if not script.exists():
        pytest.skip("tool-index is not installed next to this interpreter")
    garbage = tmp_path / "x.db"
    garbage.write_bytes(b"not a database at all" * 100)
    done = subprocess.run(
        [str(script), "--db", str(garbage), "stats"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: sqlite:///{garbage} is not a usable SQLite database")
    assert "Traceback" not in done.stderr


def test_a_read_only_database(sqlite_url: str) -> None:
    ok(sqlite_url, "import", str(DEMO))
    path = Path(parse_url(sqlite_url).database or "")
    before = path.read_bytes()
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    stderr = fails(read_only, "remove", "read")
    assert stderr.startswith(f"Error: {display_url(read_only)} is read-only (") and stderr.count("\n") == 1
    assert stderr.endswith("; use a writable file or server for changes\n")
    assert "gitforge/create_pull_request" in ok(read_only, "search", "open a pull request")
    assert path.read_bytes() == before
