"""Weak matches: tools that match a query only through very common terms.

Display only: the ranking is SPEC §4's, in which every matched term adds at least idf·δ, so a
tool sharing nothing but filler words with a query can still rank. Reads postings and statistics
only (no tool records), so a read-only search on the command line stays free of pydantic.
"""

from __future__ import annotations

from discovery.diagnostics.statistics import corpus_statistics
from discovery.index import ToolIndex
from discovery.params import checked_query, query_terms
from discovery.ranking.corpus import read_only_corpus
from store.audit import postings_of_tools
from store.engine import read_transaction
from store.reads import tools_by_names

COMMON_TERM_SHARE = 0.5
"""A term held by at least this share of the corpus' tools is a very common one (idf ≤ ln 2)."""


def weak_matches(index: ToolIndex, query: str, names: list[str], *, mode: str = "all") -> set[str]:
    """The tools among ``names`` whose every matched term of ``query`` is held by at least
    half of ``mode``'s read-only corpus; names that corpus does not rank are left out."""
    terms = list(query_terms(checked_query(query)))
    corpus = read_only_corpus(mode)
    with read_transaction(index.engine) as connection:
        tools = tools_by_names(connection, names)
        n_docs, _, df = corpus_statistics(connection, corpus, terms)
        postings = postings_of_tools(connection, [tool.id for tool in tools.values()])
    common = {term for term in terms if df.get(term, 0) >= COMMON_TERM_SHARE * n_docs}
    weak = set()
    for name, tool in tools.items():
        if tool.grp not in corpus.groups or name in corpus.excluded:
            continue
        matched = {p.term for p in postings.get(tool.id, []) if p.term in terms}
        if matched and matched <= common:
            weak.add(name)
    return weak
