"""The ranker without a database: fed an in-memory catalog through its source protocols
(``discovery._ranking.source``), it ranks as contract §4's brute-force reference does, pruned or
exhaustive, with excluded names or without."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from discovery._params import searched_query
from discovery._ranking.ranker import Ranker
from discovery._rules import INTERNAL_NAMES, Corpus, read_only_corpus
from discovery._text.analyzers import REFERENCE
from store import (
    GROUPS,
    EmbeddingState,
    GroupStats,
    LearnedChange,
    LearnedTool,
    LearningState,
    StoredTool,
    StoredVectors,
    TermStats,
)
from store._changes import CHANGE_DTYPE
from store._learning import StoredLearnedPostings
from store._postings import PostingBlock
from tests.examples import examples
from tests.test_ranking import QUERIES, catalogs, reference_ranking, summary_of, weighted_terms


def group_of(record: dict[str, Any]) -> int:
    load_mode = record.get("load_mode", "discoverable")
    if record["name"] in INTERNAL_NAMES or load_mode == "essential":
        return GROUPS.fixed
    if record["name"].startswith("mcp__"):
        return GROUPS.mcp
    return GROUPS.local if load_mode == "discoverable" else GROUPS.fixed


class MemoryCatalog:
    def __init__(self, tools: list[StoredTool]) -> None:
        self.by_id = {tool.id: tool for tool in tools}
        self.by_name = {tool.name: tool for tool in tools}

    def analyzer(self) -> str:
        return REFERENCE.stored

    def tools_by_ids(self, ids: Sequence[int]) -> dict[int, StoredTool]:
        return {i: self.by_id[i] for i in ids if i in self.by_id}

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        return {name: self.by_name[name] for name in names if name in self.by_name}

    def names_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        return {i: self.by_id[i].name for i in ids if i in self.by_id}


class MemoryIndex:
    """Postings of every term, by group, in tool-id order."""

    def __init__(self, tools: list[StoredTool], terms: dict[int, Counter[str]]) -> None:
        self.tools = tools
        self.terms = terms
        self.term_ids = {
            term: i for i, term in enumerate(sorted({t for held in terms.values() for t in held}), 1)
        }

    def group_stats(self) -> dict[int, GroupStats]:
        return {
            grp: GroupStats(
                sum(1 for tool in self.tools if tool.grp == grp),
                sum(tool.doc_len for tool in self.tools if tool.grp == grp),
            )
            for grp in GROUPS
        }

    def term_stats(self, terms: Sequence[str]) -> dict[str, tuple[int, dict[int, TermStats]]]:
        found = {}
        for term in terms:
            if term not in self.term_ids:
                continue
            by_group: dict[int, TermStats] = {}
            for tool in self.tools:
                tf = self.terms[tool.id].get(term, 0)
                if tf:
                    held = by_group.get(tool.grp, TermStats(0, 0))
                    by_group[tool.grp] = TermStats(held.df + 1, max(held.max_tf, tf))
            found[term] = (self.term_ids[term], by_group)
        return found

    def posting_blocks(self, term_id: int) -> list[tuple[int, PostingBlock]]:
        term = next(text for text, i in self.term_ids.items() if i == term_id)
        blocks = []
        for grp in GROUPS:
            held = [tool for tool in self.tools if tool.grp == grp and self.terms[tool.id].get(term)]
            if held:
                ids = np.array([tool.id for tool in held], np.int64)
                tf = np.array([self.terms[tool.id][term] for tool in held], np.int32)
                lengths = np.array([tool.doc_len for tool in held], np.int32)
                blocks.append((grp, PostingBlock(ids, tf, lengths)))
        return blocks

    def forward_postings(self, tool_ids: Sequence[int]) -> np.ndarray:
        rows = [
            (self.term_ids[term], tool.grp, tool.id, tf, tool.doc_len)
            for tool in self.tools
            if tool.id in set(tool_ids)
            for term, tf in self.terms[tool.id].items()
        ]
        return np.array(rows, CHANGE_DTYPE)

    def term_ids_of_tools(self, tool_ids: Sequence[int]) -> dict[int, frozenset[int]]:
        return {i: frozenset(self.term_ids[term] for term in self.terms.get(i, {})) for i in tool_ids}


class NothingLearned:
    def state(self) -> LearningState:
        return LearningState(enabled=False, generation=0)

    def with_catalog_generation(self) -> tuple[int, LearningState]:
        return 1, self.state()

    def changes_since(self, generation: int) -> list[LearnedChange]:
        return []

    def postings(
        self, terms: Sequence[str], min_identities: int, min_destructive: int
    ) -> dict[str, StoredLearnedPostings]:
        return {}

    def own_postings(self, identity: str, terms: Sequence[str]) -> dict[str, StoredLearnedPostings]:
        return {}

    def learned_tools(self) -> dict[str, LearnedTool]:
        return {}

    def lengths(self, tool_names: Sequence[str]) -> dict[str, int]:
        return {}


class NoVectors:
    def state(self) -> EmbeddingState:
        return EmbeddingState(None, None, 0, 0.5)

    def current(self, dimensions: int) -> StoredVectors:
        raise AssertionError("an index without a model has no vectors to read")


class MemorySource:
    """A catalog held in memory, as one read snapshot of the store would show it."""

    def __init__(self, catalog: list[dict[str, Any]]) -> None:
        tools, terms = [], {}
        for tool_id, record in enumerate(catalog, 1):
            held = weighted_terms(record)
            tools.append(
                StoredTool(
                    id=tool_id,
                    name=record["name"],
                    label=record.get("label") or record["name"],
                    description=record.get("description", ""),
                    summary=summary_of(record.get("description", "")),
                    source="mcp" if record["name"].startswith("mcp__") else "builtin",
                    server_name=record.get("server_name"),
                    mcp_tool_name=record.get("mcp_tool_name"),
                    schema_keys=list(record.get("schema_keys", [])),
                    input_schema=None,
                    load_mode=record.get("load_mode", "discoverable"),
                    grp=group_of(record),
                    doc_len=sum(held.values()),
                )
            )
            terms[tool_id] = held
        self.catalog = MemoryCatalog(tools)
        self.index = MemoryIndex(tools, terms)
        self.learning = NothingLearned()
        self.vectors = NoVectors()


def searched(
    source: MemorySource, query: str, corpus: Corpus, prune_from: int | None
) -> list[tuple[str, float]]:
    ranking = Ranker(prune_from=prune_from).search(source, searched_query(query), corpus, 10_000)
    return [(hit.name, hit.score) for hit in ranking.hits]


@settings(max_examples=examples(60), deadline=None)
@given(catalog=catalogs(), query=QUERIES, mode=st.sampled_from(["all", "mcp-only"]), data=st.data())
def test_the_ranker_alone_ranks_as_the_reference(
    catalog: list[dict[str, Any]], query: str, mode: str, data: st.DataObject
) -> None:
    source = MemorySource(catalog)
    corpus = read_only_corpus(mode)
    expected = reference_ranking(catalog, query, mode=mode)
    assert searched(source, query, corpus, prune_from=None) == expected  # exhaustive
    assert searched(source, query, corpus, prune_from=0) == expected  # pruned
    names = [record["name"] for record in catalog]
    active = frozenset(data.draw(st.sets(st.sampled_from([*names, "unknown"]))))
    excluded = Corpus(corpus.groups, corpus.excluded | active)
    assert searched(source, query, excluded, prune_from=None) == reference_ranking(
        catalog, query, mode=mode, excluded=active
    )


def test_a_worked_example_without_any_database() -> None:
    catalog = [
        {"name": "mcp__github__create_issue", "description": "Create an issue", "server_name": "github"},
        {"name": "mcp__slack__post", "description": "Post a message", "server_name": "slack"},
    ]
    hits = searched(MemorySource(catalog), "create issue", read_only_corpus("all"), prune_from=None)
    assert [name for name, _ in hits] == ["mcp__github__create_issue"]
