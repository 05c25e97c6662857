"""Session commands of the CLI: search --session, sessions, session show|reset|delete|import-jsonl."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from discovery import ToolIndex
from discovery._sessions.listing import prune_sessions
from store import SessionKey
from tests.test_cli import DEMO, REPO, fails, ok, run


def test_search_in_a_session_activates_and_persists(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    first = json.loads(
        ok(db_url, "search", "create an issue", "--session", "s1", "--mode", "mcp-only", "--json")
    )
    assert first["activated_tools"] and first["activated_tools"] == first["active_selected_tools"]
    second = json.loads(ok(db_url, "search", "create an issue", "--session", "s1", "--json"))
    assert not set(first["activated_tools"]) & set(second["activated_tools"])
    assert second["total_tools"] == first["total_tools"] - len(first["activated_tools"])
    shown = json.loads(ok(db_url, "session", "show", "s1", "--json"))
    assert list(shown) == [
        "id",
        "identity",
        "opened_by",
        "settings",
        "active",
        "selected",
        "calls",
        "not_in_catalog",
    ]
    assert (shown["identity"], shown["opened_by"]) == (
        "local",
        f"tool-index search on {socket.gethostname()}",
    )
    assert shown["selected"] == second["active_selected_tools"]
    searches = [call for call in shown["calls"] if call["kind"] == "search"]
    assert [call["tool"] for call in searches] == ["search_tool_bm25", "search_tool_bm25"]
    assert [call["params"]["query"] for call in searches] == ["create an issue", "create an issue"]


@contextmanager
def transactions() -> Iterator[list[str]]:
    """The kinds of the transactions begun in the block, in order: ``read`` or ``write``."""
    begun: list[str] = []

    def on_begin(connection: Any) -> None:
        options = connection.get_execution_options()
        reading = (
            options.get("sqlite_begin") == "DEFERRED" or options.get("isolation_level") == "REPEATABLE READ"
        )
        begun.append("read" if reading else "write")

    event.listen(Engine, "begin", on_begin)
    try:
        yield begun
    finally:
        event.remove(Engine, "begin", on_begin)


def test_a_session_search_is_one_write_and_one_read_after_opening(db_url: str) -> None:
    """Creating the session, searching and logging the call is one write; what the output shows
    beside the result (unknown names in the settings, weak matches) one read. Opening the index
    checks its schema first, in a read of its own."""
    ok(db_url, "import", str(DEMO))
    with transactions() as begun:
        created = run(
            db_url, "search", "create an issue", "--session", "s1", "--mode", "all", "--request", "x"
        )
    assert created.exit_code == 0 and "--request 'x' is not in the catalog" in created.stderr
    assert begun == ["read", "write", "read"]
    with transactions() as begun:
        ok(db_url, "search", "send a message", "--session", "s1")
    assert begun == ["read", "write", "read"]


def test_other_settings_for_an_existing_session_are_an_error(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    ok(db_url, "search", "note", "--session", "s1", "--mode", "mcp-only")
    assert fails(db_url, "search", "note", "--session", "s1", "--mode", "all") == (
        "Error: session 's1' exists with other settings (discovery_mode is 'mcp-only', not 'all'); "
        "resume it without settings or delete it first\n"
    )


def test_sessions_list_reset_and_delete(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    ok(db_url, "search", "calendar event", "--session", "a", "--mode", "all")
    listed = json.loads(ok(db_url, "sessions", "--json"))
    assert [(entry["id"], entry["searches"], entry["calls"]) for entry in listed] == [("a", 1, 0)]
    assert ok(db_url, "session", "reset", "a").startswith("reset a: ")
    assert json.loads(ok(db_url, "session", "show", "a", "--json"))["selected"] == []
    assert ok(db_url, "session", "delete", "a") == "deleted a\n"
    assert fails(db_url, "session", "show", "a") == "Error: no session 'a' in the store\n"
    assert ok(db_url, "sessions") == "No sessions.\n"


def test_discovery_errors_are_errors(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    assert fails(db_url, "search", "   ", "--session", "e", "--mode", "all") == (
        "Error: Query is required and must not be empty.\n"
    )
    assert fails(db_url, "search", "!!!", "--session", "e") == (
        "Error: Query must contain at least one letter or number.\n"
    )


def test_session_ids_the_store_cannot_keep_are_errors(db_url: str) -> None:
    """A session id from a byte string that is not UTF-8 arrives with lone surrogates."""
    ok(db_url, "import", str(DEMO))
    message = "Error: a session id must not contain NUL characters or lone surrogates: 'bad\\udcff'\n"
    for args in (("search", "note", "--session", "bad\udcff"), ("session", "show", "bad\udcff")):
        assert fails(db_url, *args) == message
    assert ok(db_url, "sessions") == "No sessions.\n"


def test_import_jsonl_restores_the_selection(db_url: str, tmp_path: Path) -> None:
    ok(db_url, "import", str(DEMO))
    path = tmp_path / "host.jsonl"
    entries = [
        {"id": "1", "parentId": None, "timestamp": "2026-01-01T00:00:00Z", "type": "session"},
        {"id": "2", "parentId": "1", "timestamp": "2026-01-01T00:00:01Z", "type": "mcp_tool_selection",
         "selectedToolNames": ["mcp__gitforge__create_issue", "mcp__gone__tool"]},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "discovery.cli._main",
            "--db",
            db_url,
            "session",
            "import-jsonl",
            str(path),
            "--id",
            "h",
            "--mode",
            "mcp-only",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "restored 1 selected tool into h\n"
    assert result.stderr == "warning: mcp__gone__tool is not in the catalog; skipped\n"
    shown = json.loads(ok(db_url, "session", "show", "h", "--json"))
    assert shown["selected"] == ["mcp__gitforge__create_issue"]
    assert shown["active"][-2:] == ["search_tool_bm25", "mcp__gitforge__create_issue"]


TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"


def test_sessions_and_session_show_print_a_table_and_the_log(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    found = json.loads(
        ok(
            db_url,
            "search",
            "create an issue",
            "--session",
            "s1",
            "--mode",
            "mcp-only",
            "--limit",
            "2",
            "--json",
        )
    )
    activated = found["activated_tools"]
    ok(db_url, "search", "line\nbreak \x1b[31mred", "--session", "s1", "--limit", "1")
    listed = ok(db_url, "sessions").splitlines()
    assert re.fullmatch(
        r"id +identity +mode +active +selected +searches +calls +updated +opened by", listed[0]
    )
    opener = rf"tool-index search on {re.escape(socket.gethostname())}"
    assert re.fullmatch(rf"s1 +local +mcp-only +12 +2 +2 +0 +{TIME} +{opener}", listed[1]), listed
    shown = ok(db_url, "session", "show", "s1").splitlines()
    settings = '{"discovery_mode": "mcp-only", "mcp_discovery": false, "essential_override": [], '
    rest = '"default_servers": [], "requested": [], "answer": "contract"}'
    assert shown[:2] == ["Session s1", "  identity: local"]
    assert re.fullmatch(rf"  opened by: {opener}", shown[2])
    assert shown[3] == f"  settings: {settings}{rest}"
    assert shown[4].startswith("  active (12): read, bash, ") and shown[4].endswith(", ".join(activated))
    assert shown[5:7] == [f"  selected (2): {', '.join(activated)}", "  log (3 events):"]
    assert re.fullmatch(rf"       1 {TIME} create", shown[7])
    search = rf'       2 {TIME} search search_tool_bm25 "create an issue": activated {", ".join(activated)}'
    assert re.fullmatch(search, shown[8])
    # The query's line break and escape code stay escaped: one line per event, no terminal codes.
    assert re.fullmatch(
        rf'       3 {TIME} search search_tool_bm25 "line\\nbreak \\u001b\[31mred": activated nothing',
        shown[9],
    )
    assert len(shown) == 10


def test_import_jsonl_of_a_bad_file_is_an_error_that_creates_no_session(db_url: str, tmp_path: Path) -> None:
    ok(db_url, "import", str(DEMO))
    path = tmp_path / "host.jsonl"
    path.write_text('{"id": "1"}\n{"id": "2", "parentId": "1"\n', encoding="utf-8")
    assert fails(db_url, "session", "import-jsonl", str(path), "--id", "h") == (
        f"Error: {path}:2: invalid JSON: Expecting ',' delimiter (column 28)\n"
    )
    path.write_text('{"id": "1", "type": "mcp_tool_selection", "selectedToolNames": "x"}\n', encoding="utf-8")
    assert fails(db_url, "session", "import-jsonl", str(path), "--id", "h") == (
        f"Error: {path}: entry '1': selectedToolNames must be a list of names\n"
    )
    assert ok(db_url, "sessions") == "No sessions.\n"


def test_import_jsonl_without_a_selection_in_force_says_so(db_url: str, tmp_path: Path) -> None:
    ok(db_url, "import", str(DEMO))
    path = tmp_path / "host.jsonl"
    path.write_text('{"id": "1"}\n{"id": "2", "parentId": "1", "type": "message"}\n', encoding="utf-8")
    result = run(db_url, "session", "import-jsonl", str(path), "--id", "h", "--mode", "mcp-only")
    assert result.exit_code == 0, result.output
    assert result.stderr == f"{path}: no tool selection in force; h has nothing selected\n"
    assert result.stdout == "restored 0 selected tools into h\n"
    assert json.loads(ok(db_url, "session", "show", "h", "--json"))["selected"] == []


def test_sessions_count_searches_and_tool_calls_apart(db_url: str) -> None:
    """The calls column once counted searches: 3 searches and 2 calls showed 3 calls."""
    ok(db_url, "import", str(DEMO))
    for query in ("create an issue", "send a message", "calendar event"):
        ok(db_url, "search", query, "--session", "a", "--mode", "all")
    activated = json.loads(ok(db_url, "session", "show", "a", "--json"))["selected"]
    ok(db_url, "session", "call", "a", activated[0])
    ok(db_url, "session", "call", "a", activated[0], "--failed")
    (listed,) = json.loads(ok(db_url, "sessions", "--json"))
    assert (listed["searches"], listed["calls"], listed["identity"]) == (3, 2, "local")
    table = ok(db_url, "sessions")
    assert re.search(r"a\s+local\s+all\s+\d+\s+\d+\s+3\s+2\s", table), table


def test_session_ids_are_per_identity_on_the_command_line(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    ok(db_url, "search", "create an issue", "--session", "p", "--mode", "all", "--identity", "alice")
    ok(db_url, "search", "send a message", "--session", "p", "--mode", "mcp-only", "--identity", "bob")
    listed = json.loads(ok(db_url, "sessions", "--json"))
    assert sorted(
        (entry["identity"], entry["id"], entry["settings"]["discovery_mode"]) for entry in listed
    ) == [
        ("alice", "p", "all"),
        ("bob", "p", "mcp-only"),
    ]
    alice = json.loads(ok(db_url, "session", "show", "p", "--identity", "alice", "--json"))
    bob = json.loads(ok(db_url, "session", "show", "p", "--identity", "bob", "--json"))
    searched = [[c["params"]["query"] for c in r["calls"] if c["kind"] == "search"] for r in (alice, bob)]
    assert searched == [["create an issue"], ["send a message"]]
    assert alice["selected"] != bob["selected"]
    assert fails(db_url, "session", "show", "p") == "Error: no session 'p' in the store\n"
    assert fails(db_url, "session", "show", "p", "--identity", "carol") == (
        "Error: no session 'p' of identity 'carol' in the store\n"
    )
    assert ok(db_url, "session", "delete", "p", "--identity", "bob") == "deleted p\n"
    assert [entry["identity"] for entry in json.loads(ok(db_url, "sessions", "--json"))] == ["alice"]
    assert fails(db_url, "session", "show", "p", "--identity", "") == "Error: an identity must not be blank\n"
    assert fails(db_url, "search", "note", "--session", "p", "--identity", "a\tb") == (
        "Error: an identity must be printable text: 'a\\tb'\n"
    )


def test_explain_in_a_session_gives_the_score_its_search_gives(db_url: str, tmp_path: Path) -> None:
    from discovery import ToolIndex
    from discovery._mcp.scope import GatewayScope
    from discovery._sessions.session import Session

    query, name = "create a pull request", "mcp__gitforge__create_pull_request"
    ok(db_url, "import", str(DEMO))
    ok(db_url, "search", "create an issue", "--session", "s1", "--mode", "mcp-only", "--limit", "1")
    ok(db_url, "search", "open a pull request", "--session", "s1", "--mode", "all", "--identity", "alice")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"gitforge": {"command": "true"}}}), encoding="utf-8")
    explained = {
        (identity, scoped): json.loads(
            ok(
                db_url,
                *("explain", query, name, "--session", "s1", "--identity", identity, "--json"),
                *(("--config", str(config)) if scoped else ()),
            )
        )
        for identity, scoped in (("local", False), ("local", True))
    }
    with ToolIndex.open(db_url) as index:
        for (identity, scoped), shown in explained.items():
            scope = GatewayScope(frozenset({"gitforge"})) if scoped else None
            session = Session(index.store, index.ranker, "s1", scope, identity=identity)
            (hit,) = [hit for hit in session.preview(query, limit=30) if hit.name == name]
            assert shown["score"] == hit.score
    assert explained[("local", False)]["n_docs"] == 16  # the mcp-only corpus less the active issue tool
    assert explained[("local", True)]["n_docs"] == 4  # and only gitforge's, as its gateway serves them
    # alice's s1 activated the tool itself: her session's search no longer ranks it.
    assert fails(db_url, "explain", query, name, "--session", "s1", "--identity", "alice") == (
        f"Error: {name!r} is never ranked in session 's1' of identity 'alice' (mode all): it is not "
        "discoverable there\n"
    )
    assert fails(db_url, "explain", query, name, "--session", "s2") == "Error: no session 's2' in the store\n"
    assert (
        "--config names the scope of a --session"
        in fails(db_url, "explain", query, name, "--config", str(config), code=2)
        + run(db_url, "explain", query, name, "--config", str(config)).stderr
    )


EVENT = "mcp__calendar__create_event"


def test_prune_deletes_the_sessions_idle_for_long_with_what_they_taught(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(db_url, "import", str(DEMO))
    ok(db_url, "learning", "on")
    with ToolIndex.open(db_url) as index:
        session = index.session("old", discovery_mode="all")
        session.search_tool.execute("", {"query": "calendar event"})
        session.record_call(EVENT)
        assert index.learned(EVENT).terms  # what "old" taught
        [old] = index.sessions()
        cutoff = datetime.fromisoformat(old.updated_at) + timedelta(microseconds=1)
    ok(db_url, "search", "calendar event", "--session", "old", "--mode", "all", "--identity", "alice")
    ok(db_url, "search", "calendar event", "--session", "new", "--mode", "all")

    with ToolIndex.open(db_url) as index:
        assert prune_sessions(index.store, cutoff, dry_run=True) == [SessionKey("local", "old")]
    assert ok(db_url, "session", "prune", "--idle", "30d") == "deleted 0 sessions unchanged for 30d\n"

    class Later(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Later:  # a day after the cutoff: "old" is a day idle
            return cls.fromtimestamp(cutoff.timestamp() + 86_400, tz)

    monkeypatch.setattr("discovery.cli._sessions.datetime", Later)
    assert ok(db_url, "session", "prune", "--idle", "1d", "--dry-run") == (
        "would delete 1 session unchanged for 1d\n  old (local)\n"
    )
    assert len(json.loads(ok(db_url, "sessions", "--json"))) == 3
    assert (
        ok(db_url, "session", "prune", "--idle", "24h")
        == "deleted 1 session unchanged for 24h\n  old (local)\n"
    )
    listed = json.loads(ok(db_url, "sessions", "--json"))
    assert {(entry["identity"], entry["id"]) for entry in listed} == {("alice", "old"), ("local", "new")}
    with ToolIndex.open(db_url) as index:
        assert index.learned(EVENT).terms == []  # with its log, what it taught went
    assert ok(db_url, "verify").startswith("ok: ")
    for bad in ("30", "0d", "-1d", "1w", "d", "10000000d"):
        assert fails(db_url, "session", "prune", "--idle", bad).startswith(
            f"Error: --idle '{bad}': give a whole"
        )
