"""Catalog writes: tool rows, their postings and every ranking aggregate in one transaction.

An upsert touches only the postings of the tools it changes and the statistics of their terms;
nothing is ever rebuilt. Writers are serialized: SQLite's ``BEGIN IMMEDIATE`` takes the write
lock, PostgreSQL locks the single ``catalog_state`` row, so aggregates are read-modify-written by
one writer at a time and stay exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from store import _driver as driver
from store._reads import CatalogReads
from store._records import IndexedBatch, ToolRow, WriteReport
from store._sql import chunks, lookup_keys
from store.errors import CorruptIndex

if TYPE_CHECKING:
    # numpy and the posting arrays' modules are imported where arrays are made: a gateway's
    # start and first answer read no postings (tests/test_mcp_startup.py).
    import numpy as np

    from store._aggregates import AggregateDelta


def lock_catalog(connection: Connection) -> int:
    """Take the catalog write lock (a no-op beyond ``BEGIN IMMEDIATE`` on SQLite)."""
    statement = "SELECT generation FROM catalog_state WHERE id = 1"
    if connection.dialect.name != "sqlite":
        statement += " FOR UPDATE"
    rows = driver.fetch(connection, statement)
    if not rows or rows[0][0] is None:
        raise CorruptIndex.found("the catalog_state row is missing")
    return int(rows[0][0])


WRITE_BATCH = 2_000
"""Tools written per step: an import streams in while its later records are still prepared."""


class _Write:
    """One catalog write: tool rows as they come, then postings and aggregates in one go.

    A name given again in a later batch updates the row an earlier batch wrote (its id, so its
    catalog position, stays); the report compares each name's last record with the catalog as
    it was before the write.
    """

    def __init__(self, connection: Connection, generation: int, *, rewrite: bool = False) -> None:
        from store._aggregates import AggregateDelta

        self.connection = connection
        self.generation = generation
        self.rewrite = rewrite
        """Rewrite every tool given, even one whose record is unchanged (a reindex)."""
        self.original: dict[str, tuple[int, str] | None] = {}
        """Each name given, in first-seen order, with its ``(id, hash)`` before this write."""
        self.final_hash: dict[str, str] = {}
        self.removed: list[str] = []
        self.written: dict[str, tuple[int, str]] = {}
        """Rows this write inserted or updated: ``(id, hash)`` by name."""
        self.written_ids: set[int] = set()
        self.empty_before = not driver.fetch(connection, "SELECT id FROM tools LIMIT 1")
        self.term_ids: dict[str, int] = {}
        self.delta = AggregateDelta()
        self.changes: list[np.ndarray] = []
        """Posting changes in the order made: a later change to the same key and tool wins."""
        self.voided = False

    def lookup(self, names: Sequence[str]) -> dict[str, tuple[int, str]]:
        """``(id, hash)`` of the named rows as this transaction sees them now."""
        found = {name: self.written[name] for name in names if name in self.written}
        if not self.empty_before:
            found.update(_existing(self.connection, [name for name in names if name not in found]))
        return found

    def upsert(self, batch: IndexedBatch) -> None:
        positions = _last_per_name(batch.rows)
        current = self.lookup([batch.rows[i].name for i in positions])
        changed: list[int] = []
        rows: list[ToolRow] = []
        stale: list[int] = []
        for i in positions:
            row = batch.rows[i]
            old = current.get(row.name)
            self.original.setdefault(row.name, old)
            self.final_hash[row.name] = row.content_hash
            if old is None:
                changed.append(i)
                rows.append(row)
            elif self.rewrite:
                # The record is as stored: only its terms change, its digest stays.
                changed.append(i)
                rows.append(row._replace(content_hash=old[1]))
                self.final_hash[row.name] = old[1]
                stale.append(old[0])
            elif old[1] != row.content_hash:
                changed.append(i)
                rows.append(row)
                stale.append(old[0])
        self.void(stale)
        if changed:
            written = batch.select(changed, rows)
            new_postings, ids = _store_tools(self.connection, written, current, self.delta, self.term_ids)
            self.delta.add_postings(new_postings, +1)
            self.changes.append(new_postings)
            self.written.update({row.name: (ids[row.name], row.content_hash) for row in written.rows})
            self.written_ids.update(ids[row.name] for row in written.rows)

    def remove(self, names: Sequence[str]) -> None:
        found = self.lookup(names) if names else {}
        self.removed = list(found)
        self.void([tool_id for tool_id, _ in found.values()])
        _delete_tools(self.connection, [tool_id for tool_id, _ in found.values()])

    def void(self, tool_ids: Sequence[int]) -> None:
        """Take the current postings of ``tool_ids`` out (their rows are then rewritten or deleted)."""
        import numpy as np

        from store._aggregates import current_postings

        if not tool_ids:
            return
        old_postings = current_postings(self.connection, tool_ids, self.delta)
        written_here = np.array([i for i in tool_ids if i in self.written_ids], dtype=np.int64)
        self.delta.add_postings(old_postings, -1, written_here=written_here)
        old_postings["tf"] = 0
        self.changes.append(old_postings)
        self.voided = True

    def finish(self) -> WriteReport:
        import numpy as np

        from store import _postings as postings
        from store._aggregates import apply_aggregates

        report = WriteReport(removed=self.removed)
        for name, before in self.original.items():
            if before is None:
                report.added.append(name)
            elif before[1] == self.final_hash[name]:
                report.unchanged.append(name)
            else:
                report.updated.append(name)
        if not self.changes:
            return _with_generation(report, self.generation)
        # A stale posting is removed unless a later version of its tool sets the same key again.
        if self.voided:
            postings.write(self.connection, _last_per_key(np.concatenate(self.changes)))
        else:
            postings.write(self.connection, *self.changes)
        apply_aggregates(self.connection, self.delta)
        self.generation += 1
        driver.execute(
            self.connection,
            "UPDATE catalog_state SET generation = :generation WHERE id = 1",
            {"generation": self.generation},
        )
        return _with_generation(report, self.generation)


def _names_in_scope(connection: Connection, server: str | None) -> list[str]:
    """The tools of ``server``, or of the whole catalog when ``None``."""
    if server is None:
        rows = driver.fetch(connection, "SELECT name FROM tools")
    else:
        rows = driver.fetch(
            connection, "SELECT name FROM tools WHERE server_name = :server", {"server": server}
        )
    return [name for (name,) in rows]


def _with_generation(report: WriteReport, generation: int) -> WriteReport:
    return WriteReport(
        added=report.added,
        updated=report.updated,
        unchanged=report.unchanged,
        removed=report.removed,
        generation=generation,
    )


def _last_per_name(rows: Sequence[ToolRow]) -> list[int]:
    """The positions of ``rows`` to write: a name given twice in one write keeps its last
    record, at its first position."""
    by_name: dict[str, int] = {}
    for position, row in enumerate(rows):
        by_name[row.name] = position
    return list(by_name.values())


def _existing(connection: Connection, names: Sequence[str]) -> dict[str, tuple[int, str]]:
    found: dict[str, tuple[int, str]] = {}
    for part in chunks(lookup_keys(names)):
        wanted, params = driver.in_list("name", part)
        statement = f"SELECT name, id, content_hash FROM tools WHERE name IN {wanted}"
        rows = driver.fetch(connection, statement, params)
        found.update({name: (tool_id, digest) for name, tool_id, digest in rows})
    return found


def _last_per_key(changes: np.ndarray) -> np.ndarray:
    """One change per (term, group, tool): the last one given."""
    import numpy as np

    order = np.lexsort((np.arange(changes.size), changes["tool_id"], changes["grp"], changes["term_id"]))
    ordered = changes.take(order)
    same_as_next = (
        (ordered["term_id"][:-1] == ordered["term_id"][1:])
        & (ordered["grp"][:-1] == ordered["grp"][1:])
        & (ordered["tool_id"][:-1] == ordered["tool_id"][1:])
    )
    return ordered[np.r_[~same_as_next, True]] if ordered.size else ordered


def _delete_tools(connection: Connection, tool_ids: Sequence[int]) -> None:
    for part in chunks(tool_ids):
        gone, params = driver.in_list("id", part)
        driver.execute(connection, f"DELETE FROM tools WHERE id IN {gone}", params)


def _store_tools(
    connection: Connection,
    batch: IndexedBatch,
    existing: dict[str, tuple[int, str]],
    delta: AggregateDelta,
    term_ids: dict[str, int],
) -> tuple[np.ndarray, dict[str, int]]:
    """Insert or update the rows of ``batch`` with their indexed terms; their postings
    (``CHANGE_DTYPE``) to write and their ids, and their documents counted into the group
    statistics. ``term_ids`` caches the ids of terms across the batches of one write."""
    import numpy as np

    from store import _postings as postings
    from store._aggregates import add_term_ids
    from store._changes import CHANGE_DTYPE

    # Only the terms these tools hold: a batch narrowed by ``select`` keeps its whole vocabulary.
    used = np.unique(batch.term_refs).tolist()
    add_term_ids(connection, {batch.vocabulary[ref] for ref in used}, term_ids)
    ids_of_refs = np.zeros(len(batch.vocabulary), np.int64)
    ids_of_refs[used] = [term_ids[batch.vocabulary[ref]] for ref in used]
    for row in batch.rows:
        delta.add_document(row.grp, row.doc_len, +1)
    total = int(batch.term_refs.size)
    entries = np.empty(total, postings.FORWARD_DTYPE)
    entries["term_id"] = ids_of_refs[batch.term_refs]
    entries["tf"] = batch.tf
    bounds = batch.term_bounds().tolist()
    indexed = [entries[bounds[i] : bounds[i + 1]].tobytes() for i in range(len(batch.rows))]
    ids = _write_rows(connection, batch.rows, indexed, existing)
    owner = np.repeat(np.arange(len(batch.rows)), batch.term_counts)
    changes = np.empty(total, CHANGE_DTYPE)
    changes["term_id"], changes["tf"] = entries["term_id"], entries["tf"]
    changes["tool_id"] = np.fromiter((ids[row.name] for row in batch.rows), np.int64, len(batch.rows))[owner]
    changes["grp"] = np.fromiter((row.grp for row in batch.rows), np.int16, len(batch.rows))[owner]
    changes["doc_len"] = np.fromiter((row.doc_len for row in batch.rows), np.int32, len(batch.rows))[owner]
    return changes, ids


def _write_rows(
    connection: Connection,
    rows: Sequence[ToolRow],
    indexed: list[bytes],
    existing: dict[str, tuple[int, str]],
) -> dict[str, int]:
    """Tool ids by name: updated rows keep theirs, new rows get new ones. A row's values are its
    ``ToolRow`` (the columns between the id and the indexed terms, in order, the JSON columns
    already encoded) and its indexed terms, bound in that order by ``_tool_columns``."""
    updates = [
        (*row, packed, existing[row.name][0])
        for row, packed in zip(rows, indexed, strict=True)
        if row.name in existing
    ]
    settings = ", ".join(f"{column} = {bind}" for column, bind in _tool_columns(connection))
    driver.execute_many(connection, f"UPDATE tools SET {settings} WHERE id = :id", updates)
    additions = [(row, packed) for row, packed in zip(rows, indexed, strict=True) if row.name not in existing]
    new = driver.new_ids(connection, "tools", len(additions))
    columns = _tool_columns(connection)
    driver.execute_many(
        connection,
        f"INSERT INTO tools (id, {', '.join(column for column, _ in columns)}) "
        f"VALUES (:id, {', '.join(bind for _, bind in columns)})",
        [(tool_id, *row, packed) for tool_id, (row, packed) in zip(new, additions, strict=True)],
    )
    ids = {values[0]: values[-1] for values in updates}
    ids.update({row.name: tool_id for tool_id, (row, _) in zip(new, additions, strict=True)})
    return ids


def _tool_columns(connection: Connection) -> list[tuple[str, str]]:
    """Each column a tool row writes and its bind, in ``ToolRow``'s order then the indexed terms:
    the JSON columns take their text as encoded (``ToolRow.schema_keys_json``, …)."""
    return [
        (column, driver.json_bind(connection, field) if field.endswith("_json") else f":{field}")
        for column, field in _ROW_COLUMNS
    ]


_ROW_COLUMNS = (
    *((field.removesuffix("_json"), field) for field in ToolRow._fields),
    ("indexed_terms", "indexed_terms"),
)
"""``(column, ToolRow field)`` of a tool row's values."""


class CatalogWrites(CatalogReads):
    """The catalog's reads, and its writes: tools upserted and removed, every statistic kept exact."""

    def lock(self) -> str:
        """The catalog's analyzer, read under the write lock (taken here if not yet held)."""
        lock_catalog(self._connection)
        return self.analyzer()

    def write_tools(
        self,
        batches: Iterable[IndexedBatch],
        *,
        remove: Iterable[str] = (),
        replace: bool = False,
        server: str | None = None,
    ) -> WriteReport:
        """Upsert the tools of ``batches`` and remove the tools named in ``remove``, in the caller's
        transaction.

        With ``replace``, the tools ``batches`` do not name are removed too: those of ``server`` when
        given, else every other tool of the catalog. Rows
        are written ``WRITE_BATCH`` tools at a time as the batches come, so a lazy iterable may still
        prepare the rest; the postings and statistics are written once, at the end.
        """
        write = _Write(self._connection, lock_catalog(self._connection))
        for batch in batches:
            for part in batch.split(WRITE_BATCH):
                write.upsert(part)
        if replace:
            remove = [*remove, *_names_in_scope(self._connection, server)]
        write.remove([name for name in dict.fromkeys(remove) if name not in write.original])
        return write.finish()

    def reindex(self, batches: Iterable[IndexedBatch], analyzer: str) -> int:
        """Rewrite the postings of every tool of ``batches`` (the whole catalog, re-analyzed) and
        record ``analyzer`` as the catalog's, in the caller's transaction; the new generation.

        Rows keep their ids, so sessions and catalog order are untouched; a record whose text is
        unchanged is rewritten all the same, since its terms are what changed."""
        write = _Write(self._connection, lock_catalog(self._connection), rewrite=True)
        for batch in batches:
            for part in batch.split(WRITE_BATCH):
                write.upsert(part)
        report = write.finish()
        # Bumped even for an empty catalog: other processes read the analyzer when it changes.
        generation = report.generation + 1
        driver.execute(
            self._connection,
            "UPDATE catalog_state SET generation = :generation, analyzer = :analyzer WHERE id = 1",
            {"generation": generation, "analyzer": analyzer},
        )
        return generation
