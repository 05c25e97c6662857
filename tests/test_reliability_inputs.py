"""Inputs that would break a promise are refused with a clear error and leave the catalog as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from discovery import InvalidRecord, ToolCallError, ToolIndex
from discovery._params import MAX_PARAMS_DEPTH
from discovery.cli._main import main
from discovery.errors import InvalidParams


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


def run_import(tmp_path: Path, source: str, **env: str) -> tuple[int, str]:
    db = f"sqlite:///{tmp_path / 't.db'}"
    result = CliRunner(env=env).invoke(main, ["--db", db, "import", source], prog_name="tool-index")
    return result.exit_code, result.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_input_is_refused_at_the_documented_limit(tmp_path: Path) -> None:
    code, stderr = run_import(tmp_path, "/dev/zero", TOOL_INDEX_MAX_INPUT_BYTES="100000")
    assert code == 1
    assert stderr == (
        "Error: /dev/zero: larger than 100000 bytes, the most a catalog may hold; "
        "split it, or set TOOL_INDEX_MAX_INPUT_BYTES to allow more\n"
    )


def test_a_record_line_beyond_the_limit_is_refused_and_the_limit_can_be_raised(tmp_path: Path) -> None:
    catalog = tmp_path / "c.jsonl"
    long_line = '{"name": "big", "description": "' + "x" * 5000 + '"}'
    catalog.write_text('{"name": "small", "description": "Fine."}\n' + long_line + "\n")
    code, stderr = run_import(tmp_path, str(catalog), TOOL_INDEX_MAX_LINE_BYTES="4096")
    assert code == 1
    assert stderr == (
        f"Error: {catalog}, line 2: longer than 4096 bytes, the most one record may take; "
        "set TOOL_INDEX_MAX_LINE_BYTES to allow more\n"
    )
    assert run_import(tmp_path, str(catalog), TOOL_INDEX_MAX_LINE_BYTES="8192")[0] == 0
    code, stderr = run_import(tmp_path, str(catalog), TOOL_INDEX_MAX_LINE_BYTES="lots")
    assert (code, stderr) == (
        1,
        "Error: TOOL_INDEX_MAX_LINE_BYTES='lots' is not a positive number of bytes\n",
    )


def nested(depth: int) -> list[object]:
    outer: list[object] = []
    current = outer
    for _ in range(depth - 1):
        inner: list[object] = []
        current.append(inner)
        current = inner
    return outer


def test_deep_or_cyclic_params_are_a_typed_error_and_log_nothing(index: ToolIndex) -> None:
    index.upsert_tools([{"name": "mcp__w__get_weather", "description": "Weather for a city."}])
    session = index.session("s1")
    cyclic: dict[str, Any] = {"query": "weather"}
    cyclic["self"] = cyclic
    cases: list[tuple[dict[str, Any], str]] = [
        (cyclic, "Params must not contain themselves."),
        ({"query": "weather", "more": nested(10_000)}, f"nested at most {MAX_PARAMS_DEPTH} levels"),
    ]
    for params, message in cases:
        with pytest.raises(InvalidParams, match=message):
            session.search_tool.execute("c1", params)
    # Within the limit the call runs (and is logged) as any other.
    fine = {"query": "weather", "more": nested(MAX_PARAMS_DEPTH - 1)}
    try:
        session.search_tool.execute("c2", fine)
    except ToolCallError as error:  # the session's own answer (e.g. discovery disabled)
        assert not isinstance(error, InvalidParams)
