"""Tool vectors and the embedding setting: what the semantic signal keeps (``embedding_state``,
``tool_vectors``).

Vectors are 4-bit values packed two to a byte, with one scale each (the layout is
``discovery._semantic.vectors.packed``'s), written by name with the content hash of the record
they were made from. A search uses only current vectors (hash equal to the tool's); readers join
on the tools table for that, so a catalog write never has to touch this table to keep it honest.
Every write here bumps the catalog generation (under the catalog lock, as a catalog write does),
so other processes reload the vectors with their other catalog caches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from store import _driver as driver
from store._catalog import lock_catalog
from store._sql import chunks
from store.errors import CorruptIndex

if TYPE_CHECKING:
    # numpy and the posting arrays' modules are imported where arrays are made: a gateway's
    # start and first answer read no postings (tests/test_mcp_startup.py).
    import numpy as np


@dataclass(frozen=True, slots=True)
class EmbeddingState:
    """The index's embedding setting: ``model`` is ``None`` when it has no semantic signal."""

    model: str | None
    model_digest: str | None
    dimensions: int
    weight: float


@dataclass(frozen=True, slots=True)
class StoredVectors:
    """Every current vector of the catalog: tool ids and groups, packed rows (uint8, two 4-bit
    values a byte, ``ceil(dimensions / 2)`` bytes a row) and their scales, in the same order (not
    sorted by id)."""

    tool_ids: np.ndarray
    groups: np.ndarray
    rows: np.ndarray
    scales: np.ndarray

    @property
    def max_id(self) -> int:
        return int(self.tool_ids.max()) if self.tool_ids.size else -1


@dataclass(frozen=True, slots=True)
class VectorRow:
    """One vector to write: made from the record whose content hash is ``content_hash``."""

    tool_name: str
    content_hash: str
    scale: float
    vector: bytes


@dataclass(frozen=True, slots=True)
class VectorCounts:
    tools: int
    current: int

    @property
    def stale(self) -> int:
        """Catalog tools without a current vector: never embedded, or changed since."""
        return self.tools - self.current


def packed_width(dimensions: int) -> int:
    """The bytes of a stored vector of ``dimensions`` values: two values a byte."""
    return (dimensions + 1) // 2


@contextmanager
def _small_page_cache(connection: Connection) -> Iterator[None]:
    if connection.dialect.name != "sqlite":
        yield
        return
    before = driver.fetch(connection, "PRAGMA cache_size")[0][0]
    driver.execute(connection, f"PRAGMA cache_size = -{READ_CACHE_KIB}")
    try:
        yield
    finally:
        driver.execute(connection, f"PRAGMA cache_size = {int(before)}")


READ_CACHE_KIB = 512
"""The page cache a read of every vector goes through."""

READ_ROWS = 256
"""Rows fetched at a time when every vector is read: the Python objects of a block outlive it in
the interpreter's allocator (its arenas are returned only when empty), so a small block keeps
the memory a serving process holds after the read close to the arrays'."""


def _bump(connection: Connection) -> None:
    generation = lock_catalog(connection)
    driver.execute(
        connection,
        "UPDATE catalog_state SET generation = :generation WHERE id = 1",
        {"generation": generation + 1},
    )


class VectorReads:
    """The semantic signal's setting and the tools' vectors."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def state(self) -> EmbeddingState:
        rows = driver.fetch(
            self._connection,
            "SELECT model, model_digest, dimensions, weight FROM embedding_state WHERE id = 1",
        )
        if not rows:
            raise CorruptIndex.found("the embedding_state row is missing")
        model, digest, dimensions, weight = rows[0]
        return EmbeddingState(model, digest, int(dimensions), float(weight))

    def counts(self) -> VectorCounts:
        rows = driver.fetch(
            self._connection,
            "SELECT (SELECT COUNT(*) FROM tools), (SELECT COUNT(*) FROM tools t JOIN tool_vectors v "
            "ON v.tool_name = t.name AND v.content_hash = t.content_hash)",
        )
        return VectorCounts(int(rows[0][0]), int(rows[0][1]))

    def current(self, dimensions: int) -> StoredVectors:
        """Every current vector, in no particular order. Read in blocks straight into the arrays
        and, on SQLite, through a small page cache: the table is read once per catalog
        generation, and its pages (and the tools' rows the join visits) kept in the connection's
        large cache would cost a serving process more memory than the vectors themselves."""
        import numpy as np

        join = "FROM tool_vectors v JOIN tools t ON t.name = v.tool_name AND t.content_hash = v.content_hash"
        with _small_page_cache(self._connection):
            count = int(driver.fetch(self._connection, f"SELECT COUNT(*) {join}")[0][0])
            tool_ids = np.zeros(count, dtype=np.int64)
            groups = np.zeros(count, dtype=np.int16)
            scales = np.zeros(count, dtype=np.float32)
            width = packed_width(dimensions)
            matrix = np.zeros((count, width), dtype=np.uint8)
            at = 0
            statement = f"SELECT t.id, t.grp, v.scale, v.vector {join}"
            for block in driver.fetch_blocks(self._connection, statement, size=READ_ROWS):
                for tool_id, grp, scale, vector in block:
                    if at >= count:
                        raise CorruptIndex.found("the tool vectors changed while they were read")
                    value = bytes(vector)
                    if len(value) != width:
                        raise CorruptIndex.found(
                            f"a stored vector has {len(value)} bytes, the {dimensions} dimensions of "
                            f"the index's model take {width}"
                        )
                    matrix[at] = np.frombuffer(value, dtype=np.uint8)
                    tool_ids[at], groups[at], scales[at] = tool_id, grp, scale
                    at += 1
        if at != count:
            raise CorruptIndex.found("the tool vectors changed while they were read")
        return StoredVectors(tool_ids=tool_ids, groups=groups, rows=matrix, scales=scales)

    def missing(self, after: str = "", limit: int | None = None) -> list[tuple[str, str]]:
        """``(name, content hash)`` of catalog tools without a current vector, by name, after ``after``:
        what ``embed`` still has to do, in an order that resumes where a killed run stopped."""
        statement = (
            "SELECT t.name, t.content_hash FROM tools t LEFT JOIN tool_vectors v ON v.tool_name = t.name "
            "AND v.content_hash = t.content_hash WHERE v.tool_name IS NULL AND t.name > :after "
            "ORDER BY t.name"
        )
        params: dict[str, Any] = {"after": after}
        if limit is not None:
            statement += " LIMIT :limit"
            params["limit"] = int(limit)
        return [
            (str(name), str(digest)) for name, digest in driver.fetch(self._connection, statement, params)
        ]

    def missing_of(self, names: Sequence[str]) -> list[tuple[str, str]]:
        """``(name, content hash)`` of those of ``names`` that are catalog tools without a current
        vector."""
        found: list[tuple[str, str]] = []
        for part in chunks(list(dict.fromkeys(names))):
            wanted, params = driver.in_list("name", part)
            rows = driver.fetch(
                self._connection,
                "SELECT t.name, t.content_hash FROM tools t LEFT JOIN tool_vectors v ON v.tool_name = t.name "
                f"AND v.content_hash = t.content_hash WHERE v.tool_name IS NULL AND t.name IN {wanted} "
                "ORDER BY t.name",
                params,
            )
            found.extend((str(name), str(digest)) for name, digest in rows)
        return found

    def of_tools(self, names: Sequence[str]) -> dict[str, tuple[str, float, bytes]]:
        """The stored vector of each of ``names`` that has one, current or not: hash, scale, bytes."""
        found: dict[str, tuple[str, float, bytes]] = {}
        for part in chunks(list(names)):
            wanted, params = driver.in_list("tool_name", part)
            rows = driver.fetch(
                self._connection,
                "SELECT tool_name, content_hash, scale, vector FROM tool_vectors "
                f"WHERE tool_name IN {wanted}",
                params,
            )
            for name, digest, scale, vector in rows:
                found[str(name)] = (str(digest), float(scale), bytes(vector))
        return found


class VectorWrites(VectorReads):
    """The semantic signal's setting and vectors, written."""

    def set_state(self, setting: EmbeddingState) -> None:
        """Record the setting (under the catalog lock, bumping the catalog generation)."""
        _bump(self._connection)
        driver.execute(
            self._connection,
            "UPDATE embedding_state SET model = :model, model_digest = :model_digest, "
            "dimensions = :dimensions, weight = :weight WHERE id = 1",
            {
                "model": setting.model,
                "model_digest": setting.model_digest,
                "dimensions": setting.dimensions,
                "weight": setting.weight,
            },
        )

    def clear(self) -> int:
        """Remove every vector and the setting; how many vectors there were."""
        _bump(self._connection)
        removed = driver.execute(self._connection, "DELETE FROM tool_vectors")
        driver.execute(
            self._connection,
            "UPDATE embedding_state SET model = NULL, model_digest = NULL, dimensions = 0 WHERE id = 1",
        )
        return max(removed, 0)

    def write(self, rows: Sequence[VectorRow]) -> None:
        """Store ``rows``, replacing any vector the same tools had."""
        if not rows:
            return
        _bump(self._connection)
        self.drop([row.tool_name for row in rows])
        driver.execute_many(
            self._connection,
            "INSERT INTO tool_vectors (tool_name, content_hash, scale, vector) "
            "VALUES (:tool_name, :content_hash, :scale, :vector)",
            [(row.tool_name, row.content_hash, row.scale, row.vector) for row in rows],
        )

    def drop(self, names: Sequence[str]) -> None:
        """Remove the vectors of ``names`` (tools a write removed); no generation bump of its own:
        the catalog write that removed them makes one."""
        for part in chunks(list(names)):
            wanted, params = driver.in_list("tool_name", part)
            driver.execute(self._connection, f"DELETE FROM tool_vectors WHERE tool_name IN {wanted}", params)

    def drop_orphans(self) -> None:
        """Remove vectors whose tool is gone from the catalog."""
        driver.execute(
            self._connection, "DELETE FROM tool_vectors WHERE tool_name NOT IN (SELECT name FROM tools)"
        )
