"""Plain values that cross the store's boundary: what goes in, what comes out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from store._digests import json_digest, record_digest
from store._logged_json import column_json

if TYPE_CHECKING:
    # numpy and the posting arrays' modules are imported where arrays are made: a gateway's
    # start and first answer read no postings (tests/test_mcp_startup.py).
    import numpy as np


class ToolRow(NamedTuple):
    """A tool record ready to store, but its terms: the values of its ``tools`` row, in the
    table's column order between the id and the packed indexed terms. The JSON columns are
    encoded once, by ``store._logged_json.column_json``, where the record is prepared (in a worker
    process for a large import, which then sends text rather than nested values)."""

    name: str
    label: str
    description: str
    summary: str
    source: str
    server_name: str | None
    mcp_tool_name: str | None
    schema_keys_json: str
    input_schema_json: str
    load_mode: str
    grp: int
    doc_len: int
    content_hash: str
    mcp_meta_json: str

    @classmethod
    def of(cls, fields: Mapping[str, Any], *, grp: int, doc_len: int) -> ToolRow:
        """The row of a record given by its contract fields (``mcp_meta`` only when it has one),
        in corpus group ``grp`` with indexed length ``doc_len``."""
        return cls(
            fields["name"],
            fields["label"],
            fields["description"],
            fields["summary"],
            fields["source"],
            fields["server_name"],
            fields["mcp_tool_name"],
            column_json(fields["schema_keys"]),
            column_json(fields["input_schema"]),
            fields["load_mode"],
            grp,
            doc_len,
            cls.content_digest(fields),
            column_json(fields.get("mcp_meta")),
        )

    @staticmethod
    def content_digest(fields: Mapping[str, Any]) -> str:
        """``content_hash`` of a record given by its contract fields: equal digests mean an
        upsert has nothing to rewrite (``store._digests.record_digest``)."""
        head = {name: value for name, value in fields.items() if name != "input_schema"}
        return record_digest(head, fields["input_schema"])


class _Vocabulary(dict[str, int]):
    """Each term's position in the order first looked up: a known term is a plain lookup."""

    def __missing__(self, term: str) -> int:
        self[term] = position = len(self)
        return position


@dataclass(frozen=True, slots=True)
class IndexedBatch:
    """Tools ready to store, many at a time: their rows, and their terms as columns.

    ``vocabulary`` holds each distinct term of the batch once; tool ``i`` holds the next
    ``term_counts[i]`` entries of ``term_refs`` (positions in ``vocabulary``) with their weighted
    tfs in ``tf``. What a worker process sends and a write takes: a few arrays and one word list
    cost far less to pass between processes and to turn into term ids than a dict per tool.
    """

    rows: list[ToolRow]
    vocabulary: list[str]
    term_refs: np.ndarray
    tf: np.ndarray
    term_counts: np.ndarray

    @classmethod
    def from_terms(cls, rows: list[ToolRow], terms: Sequence[Mapping[str, int]]) -> IndexedBatch:
        """The batch of ``rows`` whose terms are ``terms``, one mapping per row."""
        import numpy as np

        vocabulary = _Vocabulary()
        refs: list[int] = []
        tfs: list[int] = []
        for held in terms:
            refs.extend(map(vocabulary.__getitem__, held))
            tfs.extend(held.values())
        return cls(
            rows=rows,
            vocabulary=list(vocabulary),
            term_refs=np.array(refs, np.int32),
            tf=np.array(tfs, np.int32),
            term_counts=np.fromiter(map(len, terms), np.int64, len(terms)),
        )

    def __len__(self) -> int:
        return len(self.rows)

    def term_bounds(self) -> np.ndarray:
        """Where each tool's terms start in ``term_refs``, and where the last one's end."""
        import numpy as np

        bounds: np.ndarray = np.r_[0, np.cumsum(self.term_counts)]
        return bounds

    def terms_of(self, position: int) -> dict[str, int]:
        """The weighted term counts of the tool at ``position``."""
        return self._terms_between(self.term_bounds(), position)

    def tools(self) -> list[tuple[ToolRow, dict[str, int]]]:
        """Each tool's row and weighted term counts, in order."""
        bounds = self.term_bounds()
        return [(row, self._terms_between(bounds, i)) for i, row in enumerate(self.rows)]

    def _terms_between(self, bounds: np.ndarray, position: int) -> dict[str, int]:
        start, end = int(bounds[position]), int(bounds[position + 1])
        refs, tfs = self.term_refs[start:end].tolist(), self.tf[start:end].tolist()
        return {self.vocabulary[ref]: tf for ref, tf in zip(refs, tfs, strict=True)}

    def select(self, positions: Sequence[int], rows: Sequence[ToolRow] | None = None) -> IndexedBatch:
        """The tools at ``positions``, in that order (with ``rows`` as their rows when given)."""
        import numpy as np

        if rows is None and list(positions) == list(range(len(self.rows))):
            return self  # an import's batch, every tool of it written
        chosen = np.array(positions, np.int64)
        if chosen.size == 0:
            return IndexedBatch([], self.vocabulary, self.term_refs[:0], self.tf[:0], self.term_counts[:0])
        counts = self.term_counts[chosen]
        starts = self.term_bounds()[chosen]
        # Each chosen tool's run of terms, one after the other: the run's start, plus how far
        # into the run each entry is.
        within = np.arange(int(counts.sum())) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
        at = np.repeat(starts, counts) + within
        return IndexedBatch(
            rows=list(rows) if rows is not None else [self.rows[i] for i in positions],
            vocabulary=self.vocabulary,
            term_refs=self.term_refs[at],
            tf=self.tf[at],
            term_counts=counts,
        )

    def split(self, size: int) -> list[IndexedBatch]:
        """This batch in batches of at most ``size`` tools, in order."""
        if len(self.rows) <= size:
            return [self]
        return [
            self.select(range(start, min(start + size, len(self.rows))))
            for start in range(0, len(self.rows), size)
        ]


@dataclass(frozen=True, slots=True)
class StoredTool:
    """A tool as read back from the catalog."""

    id: int
    name: str
    label: str
    description: str
    summary: str
    source: str
    server_name: str | None
    mcp_tool_name: str | None
    schema_keys: list[str]
    input_schema: dict[str, Any] | None
    load_mode: str
    grp: int
    doc_len: int
    mcp_meta: dict[str, Any] | None = None
    """What the tool's MCP server said of it beyond the record (``title``, ``annotations``,
    ``outputSchema``, ``icons``), when it said any of it."""

    def as_record(self) -> dict[str, Any]:
        """The contract §2 record (without the store's own bookkeeping), with ``mcp_meta`` when
        the tool has one."""
        record = {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "summary": self.summary,
            "source": self.source,
            "server_name": self.server_name,
            "mcp_tool_name": self.mcp_tool_name,
            "schema_keys": list(self.schema_keys),
            "input_schema": self.input_schema,
            "load_mode": self.load_mode,
        }
        if self.mcp_meta is not None:
            record["mcp_meta"] = self.mcp_meta
        return record

    def pin_digest(self) -> str:
        """The digest of everything the tool claims (``as_record()``), by which a gateway pins
        it: the fixed ``store._digests.json_digest``, which the session logs' pins hold."""
        return json_digest(self.as_record())


@dataclass(frozen=True, slots=True)
class WriteReport:
    """What a catalog write did, by tool name."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    generation: int = 0


@dataclass(frozen=True, slots=True)
class GroupStats:
    doc_count: int
    total_len: int


@dataclass(frozen=True, slots=True)
class TermStats:
    df: int
    max_tf: int
