"""Records are prepared the same in worker processes as in one: same tools, same order, the same
error for the same bad record, progress for every record; and the import around it is exact."""

from __future__ import annotations

import gc
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from discovery import InvalidRecord, ToolIndex
from discovery._catalog import workers as preparation
from discovery._catalog.indexing import content_hash, corpus_group, indexed_tool
from discovery._catalog.models import ToolRecord
from discovery._diagnostics.verify import verify
from store._logged_json import column_json
from tests.catalogs import generated_catalog
from tests.conftest import migrated_sqlite_url


@pytest.fixture(params=["fork", "spawn"])
def small_chunks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Workers for any import of more than 10 records, 7 records a task, started either way:
    forked workers inherit the records, spawned ones are sent them."""
    monkeypatch.setattr(preparation, "PARALLEL_MIN", 10)
    monkeypatch.setattr(preparation, "CHUNK", 7)
    method: str = request.param
    monkeypatch.setattr(preparation, "_start_method", lambda: multiprocessing.get_context(method))
    return method


def test_forked_workers_are_sent_positions_and_spawned_ones_records(
    small_chunks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[preparation.Task] = []
    real_map = ProcessPoolExecutor.map

    def recording_map(pool: ProcessPoolExecutor, fn: Any, tasks: Any) -> Any:
        sent.extend(tasks)
        return real_map(pool, fn, sent)

    monkeypatch.setattr(ProcessPoolExecutor, "map", recording_map)
    records = generated_catalog(30)
    assert preparation.prepare(records) == [indexed_tool(ToolRecord.model_validate(r)) for r in records]
    assert [(start, end) for start, end, _, _ in sent] == [(0, 7), (7, 14), (14, 21), (21, 28), (28, 30)]
    assert {analyzer for _, _, _, analyzer in sent} == {"reference"}
    if small_chunks == "fork":
        assert all(given is None for _, _, given, _ in sent)
    else:
        assert [list(given or ()) for _, _, given, _ in sent] == [records[i : i + 7] for i in range(0, 30, 7)]


def test_an_indexed_tool_s_values_land_in_the_fields_they_name() -> None:
    """An indexed tool is built from its row by position: each value must be the field its place says."""
    record = ToolRecord.model_validate(
        {
            "name": "mcp__files__read_file",
            "description": "Read a file",
            "server_name": "files",
            "mcp_tool_name": "read_file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "load_mode": "discoverable",
        }
    )
    tool, terms = indexed_tool(record)
    assert (tool.name, tool.label, tool.description, tool.summary, tool.source) == (
        "mcp__files__read_file",
        "mcp__files__read_file",
        "Read a file",
        "Read a file",
        "mcp",
    )
    assert (tool.server_name, tool.mcp_tool_name, tool.load_mode) == ("files", "read_file", "discoverable")
    assert tool.schema_keys_json == column_json(["path"])
    assert tool.input_schema_json == column_json(record.input_schema)
    assert tool.grp == corpus_group(record) and tool.content_hash == content_hash(record)
    assert tool.doc_len == sum(terms.values()) and terms["read"] == 6 + 4 + 4 + 2


def test_workers_prepare_what_one_process_prepares(small_chunks: str) -> None:
    records = generated_catalog(60)
    assert preparation.worker_count(len(records)) == min(len(os.sched_getaffinity(0)), 9)
    done: list[int] = []
    parallel = preparation.prepare(records, done.append)
    assert parallel == [indexed_tool(ToolRecord.model_validate(r)) for r in records]
    assert sum(done) == 60 and len(done) == 9  # one report per task


def test_the_first_bad_record_is_reported_as_in_one_process(
    small_chunks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = generated_catalog(60)
    records[23] = {**records[23], "name": ""}
    records[50] = {**records[50], "load_mode": "sometimes"}
    with pytest.raises(InvalidRecord, match=r"^record 24: name: ") as raised:
        preparation.prepare(records)
    monkeypatch.setattr(preparation, "PARALLEL_MIN", 10**9)
    with pytest.raises(InvalidRecord) as alone:
        preparation.prepare(records)
    assert str(raised.value) == str(alone.value)


def test_a_parallel_import_equals_a_sequential_one(small_chunks: str, tmp_path: Path) -> None:
    records = generated_catalog(80)
    with ToolIndex.open(migrated_sqlite_url(tmp_path / "a.db")) as parallel:
        parallel.upsert_tools(records)
        assert verify(parallel).ok
        found = [[(h.name, h.score) for h in parallel.search(q)] for q in ("create issue", "sync report")]
    preparation.PARALLEL_MIN = 10**9
    with ToolIndex.open(migrated_sqlite_url(tmp_path / "b.db")) as sequential:
        sequential.upsert_tools(records)
        assert found == [
            [(h.name, h.score) for h in sequential.search(q)] for q in ("create issue", "sync report")
        ]


def test_the_collector_is_paused_only_during_an_import(index: ToolIndex) -> None:
    assert gc.isenabled()
    with preparation.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(InvalidRecord):
        index.upsert_tools([{"name": ""}])
    assert gc.isenabled()
    gc.disable()
    try:
        with preparation.collector_paused():
            pass
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
