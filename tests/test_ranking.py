"""The store-backed ranking against a brute-force BM25+ written here from contract §4 alone.

The reference re-tokenizes every document of the corpus on each query and evaluates the formula
in the order contract §4 gives, so scores must agree bit for bit, not approximately. Only ``ln`` is
borrowed: it must be JavaScript's ``Math.log`` (``test_scoring`` pins it to V8's values).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyuca import Collator

from discovery import ToolIndex
from discovery._ranking import cache as cache_module
from discovery._ranking import postings as postings_module
from discovery._ranking.bm25 import js_log
from discovery._ranking.cache import CONTRIBUTIONS_KEPT
from discovery._rules import Corpus
from discovery._text.tokenizer import tokenize
from discovery.errors import QueryWithoutTerms
from store import GROUPS
from store._reads import CatalogReads
from tests.catalogs import rank
from tests.conftest import shared_path
from tests.examples import examples

WEIGHTS = {"name": 6, "label": 4, "mcp_tool_name": 4, "server_name": 2, "summary": 2, "schema_key": 1}
ESSENTIAL_NAMES = {"read", "bash", "edit", "write", "glob", "eval"}
INTERNAL_NAMES = {"search_tool_bm25", "resolve", "yield", "report_finding", "report_tool_issue"}
MODE_GROUPS = {"all": (GROUPS.local, GROUPS.mcp), "mcp-only": (GROUPS.mcp,)}


class LazyCollator:
    """pyuca's collator, its table loaded on the first key asked for: the load takes a good part
    of a second, and most of a worker's tests never sort by it."""

    @functools.cached_property
    def _collator(self) -> Collator:
        return Collator()

    def sort_key(self, text: str) -> tuple[int, ...]:
        return tuple(self._collator.sort_key(text))


COLLATOR = LazyCollator()

Hit = tuple[str, float]
Terms = Callable[[str], list[str]]


def weighted_terms(record: dict[str, Any], terms_of: Terms = tokenize) -> Counter[str]:
    """contract §4: every token occurrence adds its field's weight (``terms_of``: the analyzer's
    document terms, the reference tokenizer's by default)."""
    fields = [("name", record["name"]), ("label", record.get("label") or record["name"])]
    fields += [(field, record[field]) for field in ("mcp_tool_name", "server_name") if record.get(field)]
    fields.append(("summary", record.get("summary", summary_of(record.get("description", "")))))
    fields += [("schema_key", key) for key in record.get("schema_keys", [])]
    counts: Counter[str] = Counter()
    for field, text in fields:
        for token in terms_of(text):
            counts[token] += WEIGHTS[field]
    return counts


def summary_of(description: str) -> str:
    """contract §2: the first 200 UTF-16 code units, as JavaScript's ``slice`` takes them."""
    units = description.encode("utf-16-le", "surrogatepass")
    return units[:400].decode("utf-16-le", "surrogatepass")


def in_corpus(record: dict[str, Any], mode: str) -> bool:
    """contract §5 for a session with nothing active and default settings."""
    name, load_mode = record["name"], record.get("load_mode", "discoverable")
    if name in INTERNAL_NAMES or name in ESSENTIAL_NAMES or load_mode == "essential":
        return False
    if name.startswith("mcp__"):
        return True
    return mode == "all" and load_mode == "discoverable"


def reference_ranking(
    catalog: list[dict[str, Any]],
    query: str,
    *,
    mode: str = "all",
    excluded: frozenset[str] = frozenset(),
    analyzer: tuple[Terms, Terms] = (tokenize, tokenize),
) -> list[Hit]:
    """contract §4's formula, evaluated in its order; ``analyzer`` gives the document and the query
    terms (the reference tokenizer's for both by default)."""
    document_terms, query_terms = analyzer
    documents = {
        record["name"]: weighted_terms(record, document_terms)
        for record in catalog
        if in_corpus(record, mode) and record["name"] not in excluded
    }
    n_docs = len(documents)
    lengths = {name: sum(terms.values()) for name, terms in documents.items()}
    avgdl = sum(lengths.values()) / n_docs if n_docs else 0.0
    if avgdl == 0:
        avgdl = 1.0
    query_counts = Counter(query_terms(query))  # insertion order = first appearance
    hits: list[Hit] = []
    for name, terms in documents.items():
        score = 0.0
        for term, qtf in query_counts.items():
            tf = terms.get(term, 0)
            if tf == 0:
                continue
            df = sum(1 for other in documents.values() if term in other)
            idf = js_log(1 + (n_docs - df + 0.5) / (df + 0.5))
            norm = 1.2 * (1 - 0.75 + 0.75 * (lengths[name] / avgdl))
            score += qtf * idf * ((tf * (1.2 + 1)) / (tf + norm) + 1.0)
        if score > 0:
            hits.append((name, score))
    return sorted(hits, key=lambda hit: (-hit[1], COLLATOR.sort_key(hit[0]), hit[0]))


def searched(index: ToolIndex, query: str, *, limit: int = 10_000, mode: str = "all") -> list[Hit]:
    return [(hit.name, hit.score) for hit in index.search(query, limit=limit, mode=mode)]


def ranked(index: ToolIndex, query: str, corpus: Corpus, limit: int | None = None) -> list[Hit]:
    return [(hit.name, hit.score) for hit in rank(index, query, corpus, limit).hits]


# Random catalogs: few words, so terms repeat, scores tie and collation decides.
WORDS = ["issue", "Issue", "pull", "request", "github", "slack", "message", "post", "createIssue", "a", "b"]
PLAIN_NAMES = [
    "a_b",
    "aB",
    "b",
    "Tool",
    "tool_a",
    "tool1",
    "grep",
    "find",
    "Find",
    "read",
    "bash",
    "glob",
    "resolve",
    "yield",
    "web_fetch",
    "webFetch",
    "notes",
]  # fmt: skip  (a record named search_tool_bm25 is refused on import; resolve and yield stay internal)
MCP_NAMES = [
    f"mcp__{server}__{tool}"
    for server in ("github", "slack", "Git")
    for tool in ("create_issue", "createIssue", "post", "b", "pull_request")
]
TEXT = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)


@st.composite
def tool_records(draw: st.DrawFn, name: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": name,
        "description": draw(TEXT),
        "schema_keys": sorted(draw(st.sets(st.sampled_from(["owner", "repo", "body", "issue_id", "text"])))),
        "load_mode": draw(st.sampled_from(["discoverable", "discoverable", "none", "essential"])),
    }
    if draw(st.booleans()):
        record["label"] = draw(TEXT)
    if name.startswith("mcp__"):
        _, server, tool = name.split("__")
        record.update(server_name=server, mcp_tool_name=tool, label=f"{server}/{tool}")
    return record


@st.composite
def catalogs(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(PLAIN_NAMES + MCP_NAMES), unique=True, max_size=14))
    return [draw(tool_records(name)) for name in names]


QUERIES = st.lists(
    st.sampled_from([*WORDS, "mcp", "tool", "git", "nothing", "1"]), min_size=1, max_size=5
).map(" ".join)
RANDOM = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@RANDOM
@given(
    catalog=catalogs(),
    queries=st.lists(QUERIES, min_size=1, max_size=3),
    mode=st.sampled_from(["all", "mcp-only"]),
)
def test_search_equals_the_brute_force_reference(
    index: ToolIndex, catalog: list[dict[str, Any]], queries: list[str], mode: str
) -> None:
    index.upsert_tools(catalog, replace=True)
    for query in queries:
        assert searched(index, query, mode=mode) == reference_ranking(catalog, query, mode=mode)


@RANDOM
@given(catalog=catalogs(), query=QUERIES, data=st.data())
def test_excluded_names_leave_the_corpus_and_its_statistics(
    index: ToolIndex, catalog: list[dict[str, Any]], query: str, data: st.DataObject
) -> None:
    index.upsert_tools(catalog, replace=True)
    mode = data.draw(st.sampled_from(["all", "mcp-only"]))
    names = [record["name"] for record in catalog]
    # Active tools, as a session would exclude them; unknown names are ignored.
    active = data.draw(st.sets(st.sampled_from([*names, "mcp__gone__x", "unknown"])))
    excluded = frozenset(active) | frozenset(ESSENTIAL_NAMES) | frozenset(INTERNAL_NAMES)
    expected = reference_ranking(catalog, query, mode=mode, excluded=excluded)
    assert ranked(index, query, Corpus(MODE_GROUPS[mode], excluded)) == expected
    assert rank(index, query, Corpus(MODE_GROUPS[mode], excluded), None).total_tools == sum(
        1 for record in catalog if in_corpus(record, mode) and record["name"] not in excluded
    )


@RANDOM
@given(catalog=catalogs(), query=QUERIES, limit=st.integers(min_value=1, max_value=16))
def test_a_limit_keeps_a_prefix_of_the_full_ranking(
    index: ToolIndex, catalog: list[dict[str, Any]], query: str, limit: int
) -> None:
    index.upsert_tools(catalog, replace=True)
    assert searched(index, query, limit=limit) == reference_ranking(catalog, query)[:limit]


@pytest.mark.parametrize(
    "dense_share", [0, postings_module.DENSE_SHARE, 10**9], ids=["sparse", "default", "dense"]
)
@RANDOM
@given(
    catalog=catalogs(),
    query=QUERIES,
    limit=st.one_of(st.none(), st.integers(min_value=1, max_value=12)),
    data=st.data(),
)
def test_contribution_layouts_and_top_selection_rank_as_the_reference(
    index: ToolIndex,
    monkeypatch: pytest.MonkeyPatch,
    dense_share: int,
    catalog: list[dict[str, Any]],
    query: str,
    limit: int | None,
    data: st.DataObject,
) -> None:
    """Contributions laid out per posting, by tool id, or as their share decides, in any corpus,
    with limits below and above the number of matches: the top is cut at a floor taken from one
    term's documents, among the terms' documents or the whole score array."""
    monkeypatch.setattr(postings_module, "DENSE_SHARE", dense_share)
    index.upsert_tools(catalog, replace=True)
    names = [record["name"] for record in catalog] or ["unknown"]
    mode = data.draw(st.sampled_from(["all", "mcp-only"]))
    excluded = frozenset(data.draw(st.sets(st.sampled_from(names)))) | ESSENTIAL_NAMES | INTERNAL_NAMES
    expected = reference_ranking(catalog, query, mode=mode, excluded=excluded)
    got = ranked(index, query, Corpus(MODE_GROUPS[mode], excluded), limit)
    assert got == (expected if limit is None else expected[:limit])


@pytest.mark.parametrize("dense_share", [0, postings_module.DENSE_SHARE], ids=["sparse", "default"])
@pytest.mark.parametrize("matching", [3, 10, 20, 30])
def test_the_top_is_exact_whatever_share_of_the_catalog_matches(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch, dense_share: int, matching: int
) -> None:
    """Thirty tools, the last ``matching`` of them holding ``alpha``, with few distinct term
    frequencies and lengths so that scores tie, and so do the floor the top is cut at and the
    limit-th best score."""
    monkeypatch.setattr(postings_module, "DENSE_SHARE", dense_share)
    catalog = [
        {
            "name": f"tool_{i:02d}",
            "description": ("alpha " * (1 + i % 3) if i >= 30 - matching else "") + "beta " * (1 + i % 4),
        }
        for i in range(30)
    ]
    index.upsert_tools(catalog)
    for query in ("alpha", "alpha beta", "beta"):
        for limit in (1, 5, 8, 40):
            assert searched(index, query, limit=limit) == reference_ranking(catalog, query)[:limit]


@pytest.mark.parametrize("dense_share", [0, 10**9], ids=["sparse", "dense"])
def test_a_search_that_failed_midway_leaves_no_scores_behind(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch, dense_share: int
) -> None:
    """The score array is reused from search to search; one that fails after scoring (here
    reading the names of its hits) must not leave its scores to the next."""
    monkeypatch.setattr(postings_module, "DENSE_SHARE", dense_share)
    catalog = [{"name": f"tool_{i}", "description": "alpha " * (1 + i % 3)} for i in range(12)]
    index.upsert_tools(catalog)

    def unreadable(view: CatalogReads, ids: Any) -> dict[int, str]:
        raise RuntimeError("names unreadable")

    with monkeypatch.context() as patch:
        patch.setattr(CatalogReads, "names_by_ids", unreadable)
        with pytest.raises(RuntimeError, match="names unreadable"):
            index.search("alpha", limit=5)
    assert searched(index, "alpha", limit=5) == reference_ranking(catalog, "alpha")[:5]


def test_a_limit_below_one_ranks_nothing(index: ToolIndex) -> None:
    index.upsert_tools([{"name": "grep", "description": "search files"}])
    assert rank(index, "search", Corpus(MODE_GROUPS["all"]), 0).hits == []
    assert ranked(index, "search", Corpus(MODE_GROUPS["all"]), 1)[0][0] == "grep"


def cache_is_consistent(index: ToolIndex, budget: int) -> None:
    """The postings cache counts exactly what it holds, and holds no more than its budget."""
    assert index.ranker._current is not None
    cache = index.ranker._current.terms
    held = [entry for entry in cache.entries.values() if entry is not None]
    assert cache.cached_bytes == sum(entry.nbytes for entry in held)
    assert cache.cached_bytes <= budget or len(cache.entries) <= 1
    assert all(len(entry.contributions) <= CONTRIBUTIONS_KEPT for entry in held)


@RANDOM
@given(
    catalog=catalogs(),
    queries=st.lists(QUERIES, min_size=1, max_size=4),
    budget=st.sampled_from([0, 64, 160, 400, 4_000, cache_module.CACHED_POSTINGS_BYTES]),
    data=st.data(),
)
def test_corpora_searched_in_turn_rank_as_the_reference_whatever_the_cache_keeps(
    index: ToolIndex,
    monkeypatch: pytest.MonkeyPatch,
    catalog: list[dict[str, Any]],
    queries: list[str],
    budget: int,
    data: st.DataObject,
) -> None:
    """More corpora than a term keeps contributions for, searched in turn, twice, under budgets
    from none at all (every term evicted as the next one loads, mid-query) to the default."""
    monkeypatch.setattr(cache_module, "CACHED_POSTINGS_BYTES", budget)
    # The index outlives an example, and an unchanged catalog keeps its cache, filled under the
    # previous example's budget: bring it within this one's, as loading the next term would.
    if index.ranker._current is not None:
        index.ranker._current.terms.evict()
    index.upsert_tools(catalog, replace=True)
    names = [record["name"] for record in catalog] or ["unknown"]
    corpora = [
        (mode, frozenset(data.draw(st.sets(st.sampled_from(names)))) | ESSENTIAL_NAMES | INTERNAL_NAMES)
        for mode in ["all", "mcp-only"] * (CONTRIBUTIONS_KEPT // 2 + 1)
    ]
    for _ in range(2):
        for query in queries:
            for mode, excluded in corpora:
                expected = reference_ranking(catalog, query, mode=mode, excluded=excluded)
                assert ranked(index, query, Corpus(MODE_GROUPS[mode], excluded)) == expected
                cache_is_consistent(index, budget)


def test_a_query_holding_more_postings_than_the_cache_ranks_them_all(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "CACHED_POSTINGS_BYTES", 1)
    catalog = [{"name": f"tool_{i}", "description": f"alpha beta gamma {'delta ' * i}"} for i in range(6)]
    index.upsert_tools(catalog)
    assert searched(index, "alpha beta gamma delta") == reference_ranking(catalog, "alpha beta gamma delta")
    cache_is_consistent(index, 1)


def test_contributions_count_against_the_cache_budget(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two terms' postings fill the budget exactly; their contributions to a corpus overflow it."""
    catalog = [{"name": f"tool_{i}", "description": f"alpha beta {'gamma ' * i}"} for i in range(8)]
    index.upsert_tools(catalog)
    # None of these tools is an MCP tool: this loads both terms and computes no contribution.
    assert searched(index, "alpha beta", mode="mcp-only") == []
    assert index.ranker._current is not None
    cache = index.ranker._current.terms
    postings_only = cache.cached_bytes
    assert postings_only > 0 and len(cache.entries) == 2
    monkeypatch.setattr(cache_module, "CACHED_POSTINGS_BYTES", postings_only)
    assert searched(index, "alpha beta") == reference_ranking(catalog, "alpha beta")
    cache_is_consistent(index, postings_only)
    assert len(cache.entries) == 1


# Six tools whose only difference is the name: the name's tokens are padded with schema keys so
# every document has the same length, the label is shared, and the query matches the summary.
COLLATION_ORDER = ["a_b", "aB", "b", "Tool", "tool_a", "tool1"]


def tied_tools(names: Sequence[str] = COLLATION_ORDER) -> list[dict[str, Any]]:
    tools = []
    for name in reversed(names):  # catalog order must not matter
        padding = 6 * (2 - len(tokenize(name)))
        tools.append(
            {
                "name": name,
                "label": "same",
                "description": "shared words",
                "schema_keys": [f"pad{n}" for n in range(padding)],
            }
        )
    return tools


@pytest.fixture
def tied(index: ToolIndex) -> Iterator[ToolIndex]:
    index.upsert_tools(tied_tools())
    yield index


def test_ties_are_ordered_by_unicode_collation_not_code_points(tied: ToolIndex) -> None:
    hits = searched(tied, "shared")
    assert [name for name, _ in hits] == COLLATION_ORDER
    assert len({score for _, score in hits}) == 1
    assert sorted(COLLATION_ORDER) != COLLATION_ORDER
    assert hits == reference_ranking(tied_tools(), "shared")


def test_metatool_queries_rank_as_the_reference(index: ToolIndex) -> None:
    """Real, model-written queries over a real catalog (MetaTool: 199 tools, 21,060 queries): one
    query in 350, across the whole file, ranked by the index and by the brute-force reference."""
    directory = shared_path("data/metatool")
    catalog = read_jsonl(directory / "catalog.jsonl")
    queries = [row["query"] for row in read_jsonl(directory / "queries.jsonl")[::350]]
    index.upsert_tools(catalog)
    assert len(queries) == 61
    for query in queries:
        assert searched(index, query, limit=8) == reference_ranking(catalog, query)[:8], query


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_ties_between_non_ascii_names_follow_the_full_collation(index: ToolIndex) -> None:
    names = ["Äpfel", "apfel", "éclair", "Eclair", "zèbre", "Zebra", "Ωmega", "omega", "ǆungla"]
    tools = tied_tools(names)
    index.upsert_tools(tools)
    hits = searched(index, "shared", limit=len(names))
    assert len(hits) == len(names) and len({score for _, score in hits}) == 1
    assert hits == reference_ranking(tools, "shared")
    assert [name for name, _ in hits] != sorted(names)


@pytest.mark.parametrize("limit", range(1, 8))
def test_a_limit_inside_a_tie_keeps_the_first_names_in_collation_order(tied: ToolIndex, limit: int) -> None:
    assert [name for name, _ in searched(tied, "shared words", limit=limit)] == COLLATION_ORDER[:limit]


def test_a_limit_between_score_levels(tied: ToolIndex) -> None:
    # "b" also matches the name of a_b, aB and b: they lead, then the other three tie.
    hits = searched(tied, "shared b", limit=4)
    assert [name for name, _ in hits] == ["a_b", "aB", "b", "Tool"]
    assert hits[2][1] > hits[3][1]
    assert hits == reference_ranking(tied_tools(), "shared b")[:4]


def test_modes_draw_on_different_groups(index: ToolIndex) -> None:
    catalog = [
        {"name": "grep", "description": "search files"},
        {"name": "read", "description": "read files"},  # essential by name
        {"name": "archive", "description": "files", "load_mode": "none"},  # never discoverable
        {
            "name": "mcp__fs__search",
            "description": "search files",
            "server_name": "fs",
            "mcp_tool_name": "search",
        },
        {"name": "mcp__fs__pin", "description": "files", "load_mode": "essential"},
    ]
    index.upsert_tools(catalog)
    assert [name for name, _ in searched(index, "files", mode="all")] == ["grep", "mcp__fs__search"]
    assert [name for name, _ in searched(index, "files", mode="mcp-only")] == ["mcp__fs__search"]
    for mode in MODE_GROUPS:
        assert searched(index, "search files", mode=mode) == reference_ranking(
            catalog, "search files", mode=mode
        )


def test_query_terms_count_repeats_and_unknown_terms_add_nothing(index: ToolIndex) -> None:
    index.upsert_tools(
        [{"name": "grep", "description": "search files"}, {"name": "ls", "description": "list"}]
    )
    once, twice = searched(index, "search"), searched(index, "search search zzz")
    assert [name for name, _ in twice] == ["grep"]
    assert twice[0][1] == 2 * once[0][1]


def test_query_without_terms_is_an_error(index: ToolIndex) -> None:
    index.upsert_tools([{"name": "grep"}])
    with pytest.raises(QueryWithoutTerms, match=r"^Query must contain at least one letter or number\.$"):
        index.search("?! —")


def test_empty_catalog_ranks_nothing(index: ToolIndex) -> None:
    assert searched(index, "anything") == []
    assert rank(index, "anything", Corpus(MODE_GROUPS["all"]), None).total_tools == 0
