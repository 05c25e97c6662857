"""Tool records to what the store indexes: weighted term counts, length, group, content hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Protocol

from discovery.corpus import corpus_group
from discovery.models import ToolRecord
from discovery.scoring import document_term_frequencies, field_texts
from store import IndexedTool


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


def content_hash(record: ToolRecord) -> str:
    """A digest of the whole record: equal digests mean an upsert has nothing to rewrite."""
    canonical = json.dumps(record.model_dump(), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def indexed_tool(record: ToolRecord) -> IndexedTool:
    terms = document_term_frequencies(record_fields(record))
    return IndexedTool(
        name=record.name,
        label=record.label,
        description=record.description,
        summary=record.summary,
        source=record.source,
        server_name=record.server_name,
        mcp_tool_name=record.mcp_tool_name,
        schema_keys_json=json.dumps(list(record.schema_keys)),
        input_schema_json=json.dumps(record.input_schema),
        load_mode=record.load_mode,
        grp=corpus_group(record),
        doc_len=sum(terms.values()),
        content_hash=content_hash(record),
        terms=terms,
    )
