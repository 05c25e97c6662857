"""A query is tokenized once per search, on every path a search takes: the library's read-only
search and its details, a session's preview and its search call, an adapter's call, and the
command line's search (read-only and in a session, with its weak-match flags) and explain.

The query is longer than the tokenizer's cache holds texts for, so every tokenization of it is
real work, and it is counted where the work is done (``tokenizer._tokens``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner

from discovery import ToolIndex
from discovery._text import tokenizer
from discovery.adapters import anthropic
from discovery.cli._main import main
from tests.providers import CATALOG

QUERY = "please post a message to the team channel on slack about the github issue we opened today"
assert len(QUERY) > tokenizer.SHORT_TEXT


@pytest.fixture
def catalog_url(sqlite_db_url: str) -> str:
    with ToolIndex.open(sqlite_db_url) as index:
        index.upsert_tools(CATALOG)
    return sqlite_db_url


@pytest.fixture
def tokenized(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts the tokenizer splits from here on, one entry per tokenization of ``QUERY``."""
    seen: list[str] = []
    split = tokenizer._tokens

    def counted(text: str) -> list[str]:
        if QUERY in text:
            seen.append(text)
        return split(text)

    monkeypatch.setattr(tokenizer, "_tokens", counted)
    yield seen


def cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def library_search(url: str) -> None:
    with ToolIndex.open(url) as index:
        assert index.search(QUERY, 3)


def library_details(url: str) -> None:
    with ToolIndex.open(url) as index:
        assert index.search_details(f"  {QUERY} ", 3)["query"] == QUERY


def session_preview(url: str) -> None:
    with ToolIndex.open(url) as index:
        assert index.session("preview", discovery_mode="all").preview(QUERY, 3)


def session_call(url: str) -> None:
    with ToolIndex.open(url) as index:
        session = index.session("call", discovery_mode="all")
        result = session.search_tool.execute("call-1", {"query": QUERY, "limit": 3})
        assert result.details["activated_tools"]


def adapter_call(url: str) -> None:
    with ToolIndex.open(url) as index:
        session = index.session("adapter", discovery_mode="all")
        block = {"type": "tool_use", "id": "toolu_1", "name": "search_tool_bm25", "input": {"query": QUERY}}
        answer = anthropic.handle(session, block)
        assert answer is not None and "activated_tools" in str(answer["content"])


def cli_search(url: str) -> None:
    assert "slack" in cli(url, "search", QUERY)


def cli_session_search(url: str) -> None:
    assert "slack" in cli(url, "search", QUERY, "--session", "chat", "--mode", "all")


def cli_explain(url: str) -> None:
    assert "score" in cli(url, "explain", QUERY, "mcp__slack__post_message")


@pytest.mark.parametrize(
    "search",
    [
        library_search,
        library_details,
        session_preview,
        session_call,
        adapter_call,
        cli_search,
        cli_session_search,
        cli_explain,
    ],
)
def test_a_search_tokenizes_its_query_once(
    catalog_url: str, tokenized: list[str], search: Callable[[str], None]
) -> None:
    search(catalog_url)
    assert len(tokenized) == 1
