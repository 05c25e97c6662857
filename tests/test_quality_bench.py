"""The analyzer harness ranks exactly: its ``reference`` is the library's search (a real SQLite
index), and every variant's ranking is the BM25+ formula computed by brute force on its terms."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import analyzers
from bench.analyzers import (
    ENHANCED,
    REFERENCE,
    TRIED,
    VARIANTS,
    Analyzer,
    build,
    compound_parts,
    query_terms,
    tool_fields,
    with_feedback,
)
from discovery import ToolIndex
from tests.catalogs import NOUNS, VERBS, WORDS, generated_catalog
from tests.conftest import migrated_sqlite_url
from tests.examples import examples

QUERY_WORDS = [*VERBS, *NOUNS, *WORDS, "the", "a", "for", "creating", "issues", "messages", "github"]
queries = st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=6).map(" ".join)


def brute_force(
    tools: list[tuple[str, list[tuple[str, str]]]], analyzer: Analyzer, query: str
) -> list[float]:
    """contract §4 written out once more: weighted tf, lengths, idf, the sum; scores best first.
    k1, b and δ are the variant's (contract §4's 1.2, 0.75 and 1 unless it says otherwise)."""
    k1, b, delta = analyzer.k1, analyzer.b, analyzer.delta
    documents = []
    for _, pairs in tools:
        tf: Counter[str] = Counter()
        for field, text in pairs:
            for term in analyzer.document(text):
                tf[term] += analyzers.FIELD_WEIGHTS[field]
        documents.append(tf)
    lengths = [sum(tf.values()) for tf in documents]
    avgdl = (sum(lengths) / len(lengths)) or 1.0
    n_docs = len(documents)
    scores = []
    for tf, length in zip(documents, lengths, strict=True):
        norm = k1 * (1 - b + b * (length / avgdl))
        score = 0.0
        for term, qtf in Counter(analyzer.query(query)).items():
            if tf[term]:
                df = sum(1 for other in documents if other[term])
                idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
                score += qtf * idf * ((tf[term] * (k1 + 1)) / (tf[term] + norm) + delta)
        if score > 0:
            scores.append(score)
    return sorted(scores, reverse=True)


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=10_000), queries)
def test_every_variant_ranks_by_the_formula(count: int, seed: int, query: str) -> None:
    tools = [tool_fields(record) for record in generated_catalog(count, seed=seed)]
    chosen = [REFERENCE, ENHANCED, VARIANTS["stemming only"], VARIANTS["query stop words only"]]
    chosen += [TRIED[name] for name in ("enhanced, k1 2", "enhanced, b 0.5", "enhanced, k1 2, δ 0")]
    chosen.append(TRIED["enhanced + stems cut to 6"])
    for analyzer in chosen:
        ranked = build(tools, analyzer).rank(dict(Counter(analyzer.query(query))), count)
        assert [score for _, score in ranked] == pytest.approx(brute_force(tools, analyzer, query), rel=1e-12)


def rounded(hits: list[tuple[str, float]]) -> list[tuple[float, frozenset[str]]]:
    """Scores to 6 decimals, with the names at each score: ties may be ordered differently
    (the harness breaks them by code point, the library by collation)."""
    groups: dict[float, set[str]] = {}
    for name, score in hits:
        groups.setdefault(round(score, 6), set()).add(name)
    return [(score, frozenset(names)) for score, names in groups.items()]


@pytest.fixture(scope="module")
def libraries(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[tuple[list[dict[str, Any]], ToolIndex]]]:
    """A few generated catalogs in real SQLite files."""
    opened: list[tuple[list[dict[str, Any]], ToolIndex]] = []
    for seed, count in ((1, 12), (2, 60), (3, 200)):
        url = migrated_sqlite_url(tmp_path_factory.mktemp("bench") / "tools.db")
        index = ToolIndex.open(url)
        catalog = generated_catalog(count, seed=seed)
        index.upsert_tools(catalog)
        opened.append((catalog, index))
    yield opened
    for _, index in opened:
        index.close()


def test_the_reference_variant_is_the_library(
    libraries: list[tuple[list[dict[str, Any]], ToolIndex]],
) -> None:
    rng = random.Random(5)
    for catalog, index in libraries:
        memory = build([tool_fields(record) for record in catalog], REFERENCE)
        for _ in range(60):
            query = " ".join(rng.sample(QUERY_WORDS, rng.randint(1, 5)))
            expected = [(hit.name, hit.score) for hit in index.search(query, len(catalog))]
            got = memory.rank(dict(Counter(REFERENCE.query(query))), len(catalog))
            assert rounded(got) == rounded(expected), query


def test_compound_names_split_into_the_tools_own_words() -> None:
    assert compound_parts("socialsearch", {"the", "social", "search", "provides"}) == ["social", "search"]
    assert compound_parts("exportchat", {"export", "your", "conversation"}) is None  # "chat" is not its word
    assert compound_parts("timemachine", {"times", "machines"}) == ["time", "machine"]  # by stem
    assert compound_parts("search", {"search"}) is None  # one word is not a compound


def test_per_field_length_normalizes_each_field() -> None:
    """BM25F: the same term in a short name field outweighs it in a long one."""
    tools = [
        ("short", [("name", "alpha"), ("summary", "beta")]),
        ("long", [("name", "alpha gamma delta epsilon zeta"), ("summary", "beta")]),
    ]
    variant = VARIANTS["enhanced + per-field length"]
    ranked = build(tools, variant).rank({"alpha": 1}, 2)
    assert [name for name, _ in ranked] == ["short", "long"]
    assert ranked[0][1] > ranked[1][1]


def test_the_coverage_rule_drops_one_word_matches() -> None:
    tools = [("two", [("name", "alpha beta")]), ("one", [("name", "alpha")]), ("none", [("name", "omega")])]
    index = build(tools, REFERENCE)
    terms = {"alpha": 1, "beta": 1, "gamma": 1}
    assert [name for name, _ in index.rank(terms, 5)] == ["two", "one"]
    assert [name for name, _ in index.rank(terms, 5, coverage=True)] == ["two"]
    assert [name for name, _ in index.rank({"alpha": 1, "beta": 1}, 5, coverage=True)] == ["two", "one"]


def test_the_coordination_factor_scales_by_the_share_of_query_terms_matched() -> None:
    tools = [("two", [("name", "alpha beta")]), ("one", [("name", "alpha")])]
    plain = dict(build(tools, REFERENCE).rank({"alpha": 1, "beta": 1, "gamma": 1}, 5))
    coord = dict(build(tools, REFERENCE).rank({"alpha": 1, "beta": 1, "gamma": 1}, 5, coord=0.5))
    assert coord["two"] == pytest.approx(plain["two"] * (2 / 3) ** 0.5)
    assert coord["one"] == pytest.approx(plain["one"] * (1 / 3) ** 0.5)


def test_feedback_adds_the_first_tools_terms_at_the_given_share() -> None:
    tools = [
        ("first", [("name", "alpha"), ("summary", "beta gamma")]),
        ("second", [("name", "alpha delta"), ("summary", "beta")]),
        ("other", [("name", "omega")]),
    ]
    index = build(tools, REFERENCE)
    forward = [analyzers._weighted(analyzers._field_terms(pairs, REFERENCE)) for _, pairs in tools]
    expanded = with_feedback(index, forward, {"alpha": 1.0}, 2, 2, 0.5)
    assert expanded["alpha"] == 1.0
    added = {term: weight for term, weight in expanded.items() if term != "alpha"}
    assert set(added) <= {"beta", "gamma", "delta"} and len(added) == 2
    assert "omega" not in expanded  # a tool past the first two gives nothing
    assert sum(added.values()) == pytest.approx(0.5)
    assert with_feedback(index, forward, {"nothing": 1.0}, 2, 2, 0.5) == {"nothing": 1.0}


def test_query_weights_replace_counts_and_drop_weightless_terms() -> None:
    def by_length(tokens: list[str]) -> list[float]:
        return [float(len(token) > 4) * len(token) for token in tokens]

    weighted = replace(ENHANCED, query_weights=by_length)
    # stop words go first, as in enhanced; "maps" weighs 0 and leaves; "routes" twice adds up
    assert query_terms(weighted, "the routes and maps, routes") == {"rout": 12.0}
    # a query whose every term weighs 0 keeps its plain counts
    assert query_terms(weighted, "maps map") == {"map": 2.0}
    assert query_terms(ENHANCED, "the routes and routes") == {"rout": 2.0}
