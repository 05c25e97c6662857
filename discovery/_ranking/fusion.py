"""Fusing the lexical score with the semantic one: a convex combination of normalised scores.

For a query with lexical scores ``L`` (BM25+, exact) and cosines ``c`` with the query's vector,
a tool of the corpus scores ``(1 - w) * L / max L + w * max(c, 0) / max c``, both maxima over the
corpus; a part whose maximum is 0 adds nothing. Only tools with a positive fused score place, so
a query that neither matches a term nor resembles a tool finds nothing. Pure functions of arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from discovery._ranking.topk import RankedTool, ordered
from discovery._rules import Corpus
from store import StoredVectors

if TYPE_CHECKING:
    from discovery._ranking.semantic import SemanticQuery

SCAN_ROWS = 1024
"""Vectors unpacked to float32 at a time, into one buffer: the packed matrix is never widened
whole (at a large catalog's size that would cost eight times its memory on every search), and a
block this size stays in the CPU's cache between its unpacking and its product."""


def cosines(vectors: StoredVectors, query: np.ndarray) -> np.ndarray:
    """The cosine of every vector with ``query`` (L2-normalised float32), in the vectors' order.

    Each block of packed rows (``discovery._semantic.vectors.packed``: even dimensions in the high
    nibbles, odd ones in the low, two's complement) is unpacked into the buffer with the high
    nibbles' values first, then the low ones', and multiplied by the query's components in that
    same order (a padding nibble meets a 0)."""
    out = np.empty(len(vectors.tool_ids), dtype=np.float32)
    width = vectors.rows.shape[1]
    ordered = np.zeros(2 * width, dtype=np.float32)
    ordered[: len(query[0::2])] = query[0::2]
    ordered[width : width + len(query[1::2])] = query[1::2]
    rows = min(SCAN_ROWS, len(out))
    buffer = np.empty((rows, 2 * width), dtype=np.float32)
    nibbles = np.empty((rows, width), dtype=np.uint8)
    for start in range(0, len(out), SCAN_ROWS):
        block = vectors.rows[start : start + SCAN_ROWS]
        widened, signed = buffer[: len(block)], nibbles[: len(block)].view(np.int8)
        # An arithmetic shift right by 4 of a byte read as int8 is its high nibble's value; the
        # low nibble moved up (times 16, wrapping in uint8) and shifted back is the low one's.
        np.right_shift(block.view(np.int8), 4, out=signed)
        np.copyto(widened[:, :width], signed, casting="unsafe")
        np.multiply(block, 16, out=signed.view(np.uint8))
        np.right_shift(signed, 4, out=signed)
        np.copyto(widened[:, width:], signed, casting="unsafe")
        np.matmul(widened, ordered, out=out[start : start + len(block)])
    out *= vectors.scales
    return out


@dataclass(frozen=True, slots=True)
class SemanticPart:
    """The semantic side of a fused search: per tool id (of the corpus, with a vector) its cosine,
    and the largest positive cosine of the corpus (0 when none is positive)."""

    tool_ids: np.ndarray
    cosines: np.ndarray
    best: float


def semantic_part(
    vectors: StoredVectors, query: np.ndarray, groups: tuple[int, ...], dropped: np.ndarray
) -> SemanticPart:
    """The cosines of the corpus' tools: those of ``groups`` not in ``dropped``."""
    every = cosines(vectors, query)
    inside = np.isin(vectors.groups, groups)
    if dropped.size:
        inside &= ~np.isin(vectors.tool_ids, dropped)
    if inside.all():
        # The whole catalog (the usual search): no copies of a catalog-sized array per search.
        ids, values = vectors.tool_ids, every
    else:
        ids, values = vectors.tool_ids[inside], every[inside]
    best = float(values.max()) if values.size else 0.0
    return SemanticPart(ids, values, max(best, 0.0))


def fused(lexical: np.ndarray, part: SemanticPart, weight: float, size: int) -> np.ndarray:
    """The fused scores by tool id (an array of ``size``); ``lexical`` holds the corpus' BM25+
    scores by tool id (0 for tools outside it)."""
    scores = np.zeros(size)
    top = float(lexical.max()) if lexical.size else 0.0
    # In place, the same operations in the same order as (1 - w) * (L / max L) and
    # w * (c / max c): a search makes one temporary of the catalog's size, not five.
    if top > 0:
        head = scores[: lexical.size]
        np.divide(lexical, top, out=head)
        head *= 1.0 - weight
    if part.best > 0:
        positive = np.maximum(part.cosines, 0.0, dtype=np.float64)
        positive /= part.best
        positive *= weight
        scores[part.tool_ids] += positive
    return scores


def part_of(semantic: SemanticQuery, corpus: Corpus, excluded: np.ndarray) -> SemanticPart:
    """The cosines of the corpus' tools (``excluded``: the ids it leaves out, sorted)."""
    return semantic_part(semantic.vectors, semantic.query, corpus.groups, excluded)


def fused_top(
    lexical: np.ndarray,
    semantic: SemanticQuery,
    part: SemanticPart,
    limit: int | None,
    names_of: Callable[[list[int]], dict[int, str]],
) -> list[RankedTool]:
    """The best ``limit`` tools by fused score, then name collation."""
    size = max(lexical.size, semantic.vectors.max_id + 1)
    scores = fused(lexical, part, semantic.weight, size)
    found = np.flatnonzero(scores > 0)
    if limit is not None and found.size > limit:
        threshold = float(np.partition(scores[found], found.size - limit)[found.size - limit])
        found = found[scores[found] >= threshold]
    return ordered(scores, found, limit, names_of)
