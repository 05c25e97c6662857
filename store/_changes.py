"""Posting changes: a posting with its key, as writes make them and audits read them, and
how they are keyed, counted and put in (term, group, tool) order."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

Key = tuple[int, int]
"""A (term id, corpus group) pair: what a posting block and term statistics are kept by."""

CHANGE_DTYPE = np.dtype(
    [
        ("term_id", np.int64),
        ("grp", np.int16),
        ("tool_id", np.int64),
        ("tf", np.int32),
        ("doc_len", np.int32),
    ],
    align=True,
)
"""A posting with its key: a change to write (``tf = 0`` removes it), or one posting of the catalog.

Aligned, 32 bytes: numpy reads aligned fields in its fast loops and moves 32-byte items as one
block, so an import's tens of millions of changes are keyed, counted and reordered several
times faster than packed into 26 bytes. Reorder with ``take``: plain fancy indexing of a
structured array copies field by field."""

GROUP_BITS = 3
"""Corpus groups are 0..2: a (term, group) key packs into one int64 as ``term << 3 | group``."""


def joined(parts: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Structured arrays of ``dtype`` end to end. Field by field: concatenating whole records,
    numpy promotes the record type once per part, which outweighs the copy when the parts are
    many and small (a posting block or a tool each)."""
    out = np.empty(sum(part.size for part in parts), dtype)
    if parts:
        for name in dtype.names or ():
            np.concatenate([part[name] for part in parts], out=out[name])
    return out


def key_codes(changes: np.ndarray) -> np.ndarray:
    """Each change's (term, group) as one sortable int64."""
    return (changes["term_id"].astype(np.int64) << GROUP_BITS) | changes["grp"].astype(np.int64)


def key_of(code: int) -> Key:
    """The (term, group) of a ``key_codes`` code."""
    return code >> GROUP_BITS, code & ((1 << GROUP_BITS) - 1)


def key_counts(changes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (term, group) of ``changes``: its ``key_codes`` code, how many changes it has and
    their largest tf, as arrays in code order."""
    codes = key_codes(changes)
    order = stable_order(codes)
    codes = codes[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    counts = np.diff(np.r_[starts, codes.size])
    largest = np.maximum.reduceat(changes["tf"][order], starts) if codes.size else changes["tf"][:0]
    return codes[starts], counts, largest


def key_totals(changes: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Per (term, group) of ``changes``: ``(term, group, how many, largest tf)``, in key order —
    a key's ``df`` and ``max_tf`` when ``changes`` are its postings."""
    if changes.size == 0:
        return []
    codes, counts, largest = key_counts(changes)
    terms, groups = codes >> GROUP_BITS, codes & ((1 << GROUP_BITS) - 1)
    return list(zip(terms.tolist(), groups.tolist(), counts.tolist(), largest.tolist(), strict=True))


_POSITION_BITS = 32


def stable_order(codes: np.ndarray) -> np.ndarray:
    """The positions that sort ``codes`` (non-negative int64), equal codes in their first order.

    Each code is packed with its position into one int64 and the packed values sorted directly:
    an indirect ``argsort`` of an import's millions of postings costs several times more, since
    it jumps about memory on every comparison."""
    size = codes.size
    if (
        size == 0
        or size >= 1 << _POSITION_BITS
        or codes.min() < 0
        or codes.max() >= 1 << (63 - _POSITION_BITS)
    ):
        return np.argsort(codes, kind="stable")
    packed = np.sort((codes << _POSITION_BITS) | np.arange(size, dtype=np.int64))
    return packed & ((1 << _POSITION_BITS) - 1)


def in_key_order(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The changes of ``parts`` as one array in (term, group, tool) order.

    Parts whose tools ascend from the first change of the first part to the last of the last
    (an import's batches) are placed key by key (``_bucketed``); any others are joined and
    sorted (``_key_order``)."""
    parts = [part for part in parts if part.size]
    if not parts:
        return np.empty(0, CHANGE_DTYPE)
    if len(parts) > 1 and _in_tool_order(parts):
        codes = [key_codes(part) for part in parts]
        size = sum(part.size for part in parts)
        if max(int(code.max()) for code in codes) < BUCKETS_PER_CHANGE * size:
            return _bucketed(parts, codes, size)
    changes = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return changes.take(_key_order(changes))


BUCKETS_PER_CHANGE = 4
"""``_bucketed`` counts changes per key code in an array as long as the largest code: it is
used while that stays within a few entries per change."""


def _in_tool_order(parts: Sequence[np.ndarray]) -> bool:
    """Whether the changes of ``parts``, one part after the other, come in tool order."""
    ends = [(int(part["tool_id"][0]), int(part["tool_id"][-1])) for part in parts]
    joined = all(last <= first for (_, last), (first, _) in pairwise(ends))
    return joined and all(bool(np.all(part["tool_id"][1:] >= part["tool_id"][:-1])) for part in parts)


def _bucketed(parts: Sequence[np.ndarray], codes: Sequence[np.ndarray], size: int) -> np.ndarray:
    """``parts`` (in tool order, with their ``key_codes``) in key order, by a counting sort:
    each key's changes take its next free places, part after part, so a key keeps them in tool
    order. Joining a large import's parts and sorting them all moves every change twice more,
    which is most of the end of an import, where the workers are done and one core is idle."""
    counts = np.bincount(np.concatenate(codes))
    free = np.cumsum(counts) - counts  # per key code, the next place its changes go
    ordered = np.empty(size, CHANGE_DTYPE)
    for part, code in zip(parts, codes, strict=True):
        order = stable_order(code)
        sorted_codes = code[order]
        starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        lengths = np.diff(np.r_[starts, sorted_codes.size])
        places = np.empty(part.size, np.int64)
        places[order] = free[sorted_codes] + np.arange(part.size) - np.repeat(starts, lengths)
        # A scatter of whole 32-byte items: ``put`` moves them as blocks, where an indexed
        # assignment copies field by field.
        np.put(ordered, places, part)
        free[sorted_codes[starts]] += lengths
    return ordered


def _key_order(changes: np.ndarray) -> np.ndarray:
    """The order of ``changes`` by (term, group, tool).

    Postings in tool order (an import's) need only a stable sort by key. Otherwise keys and tool
    ids pack into one int64 for any realistic catalog (term ids below 2^28, tool ids below
    2^32), and the packed values are unique, so a plain sort gives the one order, faster than a
    stable or multi-key sort.
    """
    codes, tool_ids = key_codes(changes), changes["tool_id"]
    if codes.size and np.all(tool_ids[1:] >= tool_ids[:-1]):
        # The postings of an import come in tool order: keeping that order within each key is
        # the key order.
        return stable_order(codes)
    if codes.size and codes.max() < 1 << 31 and tool_ids.min() >= 0 and tool_ids.max() < 1 << 32:
        return np.argsort((codes << 32) | tool_ids)
    return np.lexsort((tool_ids, codes))
