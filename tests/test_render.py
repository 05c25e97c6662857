"""Rendering a ``search_tool_bm25`` result for people (contract §6)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import wcwidth
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from discovery.cli._render import render_result, render_to_text, truncate

CREATE_ISSUE: dict[str, Any] = {
    "name": "mcp__github_create_issue",
    "label": "github/create_issue",
    "description": "Create a GitHub issue in the selected repository",
    "server_name": "github",
    "mcp_tool_name": "create_issue",
    "schema_keys": ["body", "owner", "repo", "title"],
    "score": 1.410324,
}
LIST_PULL_REQUESTS: dict[str, Any] = {
    "name": "mcp__github_list_pull_requests",
    "label": "github/list_pull_requests",
    "description": "List pull requests for a repository",
    "server_name": "github",
    "mcp_tool_name": "list_pull_requests",
    "schema_keys": ["owner", "repo", "state"],
    "score": 1.403799,
}
POST_MESSAGE: dict[str, Any] = {
    "name": "mcp__slack_post_message",
    "label": "slack/post_message",
    "description": "Post a message to a Slack channel",
    "server_name": "slack",
    "mcp_tool_name": "post_message",
    "schema_keys": ["channel", "text"],
    "score": 4.224378,
}


def details(
    tools: list[dict[str, Any]],
    *,
    query: str = "github",
    limit: int = 8,
    total_tools: int = 3,
    active: list[str] | None = None,
) -> dict[str, Any]:
    """A details dict as ``search_tool_bm25`` returns it; by default every match activated."""
    names = [tool["name"] for tool in tools]
    return {
        "query": query,
        "limit": limit,
        "total_tools": total_tools,
        "activated_tools": names,
        "active_selected_tools": names if active is None else active,
        "tools": tools,
    }


def builtin(index: int, **fields: Any) -> dict[str, Any]:
    """A built-in match (no server) named ``tool<index>``."""
    base = {
        "name": f"tool{index}",
        "label": f"tool{index}",
        "description": f"Tool number {index}",
        "schema_keys": [],
        "score": 1.0,
    }
    return base | fields


def label_line(rendered: str) -> str:
    """The label of the first match: its line without the tree guide and the meta."""
    line = rendered.splitlines()[1]
    assert line.startswith(("├── ", "└── "))
    return line[4:].split("  score ")[0]


def test_worked_example() -> None:
    rendered = render_to_text(details([CREATE_ISSUE, LIST_PULL_REQUESTS]))
    assert rendered == (
        "✔ Tool Discovery  github  2 matches · 2 active · 3 total · limit:8\n"
        "├── github/create_issue  github · score 1.410\n"
        "│   Create a GitHub issue in the selected repository\n"
        "└── github/list_pull_requests  github · score 1.404\n"
        "    List pull requests for a repository\n"
    )


def test_one_match_is_singular() -> None:
    result = details(
        [POST_MESSAGE],
        query="slack message",
        limit=1,
        total_tools=2,
        active=["mcp__github_create_issue", "mcp__slack_post_message"],
    )
    assert render_to_text(result) == (
        "✔ Tool Discovery  slack message  1 match · 2 active · 2 total · limit:1\n"
        "└── slack/post_message  slack · score 4.224\n"
        "    Post a message to a Slack channel\n"
    )


def test_collapses_to_five_matches() -> None:
    rendered = render_to_text(details([builtin(i) for i in range(7)], total_tools=7))
    assert rendered == (
        "✔ Tool Discovery  github  7 matches · 7 active · 7 total · limit:8\n"
        "├── tool0  score 1.000\n"
        "│   Tool number 0\n"
        "├── tool1  score 1.000\n"
        "│   Tool number 1\n"
        "├── tool2  score 1.000\n"
        "│   Tool number 2\n"
        "├── tool3  score 1.000\n"
        "│   Tool number 3\n"
        "├── tool4  score 1.000\n"
        "│   Tool number 4\n"
        "└── … 2 more tools (--expanded shows them)\n"
    )


def test_one_hidden_match_is_singular() -> None:
    rendered = render_to_text(details([builtin(i) for i in range(6)], total_tools=6))
    assert rendered.endswith("│   Tool number 4\n└── … 1 more tool (--expanded shows them)\n")


def test_expanded_shows_every_match() -> None:
    rendered = render_to_text(details([builtin(i) for i in range(7)]), expanded=True)
    assert "more tool" not in rendered
    assert rendered.endswith("└── tool6  score 1.000\n    Tool number 6\n")
    assert [line for line in rendered.splitlines() if "score" in line] == [
        f"{'└' if i == 6 else '├'}── tool{i}  score 1.000" for i in range(7)
    ]


def test_exactly_five_matches_hide_nothing() -> None:
    rendered = render_to_text(details([builtin(i) for i in range(5)]))
    assert "more tool" not in rendered
    assert rendered.endswith("└── tool4  score 1.000\n    Tool number 4\n")


def test_empty_summary_has_no_line() -> None:
    rendered = render_to_text(details([builtin(0, description="  \n "), builtin(1)]))
    assert rendered.splitlines()[1:] == [
        "├── tool0  score 1.000",
        "└── tool1  score 1.000",
        "    Tool number 1",
    ]


def test_summary_is_trimmed_onto_one_line() -> None:
    rendered = render_to_text(details([builtin(0, description="\n  Reads\ta file.\n\nFast. ")]))
    assert rendered.splitlines()[2] == "    Reads a file. Fast."


@pytest.mark.parametrize(
    "label",
    [
        "工具/" + "検索" * 40,
        "🔧" * 50,
        "a" + "한국어" * 30,
        "👩‍👩‍👧‍👦" * 40,
        "x" * 71 + "字",
    ],
    ids=["cjk", "emoji", "odd-offset", "zwj-family", "wide-at-edge"],
)
def test_wide_labels_are_cut_by_display_width(label: str) -> None:
    line = label_line(render_to_text(details([builtin(0, label=label)])))
    assert line.endswith("…")
    assert 71 <= wcwidth.wcswidth(line) <= 72
    assert label.startswith(line[:-1])


def test_label_of_exactly_72_columns_is_kept() -> None:
    label = "字" * 36
    assert label_line(render_to_text(details([builtin(0, label=label)]))) == label


def test_summary_is_cut_at_96_columns() -> None:
    summary = "Search the repository history for commits that touch a path " * 3
    rendered = render_to_text(details([builtin(0, description=summary)]))
    cut = summary[:95] + "…"
    assert rendered.splitlines()[2] == "    " + cut
    assert wcwidth.wcswidth(cut) == 96


def test_no_discoverable_tools() -> None:
    rendered = render_to_text(details([], total_tools=0, active=[]))
    assert rendered == (
        "⚠ Tool Discovery  github  0 matches · 0 active · 0 total · limit:8\n"
        "  No discoverable tools are currently loaded.\n"
    )


def test_no_matching_tools() -> None:
    rendered = render_to_text(details([], query="jira", total_tools=1, active=["a", "b"]))
    assert rendered == (
        "⚠ Tool Discovery  jira  0 matches · 2 active · 1 total · limit:8\n  No matching tools found.\n"
    )


def test_result_without_details_shows_its_text() -> None:
    long_line = "0123456789" * 15
    rendered = render_to_text(None, text=f'{{"query":"x"}}\n\t{long_line}')
    assert rendered == ('⚠ Tool Discovery\n{"query":"x"}\n' + ("    " + long_line)[:109] + "…\n")


def test_result_without_details_or_text() -> None:
    assert render_to_text(None) == "⚠ Tool Discovery\nTool discovery completed\n"


def test_control_characters_never_reach_the_terminal() -> None:
    rendered = render_to_text(details([builtin(0, label="evil\x1b[2Jtool", description="a\x07b")]))
    assert "\x1b" not in rendered
    assert rendered.splitlines()[1:] == ["└── evil\\u001b[2Jtool  score 1.000", "    a\\u0007b"]


def test_color_only_on_request() -> None:
    result = details([CREATE_ISSUE])
    assert "\x1b[" not in render_to_text(result)
    assert "\x1b[" in render_to_text(result, color=True)


def test_render_result_returns_a_renderable_for_a_real_console() -> None:
    console = Console(width=120, color_system=None, record=True, file=io.StringIO())
    console.print(render_result(details([CREATE_ISSUE])))
    assert console.export_text().startswith("✔ Tool Discovery  github  1 match")


@pytest.mark.parametrize(
    ("text", "columns", "expected"),
    [
        ("abc", 3, "abc"),
        ("abcd", 3, "ab…"),
        ("", 0, ""),
        ("abc", 0, ""),
        ("abc", 1, "…"),
        ("字字", 4, "字字"),
        ("字字字", 4, "字…"),
        ("字字字", 5, "字字…"),
        ("e\u0301e\u0301e\u0301", 2, "e\u0301…"),
    ],
)
def test_truncate(text: str, columns: int, expected: str) -> None:
    assert truncate(text, columns) == expected


@given(
    text=st.text(st.characters(exclude_categories=("Cc", "Cs"))),
    columns=st.integers(min_value=1, max_value=120),
)
def test_truncate_fits_and_keeps_a_prefix(text: str, columns: int) -> None:
    cut = truncate(text, columns)
    assert wcwidth.wcswidth(cut) <= columns
    if cut != text:
        assert cut.endswith("…")
        assert text.startswith(cut[:-1])
