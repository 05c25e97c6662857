"""Plain values that cross the store's boundary: what goes in, what comes out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class IndexedTool:
    """A tool record ready to store: its fields, corpus group, length and weighted term counts."""

    name: str
    label: str
    description: str
    summary: str
    source: str
    server_name: str | None
    mcp_tool_name: str | None
    schema_keys_json: str
    input_schema_json: str
    """Both JSON columns as stored, encoded once where the record is prepared (in a worker
    process for a large import, which then sends text rather than nested values)."""
    load_mode: str
    grp: int
    doc_len: int
    content_hash: str
    terms: Mapping[str, int] = field(repr=False)


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

    def as_record(self) -> dict[str, Any]:
        """The SPEC §2 record (without the store's own bookkeeping)."""
        return {
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
