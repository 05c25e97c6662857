"""Tool records to what the store indexes: weighted term counts, length, group, content hash."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from discovery._catalog.models import ToolRecord
from discovery._ranking.fields import document_term_frequencies, field_texts
from discovery._rules import INTERNAL_NAMES
from discovery._text.analyzers import REFERENCE, Analyzer
from store import GROUPS, IndexedBatch, ToolRow


class IndexedTool(NamedTuple):
    """A tool record ready to store: its row, and its weighted term counts."""

    row: ToolRow
    terms: dict[str, int]


class IndexedFields(Protocol):
    """What a tool needs to be indexed: a ``ToolRecord``, or a tool read back from the store."""

    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def mcp_tool_name(self) -> str | None: ...
    @property
    def server_name(self) -> str | None: ...
    @property
    def summary(self) -> str: ...
    @property
    def schema_keys(self) -> Sequence[str]: ...


def record_fields(record: IndexedFields) -> list[tuple[str, str]]:
    """The ``(field, text)`` pairs a tool is indexed by."""
    return field_texts(
        name=record.name,
        label=record.label,
        mcp_tool_name=record.mcp_tool_name,
        server_name=record.server_name,
        summary=record.summary,
        schema_keys=record.schema_keys,
    )


_HEAD_FIELDS = tuple(name for name in ToolRecord.model_fields if name not in ("input_schema", "mcp_meta"))


def stored_fields(record: ToolRecord) -> dict[str, Any]:
    """The fields of ``record`` its stored row and digest are made of: ``mcp_meta`` only when
    the record has one, so the digests of records without it stay those stored before it existed."""
    fields = {name: getattr(record, name) for name in _HEAD_FIELDS}
    fields["input_schema"] = record.input_schema
    if record.mcp_meta is not None:
        fields["mcp_meta"] = record.mcp_meta
    return fields


def content_hash(record: ToolRecord) -> str:
    """The store's digest of the whole record: equal digests mean an upsert has nothing to
    rewrite."""
    return ToolRow.content_digest(stored_fields(record))


def indexed_tool(record: ToolRecord, analyzer: Analyzer = REFERENCE) -> IndexedTool:
    """``record`` ready to store: the row a write stores, and the tool's weighted terms."""
    terms = document_term_frequencies(record_fields(record), analyzer)
    row = ToolRow.of(stored_fields(record), grp=corpus_group(record), doc_len=sum(terms.values()))
    return IndexedTool(row, terms)


def indexed_batch(records: Sequence[ToolRecord], analyzer: Analyzer = REFERENCE) -> IndexedBatch:
    """``records`` ready to store, as one batch."""
    rows: list[ToolRow] = []
    terms: list[dict[str, int]] = []
    for record in records:
        row, held = indexed_tool(record, analyzer)
        rows.append(row)
        terms.append(held)
    return IndexedBatch.from_terms(rows, terms)


def corpus_group(record: ToolRecord) -> int:
    """The group a tool is stored in; a session corpus is drawn from whole groups."""
    if record.name in INTERNAL_NAMES or record.load_mode == "essential":
        return GROUPS.fixed
    if record.is_mcp:
        return GROUPS.mcp
    return GROUPS.local if record.load_mode == "discoverable" else GROUPS.fixed
