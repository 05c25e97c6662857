"""The ranking aggregates of one catalog write: group and term statistics, counted as postings
come and go, and applied once at the end of the write; the term ids it needs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection

from store import _driver as driver
from store import _postings as postings
from store._audit import forward_rows
from store._changes import CHANGE_DTYPE, Key, joined, key_counts, key_of
from store._sql import chunks
from store.errors import CorruptIndex


class AggregateDelta:
    """Changes to group and term statistics collected during one write.

    Postings are counted per batch with numpy (``add_postings``) and folded into per-key
    figures once, when the write applies them (``key_figures``): an import's batches share most
    of their keys, and a Python step per key and batch cost more than the rest of the count."""

    def __init__(self) -> None:
        self.doc_count: dict[int, int] = defaultdict(int)
        self.total_len: dict[int, int] = defaultdict(int)
        self._counted: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {+1: [], -1: []}
        """Per sign, each batch's distinct key codes, their number of postings and largest tf."""
        self.recheck: set[Key] = set()
        """Keys that lost a posting added earlier in this write: their ``max_tf`` is recounted."""

    def add_document(self, grp: int, doc_len: int, sign: int) -> None:
        self.doc_count[grp] += sign
        self.total_len[grp] += sign * doc_len

    def add_postings(self, changes: np.ndarray, sign: int, written_here: np.ndarray | None = None) -> None:
        """Count ``changes`` (``CHANGE_DTYPE``) in (``sign`` +1) or out (-1): per key, their
        number and largest tf.

        ``written_here``: tools whose postings this write added; taking those out again makes
        the largest tf added an overcount, so their keys are rechecked.
        """
        if changes.size == 0:
            return
        if written_here is not None and written_here.size:
            again = changes[np.isin(changes["tool_id"], written_here)]
            self.recheck.update(zip(again["term_id"].tolist(), again["grp"].tolist(), strict=True))
        self._counted[sign].append(key_counts(changes))

    def key_figures(self) -> KeyFigures:
        """Per key of the postings counted: the change of its ``df``, and the largest tf added
        and removed (0 when none was)."""
        df: dict[Key, int] = defaultdict(int)
        largest: dict[int, dict[Key, int]] = {}
        for sign, parts in self._counted.items():
            largest[sign] = {}
            if not parts:
                continue
            codes, counts, tfs = (np.concatenate(column) for column in zip(*parts, strict=True))
            order = np.argsort(codes)
            codes, counts, tfs = codes[order], counts[order], tfs[order]
            starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
            totals = np.add.reduceat(counts, starts)
            maxima = np.maximum.reduceat(tfs, starts)
            for code, total, tf in zip(codes[starts].tolist(), totals.tolist(), maxima.tolist(), strict=True):
                key = key_of(code)
                df[key] += sign * total
                largest[sign][key] = tf
        return KeyFigures(df=dict(df), added_max_tf=largest[+1], removed_max_tf=largest[-1])


@dataclass(frozen=True, slots=True)
class KeyFigures:
    """What one write changes of each key's statistics (``AggregateDelta.key_figures``)."""

    df: dict[Key, int]
    added_max_tf: dict[Key, int]
    removed_max_tf: dict[Key, int]


def current_postings(connection: Connection, tool_ids: Sequence[int], delta: AggregateDelta) -> np.ndarray:
    """The postings ``tool_ids`` hold now (``CHANGE_DTYPE``), read from their indexed terms, and
    their documents counted out of the group statistics."""
    parts: list[np.ndarray] = []
    for part in chunks(tool_ids):
        for tool_id, grp, doc_len, packed in forward_rows(connection, part):
            delta.add_document(grp, doc_len, -1)
            entries = postings.forward_entries(packed, tool_id)
            held = np.empty(entries.size, CHANGE_DTYPE)
            held["term_id"], held["tf"] = entries["term_id"], entries["tf"]
            held["grp"], held["tool_id"], held["doc_len"] = grp, tool_id, doc_len
            parts.append(held)
    return joined(parts, CHANGE_DTYPE)


def add_term_ids(connection: Connection, terms: set[str], ids: dict[str, int]) -> None:
    """Add the ids of ``terms`` to ``ids``, creating the missing terms (safe: writers hold the
    catalog lock)."""
    wanted = sorted(term for term in terms if term not in ids)
    for part in chunks(wanted):
        found, params = driver.in_list("text", part)
        ids.update(
            dict(driver.fetch(connection, f"SELECT text, id FROM terms WHERE text IN {found}", params))
        )
    missing = [term for term in wanted if term not in ids]
    if not missing:
        return
    # In one driver call: an import adds tens of thousands of terms, and one INSERT ... RETURNING
    # each takes several times as long.
    new = dict(zip(missing, driver.new_ids(connection, "terms", len(missing)), strict=True))
    driver.execute_many(
        connection,
        "INSERT INTO terms (id, text) VALUES (:id, :text)",
        [(term_id, term) for term, term_id in new.items()],
    )
    ids.update(new)


def apply_aggregates(connection: Connection, delta: AggregateDelta) -> None:
    for grp in set(delta.doc_count) | set(delta.total_len):
        changed = driver.execute(
            connection,
            "UPDATE group_stats SET doc_count = doc_count + :documents, total_len = total_len + :length "
            "WHERE grp = :grp",
            {"documents": delta.doc_count[grp], "length": delta.total_len[grp], "grp": grp},
        )
        if changed != 1:  # the write rolls back: a count cannot be kept on a missing row
            raise CorruptIndex.found(f"no group_stats row for group {grp}")
    figures = delta.key_figures()
    keys = sorted(set(figures.df) | set(figures.added_max_tf))
    current = stored_term_stats(connection, keys)
    stats: dict[Key, tuple[int, int]] = {}
    deletes: list[Key] = []
    recompute: list[Key] = []
    for key in keys:
        old_df, old_max = current.get(key, (0, 0))
        df = old_df + figures.df.get(key, 0)
        if df <= 0:
            deletes.append(key)
            continue
        removed_max, added_max = figures.removed_max_tf.get(key, 0), figures.added_max_tf.get(key, 0)
        stats[key] = (df, max(old_max, added_max))
        if key in delta.recheck or removed_max >= old_max > added_max:
            recompute.append(key)  # a removed posting may have held the maximum
    for key, block in postings.key_blocks(connection, recompute).items():
        stats[key] = (stats[key][0], int(block.tf.max()))
    driver.execute_many(
        connection,
        "INSERT INTO term_stats (term_id, grp, df, max_tf) VALUES (:term_id, :grp, :df, :max_tf)",
        [(*key, df, max_tf) for key, (df, max_tf) in stats.items() if key not in current],
    )
    driver.execute_many(
        connection,
        "UPDATE term_stats SET df = :df, max_tf = :max_tf WHERE term_id = :term_id AND grp = :grp",
        [
            (df, max_tf, *key)
            for key, (df, max_tf) in stats.items()
            if key in current and current[key] != (df, max_tf)
        ],
    )
    driver.execute_many(connection, "DELETE FROM term_stats WHERE term_id = :term_id AND grp = :grp", deletes)
    drop_orphan_terms(connection, sorted({term_id for term_id, _ in deletes}))


def stored_term_stats(
    connection: Connection, keys: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], tuple[int, int]]:
    wanted = set(keys)
    found: dict[tuple[int, int], tuple[int, int]] = {}
    for part in chunks(sorted({term_id for term_id, _ in keys})):
        term_ids, params = driver.in_list("term_id", part)
        statement = f"SELECT term_id, grp, df, max_tf FROM term_stats WHERE term_id IN {term_ids}"
        for term_id, grp, df, max_tf in driver.fetch(connection, statement, params):
            if (term_id, grp) in wanted:
                found[(term_id, grp)] = (df, max_tf)
    return found


def drop_orphan_terms(connection: Connection, term_ids: Sequence[int]) -> None:
    for part in chunks(term_ids):
        wanted, params = driver.in_list("term_id", part)
        rows = driver.fetch(connection, f"SELECT term_id FROM term_stats WHERE term_id IN {wanted}", params)
        still_used = {term_id for (term_id,) in rows}
        orphans = [term_id for term_id in part if term_id not in still_used]
        if orphans:
            gone, params = driver.in_list("id", orphans)
            driver.execute(connection, f"DELETE FROM terms WHERE id IN {gone}", params)
