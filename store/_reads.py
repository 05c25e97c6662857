"""The catalog's read views: its tool rows, generation and analyzer (``CatalogReads``), and its
statistics and postings (``IndexReads``). A view reads on its unit's connection, so a caller
reads several of them from one snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select

from store import _driver as driver
from store import _postings as packed
from store._audit import StoredPosting, forward_terms, listed_term_ids, remember_texts
from store._changes import CHANGE_DTYPE
from store._records import GroupStats, StoredTool, TermStats
from store._schema import (
    GROUPS,
    catalog_state_table,
    group_stats_table,
    term_stats_table,
    terms_table,
    tools_table,
)
from store._sql import TOOL_COLUMNS, chunks, lookup_keys, matchable
from store.errors import CorruptIndex


def _stored(row: Any) -> StoredTool:
    return StoredTool(**row._asdict())


class CatalogReads:
    """The catalog's tool rows, its generation and analyzer."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def generation(self) -> int:
        """The catalog generation; every read-only search starts here, so straight to the driver."""
        rows = driver.fetch(self._connection, "SELECT generation FROM catalog_state WHERE id = 1")
        if not rows:
            raise CorruptIndex.found("the catalog_state row is missing")
        return int(rows[0][0])

    def analyzer(self) -> str:
        """The name of the analyzer the catalog's postings were made with."""
        value = self._connection.execute(
            select(catalog_state_table.c.analyzer).where(catalog_state_table.c.id == 1)
        ).scalar()
        if value is None:
            raise CorruptIndex.found("the catalog_state row is missing")
        return str(value)

    def tools_by_ids(self, ids: Sequence[int]) -> dict[int, StoredTool]:
        found: dict[int, StoredTool] = {}
        for part in chunks(list(ids)):
            for row in self._connection.execute(select(*TOOL_COLUMNS).where(tools_table.c.id.in_(part))):
                found[row.id] = _stored(row)
        return found

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        found: dict[str, StoredTool] = {}
        for part in chunks(lookup_keys(names)):
            for row in self._connection.execute(select(*TOOL_COLUMNS).where(tools_table.c.name.in_(part))):
                found[row.name] = _stored(row)
        return found

    def names_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for part in chunks(list(ids)):
            found.update(
                dict(
                    self._connection.execute(
                        select(tools_table.c.id, tools_table.c.name).where(tools_table.c.id.in_(part))
                    ).all()
                )
            )
        return found

    def all_tools(self, *, server: str | None = None, source: str | None = None) -> list[StoredTool]:
        """Catalog tools in catalog order (the order they were first added)."""
        if not all(matchable(value) for value in (server, source) if value is not None):
            return []
        query = select(*TOOL_COLUMNS).order_by(tools_table.c.id)
        if server is not None:
            query = query.where(tools_table.c.server_name == server)
        if source is not None:
            query = query.where(tools_table.c.source == source)
        return [_stored(row) for row in self._connection.execute(query)]

    def summary(self) -> dict[str, Any]:
        """What ``tool-index stats`` shows: sizes, average length, per-source and per-server counts."""
        groups = IndexReads(self._connection).group_stats()
        tools = sum(g.doc_count for g in groups.values())
        total_len = sum(g.total_len for g in groups.values())
        by_source: dict[str, int] = dict(
            self._connection.execute(
                select(tools_table.c.source, func.count()).group_by(tools_table.c.source)
            ).all()
        )
        by_server: dict[str, int] = dict(
            self._connection.execute(
                select(tools_table.c.server_name, func.count())
                .where(tools_table.c.server_name.is_not(None))
                .group_by(tools_table.c.server_name)
            ).all()
        )
        return {
            "tools": tools,
            "terms": int(
                self._connection.execute(select(func.count()).select_from(terms_table)).scalar_one()
            ),
            "postings": int(
                self._connection.execute(
                    select(func.coalesce(func.sum(term_stats_table.c.df), 0))
                ).scalar_one()
            ),
            "avgdl": total_len / tools if tools else 0.0,
            "generation": self.generation(),
            "analyzer": self.analyzer(),
            "sources": dict(sorted(by_source.items())),
            "servers": dict(sorted(by_server.items())),
        }

    def opening_candidates(
        self, *, everything: bool, servers: Sequence[str], names: Sequence[str]
    ) -> list[tuple[str, int, str]]:
        """``(name, group, load_mode)`` in catalog order of the tools a new session may start with:
        every tool, or the non-MCP tools plus the MCP tools of ``servers`` or named in ``names``."""
        query = select(tools_table.c.name, tools_table.c.grp, tools_table.c.load_mode).order_by(
            tools_table.c.id
        )
        if not everything:
            mcp = tools_table.c.name.startswith("mcp__", autoescape=True)
            chosen = ~mcp
            if servers:
                chosen = chosen | tools_table.c.server_name.in_(list(servers))
            if names:
                chosen = chosen | tools_table.c.name.in_(list(names))
            query = query.where(chosen)
        return [(name, int(grp), load_mode) for name, grp, load_mode in self._connection.execute(query)]

    def group_members(self, grp: int) -> list[tuple[str, str | None]]:
        """``(name, server_name)`` of every tool in a corpus group."""
        rows = self._connection.execute(
            select(tools_table.c.name, tools_table.c.server_name).where(tools_table.c.grp == grp)
        )
        return [(name, server) for name, server in rows]

    def tool_origins(self) -> list[tuple[str, str | None, str | None]]:
        """``(name, server_name, mcp_tool_name)`` of every catalog tool."""
        rows = self._connection.execute(
            select(tools_table.c.name, tools_table.c.server_name, tools_table.c.mcp_tool_name)
        )
        return [(name, server, tool) for name, server, tool in rows]

    def servers(self) -> set[str]:
        """The servers the catalog holds tools of."""
        rows = self._connection.execute(
            select(tools_table.c.server_name).where(tools_table.c.server_name.is_not(None)).distinct()
        )
        return {server for (server,) in rows}

    def group_server_counts(self, grp: int) -> dict[str | None, int]:
        rows = self._connection.execute(
            select(tools_table.c.server_name, func.count())
            .where(tools_table.c.grp == grp)
            .group_by(tools_table.c.server_name)
        )
        return {server: int(count) for server, count in rows}


class IndexReads:
    """Group and term statistics and the postings of the catalog's tools."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def group_stats(self) -> dict[int, GroupStats]:
        rows = self._connection.execute(
            select(group_stats_table.c.grp, group_stats_table.c.doc_count, group_stats_table.c.total_len)
        )
        stats = {grp: GroupStats(int(count), int(total)) for grp, count, total in rows}
        missing = sorted(set(GROUPS) - stats.keys())
        if missing:
            raise CorruptIndex.found(f"no group_stats row for group {missing[0]}")
        return stats

    def term_stats(self, terms: Sequence[str]) -> dict[str, tuple[int, dict[int, TermStats]]]:
        """``{term: (term_id, {group: stats})}`` for the terms that are in the catalog."""
        found: dict[str, tuple[int, dict[int, TermStats]]] = {}
        for part in chunks(list(terms)):
            rows = self._connection.execute(
                select(
                    terms_table.c.text,
                    terms_table.c.id,
                    term_stats_table.c.grp,
                    term_stats_table.c.df,
                    term_stats_table.c.max_tf,
                )
                .join(term_stats_table, term_stats_table.c.term_id == terms_table.c.id)
                .where(terms_table.c.text.in_(part))
            )
            for text, term_id, grp, df, max_tf in rows:
                found.setdefault(text, (term_id, {}))[1][grp] = TermStats(int(df), int(max_tf))
        return found

    def posting_blocks(self, term_id: int) -> list[tuple[int, packed.PostingBlock]]:
        """Every posting of one term as ``(group, block)``, in group order; each block's arrays
        (tool ids, tfs and document lengths, in the unsigned widths they are stored in or wider)
        are sorted by tool id."""
        return packed.term_blocks(self._connection, term_id)

    def forward_postings(self, tool_ids: Sequence[int]) -> np.ndarray:
        """The postings ``tool_ids`` hold (``store._changes.CHANGE_DTYPE``), read from their indexed
        terms: what scoring a few documents needs, without any term's whole postings. A pruned search
        reads thousands of rows: their entries are joined as bytes and laid out in one pass, not an
        array per tool."""
        rows: list[Any] = []
        for part in chunks(list(tool_ids)):
            wanted, params = driver.in_list("id", part)
            rows.extend(
                driver.fetch(
                    self._connection,
                    f"SELECT id, grp, doc_len, indexed_terms FROM tools WHERE id IN {wanted}",
                    params,
                )
            )
        if not rows:
            return np.empty(0, CHANGE_DTYPE)
        ids, groups, lengths, blobs = zip(*rows, strict=True)
        width = packed.FORWARD_DTYPE.itemsize
        try:
            sizes = np.fromiter(map(len, blobs), np.int64, len(blobs))
            joined = b"".join(blobs)
        except TypeError:  # one is not bytes: the check of each row names it
            for tool_id, blob in zip(ids, blobs, strict=True):
                packed.forward_entries(blob, tool_id)
            raise
        for at in np.flatnonzero(sizes % width).tolist():
            packed.forward_entries(blobs[at], ids[at])  # not whole entries: raises, naming the tool
        entries = np.frombuffer(joined, packed.FORWARD_DTYPE)
        counts = sizes // width
        held = np.empty(entries.size, CHANGE_DTYPE)
        held["term_id"], held["tf"] = entries["term_id"], entries["tf"]
        held["tool_id"] = np.repeat(np.array(ids, np.int64), counts)
        held["grp"] = np.repeat(np.array(groups, np.int16), counts)
        held["doc_len"] = np.repeat(np.array(lengths, np.int32), counts)
        return held

    def term_ids_of_tools(self, tool_ids: Sequence[int]) -> dict[int, frozenset[int]]:
        """The terms each tool holds, from its indexed terms."""
        found: dict[int, frozenset[int]] = {tool_id: frozenset() for tool_id in tool_ids}
        for part in chunks(list(tool_ids)):
            for tool_id, indexed in self._connection.execute(
                select(tools_table.c.id, tools_table.c.indexed_terms).where(tools_table.c.id.in_(part))
            ):
                found[tool_id] = frozenset(packed.forward_entries(indexed, tool_id)["term_id"].tolist())
        return found

    def postings_of_tools(self, tool_ids: Sequence[int]) -> dict[int, list[StoredPosting]]:
        """The postings ``tool_ids`` hold, from their indexed terms, with the term texts, per tool,
        ordered by term id."""
        found: dict[int, list[StoredPosting]] = {}
        texts: dict[int, str] = {}
        for part in chunks(list(tool_ids)):
            rows = self._connection.execute(
                select(
                    tools_table.c.id, tools_table.c.grp, tools_table.c.doc_len, tools_table.c.indexed_terms
                ).where(tools_table.c.id.in_(part))
            ).all()
            forward = forward_terms(rows)
            remember_texts(self._connection, texts, listed_term_ids(forward))
            for row in rows:
                found[row.id] = [
                    StoredPosting(term_id, texts.get(term_id), row.grp, tf, row.doc_len)
                    for term_id, tf in zip(*forward[row.id], strict=True)
                ]
        return found
