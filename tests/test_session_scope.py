"""A scoped session handle (a gateway's config and filters) ranks as if the catalog held only the
tools in scope: the same scores, ``total_tools`` and description counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from discovery import ToolIndex
from discovery._catalog.formats import read_catalog
from discovery._mcp.scope import GatewayScope, ToolFilter
from discovery._ranking.snapshot import Snapshot
from discovery._rules import Corpus
from discovery.cli._catalog import EXAMPLE_CATALOG

SCOPE = GatewayScope(frozenset({"gitforge", "chatops", "absent"}), ToolFilter(deny=("gitforge/merge_*",)))
QUERIES = ["create an issue", "post a message to a channel", "merge a pull request", "search", "list"]


@pytest.mark.parametrize("mode", ["mcp-only", "all"])
def test_a_scoped_session_ranks_as_a_catalog_of_only_its_tools(tmp_path: Path, mode: str) -> None:
    records = read_catalog([str(EXAMPLE_CATALOG)], server=None, skip_invalid=False).records
    kept = [record for record in records if SCOPE.admits(record.server_name, record.mcp_tool_name)]
    assert 0 < len(kept) < len(records)
    with (
        ToolIndex.open(f"sqlite:///{tmp_path / 'all.db'}") as everything,
        ToolIndex.open(f"sqlite:///{tmp_path / 'scope.db'}") as only,
    ):
        everything.upsert_tools(records)
        only.upsert_tools(kept)
        scoped = everything.session("s", discovery_mode=mode, essential_override=["-"]).scoped(SCOPE)
        alone = only.session("s", discovery_mode=mode, essential_override=["-"])
        assert scoped.total_tools == alone.total_tools == len(kept)
        assert scoped.search_tool.description == alone.search_tool.description
        assert scoped.search_tool.stable_description == alone.search_tool.stable_description
        for query in QUERIES:
            assert scoped.preview(query, limit=20) == alone.preview(query, limit=20)
        found = scoped.search_tool.execute("c1", {"query": "merge a pull request or create an issue"})
        expected = alone.search_tool.execute("c1", {"query": "merge a pull request or create an issue"})
        assert found.content == expected.content
        assert "mcp__gitforge__merge_pull_request" not in found.details["activated_tools"]
        assert scoped.total_tools == alone.total_tools


def test_searches_in_a_row_rank_as_the_catalog_of_only_the_tools_in_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search activates tools, so the corpus changes; the ranker counts only what changed
    on top of the many tools out of scope: what it counts must equal a count from scratch."""
    reused: list[object] = []
    original = Snapshot._excluding_less

    def spied(snapshot: Snapshot, corpus: Corpus) -> object:
        found = original(snapshot, corpus)
        reused.append(found)
        return found

    monkeypatch.setattr(Snapshot, "_excluding_less", spied)
    words = ["issue", "message", "file", "event", "query", "note", "channel", "branch", "table", "free"]
    noise = tmp_path / "noise.jsonl"
    noise.write_text(
        "\n".join(
            json.dumps(
                {
                    "name": f"mcp__noise__tool_{i}",
                    "description": f"Noise {i}: {words[i % 10]} {words[i * 7 % 10]}, {words[i % 3]}",
                    "server_name": "noise",
                    "mcp_tool_name": f"tool_{i}",
                    "source": "mcp",
                }
            )
            for i in range(120)
        ),
        encoding="utf-8",
    )
    records = read_catalog([str(EXAMPLE_CATALOG), str(noise)], server=None, skip_invalid=False).records
    kept = [record for record in records if SCOPE.admits(record.server_name, record.mcp_tool_name)]
    with (
        ToolIndex.open(f"sqlite:///{tmp_path / 'all.db'}") as everything,
        ToolIndex.open(f"sqlite:///{tmp_path / 'scope.db'}") as only,
    ):
        everything.upsert_tools(records)
        only.upsert_tools(kept)
        scoped = everything.session("s", discovery_mode="mcp-only").scoped(SCOPE)
        alone = only.session("s", discovery_mode="mcp-only")
        for number, query in enumerate(["an issue", "a message in a channel", "files", "list", "search"]):
            call = f"c{number}"
            assert scoped.search_tool.execute(call, {"query": query, "limit": 1}).content == (
                alone.search_tool.execute(call, {"query": query, "limit": 1}).content
            )
            assert scoped.preview("issue message file list", limit=20) == alone.preview(
                "issue message file list", limit=20
            )
            assert scoped.search_tool.description == alone.search_tool.description
    assert any(found is not None for found in reused)
