"""Postings laid out for the scan: one packed block per (term, group), plus a small delta.

A block holds the postings of one term in one corpus group as three little-endian arrays sorted
by tool id: ids, weighted tfs and document lengths, each in the narrowest of a few unsigned
widths that holds its values (its ``widths`` column says which). Reading a term is one row
whatever its document frequency, and numpy takes the bytes as they are, so neither an import
nor a cold search pays per posting row; the narrow widths make a common term's row a third of
what fixed 8/4/4-byte arrays made it, and a cold search reads that many fewer bytes.

Rewriting a block of 100k postings for a one-tool upsert would cost megabytes, so small changes
go to ``posting_delta`` instead: rows keyed like postings that *override* the block entry of the
same (term, group, tool) — ``tf > 0`` sets it, ``tf = 0`` voids it. Readers apply the overrides.
A write merges a key's overrides into its block, in the same transaction, once they are many
next to the block (or when the write brings so many changes that rewriting is the cheap way).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection

from store import _driver as driver
from store._changes import CHANGE_DTYPE, Key, in_key_order, joined
from store.errors import CorruptIndex

REWRITE_FACTOR = 16
"""A write rewrites a key's block rather than adding overrides when the block and its pending
overrides hold fewer than ``REWRITE_FACTOR`` postings per change it brings: an import writes
whole blocks, a one-tool upsert rewrites only small ones."""
MERGE_SLACK = 64
MERGE_FRACTION = 8
"""A key is merged once its overrides exceed ``MERGE_SLACK + block size / MERGE_FRACTION``: the
delta stays small next to the blocks, and the merge cost per override stays bounded."""

KEY_CHUNK = 500
"""Term ids per ``IN (...)``: far below every backend's bound-parameter limit."""

ID_DTYPE = np.dtype("<i8")
VALUE_DTYPE = np.dtype("<i4")
"""The widest layout (every block's before revision 0006), and the dtypes changes come in."""

ID_WIDTHS: dict[int, np.dtype[Any]] = {4: np.dtype("<u4"), 8: ID_DTYPE}
VALUE_WIDTHS: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: VALUE_DTYPE}
"""The dtypes a block's arrays may be stored in, by bytes per value."""

WIDE = 844
"""``widths`` of a block stored in ``ID_DTYPE`` and ``VALUE_DTYPE``: a block's ``widths`` is its
bytes per tool id, tf and length, as the three digits of one number."""

LAYOUTS: dict[int, tuple[np.dtype[Any], np.dtype[Any], np.dtype[Any]]] = {
    id_width * 100 + tf_width * 10 + len_width: (
        ID_WIDTHS[id_width],
        VALUE_WIDTHS[tf_width],
        VALUE_WIDTHS[len_width],
    )
    for id_width in ID_WIDTHS
    for tf_width in VALUE_WIDTHS
    for len_width in VALUE_WIDTHS
}
"""Every valid ``widths`` and the dtypes of the arrays it stands for."""


def limits(widths: dict[int, np.dtype[Any]]) -> tuple[tuple[int, int], ...]:
    """Each width of ``widths`` and the largest value it holds, narrowest first."""
    return tuple(sorted((width, int(np.iinfo(dtype).max)) for width, dtype in widths.items()))


ID_LIMITS, VALUE_LIMITS = limits(ID_WIDTHS), limits(VALUE_WIDTHS)
"""Worked out once: an import encodes a block per key."""


def narrowest(values: np.ndarray, limits: tuple[tuple[int, int], ...]) -> int:
    """The fewest bytes per value of ``limits`` that hold every one of ``values`` exactly (the
    widest, signed one for negative values, which no valid block holds)."""
    if values.size == 0:
        return limits[0][0]
    # Every limit is all ones (2**bits - 1): the values fit under one exactly when their bitwise
    # OR does, and the OR is negative when any value is. One pass instead of a min and a max.
    bits = int(np.bitwise_or.reduce(values))
    return next((width for width, limit in limits if 0 <= bits <= limit), limits[-1][0])


POSTING_DTYPE = np.dtype([("tool_id", np.int64), ("tf", np.int32), ("doc_len", np.int32), ("grp", np.int8)])
"""One posting of a term as the scorer reads it."""

FORWARD_DTYPE = np.dtype([("term_id", "<i8"), ("tf", "<i4")])
"""One entry of a tool's ``indexed_terms``: a term it holds and its weighted tf."""


def forward_entries(packed: bytes, tool_id: int) -> np.ndarray:
    """A tool's ``indexed_terms`` as ``FORWARD_DTYPE``; ``CorruptIndex`` if they cannot be."""
    try:
        return np.frombuffer(packed, FORWARD_DTYPE)
    except (TypeError, ValueError) as exc:
        raise CorruptIndex.found(f"indexed terms of tool id {tool_id}: {exc}") from None


@dataclass(frozen=True, slots=True)
class PostingBlock:
    """The postings of one (term, group), sorted by tool id."""

    tool_ids: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray

    @classmethod
    def empty(cls) -> PostingBlock:
        return cls(np.empty(0, ID_DTYPE), np.empty(0, VALUE_DTYPE), np.empty(0, VALUE_DTYPE))

    @classmethod
    def decode(cls, key: Key, widths: int, tool_ids: bytes, tf: bytes, doc_len: bytes) -> PostingBlock:
        """A stored block; ``CorruptIndex`` if its arrays cannot be one."""
        where = f"posting block of term id {key[0]}, group {key[1]}"
        dtypes = LAYOUTS.get(widths)
        if dtypes is None:
            raise CorruptIndex.found(f"{where}: unknown widths {widths}")
        try:
            id_type, tf_type, len_type = dtypes
            block = cls(
                np.frombuffer(tool_ids, id_type), np.frombuffer(tf, tf_type), np.frombuffer(doc_len, len_type)
            )
        except (TypeError, ValueError) as exc:
            raise CorruptIndex.found(f"{where}: {exc}") from None
        if not block.tool_ids.size == block.tf.size == block.doc_len.size:
            raise CorruptIndex.found(f"{where}: arrays of unequal length")
        return block

    def encode(self) -> tuple[int, bytes, bytes, bytes]:
        """``(widths, tool ids, tfs, lengths)``: each array in the narrowest width that holds it."""
        id_width = narrowest(self.tool_ids, ID_LIMITS)
        tf_width, len_width = narrowest(self.tf, VALUE_LIMITS), narrowest(self.doc_len, VALUE_LIMITS)
        return (
            id_width * 100 + tf_width * 10 + len_width,
            self.tool_ids.astype(ID_WIDTHS[id_width], copy=False).tobytes(),
            self.tf.astype(VALUE_WIDTHS[tf_width], copy=False).tobytes(),
            self.doc_len.astype(VALUE_WIDTHS[len_width], copy=False).tobytes(),
        )

    @property
    def size(self) -> int:
        return int(self.tool_ids.size)

    def overridden(self, tool_ids: np.ndarray, tf: np.ndarray, doc_len: np.ndarray) -> PostingBlock:
        """This block with overrides applied: ``tool_ids`` unique and ascending, ``tf = 0`` removes.
        Arrays whose overrides come wider than they are stored widen to hold them."""
        if tool_ids.size == 0:
            return self
        if self.tool_ids.size == 0:  # a new key: the overrides, sorted by id, are the block
            live = tf > 0
            return PostingBlock(tool_ids[live], tf[live], doc_len[live])
        # Both id arrays ascend: each override finds its block entry by binary search, so a few
        # overrides cost a few lookups however large the block.
        at = np.searchsorted(self.tool_ids, tool_ids)
        found = at < self.tool_ids.size
        found[found] = self.tool_ids[at[found]] == tool_ids[found]
        live = tf > 0
        if tool_ids.size <= SPLICED_OVERRIDES:
            return PostingBlock(
                _spliced(self.tool_ids, at, found, tool_ids, live),
                _spliced(self.tf, at, found, tf, live),
                _spliced(self.doc_len, at, found, doc_len, live),
            )
        keep = np.ones(self.tool_ids.size, dtype=bool)
        keep[at[found]] = False
        kept_ids, added_ids = self.tool_ids[keep], tool_ids[live]
        # Each added posting goes where its id belongs among the kept ones, shifted by the added
        # ones before it: a merge in one pass, where a sort of all would cost a large block's
        # length times its logarithm.
        at_added = np.searchsorted(kept_ids, added_ids) + np.arange(added_ids.size)
        is_added = np.zeros(kept_ids.size + added_ids.size, dtype=bool)
        is_added[at_added] = True
        return PostingBlock(
            _merged(kept_ids, added_ids, is_added),
            _merged(self.tf[keep], tf[live], is_added),
            _merged(self.doc_len[keep], doc_len[live], is_added),
        )


SPLICED_OVERRIDES = 64
"""Up to this many overrides are spliced into a block's arrays between runs copied whole; more
are merged with masks over the whole block, one pass whatever their number."""


def _spliced(
    values: np.ndarray, at: np.ndarray, found: np.ndarray, overrides: np.ndarray, live: np.ndarray
) -> np.ndarray:
    """``values`` with override ``i`` in place of entry ``at[i]`` when ``found[i]``, else before
    it, and left out when not ``live[i]``."""
    pieces = []
    start = 0
    for i, (position, replaces, kept) in enumerate(
        zip(at.tolist(), found.tolist(), live.tolist(), strict=True)
    ):
        pieces.append(values[start:position])
        if kept:
            pieces.append(overrides[i : i + 1])
        start = position + replaces
    pieces.append(values[start:])
    return np.concatenate(pieces).astype(np.result_type(values, overrides), copy=False)


def _merged(kept: np.ndarray, added: np.ndarray, is_added: np.ndarray) -> np.ndarray:
    merged = np.empty(is_added.size, np.result_type(kept, added))
    merged[is_added] = added
    merged[~is_added] = kept
    return merged


BLOCK_COLUMNS = "SELECT term_id, grp, widths, tool_ids, tfs, doc_lens FROM posting_blocks"


def _blocks_of(rows: list[Any]) -> dict[Key, PostingBlock]:
    return {
        (term, grp): PostingBlock.decode((term, grp), widths, ids, tf, lens)
        for term, grp, widths, ids, tf, lens in rows
    }


def _merge(blocks: dict[Key, PostingBlock], delta_rows: list[Any]) -> dict[Key, PostingBlock]:
    """``blocks`` with the overrides of ``delta_rows`` (``(term, grp, tool, tf, doc_len)`` in key
    order) applied; keys with overrides but no block start from an empty one."""
    if not delta_rows:
        return blocks
    changes = np.array(delta_rows, dtype=CHANGE_DTYPE)
    merged = dict(blocks)
    for key, part in _by_key(changes):
        merged[key] = merged.get(key, PostingBlock.empty()).overridden(
            part["tool_id"], part["tf"], part["doc_len"]
        )
    return merged


def _by_key(changes: np.ndarray) -> Iterator[tuple[Key, np.ndarray]]:
    """Runs of ``changes`` (sorted by term, group, tool) with one (term, group) each."""
    if changes.size == 0:
        return
    terms, groups = changes["term_id"], changes["grp"]
    breaks = np.flatnonzero((terms[1:] != terms[:-1]) | (groups[1:] != groups[:-1])) + 1
    starts = [0, *breaks.tolist()]
    ends = [*breaks.tolist(), int(changes.size)]
    for start, end in zip(starts, ends, strict=True):
        yield (int(terms[start]), int(groups[start])), changes[start:end]


def term_blocks(connection: Connection, term_id: int) -> list[tuple[int, PostingBlock]]:
    """Every posting of one term as ``(group, block)`` in group order, overrides applied.

    The hot path of a search: two index lookups, whatever the term's document frequency, and
    a block without overrides is the stored bytes as they are, not a copy.
    """
    blocks = _blocks_of(
        driver.fetch(
            connection,
            f"{BLOCK_COLUMNS} WHERE term_id = :term_id",
            {"term_id": term_id},
        )
    )
    delta = driver.fetch(
        connection,
        "SELECT term_id, grp, tool_id, tf, doc_len FROM posting_delta WHERE term_id = :term_id "
        "ORDER BY grp, tool_id",
        {"term_id": term_id},
    )
    return [(grp, block) for (_, grp), block in sorted(_merge(blocks, delta).items()) if block.size]


def term_postings(connection: Connection, term_id: int) -> np.ndarray:
    """Every posting of one term (``POSTING_DTYPE``), ordered by (group, tool id)."""
    parts = []
    for grp, block in term_blocks(connection, term_id):
        part = np.empty(block.size, POSTING_DTYPE)
        part["tool_id"], part["tf"], part["doc_len"] = block.tool_ids, block.tf, block.doc_len
        part["grp"] = grp
        parts.append(part)
    return joined(parts, POSTING_DTYPE)


def key_blocks(connection: Connection, keys: Sequence[Key]) -> dict[Key, PostingBlock]:
    """The current postings of ``keys`` (overrides applied); a key without postings is absent."""
    wanted = set(keys)
    found: dict[Key, PostingBlock] = {}
    term_ids = sorted({term for term, _ in wanted})
    for start in range(0, len(term_ids), KEY_CHUNK):
        part = term_ids[start : start + KEY_CHUNK]
        terms, params = driver.in_list("term_id", part)
        blocks = _blocks_of(driver.fetch(connection, f"{BLOCK_COLUMNS} WHERE term_id IN {terms}", params))
        delta = driver.fetch(
            connection,
            f"SELECT term_id, grp, tool_id, tf, doc_len FROM posting_delta WHERE term_id IN {terms} "
            "ORDER BY term_id, grp, tool_id",
            params,
        )
        for key, block in _merge(blocks, delta).items():
            if key in wanted and block.size:
                found[key] = block
    return found


def all_postings(connection: Connection) -> np.ndarray:
    """Every posting of the catalog (``CHANGE_DTYPE``), sorted by (term, group, tool): for audits."""
    blocks = _blocks_of(driver.fetch(connection, f"{BLOCK_COLUMNS} ORDER BY term_id, grp"))
    delta = driver.fetch(
        connection,
        "SELECT term_id, grp, tool_id, tf, doc_len FROM posting_delta ORDER BY term_id, grp, tool_id",
    )
    merged = sorted(_merge(blocks, delta).items())
    found = np.empty(sum(block.size for _, block in merged), CHANGE_DTYPE)
    if merged:
        # Column by column: a record array per block would cost more than its few postings.
        sizes = [block.size for _, block in merged]
        found["term_id"] = np.repeat([term for (term, _), _ in merged], sizes)
        found["grp"] = np.repeat([grp for (_, grp), _ in merged], sizes)
        found["tool_id"] = np.concatenate([block.tool_ids for _, block in merged])
        found["tf"] = np.concatenate([block.tf for _, block in merged])
        found["doc_len"] = np.concatenate([block.doc_len for _, block in merged])
    return found


def write(connection: Connection, *parts: np.ndarray) -> None:
    """Apply the changes of ``parts`` (``CHANGE_DTYPE``, at most one per (term, group, tool);
    ``tf = 0`` removes the posting), in the caller's transaction, which must hold the catalog
    write lock.

    Per key, the changes either become overrides in the delta or are merged with the block and
    its pending overrides into a new block (see ``REWRITE_FACTOR`` and ``MERGE_SLACK``).
    """
    changes = in_key_order(parts)
    if changes.size == 0:
        return
    runs = list(_by_key(changes))
    keys = [key for key, _ in runs]
    sizes, pending = _key_sizes(connection, keys)
    rewrite: list[tuple[Key, np.ndarray]] = []
    overrides: list[np.ndarray] = []
    for key, part in runs:
        size, waiting = sizes.get(key, 0), pending.get(key, 0)
        cheap = size + waiting < part.size * REWRITE_FACTOR
        due = waiting + part.size > MERGE_SLACK + size // MERGE_FRACTION
        if cheap or due:
            rewrite.append((key, part))
        else:
            overrides.append(part)
    if overrides:
        rows = np.concatenate(overrides)
        driver.execute_many(
            connection,
            "INSERT INTO posting_delta (term_id, grp, tool_id, tf, doc_len) "
            "VALUES (:term_id, :grp, :tool_id, :tf, :doc_len) "
            "ON CONFLICT (term_id, grp, tool_id) DO UPDATE SET tf = excluded.tf, doc_len = excluded.doc_len",
            rows.tolist(),
        )
    if rewrite:
        _rewrite(connection, rewrite, {key for key, _ in rewrite if pending.get(key, 0)})


def _key_sizes(connection: Connection, keys: Sequence[Key]) -> tuple[dict[Key, int], dict[Key, int]]:
    """Per key: postings in its block, and overrides waiting in the delta."""
    wanted = set(keys)
    sizes: dict[Key, int] = {}
    pending: dict[Key, int] = {}
    term_ids = sorted({term for term, _ in wanted})
    for start in range(0, len(term_ids), KEY_CHUNK):
        part = term_ids[start : start + KEY_CHUNK]
        terms, params = driver.in_list("term_id", part)
        for term, grp, size in driver.fetch(
            connection, f"SELECT term_id, grp, size FROM posting_blocks WHERE term_id IN {terms}", params
        ):
            sizes[(term, grp)] = int(size)
        for term, grp, count in driver.fetch(
            connection,
            f"SELECT term_id, grp, COUNT(*) FROM posting_delta WHERE term_id IN {terms} "
            "GROUP BY term_id, grp",
            params,
        ):
            pending[(term, grp)] = int(count)
    return (
        {key: size for key, size in sizes.items() if key in wanted},
        {key: count for key, count in pending.items() if key in wanted},
    )


def _rewrite(connection: Connection, runs: list[tuple[Key, np.ndarray]], with_pending: set[Key]) -> None:
    """New blocks for the keys of ``runs``: block, pending overrides, then these changes."""
    current = key_blocks(connection, [key for key, _ in runs])
    upserts: list[tuple[Any, ...]] = []
    emptied: list[Key] = []
    for key, part in runs:
        block = current.get(key, PostingBlock.empty()).overridden(
            part["tool_id"], part["tf"], part["doc_len"]
        )
        if block.size:
            upserts.append((key[0], key[1], block.size, *block.encode()))
        else:
            emptied.append(key)
    driver.execute_many(
        connection,
        "INSERT INTO posting_blocks (term_id, grp, size, widths, tool_ids, tfs, doc_lens) "
        "VALUES (:term_id, :grp, :size, :widths, :tool_ids, :tfs, :doc_lens) "
        "ON CONFLICT (term_id, grp) DO UPDATE SET size = excluded.size, widths = excluded.widths, "
        "tool_ids = excluded.tool_ids, tfs = excluded.tfs, doc_lens = excluded.doc_lens",
        upserts,
    )
    driver.execute_many(
        connection, "DELETE FROM posting_blocks WHERE term_id = :term_id AND grp = :grp", emptied
    )
    driver.execute_many(
        connection, "DELETE FROM posting_delta WHERE term_id = :term_id AND grp = :grp", sorted(with_pending)
    )
