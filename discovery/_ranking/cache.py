"""What a process keeps of the catalog to rank with: the queried terms (their statistics, and
their postings with what they add to the scores of the corpora searched last, least recently used
term first out of a byte budget), and the rows of documents a pruned search scored in full.

A ``Snapshot`` of one catalog generation owns one of each; the next generation gets new ones.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from discovery._ranking.source import RankingSource
from store import TermStats

if TYPE_CHECKING:
    # Loaded by the first search that reads postings (a snapshot is made before any).
    import numpy as np

    from discovery._ranking.postings import Contribution, TermPostings

CACHED_POSTINGS_BYTES = 128_000_000
"""Memory for the postings kept per process, least recently used term first out: the bytes of
the stored arrays (6 to 16 a posting), and for each contribution kept 8 more a posting, or 8 an
id when laid out densely, and 8 a posting for its ids unless the stored ids are 8-byte ones.
Enough for the common terms of a million-tool catalog's usual queries, so that repeated
searches do not read them again; serving stays within a few hundred MB."""

CONTRIBUTIONS_KEPT = 4
"""Contributions a term keeps, one per corpus (and query weight). Each session leaves its own
active tools out, so its corpus has its own average length and idf: the read-only corpus and a
few sessions searched in turn by one process each find theirs computed (one slot made them
recompute every time, a visible share of a search on a large catalog)."""

CACHED_TERM_STATS = 65_536
"""Terms whose id and statistics are kept per process."""

KnownTerm = tuple[int, dict[int, TermStats]]
"""A term's id and its statistics per group."""


class TermCache:
    """Statistics and postings of the terms searched, read from the store on first use.

    ``cached_bytes`` counts exactly what ``entries`` hold (postings and kept contributions), and
    is at most ``CACHED_POSTINGS_BYTES`` unless one term alone holds more."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, TermPostings | None] = OrderedDict()
        self.cached_bytes = 0
        self._stats: dict[str, KnownTerm | None] = {}

    def __contains__(self, term: str) -> bool:
        """Whether ``term``'s postings are at hand (or known to be none)."""
        return term in self.entries

    def clear(self) -> None:
        self.entries.clear()
        self.cached_bytes = 0
        self._stats.clear()

    def stats(self, reader: RankingSource, terms: Sequence[str]) -> dict[str, KnownTerm | None]:
        """Each term's id and statistics per group (``None``: no tool has it)."""
        missing = [term for term in terms if term not in self._stats]
        if missing:
            if len(self._stats) + len(missing) > CACHED_TERM_STATS:
                self._stats.clear()
            found = reader.index.term_stats(missing)
            for term in missing:
                self._stats[term] = found.get(term)
        return {term: self._stats[term] for term in terms}

    def postings(self, reader: RankingSource, terms: Sequence[str]) -> dict[str, TermPostings | None]:
        """The postings of ``terms`` (``None`` for a term no tool has), from the cache or the store.

        The answer is collected as the terms are found, not read back from the cache: the terms
        of one query may hold more postings than the cache does, and then loading the last ones
        evicts the first."""
        found: dict[str, TermPostings | None] = {}
        for term in terms:
            if term in self.entries:
                self.entries.move_to_end(term)
                found[term] = self.entries[term]
        missing = [term for term in terms if term not in found]
        if missing:
            from discovery._ranking.postings import load_postings

            stats = self.stats(reader, missing)
            for term in missing:
                known = stats[term]
                entry = None if known is None else load_postings(reader, *known)
                found[term] = entry
                self.entries[term] = entry
                self.cached_bytes += 0 if entry is None else entry.nbytes
                self.evict()
        return found

    def contribution(
        self,
        term: str,
        entry: TermPostings,
        groups: tuple[int, ...],
        avgdl: float,
        norms: Callable[[], np.ndarray | None],
        weight: float,
    ) -> Contribution:
        """``entry``'s contribution to a corpus at ``weight``, kept among its last
        ``CONTRIBUTIONS_KEPT``."""
        key = (avgdl, groups, weight)
        kept = entry.contributions
        found = kept.get(key)
        if found is not None:
            kept.move_to_end(key)
            return found
        found = entry.contribution(groups, avgdl, norms(), weight)
        if self.entries.get(term) is entry:  # not evicted by the query's own loading
            kept[key] = found
            self.cached_bytes += found.nbytes
            if len(kept) > CONTRIBUTIONS_KEPT:
                self.cached_bytes -= kept.popitem(last=False)[1].nbytes
        return found

    def evict(self) -> None:
        """Drop least recently used terms until the cache fits ``CACHED_POSTINGS_BYTES``."""
        while self.cached_bytes > CACHED_POSTINGS_BYTES and len(self.entries) > 1:
            _, evicted = self.entries.popitem(last=False)
            self.cached_bytes -= 0 if evicted is None else evicted.nbytes


FORWARD_COLUMNS = ("tool_id", "term_id", "tf", "doc_len")
"""The columns of the cached forward postings, one int64 row a posting."""

CACHED_FORWARD_LIMIT = 65_536
"""Documents whose own postings are kept per process, for the exact scores of pruned searches."""


class RowCache:
    """The postings each document holds (its row's indexed terms), by tool id, read on first use."""

    def __init__(self) -> None:
        self._by_tool: dict[int, np.ndarray] = {}

    def __contains__(self, tool_id: int) -> bool:
        return tool_id in self._by_tool

    def clear(self) -> None:
        self._by_tool.clear()

    def postings(self, reader: RankingSource, ids: list[int]) -> np.ndarray:
        """The postings documents ``ids`` hold (``reads.forward_postings``), as rows of
        ``FORWARD_COLUMNS`` in no particular order."""
        import numpy as np

        cache = self._by_tool
        parts: list[np.ndarray] = []
        missing: list[int] = []
        for i in ids:
            found = cache.get(i)
            if found is None:
                missing.append(i)
            else:
                parts.append(found)
        if missing:
            if len(cache) + len(missing) > CACHED_FORWARD_LIMIT:
                cache.clear()
            rows = reader.index.forward_postings(missing)
            table = np.column_stack([rows[column].astype(np.int64) for column in FORWARD_COLUMNS])
            parts.append(table)
            tool_ids = rows["tool_id"]
            # Each tool's postings come as one run.
            starts = [0, *(np.flatnonzero(tool_ids[1:] != tool_ids[:-1]) + 1).tolist()]
            ends = [*starts[1:], int(rows.size)]
            for start, end in zip(starts, ends, strict=True):
                if end > start:
                    cache[int(tool_ids[start])] = table[start:end]
            for i in missing:
                cache.setdefault(i, table[:0])
        if not parts:
            return np.empty((0, len(FORWARD_COLUMNS)), np.int64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


Key = TypeVar("Key")
Value = TypeVar("Value")


class ByTerm(Generic[Key, Value]):
    """Values by term and then by a key, at most ``limit`` of them (when full, all go: what is
    kept is cheap to compute again, and a search computes few); a term's values go together."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_term: dict[str, dict[Key, Value]] = {}
        self._size = 0

    def holds(self, term: str, key: Key) -> bool:
        found = self._by_term.get(term)
        return found is not None and key in found

    def get(self, term: str, key: Key) -> Value:
        return self._by_term[term][key]

    def put(self, term: str, key: Key, value: Value) -> None:
        if self._size >= self._limit:
            self.clear()
        values = self._by_term.setdefault(term, {})
        self._size += key not in values
        values[key] = value

    def drop(self, terms: Iterable[str]) -> None:
        for term in terms:
            self._size -= len(self._by_term.pop(term, ()))

    def clear(self) -> None:
        self._by_term.clear()
        self._size = 0
