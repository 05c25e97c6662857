"""Reads for auditing the catalog: every tool with its stored postings (as its indexed terms list
them and as the term index holds them), streamed in batches, and the ranking aggregates
recomputed from scratch.

Nothing here knows how a record is tokenized; ``discovery._diagnostics.verify`` recomputes the postings and
compares. ``AuditReads`` reads on its unit's connection, so an audit sees one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from store import _driver as driver
from store._records import GroupStats, StoredTool, TermStats
from store._sql import CheckedJSON, chunks
from store._tool_rows import TOOL_FIELDS, tool_reader
from store.errors import CorruptIndex

if TYPE_CHECKING:
    # numpy and the posting arrays' modules are imported where arrays are made: a gateway's
    # start and first answer read no postings (tests/test_mcp_startup.py).
    import numpy as np


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
    """A catalog tool as stored: its record, its content hash, the terms its indexed terms list
    (``listed``: term ids, tfs) and the postings the term index holds for it (``held``: term ids,
    groups, tfs, lengths; ordered by term id, group), as parallel lists. ``texts`` names the ids.

    ``postings`` and ``indexed`` build one object per posting, which an audit of 100k tools needs
    only for the few tools whose terms differ (``terms_listed``, ``terms_held``)."""

    tool: StoredTool
    content_hash: str
    listed: tuple[list[int], list[int]]
    held: tuple[list[int], list[int], list[int], list[int]]
    texts: Mapping[int, str]

    def terms_listed(self) -> dict[str | None, int] | None:
        """``{term: tf}`` as the indexed terms list them; ``None`` if a term is listed twice."""
        term_ids, tfs = self.listed
        found = dict(zip(map(self.texts.get, term_ids), tfs, strict=True))
        return found if len(found) == len(term_ids) else None

    def terms_held(self) -> dict[str | None, int] | None:
        """``{term: tf}`` as the term index holds them; ``None`` if a term is held twice or a
        posting's group or length is not the tool's."""
        term_ids, grps, tfs, doc_lens = self.held
        count = len(term_ids)
        if grps.count(self.tool.grp) != count or doc_lens.count(self.tool.doc_len) != count:
            return None
        found = dict(zip(map(self.texts.get, term_ids), tfs, strict=True))
        return found if len(found) == count else None

    @property
    def postings(self) -> list[StoredPosting]:
        """The postings its indexed terms list (ordered by term id; group and length are the tool's)."""
        tool = self.tool
        return [
            StoredPosting(term_id, self.texts.get(term_id), tool.grp, tf, tool.doc_len)
            for term_id, tf in zip(*self.listed, strict=True)
        ]

    @property
    def indexed(self) -> list[StoredPosting]:
        """The postings the term index holds for it (ordered by term id, group)."""
        return [
            StoredPosting(term_id, self.texts.get(term_id), grp, tf, doc_len)
            for term_id, grp, tf, doc_len in zip(*self.held, strict=True)
        ]


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


def forward_rows(connection: Connection, tool_ids: Sequence[int]) -> list[Any]:
    """``(id, grp, doc_len, indexed_terms)`` of the tools of ``tool_ids`` (one chunk of them)."""
    wanted, params = driver.in_list("id", tool_ids)
    return driver.fetch(
        connection, f"SELECT id, grp, doc_len, indexed_terms FROM tools WHERE id IN {wanted}", params
    )


def forward_terms(rows: Sequence[Sequence[Any]]) -> dict[int, tuple[list[int], list[int]]]:
    """The indexed terms of each ``(tool id, …, indexed terms)`` row as (term ids, tfs), decoded
    for the batch at once."""
    import numpy as np

    from store import _postings as postings

    width = postings.FORWARD_DTYPE.itemsize
    for row in rows:  # a torn entry is reported for its tool, not for the batch
        if len(row[-1]) % width:
            postings.forward_entries(row[-1], row[0])
    entries = np.frombuffer(b"".join(row[-1] for row in rows), postings.FORWARD_DTYPE)
    term_ids, tfs = entries["term_id"].tolist(), entries["tf"].tolist()
    found: dict[int, tuple[list[int], list[int]]] = {}
    start = 0
    for row in rows:
        end = start + len(row[-1]) // width
        found[row[0]] = (term_ids[start:end], tfs[start:end])
        start = end
    return found


def listed_term_ids(forward: dict[int, tuple[list[int], list[int]]]) -> set[int]:
    return {term_id for term_ids, _ in forward.values() for term_id in term_ids}


def remember_texts(connection: Connection, texts: dict[int, str], term_ids: set[int]) -> None:
    missing = sorted(term_ids - texts.keys())
    for part in chunks(missing):
        wanted, params = driver.in_list("id", part)
        texts.update(
            dict(driver.fetch(connection, f"SELECT id, text FROM terms WHERE id IN {wanted}", params))
        )


_TABLES = ("tools", "terms", "term_stats", "catalog_state")


class AuditReads:
    """What ``verify`` checks: raw counts of the catalog's tables and cross-checks of what they hold."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def catalog_postings(self) -> np.ndarray:
        """Every posting of the term index (``store._changes.CHANGE_DTYPE``): blocks with their
        overrides applied, sorted by (term, group, tool)."""
        from store import _postings as postings

        return postings.all_postings(self._connection)

    def tool_batches(
        self, *, batch_size: int, indexed: np.ndarray | None = None
    ) -> Iterator[list[AuditedTool]]:
        """Every catalog tool with its postings, in catalog order, ``batch_size`` tools at a time.

        Batches are read by id ranges (keyset pagination), so each costs one index range. The term
        index side comes from ``indexed`` (default: ``catalog_postings``), regrouped by tool.
        """
        import numpy as np

        everything = self.catalog_postings() if indexed is None else indexed
        by_tool = everything[np.argsort(everything["tool_id"], kind="stable")]
        # Plain columns: turning a structured slice into tuples costs far more than zipping lists.
        columns = [np.ascontiguousarray(by_tool[field]) for field in ("term_id", "grp", "tf", "doc_len")]
        tool_ids = np.ascontiguousarray(by_tool["tool_id"])  # searched once per batch: copied once here
        texts: dict[int, str] = {}
        read = tool_reader(self._connection.dialect)
        statement = (
            f"SELECT {', '.join(TOOL_FIELDS)}, content_hash, indexed_terms FROM tools "
            "WHERE id > :last_id ORDER BY id LIMIT :batch_size"
        )
        last_id = 0
        while True:
            rows = driver.fetch(self._connection, statement, {"last_id": last_id, "batch_size": batch_size})
            if not rows:
                return
            ids = np.array([row[0] for row in rows], dtype=np.int64)
            starts = np.searchsorted(tool_ids, ids, side="left").tolist()
            ends = np.searchsorted(tool_ids, ids, side="right").tolist()
            forward = forward_terms(rows)
            wanted = listed_term_ids(forward)
            # The batch's ids ascend, so its postings are one range of the regrouped term index.
            first = starts[0]
            term_ids, grps, tfs, doc_lens = (column[first : ends[-1]].tolist() for column in columns)
            wanted.update(term_ids)
            remember_texts(self._connection, texts, wanted)
            batch = []
            for row, start, end in zip(rows, starts, ends, strict=True):
                tool = read(row[:-2])
                # By term and group still: the regrouping sort is stable.
                part = slice(start - first, end - first)
                held = (term_ids[part], grps[part], tfs[part], doc_lens[part])
                batch.append(AuditedTool(tool, row[-2], forward[tool.id], held, texts))
            yield batch
            last_id = rows[-1][0]

    def row_count(self, table: str) -> int:
        """Rows in one catalog table: ``tools``, ``terms``, ``term_stats`` or ``catalog_state``."""
        if table not in _TABLES:  # a table name goes into the statement: only these
            raise ValueError(f"not a catalog table: {table!r}")
        return int(driver.fetch(self._connection, f"SELECT COUNT(*) FROM {table}")[0][0])

    def group_totals(self) -> dict[int, GroupStats]:
        """Document count and total length per group, recomputed from the tool rows."""
        rows = driver.fetch(
            self._connection, "SELECT grp, COUNT(*), COALESCE(SUM(doc_len), 0) FROM tools GROUP BY grp"
        )
        return {int(grp): GroupStats(int(count), int(total)) for grp, count, total in rows}

    def stored_group_stats(self) -> dict[int, GroupStats]:
        rows = driver.fetch(self._connection, "SELECT grp, doc_count, total_len FROM group_stats")
        return {int(grp): GroupStats(int(count), int(total)) for grp, count, total in rows}

    def term_stat_mismatches(
        self, *, limit: int, indexed: np.ndarray | None = None
    ) -> list[TermStatMismatch]:
        """Up to ``limit`` ``(term, group)`` pairs whose ``term_stats`` row disagrees with the term
        index (``indexed``, default ``catalog_postings``): a wrong ``df`` or ``max_tf``, a row
        without postings, or postings without a row. Ordered by term id, then group."""
        from store._changes import key_totals

        everything = self.catalog_postings() if indexed is None else indexed
        actual = {(term, grp): TermStats(df, max_tf) for term, grp, df, max_tf in key_totals(everything)}
        stored = {
            (int(term), int(grp)): TermStats(int(df), int(max_tf))
            for term, grp, df, max_tf in driver.fetch(
                self._connection, "SELECT term_id, grp, df, max_tf FROM term_stats"
            )
        }
        wrong = sorted(key for key in stored.keys() | actual.keys() if stored.get(key) != actual.get(key))[
            :limit
        ]
        texts: dict[int, str] = {}
        remember_texts(self._connection, texts, {term for term, _ in wrong})
        return [
            TermStatMismatch(term, texts.get(term), grp, stored.get((term, grp)), actual.get((term, grp)))
            for term, grp in wrong
        ]

    def orphan_terms(self, *, limit: int, indexed: np.ndarray | None = None) -> list[tuple[int, str]]:
        """Up to ``limit`` terms that no posting uses (every write should have dropped them)."""
        import numpy as np

        everything = self.catalog_postings() if indexed is None else indexed
        used = set(np.unique(everything["term_id"]).tolist())
        found: list[tuple[int, str]] = []
        for block in driver.fetch_blocks(self._connection, "SELECT id, text FROM terms ORDER BY id"):
            for term_id, text in block:
                if term_id not in used:
                    found.append((int(term_id), text))
                    if len(found) >= limit:
                        return found
        return found

    def unreadable_tool_values(self) -> list[str]:
        """Each tool's JSON column that cannot be read back, in words: SQLite keeps any text there."""
        found = []
        dialect = self._connection.dialect
        readers = {
            column: CheckedJSON(f"tools.{column}").dialect_impl(dialect).result_processor(dialect, None)
            for column in ("schema_keys", "input_schema")
        }
        for name, schema_keys, input_schema in driver.fetch(
            self._connection, "SELECT name, schema_keys, input_schema FROM tools ORDER BY id"
        ):
            for column, value in (("schema_keys", schema_keys), ("input_schema", input_schema)):
                read = readers[column]
                try:
                    if read is not None:
                        read(value)
                except CorruptIndex:
                    found.append(f"tool {name!r}: its {column} is not JSON")
        return found

    def block_size_mismatches(self, *, limit: int) -> list[tuple[int, int, int, int]]:
        """``(term id, group, stored size, postings held)`` of blocks whose ``size`` is not the number
        of postings their arrays hold (writes read the size to decide when to merge). Blocks of an
        unknown layout are ``unknown_block_layouts``'."""
        from store import _postings as postings

        layouts, params = driver.in_list("layout", sorted(postings.LAYOUTS))
        held = "LENGTH(tool_ids) / (widths / 100)"
        rows = driver.fetch(
            self._connection,
            f"SELECT term_id, grp, size, {held} FROM posting_blocks "
            f"WHERE widths IN {layouts} AND size != {held} ORDER BY term_id, grp LIMIT :limit",
            {**params, "limit": limit},
        )
        return [(int(term), int(grp), int(size), int(count)) for term, grp, size, count in rows]

    def unknown_block_layouts(self, *, limit: int) -> list[tuple[int, int, int]]:
        """``(term id, group, widths)`` of blocks whose ``widths`` is none of ``postings.LAYOUTS``."""
        from store import _postings as postings

        layouts, params = driver.in_list("layout", sorted(postings.LAYOUTS))
        rows = driver.fetch(
            self._connection,
            f"SELECT term_id, grp, widths FROM posting_blocks WHERE widths NOT IN {layouts} "
            "ORDER BY term_id, grp LIMIT :limit",
            {**params, "limit": limit},
        )
        return [(int(term), int(grp), int(widths)) for term, grp, widths in rows]
