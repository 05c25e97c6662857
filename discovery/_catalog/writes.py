"""Catalog writes: tools added, updated and removed by name, each write one transaction, with
the MCP server that owns them and what that server is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from discovery._params import analyzer_named
from discovery._text.analyzers import stored_version
from discovery.errors import AnalyzerMismatch, ServerClaimed, ServerNameCollision, ToolNotFound
from store import Reader, ServerOrigin, Store, StoredServer, Writer

if TYPE_CHECKING:
    from discovery._catalog.models import ToolRecord
    from discovery._catalog.workers import Progress


@dataclass(frozen=True, slots=True)
class ImportReport:
    """Names added, updated, unchanged and removed by one catalog write."""

    added: list[str]
    updated: list[str]
    unchanged: list[str]
    removed: list[str]
    stale_vectors: int = 0
    """Tools the write added or changed that have no current vector: the index has a semantic
    signal but its model could not be loaded here (``embed`` makes them)."""

    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
        }


def write_tools(
    store: Store,
    records: list[Mapping[str, Any] | ToolRecord],
    analyzer: str,
    *,
    replace: bool,
    server: str | None,
    origin: ServerOrigin | None,
    take_over: bool,
    progress: Progress | None,
) -> ImportReport:
    """``ToolIndex.upsert_tools``: ``records``, read whole before the write lock is taken, written
    with the catalog's ``analyzer``."""
    from discovery._catalog.embedding import embed_written
    from discovery._catalog.workers import collector_paused, prepared

    # Records are prepared (in worker processes when many) while the first ones are written.
    with (
        collector_paused(),
        closing(prepared(records, progress, analyzer)) as tools,
        store.writing() as writer,
    ):
        now = writer.catalog.lock()
        # A reindex committed in between: these terms are the old kind.
        if now != analyzer_named(analyzer).stored:
            raise AnalyzerMismatch(store.url, stored_version(now)[0], analyzer)
        if server is not None:
            _check_owners(writer, records, server)
        held = None if origin is None else _held(writer, origin, server)
        report = writer.catalog.write_tools(tools, replace=replace, server=server)
        if origin is not None:
            changed = bool(report.added or report.updated or report.removed)
            _record_origin(writer, origin, held, changed=changed, take_over=take_over)
        writer.vectors.drop(report.removed)
        stale = embed_written(writer, [*report.added, *report.updated])
    return ImportReport(report.added, report.updated, report.unchanged, report.removed, stale)


def remove_tools(store: Store, names: Iterable[str], *, missing_ok: bool) -> list[str]:
    """``ToolIndex.remove_tools``: the names removed, in one transaction."""
    wanted = list(dict.fromkeys(names))
    with store.writing() as writer:
        if not missing_ok:
            missing = [name for name in wanted if name not in writer.catalog.tools_by_names(wanted)]
            if missing:
                listed = ", ".join(repr(name) for name in missing)
                raise ToolNotFound(f"not in the catalog: {listed}; nothing removed")
        removed = writer.catalog.write_tools([], remove=wanted).removed
        writer.vectors.drop(removed)
        return removed


def _check_owners(reader: Reader, records: list[Mapping[str, Any] | ToolRecord], server: str) -> None:
    """A write of one server's tools never takes over a record of another server's: the catalog
    name ``mcp__a__b__c`` of server ``a``'s tool ``b__c`` is also that of server ``a__b``'s ``c``."""
    names = [name for record in records if isinstance(name := _name_of(record), str)]
    for name, owner in reader.catalog.tools_by_names(names).items():
        if owner.server_name is not None and owner.server_name != server:
            raise ServerNameCollision(name, owner.server_name, owner.mcp_tool_name, server)


def _held(writer: Writer, origin: ServerOrigin, server: str | None) -> StoredServer | None:
    """What the catalog's server of ``origin``'s name is, when a sync recorded it."""
    if server != origin.name:
        raise ValueError(f"an origin is the written server's: {origin.name!r} is not {server!r}")
    return writer.servers.get(origin.name)


def _record_origin(
    writer: Writer, origin: ServerOrigin, held: StoredServer | None, *, changed: bool, take_over: bool
) -> None:
    """After a sync's write: ``origin`` becomes what the catalog's server of its name is on the first
    sync of that name, a change by the config that synced it (a new version) or a take-over; the
    same server synced by another config only refreshes the time of its latest sync. A different
    server of another config may sync only what changes nothing (as one filesystem server per
    project, whose roots differ and whose tools are the same); one that would change the tools
    is refused, and the write rolls back."""
    if held is None or take_over or origin.same_config(held.origin):
        writer.servers.record(origin, datetime.now(UTC), claimed=True)
    elif held.origin.fingerprint == origin.fingerprint:
        writer.servers.record(origin, datetime.now(UTC), claimed=False)
    elif changed:
        raise ServerClaimed(origin, held)


def _name_of(record: Mapping[str, Any] | ToolRecord) -> Any:
    return record.get("name") if isinstance(record, Mapping) else record.name
