"""Reads for auditing the catalog: every tool with its stored postings (as its indexed terms list
them and as the term index holds them), streamed in batches, and the ranking aggregates
recomputed from scratch.

Nothing here knows how a record is tokenized; ``discovery.verify`` recomputes the postings and
compares. Each function reads through the caller's connection, so an audit sees one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, func, select

from store import postings
from store.catalog import chunks
from store.reads import _TOOL_COLUMNS
from store.records import GroupStats, StoredTool, TermStats
from store.schema import group_stats_table, term_stats_table, terms_table, tools_table

AUDIT_BATCH = 1000
"""Tool rows read per batch (the term index is read whole: 24 bytes per posting)."""


@dataclass(frozen=True, slots=True)
class StoredPosting:
    """One stored posting of a tool; ``term`` is ``None`` when its term id has no ``terms`` row."""

    term_id: int
    term: str | None
    grp: int
    tf: int
    doc_len: int


@dataclass(frozen=True, slots=True)
class AuditedTool:
    """A catalog tool as stored: its record, content hash, the postings its indexed terms list
    (ordered by term id; group and length are the tool's), and the postings the term index
    holds for it (ordered by term id, group)."""

    tool: StoredTool
    content_hash: str
    postings: list[StoredPosting]
    indexed: list[StoredPosting]


@dataclass(frozen=True, slots=True)
class TermStatMismatch:
    """A ``(term, group)`` whose stored statistics differ from its postings.

    ``stored`` is ``None`` when the row is missing, ``actual`` when the term has no postings there.
    """

    term_id: int
    term: str | None
    grp: int
    stored: TermStats | None
    actual: TermStats | None


def catalog_postings(connection: Connection) -> np.ndarray:
    """Every posting of the term index (``store.postings.CHANGE_DTYPE``): blocks with their
    overrides applied, sorted by (term, group, tool)."""
    return postings.all_postings(connection)


def tool_batches(
    connection: Connection, *, batch_size: int = AUDIT_BATCH, indexed: np.ndarray | None = None
) -> Iterator[list[AuditedTool]]:
    """Every catalog tool with its postings, in catalog order, ``batch_size`` tools at a time.

    Batches are read by id ranges (keyset pagination), so each costs one index range. The term
    index side comes from ``indexed`` (default: ``catalog_postings``), regrouped by tool.
    """
    everything = catalog_postings(connection) if indexed is None else indexed
    by_tool = everything[np.argsort(everything["tool_id"], kind="stable")]
    texts: dict[int, str] = {}
    last_id = 0
    while True:
        rows = connection.execute(
            select(*_TOOL_COLUMNS, tools_table.c.content_hash, tools_table.c.indexed_terms)
            .where(tools_table.c.id > last_id)
            .order_by(tools_table.c.id)
            .limit(batch_size)
        ).all()
        if not rows:
            return
        ids = np.array([row.id for row in rows], dtype=np.int64)
        starts = np.searchsorted(by_tool["tool_id"], ids, side="left").tolist()
        ends = np.searchsorted(by_tool["tool_id"], ids, side="right").tolist()
        forward = {row.id: postings.forward_entries(row.indexed_terms, row.id) for row in rows}
        wanted = {int(t) for entries in forward.values() for t in entries["term_id"]}
        wanted |= {int(t) for s, e in zip(starts, ends, strict=True) for t in by_tool["term_id"][s:e]}
        _remember_texts(connection, texts, wanted)
        batch = []
        for row, start, end in zip(rows, starts, ends, strict=True):
            tool = StoredTool(*row[:-2])
            listed = [
                StoredPosting(term_id, texts.get(term_id), tool.grp, tf, tool.doc_len)
                for term_id, tf in forward[row.id].tolist()
            ]
            held = [  # by term and group still: the regrouping sort is stable
                StoredPosting(term_id, texts.get(term_id), grp, tf, doc_len)
                for term_id, grp, _, tf, doc_len in by_tool[start:end].tolist()
            ]
            batch.append(AuditedTool(tool, row.content_hash, listed, held))
        yield batch
        last_id = rows[-1].id


def _remember_texts(connection: Connection, texts: dict[int, str], term_ids: set[int]) -> None:
    missing = sorted(term_ids - texts.keys())
    for part in chunks(missing):
        texts.update(
            dict(
                connection.execute(
                    select(terms_table.c.id, terms_table.c.text).where(terms_table.c.id.in_(part))
                ).all()
            )
        )


def postings_of_tools(connection: Connection, tool_ids: Sequence[int]) -> dict[int, list[StoredPosting]]:
    """The postings ``tool_ids`` hold, from their indexed terms, with the term texts, per tool,
    ordered by term id."""
    found: dict[int, list[StoredPosting]] = {}
    texts: dict[int, str] = {}
    for part in chunks(list(tool_ids)):
        rows = connection.execute(
            select(
                tools_table.c.id, tools_table.c.grp, tools_table.c.doc_len, tools_table.c.indexed_terms
            ).where(tools_table.c.id.in_(part))
        ).all()
        forward = {tool_id: postings.forward_entries(packed, tool_id) for tool_id, _, _, packed in rows}
        _remember_texts(connection, texts, {int(t) for e in forward.values() for t in e["term_id"]})
        for tool_id, grp, doc_len, _ in rows:
            found[tool_id] = [
                StoredPosting(term_id, texts.get(term_id), grp, tf, doc_len)
                for term_id, tf in forward[tool_id].tolist()
            ]
    return found


_TABLES = {"tools": tools_table, "terms": terms_table, "term_stats": term_stats_table}


def row_count(connection: Connection, table: str) -> int:
    """Rows in one catalog table: ``tools``, ``terms`` or ``term_stats``."""
    return int(connection.execute(select(func.count()).select_from(_TABLES[table])).scalar_one())


def group_totals(connection: Connection) -> dict[int, GroupStats]:
    """Document count and total length per group, recomputed from the tool rows."""
    rows = connection.execute(
        select(tools_table.c.grp, func.count(), func.coalesce(func.sum(tools_table.c.doc_len), 0)).group_by(
            tools_table.c.grp
        )
    )
    return {int(grp): GroupStats(int(count), int(total)) for grp, count, total in rows}


def stored_group_stats(connection: Connection) -> dict[int, GroupStats]:
    rows = connection.execute(
        select(group_stats_table.c.grp, group_stats_table.c.doc_count, group_stats_table.c.total_len)
    )
    return {int(grp): GroupStats(int(count), int(total)) for grp, count, total in rows}


def term_stat_mismatches(
    connection: Connection, *, limit: int, indexed: np.ndarray | None = None
) -> list[TermStatMismatch]:
    """Up to ``limit`` ``(term, group)`` pairs whose ``term_stats`` row disagrees with the term
    index (``indexed``, default ``catalog_postings``): a wrong ``df`` or ``max_tf``, a row
    without postings, or postings without a row. Ordered by term id, then group."""
    everything = catalog_postings(connection) if indexed is None else indexed
    actual = {(term, grp): TermStats(df, max_tf) for term, grp, df, max_tf in postings.key_totals(everything)}
    stored = {
        (int(term), int(grp)): TermStats(int(df), int(max_tf))
        for term, grp, df, max_tf in connection.execute(
            select(
                term_stats_table.c.term_id,
                term_stats_table.c.grp,
                term_stats_table.c.df,
                term_stats_table.c.max_tf,
            )
        )
    }
    wrong = sorted(key for key in stored.keys() | actual.keys() if stored.get(key) != actual.get(key))[:limit]
    texts: dict[int, str] = {}
    _remember_texts(connection, texts, {term for term, _ in wrong})
    return [
        TermStatMismatch(term, texts.get(term), grp, stored.get((term, grp)), actual.get((term, grp)))
        for term, grp in wrong
    ]


def orphan_terms(
    connection: Connection, *, limit: int, indexed: np.ndarray | None = None
) -> list[tuple[int, str]]:
    """Up to ``limit`` terms that no posting uses (every write should have dropped them)."""
    everything = catalog_postings(connection) if indexed is None else indexed
    used = set(np.unique(everything["term_id"]).tolist())
    found: list[tuple[int, str]] = []
    for term_id, text in connection.execute(
        select(terms_table.c.id, terms_table.c.text).order_by(terms_table.c.id)
    ):
        if term_id not in used:
            found.append((int(term_id), text))
            if len(found) >= limit:
                break
    return found
