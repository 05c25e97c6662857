"""Pruned top-k against the exhaustive search: the same hits with the same doubles, in order.

Both rankers read one index; the exhaustive one scores every posting of every query term. The
catalogs repeat a small vocabulary with skewed frequencies, so the pruned path meets ties,
terms held by most documents and terms held by few; sessions exclude some tools, which changes
``N``, the average length and ``df`` under the bounds.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from discovery import ToolIndex
from discovery._params import query_terms
from discovery._ranking import pruned as pruned_module
from discovery._ranking.ranker import Ranker
from discovery._rules import Corpus
from store import GROUPS, Reader, Writer
from store._engine import read_transaction, write_transaction
from store.errors import CorruptIndex
from tests.conftest import migrated_sqlite_url
from tests.examples import examples

VOCABULARY = [f"w{i}" for i in range(40)]
SERVERS = ["alpha", "beta", "gamma"]


def catalog(seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` tools whose words follow a skewed distribution (w0 in most, w39 in few)."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    tools = []
    for number in range(count):
        server = rng.choice(SERVERS)
        words = rng.choices(VOCABULARY, weights, k=rng.randint(1, 10))
        keys = rng.sample(VOCABULARY[:12], rng.randint(0, 3))
        local = number % 7 == 0
        tools.append(
            {
                "name": f"{words[0]}_{number}" if local else f"mcp__{server}__{words[0]}_{number}",
                "description": " ".join(words),
                "server_name": None if local else server,
                "mcp_tool_name": None if local else f"{words[0]}_{number}",
                "input_schema": {"type": "object", "properties": {key: {"type": "string"} for key in keys}},
            }
        )
    return tools


def open_indexes(
    factory: pytest.TempPathFactory, seeds: range, *, learned: bool
) -> Iterator[dict[int, ToolIndex]]:
    """One index per seed of ``catalog``, closed when the fixture ends; with ``learned``, learning
    on and the field ``taught`` describes."""
    opened = {}
    for seed in seeds:
        path: Path = factory.mktemp(f"pruning-{'learned-' if learned else ''}{seed}") / "tools.db"
        index = ToolIndex.open(migrated_sqlite_url(path), learning=learned)
        tools = catalog(seed, 300 + 150 * seed)
        index.upsert_tools(tools)
        if learned:
            with write_transaction(index.store.engine) as connection:
                Writer(connection).learning.replace_all(taught(seed, tools))
        opened[seed] = index
    yield opened
    for index in opened.values():
        index.close()


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, ToolIndex]]:
    """One index per seed of a few catalogs, kept for the module (hypothesis draws from them)."""
    yield from open_indexes(tmp_path_factory, range(3), learned=False)


def both(index: ToolIndex, query: str, corpus: Corpus, limit: int) -> tuple[list[Any], list[Any]]:
    """``(pruned hits, exhaustive hits)`` as ``(name, score)`` pairs."""
    answers = []
    for ranker in (Ranker(prune_from=0), Ranker(prune_from=None)):
        with index.store.reading() as reader:
            ranking = ranker.rank(reader, query_terms(query), corpus, limit)
        answers.append([(hit.tool_id, hit.name, hit.score) for hit in ranking.hits])
    return answers[0], answers[1]


@pytest.mark.parametrize("row_read_postings", [0, 10**12], ids=["rows", "postings"])
@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2),
    words=st.lists(st.sampled_from([*VOCABULARY, "absent"]), min_size=1, max_size=9),
    limit=st.integers(1, 12),
    mode=st.sampled_from([(GROUPS.mcp,), (GROUPS.local, GROUPS.mcp)]),
    excluded=st.lists(st.integers(0, 599), max_size=30),
)
def test_pruned_search_equals_exhaustive(
    indexes: dict[int, ToolIndex],
    monkeypatch: pytest.MonkeyPatch,
    row_read_postings: int,
    seed: int,
    words: list[str],
    limit: int,
    mode: tuple[int, ...],
    excluded: list[int],
) -> None:
    """Documents left to score in full are scored from their rows, or from the postings of the
    query terms (``ROW_READ_POSTINGS`` decides): the doubles are the same either way."""
    monkeypatch.setattr(pruned_module, "ROW_READ_POSTINGS", row_read_postings)
    tools = catalog(seed, 300 + 150 * seed)
    names = frozenset(tools[i]["name"] for i in excluded if i < len(tools))
    pruned, exhaustive = both(indexes[seed], " ".join(words), Corpus(mode, names), limit)
    assert pruned == exhaustive  # floats compared for equality: bit for bit


def test_common_terms_are_pruned(indexes: dict[int, ToolIndex], monkeypatch: pytest.MonkeyPatch) -> None:
    """A query of a rare term and common ones takes the pruned path and scores only a few
    documents in full, and still answers as the exhaustive search does."""
    rescored: list[int] = []
    original = pruned_module._rescored

    def spy(reader: Any, snapshot: Any, ids: Any, *args: Any) -> Any:
        rescored.append(int(ids.size))
        return original(reader, snapshot, ids, *args)

    monkeypatch.setattr(pruned_module, "_rescored", spy)
    index = indexes[2]
    pruned, exhaustive = both(index, "w39 w0 w1 w2", Corpus((GROUPS.local, GROUPS.mcp)), 5)
    assert pruned == exhaustive
    assert len(rescored) == 1
    assert 5 <= rescored[0] < len(catalog(2, 600)) // 4


LEARNED_WORDS = [*VOCABULARY[:20], *(f"l{i}" for i in range(10))]
"""What sessions taught: words of the tool texts, and words no tool text holds."""


def taught(seed: int, tools: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Credits (identity, session, term, tool) for two tools in five, one to four sessions each,
    of three identities (the local one, which the searches are, sees the others' when shared)."""
    rng = random.Random(seed + 100)
    credits = []
    for number, tool in enumerate(tools):
        if rng.random() < 0.4:
            for session in range(rng.randint(1, 4)):
                for word in rng.sample(LEARNED_WORDS, rng.randint(1, 4)):
                    identity = ("local", "alice", "bob")[session % 3]
                    credits.append((identity, f"s{number}-{session}", word, tool["name"]))
    return credits


@pytest.fixture(scope="module")
def learned_indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, ToolIndex]]:
    """The catalogs of ``indexes`` with learning on and a learned field."""
    yield from open_indexes(tmp_path_factory, range(2), learned=True)


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 1),
    words=st.lists(st.sampled_from([*VOCABULARY, *LEARNED_WORDS, "absent"]), min_size=1, max_size=9),
    limit=st.integers(1, 12),
    mode=st.sampled_from([(GROUPS.mcp,), (GROUPS.local, GROUPS.mcp)]),
    excluded=st.lists(st.integers(0, 449), max_size=30),
)
def test_pruned_search_with_a_learned_field_equals_exhaustive(
    learned_indexes: dict[int, ToolIndex],
    seed: int,
    words: list[str],
    limit: int,
    mode: tuple[int, ...],
    excluded: list[int],
) -> None:
    """A query that reaches the learned field, in a catalog searched with pruning: the same hits
    with the same doubles as the exhaustive search."""
    tools = catalog(seed, 300 + 150 * seed)
    names = frozenset(tools[i]["name"] for i in excluded if i < len(tools))
    pruned, exhaustive = both(learned_indexes[seed], " ".join(words), Corpus(mode, names), limit)
    assert pruned == exhaustive  # floats compared for equality: bit for bit


@pytest.mark.parametrize("torn", [bytes(5), "twelve chars"], ids=["not whole entries", "text"])
def test_a_torn_row_read_for_scoring_is_a_corrupt_index(indexes: dict[int, ToolIndex], torn: object) -> None:
    """The rows of documents scored in full are checked as they are read: one whose indexed
    terms are not whole entries, or not bytes at all, names its tool."""
    index = indexes[0]
    with read_transaction(index.store.engine) as connection:
        first, second = (
            row[0] for row in connection.exec_driver_sql("SELECT id FROM tools ORDER BY id LIMIT 2")
        )
        good = Reader(connection).index.forward_postings([first, second])
    assert set(good["tool_id"].tolist()) == {first, second}
    with write_transaction(index.store.engine) as connection:
        original = connection.exec_driver_sql(
            "SELECT indexed_terms FROM tools WHERE id = ?", (second,)
        ).scalar()
        connection.exec_driver_sql("UPDATE tools SET indexed_terms = ? WHERE id = ?", (torn, second))
    try:
        with (
            read_transaction(index.store.engine) as connection,
            pytest.raises(CorruptIndex, match=f"tool id {second}"),
        ):
            Reader(connection).index.forward_postings([first, second])
    finally:
        with write_transaction(index.store.engine) as connection:
            connection.exec_driver_sql("UPDATE tools SET indexed_terms = ? WHERE id = ?", (original, second))


@settings(max_examples=examples(60), deadline=None)
@given(
    size=st.integers(0, 3_000),
    top_tf=st.integers(1, 60),
    longest=st.integers(1, 400),
    avgdl=st.floats(0.5, 500.0),
    weight=st.floats(0.01, 20.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_contributions_from_a_table_are_the_formula_s_bits(
    size: int, top_tf: int, longest: int, avgdl: float, weight: float, seed: int
) -> None:
    """Common terms look their contributions up in a (tf, length) table; each must be the
    double the formula gives that posting, whichever way it was computed."""
    import numpy as np

    from discovery._ranking import postings as term_postings
    from discovery._ranking.bm25 import contribution, length_norm, saturation_numerator

    rng = np.random.default_rng(seed)
    tf = rng.integers(1, top_tf + 1, size).astype(np.int32)
    doc_len = rng.integers(1, longest + 1, size).astype(np.int32)
    norms = length_norm(np.arange(longest + 1, dtype=np.float64), avgdl)
    as_float = tf.astype(np.float64)
    expected = contribution(weight, saturation_numerator(as_float), as_float, length_norm(doc_len, avgdl))
    for table in (norms, None):
        found = term_postings._contributions(weight, tf, doc_len, avgdl, table)
        assert found.dtype == np.float64
        assert found.view(np.int64).tolist() == expected.view(np.int64).tolist()
