"""Our ranking (contract §4) in plain Python dicts, rebuilt from the catalog on every open.

This is what a host without a persistent index pays at every session start: read the tool
records, tokenize every field, build postings. It uses the project's own tokenizer and scoring
functions and the corpus of a read-only search in mode ``all`` (contract §5: essential and internal
tools are left out), so its rankings are ours; only the storage differs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from bench.peers import Hit, Raw, read_catalog, tool_records


class MemoryPeer:
    """Postings ``term -> {doc: weighted tf}`` with exact top-k, ties by collation of names."""

    name = "memory"
    incremental = True
    persistent = False

    def __init__(self, directory: Path, catalog: Path) -> None:
        from discovery import _params as params
        from discovery._catalog.indexing import record_fields
        from discovery._ranking import bm25 as scoring
        from discovery._ranking import fields
        from discovery._rules import DEFAULT_ESSENTIAL_NAMES, INTERNAL_NAMES
        from discovery._text.collation import collation_key

        self.scoring = scoring
        self.fields = fields
        self.params = params
        self.record_fields = record_fields
        self.collation_key = collation_key
        self.catalog = catalog
        self.never_searched = frozenset(DEFAULT_ESSENTIAL_NAMES) | INTERNAL_NAMES
        self.postings: dict[str, dict[int, int]] = {}
        self.docs: dict[str, tuple[int, dict[str, int]]] = {}
        self.names: dict[int, str] = {}
        self.lengths: dict[int, int] = {}
        self.norms: dict[int, float] | None = None
        self.total_length = 0
        self.next_id = 0

    def prepare(self, raw: Sequence[Raw]) -> Any:
        return tool_records(raw)

    def build(self, prepared: Any) -> None:
        for record in prepared:
            self._add(record)

    def open(self) -> None:
        self.build(tool_records(read_catalog(self.catalog)))

    def searchable(self, record: Any) -> bool:
        """In the corpus of a read-only search in mode ``all``: MCP tools and discoverable
        non-MCP tools, less the essential and internal ones."""
        if record.name in self.never_searched or record.load_mode == "essential":
            return False
        return bool(record.is_mcp or record.load_mode == "discoverable")

    def _add(self, record: Any) -> None:
        if record.name in self.docs:
            self.remove(record.name)
        if not self.searchable(record):
            return
        frequencies = self.fields.document_term_frequencies(self.record_fields(record))
        doc = self.next_id
        self.next_id += 1
        for term, tf in frequencies.items():
            self.postings.setdefault(term, {})[doc] = tf
        length = sum(frequencies.values())
        self.docs[record.name] = (doc, frequencies)
        self.names[doc] = record.name
        self.lengths[doc] = length
        self.total_length += length
        self.norms = None

    def upsert(self, raw: Raw) -> None:
        self._add(tool_records([raw])[0])

    def remove(self, name: str) -> None:
        entry = self.docs.pop(name, None)
        if entry is None:
            return
        doc, frequencies = entry
        for term in frequencies:
            posting = self.postings[term]
            del posting[doc]
            if not posting:
                del self.postings[term]
        del self.names[doc]
        self.total_length -= self.lengths.pop(doc)
        self.norms = None

    def _current_norms(self) -> dict[int, float]:
        """Each document's ``k1 · (1 − b + b · len/avgdl)``, recomputed after a write."""
        if self.norms is None:
            avgdl = self.scoring.average_length(len(self.lengths), self.total_length)
            norm = self.scoring.length_norm
            self.norms = {doc: norm(length, avgdl) for doc, length in self.lengths.items()}
        return self.norms

    def search(self, query: str, k: int) -> list[Hit]:
        norms = self._current_norms()
        n_docs = len(self.names)
        term_score = self.scoring.term_score
        scores: dict[int, float] = {}
        for term, qtf in self.params.query_terms(query).items():
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = self.scoring.idf(n_docs, len(posting))
            for doc, tf in posting.items():
                scores[doc] = scores.get(doc, 0.0) + term_score(qtf, idf, tf, norms[doc])
        return self._top(scores, k)

    def _top(self, scores: dict[int, float], k: int) -> list[Hit]:
        best = heapq.nlargest(k, scores.items(), key=itemgetter(1))
        if not best:
            return []
        cutoff = best[-1][1]
        tied = [(doc, score) for doc, score in scores.items() if score >= cutoff and score > 0]
        tied.sort(key=lambda item: (-item[1], self.collation_key(self.names[item[0]])))
        return [(self.names[doc], score) for doc, score in tied[:k]]

    def close(self) -> None:
        self.postings.clear()
