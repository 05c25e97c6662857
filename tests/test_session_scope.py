"""A scoped session handle (a gateway's config and filters) ranks as if the catalog held only the
tools in scope: the same scores, ``total_tools`` and description counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from discovery import ToolIndex
from discovery.catalog.formats import read_catalog
from discovery.cli.catalog import EXAMPLE_CATALOG
from discovery.mcp.scope import GatewayScope, ToolFilter

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
