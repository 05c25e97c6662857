"""Reads for auditing the catalog: every tool with its stored postings, streamed in batches, and
the ranking aggregates recomputed from scratch with ``GROUP BY``.

Nothing here knows how a record is tokenized; ``discovery.verify`` recomputes the postings and
compares. Each function reads through the caller's connection, so an audit sees one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, exists, func, or_, select

from store.catalog import chunks
from store.reads import _TOOL_COLUMNS
from store.records import GroupStats, StoredTool, TermStats
from store.schema import GroupStat, Posting, Term, TermStat, Tool

AUDIT_BATCH = 1000
"""Tools read per batch: memory stays bounded whatever the catalog's size."""


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
    """A catalog tool as stored: its record, content hash and postings (ordered by term id)."""

    tool: StoredTool
    content_hash: str
    postings: list[StoredPosting]


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


def tool_batches(connection: Connection, *, batch_size: int = AUDIT_BATCH) -> Iterator[list[AuditedTool]]:
    """Every catalog tool with its postings, in catalog order, ``batch_size`` tools at a time.

    Batches are read by id ranges (keyset pagination), so each costs one index range.
    """
    last_id = 0
    while True:
        rows = connection.execute(
            select(*_TOOL_COLUMNS, Tool.content_hash)
            .where(Tool.id > last_id)
            .order_by(Tool.id)
            .limit(batch_size)
        ).all()
        if not rows:
            return
        postings = postings_of_tools(connection, [row.id for row in rows])
        yield [AuditedTool(StoredTool(*row[:-1]), row.content_hash, postings.get(row.id, [])) for row in rows]
        last_id = rows[-1].id


def postings_of_tools(connection: Connection, tool_ids: Sequence[int]) -> dict[int, list[StoredPosting]]:
    """The stored postings of ``tool_ids`` with their term texts, per tool, ordered by term id."""
    found: dict[int, list[StoredPosting]] = {}
    for part in chunks(list(tool_ids)):
        rows = connection.execute(
            select(Posting.tool_id, Posting.term_id, Term.text, Posting.grp, Posting.tf, Posting.doc_len)
            .outerjoin(Term, Term.id == Posting.term_id)
            .where(Posting.tool_id.in_(part))
            .order_by(Posting.tool_id, Posting.term_id, Posting.grp)
        )
        for tool_id, term_id, text, grp, tf, doc_len in rows:
            found.setdefault(tool_id, []).append(StoredPosting(term_id, text, grp, tf, doc_len))
    return found


_TABLES = {"tools": Tool, "postings": Posting, "terms": Term, "term_stats": TermStat}


def row_count(connection: Connection, table: str) -> int:
    """Rows in one catalog table: ``tools``, ``postings``, ``terms`` or ``term_stats``."""
    return int(connection.execute(select(func.count()).select_from(_TABLES[table])).scalar_one())


def group_totals(connection: Connection) -> dict[int, GroupStats]:
    """Document count and total length per group, recomputed from the tool rows."""
    rows = connection.execute(
        select(Tool.grp, func.count(), func.coalesce(func.sum(Tool.doc_len), 0)).group_by(Tool.grp)
    )
    return {int(grp): GroupStats(int(count), int(total)) for grp, count, total in rows}


def stored_group_stats(connection: Connection) -> dict[int, GroupStats]:
    rows = connection.execute(select(GroupStat.grp, GroupStat.doc_count, GroupStat.total_len))
    return {int(grp): GroupStats(int(count), int(total)) for grp, count, total in rows}


def term_stat_mismatches(connection: Connection, *, limit: int) -> list[TermStatMismatch]:
    """Up to ``limit`` ``(term, group)`` pairs whose ``term_stats`` row disagrees with the postings:
    a wrong ``df`` or ``max_tf``, a row without postings, or postings without a row.

    The comparison runs in the database, so only disagreements cross the wire.
    """
    actual = (
        select(
            Posting.term_id.label("term_id"),
            Posting.grp.label("grp"),
            func.count().label("df"),
            func.max(Posting.tf).label("max_tf"),
        )
        .group_by(Posting.term_id, Posting.grp)
        .subquery()
    )
    same_key = and_(actual.c.term_id == TermStat.term_id, actual.c.grp == TermStat.grp)
    wrong = (
        select(
            TermStat.term_id,
            Term.text,
            TermStat.grp,
            TermStat.df,
            TermStat.max_tf,
            actual.c.df,
            actual.c.max_tf,
        )
        .outerjoin(actual, same_key)
        .outerjoin(Term, Term.id == TermStat.term_id)
        .where(or_(actual.c.df.is_(None), actual.c.df != TermStat.df, actual.c.max_tf != TermStat.max_tf))
        .order_by(TermStat.term_id, TermStat.grp)
        .limit(limit)
    )
    missing = (
        select(actual.c.term_id, Term.text, actual.c.grp, actual.c.df, actual.c.max_tf)
        .outerjoin(TermStat, same_key)
        .outerjoin(Term, Term.id == actual.c.term_id)
        .where(TermStat.term_id.is_(None))
        .order_by(actual.c.term_id, actual.c.grp)
        .limit(limit)
    )
    found = [
        TermStatMismatch(
            term_id,
            text,
            grp,
            TermStats(df, max_tf),
            None if actual_df is None else TermStats(int(actual_df), int(actual_max)),
        )
        for term_id, text, grp, df, max_tf, actual_df, actual_max in connection.execute(wrong)
    ]
    found.extend(
        TermStatMismatch(term_id, text, grp, None, TermStats(int(df), int(max_tf)))
        for term_id, text, grp, df, max_tf in connection.execute(missing)
    )
    return found[:limit]


def orphan_terms(connection: Connection, *, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` terms that no posting uses (every write should have dropped them)."""
    used = exists().where(Posting.term_id == Term.id)
    rows = connection.execute(select(Term.id, Term.text).where(~used).order_by(Term.id).limit(limit))
    return [(int(term_id), text) for term_id, text in rows]
