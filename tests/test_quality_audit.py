"""``tool-index audit`` on a small catalog with a planted unfindable tool and a planted hub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from discovery import ToolIndex
from discovery._quality.audit import audit, probes_of
from discovery.cli._main import main

UNFINDABLE = "mcp__legacy_enterprise_integration_platform_gateway__issue"
HUB = "mcp__kitchen__sink"


def tool(server: str, name: str, summary: str, keys: list[str]) -> dict[str, Any]:
    return {
        "name": f"mcp__{server}__{name}",
        "label": f"{server}/{name}",
        "description": summary,
        "server_name": server,
        "mcp_tool_name": name,
        "schema_keys": keys,
    }


CATALOG = [
    tool("github", "create_issue", "Create an issue in a repository", ["owner", "repo", "title"]),
    tool("github", "list_pull_requests", "List pull requests of a repository", ["owner", "repo", "state"]),
    tool("jira", "get_issue", "Get one issue by key", ["key"]),
    tool("slack", "post_message", "Post a message to a channel", ["channel", "text"]),
    tool("calendar", "create_event", "Create a calendar event", ["start", "end", "title"]),
    tool("weather", "get_forecast", "Weather forecast for a city", ["city", "days"]),
    tool("files", "read_file", "Read a text file from disk", ["path"]),
    tool("files", "write_file", "Write text to a file on disk", ["path", "content"]),
    tool("notes", "search_notes", "Search notes by keyword", ["query"]),
    tool("maps", "route", "Driving directions between two places", ["origin", "destination"]),
    tool("mail", "send_email", "Send an email message", ["to", "subject", "body"]),
    # The hub: every capability's words in one short record.
    tool(
        "kitchen",
        "sink",
        "Create list post read write search send get route: issue message event file note email forecast",
        ["title", "text", "path", "query", "city", "owner", "repo", "channel", "body"],
    ),
    # Unfindable: asked for only by `issue`, which shorter tools hold as strongly; its long
    # server name makes it the longest document, and it has no summary or parameters to help.
    tool("legacy_enterprise_integration_platform_gateway", "issue", "", []),
    # Essential and internal names are never searched, so never probed.
    {"name": "read", "description": "Read a file"},
    {"name": "resolve", "description": "Resolve a hidden tool"},
    {"name": "notes_local", "description": "Local notes", "load_mode": "none"},
]


@pytest.fixture
def catalog_url(sqlite_db_url: str) -> str:
    with ToolIndex.open(sqlite_db_url) as index:
        index.upsert_tools(CATALOG)
    return sqlite_db_url


def test_without_the_planted_hub_no_tool_is_a_hub_by_chance(sqlite_db_url: str) -> None:
    """Each tool's probes fill k places: in a small catalog every tool is in the first k for
    a fair share of the others' probes (by 5% of them alone, 8 of these 12 were hubs at k 5)."""
    with ToolIndex.open(sqlite_db_url) as index:
        index.upsert_tools([entry for entry in CATALOG if entry["name"] != HUB])
        report = audit(index, k=5)
    assert report.tools == 12 and report.hubs == []


def test_the_planted_unfindable_tool_and_hub_are_found(catalog_url: str) -> None:
    with ToolIndex.open(catalog_url) as index:
        report = audit(index, k=2)
    assert (report.tools, report.k, report.mode) == (13, 2, "all")
    [unfindable] = report.unfindable
    assert unfindable.name == UNFINDABLE
    assert [(probe.kind, probe.query) for probe in unfindable.probes] == [("name", "issue")]
    assert unfindable.common_terms == [("issue", 3)]  # create_issue, get_issue and the hub have it
    assert {name for name, _ in unfindable.crowded_by} == {
        "mcp__jira__get_issue",
        "mcp__github__create_issue",
    }
    hub = report.hubs[0]
    assert hub.name == HUB
    assert hub.tools_reached == max(other.tools_reached for other in report.hubs)
    assert hub.tools_reached >= 10  # nearly every other tool's probes
    sink = CATALOG[11]
    own_words = set(f"{sink['description']} {' '.join(sink['schema_keys'])}".lower().replace(":", "").split())
    assert {term for term, _ in hub.terms} <= own_words
    assert hub.terms[0][1] >= 3  # its most responsible term was in the probes of three tools or more


def test_with_a_larger_cutoff_the_planted_tool_is_found(catalog_url: str) -> None:
    with ToolIndex.open(catalog_url) as index:
        assert audit(index, k=3).unfindable == []


def test_mcp_only_probes_only_mcp_tools(catalog_url: str) -> None:
    with ToolIndex.open(catalog_url) as index:
        assert audit(index, k=2, mode="mcp-only").tools == 13
        assert audit(index, k=2, mode="all").probes == audit(index, k=2, mode="mcp-only").probes


def test_probes_are_the_tools_own_words(catalog_url: str) -> None:
    with ToolIndex.open(catalog_url) as index:
        [stored] = [t for t in index.tools() if t.name == "mcp__github__create_issue"]
    assert [(probe.kind, probe.query) for probe in probes_of(stored)] == [
        ("name", "create issue"),
        ("summary", "Create an issue in a repository"),
        ("parameters", "owner repo title"),
    ]


def run(db_url: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["--db", db_url, *args], catch_exceptions=False, prog_name="tool-index")
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    return result.stdout


def test_json_report(catalog_url: str) -> None:
    report = json.loads(run(catalog_url, "audit", "--k", "2", "--json"))
    assert list(report) == ["k", "mode", "tools", "probes", "unfindable", "hubs", "learning"]
    assert report["learning"] == []  # nothing learned: no alarm
    assert report["unfindable"][0] == {
        "name": UNFINDABLE,
        "probes": [{"kind": "name", "query": "issue"}],
        "common_terms": [{"term": "issue", "tools": 3}],
        "crowded_by": report["unfindable"][0]["crowded_by"],
    }
    assert report["hubs"][0]["name"] == HUB


def test_piped_output_is_plain_text(catalog_url: str) -> None:
    lines = run(catalog_url, "audit", "--k", "2").splitlines()
    assert lines[0].startswith("13 tools, ")
    assert lines[0].endswith("top 2, mode all: 1 unfindable, 2 hubs, 0 learning alarms")
    assert f"  {UNFINDABLE}" in lines
    assert "    shared terms: issue ×3" in lines
    assert any(line.startswith(f"  {HUB}  ") for line in lines)
    assert not any(char in "".join(lines) for char in "┃│━─")


def test_a_terminal_gets_tables(catalog_url: str, tmp_path: Path) -> None:
    """A real pseudo-terminal, so the command sees a tty on stdout."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    script = "from discovery.cli._main import main; main(prog_name='tool-index')"
    done = subprocess.run(
        [sys.executable, "-c", script, "--db", catalog_url, "audit", "--k", "2"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "160", "TERM": "xterm"},
        check=True,
        timeout=60,
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    text = output.decode()
    assert done.stderr == b""
    assert "Unfindable" in text and "Hubs" in text
    assert "━" in text or "─" in text
    assert UNFINDABLE in text


def test_an_enhanced_index_names_its_own_terms(tmp_path: Path) -> None:
    """The terms responsible are the ones the index matched: stems, and no dropped stop word."""
    from discovery._text import enhanced

    with ToolIndex.open(f"sqlite:///{tmp_path / 'enhanced.db'}", analyzer="enhanced") as index:
        index.upsert_tools(CATALOG)
        report = audit(index, k=2)
    hub = next(hub for hub in report.hubs if hub.name == HUB)
    sink = CATALOG[11]
    stems = {
        term
        for text in [sink["name"], sink["label"], sink["description"], *sink["schema_keys"]]
        for term in enhanced.document_tokens(text)
    }
    assert {term for term, _ in hub.terms} <= stems
    assert "issu" in {term for term, _ in hub.terms}  # the stem, where the reference says "issue"
    every_term = {term for hub in report.hubs for term, _ in hub.terms} | {
        term for tool in report.unfindable for term, _ in tool.common_terms
    }
    assert every_term
    assert not every_term & {"a", "an", "the", "to", "of", "in", "by", "on", "for"}
