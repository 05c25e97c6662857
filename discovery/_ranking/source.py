"""What the ranker reads, and nothing more: the reads of a ``store.Reader`` that ranking uses.

The ranker is fed through these protocols, never through a database connection: a ``Reader``
of the store satisfies them, and so does anything else that holds the same rows (the tests rank
an in-memory catalog with the ranker alone). Scoring itself is arithmetic over the arrays they
return (``bm25``, ``postings``, ``topk``, ``learned``, ``fusion``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from store import (
        EmbeddingState,
        GroupStats,
        LearnedChange,
        LearnedTool,
        LearningState,
        StoredTool,
        StoredVectors,
        TermStats,
    )


class PostingArrays(Protocol):
    """One term's postings in one group, by tool id (a block of the store's postings)."""

    @property
    def tool_ids(self) -> np.ndarray: ...

    @property
    def tf(self) -> np.ndarray: ...

    @property
    def doc_len(self) -> np.ndarray: ...

    @property
    def size(self) -> int: ...


class LearnedArrays(Protocol):
    """The tools holding one learned term, ascending by id, and its tf in each."""

    @property
    def ids(self) -> np.ndarray: ...

    @property
    def tf(self) -> np.ndarray: ...


class CatalogSource(Protocol):
    def analyzer(self) -> str:
        """The stored name of the analyzer the catalog is indexed with."""
        ...

    def tools_by_ids(self, ids: Sequence[int]) -> dict[int, StoredTool]: ...

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]: ...

    def names_by_ids(self, ids: Sequence[int]) -> dict[int, str]: ...


class IndexSource(Protocol):
    def group_stats(self) -> dict[int, GroupStats]: ...

    def term_stats(self, terms: Sequence[str]) -> dict[str, tuple[int, dict[int, TermStats]]]:
        """``{term: (term id, {group: statistics})}`` of the terms the catalog holds."""
        ...

    def posting_blocks(self, term_id: int) -> Sequence[tuple[int, PostingArrays]]:
        """``(group, block)`` of a term's postings, in group order, each block by tool id."""
        ...

    def forward_postings(self, tool_ids: Sequence[int]) -> np.ndarray:
        """Every posting of the tools ``tool_ids`` (fields ``term_id``, ``grp``, ``tool_id``,
        ``tf``, ``doc_len``)."""
        ...

    def term_ids_of_tools(self, tool_ids: Sequence[int]) -> dict[int, frozenset[int]]: ...


class LearningSource(Protocol):
    def state(self) -> LearningState: ...

    def with_catalog_generation(self) -> tuple[int, LearningState]:
        """The catalog's generation and the learning switch, read together."""
        ...

    def changes_since(self, generation: int) -> list[LearnedChange]: ...

    def postings(
        self, terms: Sequence[str], min_identities: int, min_destructive: int
    ) -> Mapping[str, LearnedArrays]:
        """The postings of ``terms`` taught by enough identities (shared): their counts."""
        ...

    def own_postings(self, identity: str, terms: Sequence[str]) -> Mapping[str, LearnedArrays]:
        """The postings of ``terms`` ``identity`` taught: its sessions' counts."""
        ...

    def learned_tools(self) -> dict[str, LearnedTool]: ...


class VectorSource(Protocol):
    def state(self) -> EmbeddingState: ...

    def current(self, dimensions: int) -> StoredVectors: ...


class RankingSource(Protocol):
    """One consistent snapshot of what ranking reads, by concern (a ``store.Reader`` is one)."""

    @property
    def catalog(self) -> CatalogSource: ...

    @property
    def index(self) -> IndexSource: ...

    @property
    def learning(self) -> LearningSource: ...

    @property
    def vectors(self) -> VectorSource: ...
