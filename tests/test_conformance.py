"""contract §4 conformance: read-only searches over the shared catalogs give the exact expected rankings.

Each catalog is imported once per backend; every case must give the same names in the same
order with the same rounded scores (and the same unrounded doubles, which is what ties need).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from discovery import ToolCallError, ToolIndex
from discovery._diagnostics.explain import explain
from discovery._ranking.bm25 import round6
from discovery._ranking.ranker import PRUNE_FROM
from discovery._rules import Corpus
from store import GROUPS
from tests.catalogs import rank
from tests.conftest import BACKENDS, CONFORMANCE, SHARED, scratch_database, shared_json

FILES = ("ranking-real.json", "ranking-synthetic.json")


def catalog_of(vectors: dict[str, Any]) -> list[dict[str, Any]]:
    catalog = vectors["catalog"]
    if isinstance(catalog, str):
        path = SHARED / catalog
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return list(catalog)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def imported(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ToolIndex]]:
    """Per backend: each conformance catalog imported into a fresh index of its own."""
    directory = tmp_path_factory.mktemp("conformance")
    indexes: dict[str, ToolIndex] = {}
    with (
        scratch_database(backend, directory) as real_url,
        scratch_database(backend, directory) as synthetic_url,
    ):
        for name, url in zip(FILES, (real_url, synthetic_url), strict=True):
            if not (CONFORMANCE / name).exists():
                continue
            index = ToolIndex.open(url)
            index.upsert_tools(catalog_of(json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))))
            indexes[name] = index
        try:
            yield indexes
        finally:
            for index in indexes.values():
                index.close()


def _cases(name: str) -> list[Any]:
    path = CONFORMANCE / name
    if not path.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{path} is not present"))]
    cases = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return [pytest.param(case, id=f"{number}-{case['query'][:30]}") for number, case in enumerate(cases)]


PRUNING = [None, 0]
"""The ranker's ``prune_from`` for each run of a case: the default (these catalogs are searched
exhaustively) and 0, which takes the pruned path wherever a query has terms to skip."""


def check_case(index: ToolIndex, case: dict[str, Any], prune_from: int | None) -> None:
    if prune_from is not None:
        index.ranker.prune_from = prune_from
    try:
        _check_case(index, case)
    finally:
        index.ranker.prune_from = PRUNE_FROM


def _check_case(index: ToolIndex, case: dict[str, Any]) -> None:
    if case["error"]:
        with pytest.raises(ToolCallError) as raised:
            index.search(case["query"], limit=case["limit"])
        assert str(raised.value) == case["error"]
        return
    hits = index.search(case["query"], limit=case["limit"])
    assert [hit.name for hit in hits] == [row["name"] for row in case["expected"]]
    assert [round6(hit.score) for hit in hits] == [row["score6"] for row in case["expected"]]
    assert [hit.score for hit in hits] == [row["score"] for row in case["expected"]]


@pytest.mark.parametrize("prune_from", PRUNING, ids=["default", "pruned"])
@pytest.mark.parametrize("case", _cases("ranking-real.json"))
def test_real_catalog(imported: dict[str, ToolIndex], case: dict[str, Any], prune_from: int | None) -> None:
    check_case(imported["ranking-real.json"], case, prune_from)


@pytest.mark.parametrize("prune_from", PRUNING, ids=["default", "pruned"])
@pytest.mark.parametrize("case", _cases("ranking-synthetic.json"))
def test_synthetic_catalog(
    imported: dict[str, ToolIndex], case: dict[str, Any], prune_from: int | None
) -> None:
    check_case(imported["ranking-synthetic.json"], case, prune_from)


@pytest.mark.parametrize("name", FILES)
def test_corpus_statistics_match_the_store(imported: dict[str, ToolIndex], name: str) -> None:
    vectors = shared_json(f"conformance/{name}")
    index = imported[name]
    stats = index.stats()
    assert stats["tools"] == vectors["stats"]["N"]
    assert stats["avgdl"] == vectors["stats"]["avgdl"]
    # The read-only corpus is the whole catalog here (every tool is an MCP tool).
    assert stats["sources"] == {"mcp": vectors["stats"]["N"]}
    first = next(case for case in vectors["cases"] if case["expected"])
    explanation = explain(index, first["query"], first["expected"][0]["name"])
    assert (explanation.n_docs, explanation.avgdl) == (vectors["stats"]["N"], vectors["stats"]["avgdl"])
    assert rank(index, first["query"], Corpus((GROUPS.mcp,)), None).total_tools == vectors["stats"]["N"]
