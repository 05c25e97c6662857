"""Catalog writes: tool rows, their postings and every ranking aggregate in one transaction.

An upsert touches only the postings of the tools it changes and the statistics of their terms;
nothing is ever rebuilt. Writers are serialized: SQLite's ``BEGIN IMMEDIATE`` takes the write
lock, PostgreSQL locks the single ``catalog_state`` row, so aggregates are read-modify-written by
one writer at a time and stay exact.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, delete, func, insert, select, update

from store.records import IndexedTool, WriteReport
from store.schema import CatalogState, GroupStat, Posting, Term, TermStat, Tool

CHUNK = 500
"""Names or ids per ``IN (...)``: far below every backend's bound-parameter limit."""

T = TypeVar("T")
PostingRow = tuple[int, int, int, int, int]
"""A posting row as the driver takes it: ``(term_id, grp, tool_id, tf, doc_len)``."""


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def matchable(text: str) -> bool:
    """Whether stored text could equal ``text``: stored text never holds NUL or a lone surrogate.

    Such a value matches nothing, and it cannot even be sent (PostgreSQL refuses NUL in a
    parameter, neither driver encodes a lone surrogate), so lookups drop it instead.
    """
    return _UNSTORABLE.search(text) is None


def lookup_keys(names: Iterable[str]) -> list[str]:
    """Distinct names to look up, in first-seen order, less those that cannot match."""
    return [name for name in dict.fromkeys(names) if matchable(name)]


def lock_catalog(connection: Connection) -> int:
    """Take the catalog write lock (a no-op beyond ``BEGIN IMMEDIATE`` on SQLite)."""
    query = select(CatalogState.generation).where(CatalogState.id == 1)
    if connection.dialect.name != "sqlite":
        query = query.with_for_update()
    return int(connection.execute(query).scalar_one())


@dataclass(frozen=True, slots=True)
class ReplaceScope:
    """Tools a replacing import owns: those of one server, or (``server=None``) the whole catalog."""

    server: str | None = None


def write_tools(
    connection: Connection,
    tools: Sequence[IndexedTool],
    *,
    remove: Iterable[str] = (),
    replace: ReplaceScope | None = None,
) -> WriteReport:
    """Upsert ``tools`` and remove the tools named in ``remove``, in the caller's transaction.

    With ``replace``, the tools of that scope that ``tools`` does not name are removed too.
    """
    generation = lock_catalog(connection)
    if replace is not None:
        keep = {tool.name for tool in tools}
        remove = [*remove, *(name for name in _names_in_scope(connection, replace) if name not in keep)]
    delta = _AggregateDelta()
    report = WriteReport()
    existing = _existing(connection, [tool.name for tool in tools])
    changed: list[IndexedTool] = []
    for tool in _last_per_name(tools):
        old = existing.get(tool.name)
        if old is None:
            report.added.append(tool.name)
            changed.append(tool)
        elif old[1] == tool.content_hash:
            report.unchanged.append(tool.name)
        else:
            report.updated.append(tool.name)
            changed.append(tool)
    removed = _existing(connection, [name for name in dict.fromkeys(remove) if name not in existing])
    report.removed.extend(removed)
    stale_ids = [existing[name][0] for name in report.updated] + [row[0] for row in removed.values()]
    _drop_postings(connection, stale_ids, delta)
    _delete_tools(connection, [row[0] for row in removed.values()])
    _store_tools(connection, changed, existing, delta)
    if not changed and not stale_ids:
        return _with_generation(report, generation)
    _apply_aggregates(connection, delta)
    generation += 1
    connection.execute(update(CatalogState).where(CatalogState.id == 1).values(generation=generation))
    return _with_generation(report, generation)


def _names_in_scope(connection: Connection, scope: ReplaceScope) -> list[str]:
    query = select(Tool.name)
    if scope.server is not None:
        query = query.where(Tool.server_name == scope.server)
    return list(connection.execute(query).scalars())


def _with_generation(report: WriteReport, generation: int) -> WriteReport:
    return WriteReport(
        added=report.added,
        updated=report.updated,
        unchanged=report.unchanged,
        removed=report.removed,
        generation=generation,
    )


def _last_per_name(tools: Sequence[IndexedTool]) -> list[IndexedTool]:
    """A name given twice in one write keeps its last record, at its first position."""
    by_name: dict[str, IndexedTool] = {}
    for tool in tools:
        by_name[tool.name] = tool
    return list(by_name.values())


def _existing(connection: Connection, names: Sequence[str]) -> dict[str, tuple[int, str]]:
    found: dict[str, tuple[int, str]] = {}
    for part in chunks(lookup_keys(names)):
        rows = connection.execute(select(Tool.name, Tool.id, Tool.content_hash).where(Tool.name.in_(part)))
        found.update({name: (tool_id, digest) for name, tool_id, digest in rows})
    return found


class _AggregateDelta:
    """Changes to group and term statistics collected during one write."""

    def __init__(self) -> None:
        self.doc_count: dict[int, int] = defaultdict(int)
        self.total_len: dict[int, int] = defaultdict(int)
        self.df: dict[tuple[int, int], int] = defaultdict(int)
        self.added_max_tf: dict[tuple[int, int], int] = {}
        self.removed_max_tf: dict[tuple[int, int], int] = {}

    def add_document(self, grp: int, doc_len: int, sign: int) -> None:
        self.doc_count[grp] += sign
        self.total_len[grp] += sign * doc_len

    def add_posting(self, term_id: int, grp: int, tf: int, sign: int) -> None:
        key = (term_id, grp)
        self.df[key] += sign
        target = self.added_max_tf if sign > 0 else self.removed_max_tf
        target[key] = max(target.get(key, 0), tf)


def _drop_postings(connection: Connection, tool_ids: Sequence[int], delta: _AggregateDelta) -> None:
    for part in chunks(tool_ids):
        rows = connection.execute(
            select(Posting.term_id, Posting.grp, Posting.tf).where(Posting.tool_id.in_(part))
        )
        for term_id, grp, tf in rows:
            delta.add_posting(term_id, grp, tf, -1)
        documents = connection.execute(select(Tool.grp, Tool.doc_len).where(Tool.id.in_(part)))
        for grp, doc_len in documents:
            delta.add_document(grp, doc_len, -1)
        connection.execute(delete(Posting).where(Posting.tool_id.in_(part)))


def _delete_tools(connection: Connection, tool_ids: Sequence[int]) -> None:
    for part in chunks(tool_ids):
        connection.execute(delete(Tool).where(Tool.id.in_(part)))


def _tool_values(tool: IndexedTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "label": tool.label,
        "description": tool.description,
        "summary": tool.summary,
        "source": tool.source,
        "server_name": tool.server_name,
        "mcp_tool_name": tool.mcp_tool_name,
        "schema_keys": tool.schema_keys,
        "input_schema": tool.input_schema,
        "load_mode": tool.load_mode,
        "grp": tool.grp,
        "doc_len": tool.doc_len,
        "content_hash": tool.content_hash,
    }


def _store_tools(
    connection: Connection,
    tools: Sequence[IndexedTool],
    existing: dict[str, tuple[int, str]],
    delta: _AggregateDelta,
) -> None:
    ids: dict[str, int] = {}
    updates = [tool for tool in tools if tool.name in existing]
    for tool in updates:
        tool_id = existing[tool.name][0]
        connection.execute(update(Tool).where(Tool.id == tool_id).values(**_tool_values(tool)))
        ids[tool.name] = tool_id
    additions = [tool for tool in tools if tool.name not in existing]
    for part in chunks(additions):
        rows = connection.execute(
            insert(Tool).returning(Tool.name, Tool.id, sort_by_parameter_order=True),
            [_tool_values(tool) for tool in part],
        )
        ids.update({name: tool_id for name, tool_id in rows})
    term_ids = _term_ids(connection, {term for tool in tools for term in tool.terms})
    # The loop of every import, over every posting: the delta's add_posting inlined, and rows
    # bucketed by (term, group) so they come out in key order without sorting millions of rows.
    buckets: defaultdict[tuple[int, int], list[PostingRow]] = defaultdict(list)
    df, max_tf = delta.df, delta.added_max_tf
    for tool in tools:
        delta.add_document(tool.grp, tool.doc_len, +1)
        tool_id, grp, doc_len = ids[tool.name], tool.grp, tool.doc_len
        for term, tf in tool.terms.items():
            key = (term_ids[term], grp)
            df[key] += 1
            if tf > max_tf.get(key, 0):
                max_tf[key] = tf
            buckets[key].append((key[0], grp, tool_id, tf, doc_len))
    postings: list[PostingRow] = []
    for key in sorted(buckets):
        bucket = buckets[key]
        if updates:  # updated tools keep their older, smaller ids
            bucket.sort()
        postings.extend(bucket)
    insert_postings(connection, postings)


def insert_postings(connection: Connection, postings: list[PostingRow]) -> None:
    """Bulk insert ``(term_id, grp, tool_id, tf, doc_len)`` rows, given in key order: the bulk of
    every import.

    Straight to the driver: SQLite's ``executemany`` (in key order, each row appends to the
    clustered index instead of landing at random); PostgreSQL's ``COPY``.
    """
    columns = "term_id, grp, tool_id, tf, doc_len"
    cursor = connection.connection.cursor()
    try:
        if connection.dialect.name == "postgresql":
            with cursor.copy(f"COPY postings ({columns}) FROM STDIN") as copy:
                for row in postings:
                    copy.write_row(row)
        else:
            cursor.executemany(f"INSERT INTO postings ({columns}) VALUES (?, ?, ?, ?, ?)", postings)
    finally:
        cursor.close()


def _term_ids(connection: Connection, terms: set[str]) -> dict[str, int]:
    """Ids of ``terms``, creating the missing ones (safe: writers hold the catalog lock)."""
    ids: dict[str, int] = {}
    wanted = sorted(terms)
    for part in chunks(wanted):
        ids.update(dict(connection.execute(select(Term.text, Term.id).where(Term.text.in_(part))).all()))
    missing = [term for term in wanted if term not in ids]
    for part in chunks(missing):
        rows = connection.execute(
            insert(Term).returning(Term.text, Term.id, sort_by_parameter_order=True),
            [{"text": term} for term in part],
        )
        ids.update({text: term_id for text, term_id in rows})
    return ids


def _apply_aggregates(connection: Connection, delta: _AggregateDelta) -> None:
    for grp in set(delta.doc_count) | set(delta.total_len):
        connection.execute(
            update(GroupStat)
            .where(GroupStat.grp == grp)
            .values(
                doc_count=GroupStat.doc_count + delta.doc_count[grp],
                total_len=GroupStat.total_len + delta.total_len[grp],
            )
        )
    keys = sorted(set(delta.df) | set(delta.added_max_tf))
    current = _term_stats(connection, keys)
    inserts: list[dict[str, int]] = []
    updates: list[dict[str, int]] = []
    deletes: list[tuple[int, int]] = []
    for key in keys:
        old_df, old_max = current.get(key, (0, 0))
        df = old_df + delta.df.get(key, 0)
        if df <= 0:
            deletes.append(key)
            continue
        max_tf = max(old_max, delta.added_max_tf.get(key, 0))
        if delta.removed_max_tf.get(key, 0) >= old_max > delta.added_max_tf.get(key, 0):
            max_tf = _recomputed_max_tf(connection, *key)
        values = {"term_id": key[0], "grp": key[1], "df": df, "max_tf": max_tf}
        (updates if key in current else inserts).append(values)
    if inserts:
        connection.execute(insert(TermStat), inserts)
    for values in updates:
        connection.execute(
            update(TermStat)
            .where(TermStat.term_id == values["term_id"], TermStat.grp == values["grp"])
            .values(df=values["df"], max_tf=values["max_tf"])
        )
    for term_id, grp in deletes:
        connection.execute(delete(TermStat).where(TermStat.term_id == term_id, TermStat.grp == grp))
    _drop_orphan_terms(connection, sorted({term_id for term_id, _ in deletes}))


def _term_stats(
    connection: Connection, keys: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], tuple[int, int]]:
    wanted = set(keys)
    found: dict[tuple[int, int], tuple[int, int]] = {}
    for part in chunks(sorted({term_id for term_id, _ in keys})):
        rows = connection.execute(
            select(TermStat.term_id, TermStat.grp, TermStat.df, TermStat.max_tf).where(
                TermStat.term_id.in_(part)
            )
        )
        for term_id, grp, df, max_tf in rows:
            if (term_id, grp) in wanted:
                found[(term_id, grp)] = (df, max_tf)
    return found


def _recomputed_max_tf(connection: Connection, term_id: int, grp: int) -> int:
    """The removed posting held the maximum: find the new one among the remaining postings."""
    query = select(func.max(Posting.tf)).where(Posting.term_id == term_id, Posting.grp == grp)
    return int(connection.execute(query).scalar_one() or 0)


def _drop_orphan_terms(connection: Connection, term_ids: Sequence[int]) -> None:
    for part in chunks(term_ids):
        still_used = set(
            connection.execute(select(TermStat.term_id).where(TermStat.term_id.in_(part))).scalars()
        )
        orphans = [term_id for term_id in part if term_id not in still_used]
        if orphans:
            connection.execute(delete(Term).where(Term.id.in_(orphans)))
