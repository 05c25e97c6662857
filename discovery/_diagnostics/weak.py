"""Weak matches: tools that match a query only through very common terms.

Display only: the ranking is contract §4's, in which every matched term adds at least idf·δ, so a
tool sharing nothing but filler words with a query can still rank. Reads postings and statistics
only (no tool records), so a read-only search on the command line stays free of pydantic.
"""

from __future__ import annotations

from discovery._diagnostics.statistics import corpus_statistics
from discovery._index import ToolIndex
from discovery._params import Query, checked_query, searched_query
from discovery._ranking.ranker import Ranker
from discovery._rules import LOCAL_IDENTITY, read_only_corpus
from discovery._sessions.answer import is_common
from store import Reader


def weak_matches(index: ToolIndex, query: str, names: list[str], *, mode: str = "all") -> set[str]:
    """The tools among ``names`` whose every matched term of ``query`` (under the catalog's
    analyzer) is common in ``mode``'s read-only corpus (``is_common``, the rule a rich answer
    activates by); names that corpus does not rank are left out."""
    checked = searched_query(checked_query(query))
    with index.store.reading() as reader:
        return weak_matches_in(reader, index.ranker, checked, names, mode=mode)


def weak_matches_in(
    reader: Reader,
    ranker: Ranker,
    query: Query,
    names: list[str],
    *,
    mode: str,
    identity: str = LOCAL_IDENTITY,
) -> set[str]:
    """``weak_matches`` in the caller's transaction, of a query checked already, as ``identity``
    sees what was learned."""
    corpus = read_only_corpus(mode, identity)
    counts = ranker.query_terms(reader, query)
    terms = list(counts)
    tools = reader.catalog.tools_by_names(names)
    n_docs, _, df = corpus_statistics(reader, corpus, terms)
    postings = reader.index.postings_of_tools([tool.id for tool in tools.values()])
    learned = ranker.learned(reader, counts, corpus)
    taught: dict[int, set[str]] = {}
    for part in learned:  # a term a tool learned is matched as well as one of its text
        for tool_id in part.ids.tolist():
            taught.setdefault(tool_id, set()).add(part.term)
    common = {term for term in terms if is_common(term, df.get(term, 0), n_docs)}
    weak = set()
    for name, tool in tools.items():
        if tool.grp not in corpus.groups or name in corpus.excluded:
            continue
        matched = {p.term for p in postings.get(tool.id, []) if p.term in terms} | taught.get(tool.id, set())
        if matched and matched <= common:
            weak.add(name)
    return weak
