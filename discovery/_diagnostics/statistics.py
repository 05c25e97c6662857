"""A read-only corpus' statistics as the ranking computes them: the groups' stored aggregates less
the corpus' excluded documents. Postings and aggregates only, no tool records."""

from __future__ import annotations

from discovery._rules import Corpus
from store import Reader, StoredPosting, StoredTool


def corpus_statistics(reader: Reader, corpus: Corpus, terms: list[str]) -> tuple[int, int, dict[str, int]]:
    """``(N, total length, df per term)`` of ``corpus``: the groups' aggregates less its excluded
    documents, as the ranking computes them."""
    groups = reader.index.group_stats()
    candidates = reader.catalog.tools_by_names(sorted(corpus.excluded)).values()
    excluded = [doc for doc in candidates if doc.grp in corpus.groups]
    stats = reader.index.term_stats(terms)
    excluded_df = _excluded_document_frequencies(
        reader.index.postings_of_tools([doc.id for doc in excluded]), excluded
    )
    n_docs = sum(groups[g].doc_count for g in corpus.groups) - len(excluded)
    total_len = sum(groups[g].total_len for g in corpus.groups) - sum(doc.doc_len for doc in excluded)
    dfs = {}
    for term in terms:
        by_group = stats[term][1] if term in stats else {}
        dfs[term] = sum(by_group[g].df for g in corpus.groups if g in by_group) - excluded_df.get(term, 0)
    return n_docs, total_len, dfs


def _excluded_document_frequencies(
    postings: dict[int, list[StoredPosting]], excluded: list[StoredTool]
) -> dict[str, int]:
    """How many excluded documents hold each term: the corpus df is the groups' df less these."""
    counts: dict[str, int] = {}
    for doc in excluded:
        for posting in postings.get(doc.id, []):
            if posting.term is not None:
                counts[posting.term] = counts.get(posting.term, 0) + 1
    return counts
