"""The rich answer of a session (``answer="rich"``, issue 54): what it lists and activates, the
query forms, and that a default session still answers exactly as contract §6 says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from discovery import ToolIndex
from discovery._sessions.answer import one_line, query_form, required_arguments
from discovery.errors import ToolIndexError
from tests.conftest import migrated_sqlite_url, shared_path


def _tool(server: str, tool: str, description: str, required: list[str] | None = None) -> dict[str, Any]:
    properties = {name: {"type": "string"} for name in required or []}
    return {
        "name": f"mcp__{server}__{tool}",
        "label": f"{server}/{tool}",
        "description": description,
        "server_name": server,
        "mcp_tool_name": tool,
        "input_schema": {"type": "object", "properties": properties, "required": required or []},
    }


CATALOG = [
    _tool(
        "files",
        "read_text_file",
        "Read the complete contents of a file as text. Handles encodings.",
        ["path"],
    ),
    _tool("files", "write_file", "Create or overwrite a file with new content.", ["path", "content"]),
    _tool("files", "list_directory", "List the entries of a directory.", ["path"]),
    _tool("time", "get_current_time", "Get the current time in a timezone.", ["timezone"]),
    _tool("time", "convert_time", "Convert a time between timezones.", ["time", "source", "target"]),
    _tool("github", "create_issue", "Create a new issue in a GitHub repository.", ["owner", "repo", "title"]),
    _tool("github", "list_issues", "List the issues of a GitHub repository.", ["owner", "repo"]),
    _tool("github", "search_code", "Search code across GitHub repositories.", ["query"]),
    _tool(
        "memory",
        "delete_entities",
        "Delete entities and their relations from the knowledge graph.",
        ["names"],
    ),
    _tool("memory", "create_entities", "Create entities in the knowledge graph.", ["entities"]),
    _tool("serena", "find_symbol", "Locate a code symbol by its name path.", ["name_path"]),
]


@pytest.fixture
def catalog(index: ToolIndex) -> ToolIndex:
    index.upsert_tools(CATALOG)
    return index


def _search(index: ToolIndex, session_id: str, query: str, limit: int = 5) -> dict[str, Any]:
    session = index.session(session_id, discovery_mode="mcp-only", answer="rich")
    result = session.search_tool.execute("", {"query": query, "limit": limit})
    assert json.loads(result.content) == result.structured
    return result.structured


def _names(answer: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in answer["tools"]]


def test_an_answer_lists_its_tools_with_a_line_and_their_required_arguments(catalog: ToolIndex) -> None:
    answer = _search(catalog, "s", "read a text file")
    assert answer["tools"][0] == {
        "name": "mcp__files__read_text_file",
        "description": "Read the complete contents of a file as text.",
        "required": ["path"],
    }
    assert answer["activated_tools"] == _names(answer)
    assert list(answer) == ["query", "activated_tools", "tools", "match_count", "total_tools"]
    assert answer["match_count"] == len(answer["tools"]) and answer["total_tools"] == len(CATALOG)


def test_a_repeated_search_names_the_same_tools_as_active_and_activates_nothing(catalog: ToolIndex) -> None:
    first = _search(catalog, "s", "read a text file")
    again = _search(catalog, "s", "read a text file")
    assert _names(again) == _names(first)
    assert again["activated_tools"] == []
    assert all(tool["active"] is True for tool in again["tools"])


def test_a_resumed_session_names_the_tools_it_has(catalog: ToolIndex, db_url: str) -> None:
    first = _search(catalog, "kept", "what time is it")
    with ToolIndex.open(db_url) as other:
        resumed = other.session("kept").search_tool.execute("", {"query": "what time is it", "limit": 5})
    assert _names(resumed.structured) == _names(first) and resumed.structured["activated_tools"] == []


def test_a_request_matched_by_common_words_only_activates_nothing_and_says_where_to_look(
    catalog: ToolIndex,
) -> None:
    answer = _search(catalog, "s", "the a of with")
    assert answer["tools"] == [] and answer["activated_tools"] == []
    assert "none was activated" in answer["note"]
    assert "files (3)" in answer["note"] and "github (3)" in answer["note"]


def test_a_search_where_no_tool_can_be_found_says_so_and_not_to_rephrase(index: ToolIndex) -> None:
    index.upsert_tools([{"name": "grep", "description": "Search file contents"}])  # no MCP tool
    answer = _search(index, "s", "read a file")
    assert answer["tools"] == [] and answer["total_tools"] == 0
    assert answer["note"].startswith("No tool can be searched here")


def test_tool_is_a_common_word_only_where_the_analyzer_drops_it(index: ToolIndex) -> None:
    """``enhanced`` leaves ``tool`` out of queries; under ``reference`` it is a word like others."""
    index.upsert_tools([*CATALOG, _tool("inspector", "list_tools", "List the tools an MCP server offers.")])
    assert _search(index, "s", "tools")["activated_tools"] == ["mcp__inspector__list_tools"]


def test_in_one_small_server_its_own_word_is_what_a_request_names(index: ToolIndex) -> None:
    # Both tools of a lone time server hold "time": in so small a corpus that share says nothing.
    index.upsert_tools([tool for tool in CATALOG if tool["server_name"] == "time"])
    answer = _search(index, "s", "what time is it in Tokyo")
    assert set(answer["activated_tools"]) == {"mcp__time__get_current_time", "mcp__time__convert_time"}
    assert "note" not in answer
    nothing = _search(index, "t", "what is it")
    assert nothing["activated_tools"] == [] and "note" in nothing


def test_select_activates_exactly_the_named_tools_and_names_the_unknown(catalog: ToolIndex) -> None:
    answer = _search(catalog, "s", "select:github/list_issues, mcp__time__convert_time,find_symbol,nope")
    assert answer["activated_tools"] == [
        "mcp__github__list_issues",
        "mcp__time__convert_time",
        "mcp__serena__find_symbol",
    ]
    assert answer["unknown"] == ["nope"]
    again = _search(catalog, "s", "select:convert_time")
    assert again["activated_tools"] == [] and again["tools"][0]["active"] is True


def test_an_answer_repeats_a_huge_request_or_name_list_in_part(catalog: ToolIndex) -> None:
    names = [f"nope_{number}" for number in range(1000)]
    answer = _search(catalog, "s", "select:convert_time," + ",".join(names))
    assert answer["activated_tools"] == ["mcp__time__convert_time"]
    assert answer["unknown"] == names[:24] and "976 more names no tool has" in answer["note"]
    assert len(answer["query"]) == 200 and answer["query"].endswith("…")
    huge = _search(catalog, "t", "convert a time " + "x" * 100_000)
    assert len(json.dumps(huge)) < 2000


def test_a_query_written_as_a_tool_name_asks_for_that_tool_alone(catalog: ToolIndex) -> None:
    ranked = _search(catalog, "ranked", "read text file")
    assert ranked["activated_tools"][0] == "mcp__files__read_text_file" and len(ranked["tools"]) > 1
    for number, written in enumerate(
        ["read_text_file", "files/read_text_file", "mcp__files__read_text_file", "Read_Text_File"]
    ):
        answer = _search(catalog, f"named-{number}", written)
        assert answer["activated_tools"] == ["mcp__files__read_text_file"], written
        assert _names(answer) == ["mcp__files__read_text_file"] and "note" not in answer
    # Words that spell a name rank, the named tool first.
    assert _names(_search(catalog, "a", "find symbol"))[0] == "mcp__serena__find_symbol"


def test_a_required_word_keeps_to_a_server_and_ranks_by_the_rest(catalog: ToolIndex) -> None:
    answer = _search(catalog, "s", "+github repository")
    assert set(_names(answer)) == {"mcp__github__create_issue", "mcp__github__list_issues"}
    assert _names(_search(catalog, "t", "+time convert"))[0] == "mcp__time__convert_time"
    assert set(_names(_search(catalog, "u", "+time tokyo"))) == {
        "mcp__time__get_current_time",
        "mcp__time__convert_time",
    }


def test_tools_out_of_scope_are_reported_and_not_replaced(catalog: ToolIndex) -> None:
    class NoDeletes:
        def admits(self, server: str | None, tool: str | None) -> bool:
            return not (tool or "").startswith("delete_") and server != "serena"

        def reports(self, server: str | None, tool: str | None) -> bool:
            return server != "serena"

    session = catalog.session("scoped", discovery_mode="mcp-only", answer="rich").scoped(NoDeletes())
    answer = session.search_tool.execute("", {"query": "delete entities", "limit": 5}).structured
    assert answer["unavailable"] == ["mcp__memory__delete_entities"]
    assert answer["activated_tools"] == [] and answer["tools"] == []
    assert "not available here" in answer["note"]
    # Left out below the best match, it is reported and what ranks below it is listed.
    broader = session.search_tool.execute("", {"query": "create entities", "limit": 5}).structured
    assert broader["unavailable"] == ["mcp__memory__delete_entities"]
    assert broader["activated_tools"][0] == "mcp__memory__create_entities"
    assert "mcp__github__create_issue" in broader["activated_tools"]  # ranked below delete_entities
    for written in ("find symbol", "find_symbol", "serena/find_symbol"):  # as words, or as its name
        unseen = session.search_tool.execute("", {"query": written}).structured
        assert "mcp__serena" not in json.dumps(unseen) and "unavailable" not in unseen, written
    named = session.search_tool.execute("", {"query": "select:find_symbol"}).structured
    assert named["unavailable"] == ["mcp__serena__find_symbol"] and named["activated_tools"] == []


def test_a_default_session_answers_as_contract_section_6(catalog: ToolIndex) -> None:
    session = catalog.session("plain", discovery_mode="mcp-only")
    content = json.loads(
        session.search_tool.execute("", {"query": "select:convert_time", "limit": 2}).content
    )
    assert list(content) == ["query", "activated_tools", "match_count", "total_tools"]
    assert session.answer_style() == "contract"


def test_a_handle_may_answer_richly_for_a_session_stored_without_the_setting(catalog: ToolIndex) -> None:
    catalog.session("old", discovery_mode="mcp-only")
    handle = catalog.session("old").answering("rich")
    assert "tools" in handle.search_tool.execute("", {"query": "create issue"}).structured


def test_settings_are_checked_by_one_model(catalog: ToolIndex) -> None:
    with pytest.raises(ToolIndexError, match="answr"):
        catalog.session("x", answr="rich")
    with pytest.raises(ToolIndexError, match="answer"):
        catalog.session("y", answer="verbose")


@pytest.mark.parametrize(
    ("query", "form"),
    [
        ("select:a, b,,a", ((("a", "b")), ())),
        ("SELECT:x", ((("x",)), ())),
        ("+github list issues", (None, ("github",))),
        ("+ spaced", (None, ())),
        ("list issues", (None, ())),
    ],
)
def test_query_forms(query: str, form: tuple[Any, Any]) -> None:
    parsed = query_form(query)
    assert (parsed.names, parsed.required) == form


def test_lines_and_required_arguments() -> None:
    assert one_line("  First. Second sentence.\nMore") == "First."
    assert len(one_line("x" * 500)) == 120
    assert required_arguments({"required": ["a", 3, "b"]}) == ["a", "b"]
    assert required_arguments({"required": "a"}) == [] and required_arguments(None) == []


@pytest.fixture(scope="module")
def real_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolIndex]:
    path = shared_path("data/mcp-catalog.jsonl")
    from discovery._catalog.formats import read_catalog

    url = migrated_sqlite_url(tmp_path_factory.mktemp("real") / "tools.db")
    with ToolIndex.open(url, analyzer="enhanced") as index:
        index.upsert_tools(read_catalog([str(path)], server=None, skip_invalid=False).records)
        yield index


HELD_OUT = [
    "read a text file",
    "what time is it in Tokyo",
    "open a new issue on our repo about the login bug",
    "delete entities from memory",
    "take a screenshot of the page",
]


@pytest.mark.parametrize("query", HELD_OUT)
def test_over_the_real_catalog_a_repeat_and_a_resume_name_what_the_first_answer_named(
    real_catalog: ToolIndex, query: str
) -> None:
    session_id = f"held-out-{HELD_OUT.index(query)}"
    first = _search(real_catalog, session_id, query)
    assert first["tools"] and len(json.dumps(first, separators=(",", ":")).encode()) < 2500
    again = _search(real_catalog, session_id, query)
    assert _names(again) == _names(first) and again["activated_tools"] == []
    resumed = real_catalog.session(session_id).answering("rich")
    answer = resumed.search_tool.execute("", {"query": query, "limit": 5}).structured
    assert _names(answer) == _names(first)


@pytest.mark.parametrize("query", ["can you do it for me", "what is this about"])
def test_over_the_real_catalog_requests_of_common_words_activate_nothing(
    real_catalog: ToolIndex, query: str
) -> None:
    answer = _search(real_catalog, f"none-{query}", query)
    assert answer["activated_tools"] == [] and answer["tools"] == []


UNSERVED = Path(__file__).resolve().parent.parent / "bench" / "queries" / "mcp-unserved.jsonl"
UNSERVED_ANSWERED_WITH_NOTHING = 6
"""Of the 20 requests no tool of the real catalog serves, those whose words no tool holds beyond
common ones ("walk the dog", "tune my guitar"): bench/results.md, "Activation"."""


def test_over_the_real_catalog_requests_no_tool_serves_mostly_activate_nothing(
    real_catalog: ToolIndex,
) -> None:
    queries = [json.loads(line)["query"] for line in UNSERVED.read_text(encoding="utf-8").splitlines()]
    answers = [_search(real_catalog, f"unserved-{n}", query) for n, query in enumerate(queries)]
    nothing = [answer for answer in answers if not answer["tools"]]
    assert len(nothing) >= UNSERVED_ANSWERED_WITH_NOTHING
    assert all(
        answer["activated_tools"] == [] and "none was activated" in answer["note"] for answer in nothing
    )
    assert all(len(answer["activated_tools"]) <= len(answer["tools"]) <= 5 for answer in answers)
