"""Inputs that would break a promise are refused with a clear error and leave the catalog as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from discovery import InvalidRecord, ToolIndex
from discovery.cli.main import main


def test_the_search_tools_own_name_is_refused_on_import(index: ToolIndex) -> None:
    with pytest.raises(InvalidRecord, match="is the name of the search tool itself"):
        index.upsert_tools([{"name": "search_tool_bm25", "description": "An impostor."}])
    assert index.tools() == []


@pytest.mark.parametrize("name", ["resolve", "yield"])
def test_internal_built_ins_stay_importable(index: ToolIndex, name: str) -> None:
    index.upsert_tools([{"name": name, "description": "A built-in."}])
    assert [tool.name for tool in index.tools()] == [name]


def test_the_cli_refuses_the_search_tools_name_in_one_line(tmp_path: Path) -> None:
    catalog = tmp_path / "c.jsonl"
    catalog.write_text('{"name": "ok_tool", "description": "Fine."}\n{"name": "search_tool_bm25"}\n')
    db = f"sqlite:///{tmp_path / 't.db'}"
    result = CliRunner().invoke(main, ["--db", db, "import", str(catalog)], prog_name="tool-index")
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert "search_tool_bm25" in result.stderr and "search tool itself" in result.stderr
    with ToolIndex.open(db) as index:
        assert index.tools() == []
