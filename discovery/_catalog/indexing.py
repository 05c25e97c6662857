"""Tool records to what the store indexes: weighted term counts, length, group, content hash."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from discovery._catalog.models import ToolRecord
from discovery._ranking.fields import document_term_frequencies, field_texts
from discovery._rules import INTERNAL_NAMES
from discovery._text.analyzers import REFERENCE, Analyzer
from store import (
    GROUP_FIXED,
    GROUP_LOCAL,
    GROUP_MCP,
    IndexedBatch,
    IndexedTool,
    ToolRow,
    column_json,
    record_digest,
)


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


def content_hash(record: ToolRecord) -> str:
    """``store.record_digest`` of the whole record: equal digests mean an upsert has
    nothing to rewrite. ``mcp_meta`` counts only when the record has one, so the digests of
    records without it stay those stored before it existed."""
    head = {name: getattr(record, name) for name in _HEAD_FIELDS}
    if record.mcp_meta is not None:
        head["mcp_meta"] = record.mcp_meta
    return record_digest(head, record.input_schema)


def indexed_tool(record: ToolRecord, analyzer: Analyzer = REFERENCE) -> IndexedTool:
    """``record`` ready to store: the row a write stores, and the tool's weighted terms."""
    terms = document_term_frequencies(record_fields(record), analyzer)
    row = ToolRow(
        record.name,
        record.label,
        record.description,
        record.summary,
        record.source,
        record.server_name,
        record.mcp_tool_name,
        column_json(record.schema_keys),
        column_json(record.input_schema),
        record.load_mode,
        corpus_group(record),
        sum(terms.values()),
        content_hash(record),
        column_json(record.mcp_meta),
    )
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
        return GROUP_FIXED
    if record.is_mcp:
        return GROUP_MCP
    return GROUP_LOCAL if record.load_mode == "discoverable" else GROUP_FIXED
