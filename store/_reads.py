"""The catalog's read views: its tool rows, generation and analyzer (``CatalogReads``), and its
statistics and postings (``IndexReads``). A view reads on its unit's connection, so a caller
reads several of them from one snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from store import _driver as driver
from store._audit import StoredPosting, forward_rows, forward_terms, listed_term_ids, remember_texts
from store._records import GroupStats, StoredTool, TermStats
from store._schema import GROUPS
from store._sql import chunks, lookup_keys, matchable
from store._tool_rows import TOOL_SELECT, tool_reader
from store.errors import CorruptIndex

if TYPE_CHECKING:
    # numpy and the posting arrays' modules are imported where arrays are made: a gateway's
    # start and first answer read no postings (tests/test_mcp_startup.py).
    import numpy as np

    from store import _postings as packed

MCP_NAMES = "name LIKE :mcp_names ESCAPE '/'"
"""The names of MCP tools (``mcp__`` first, its underscores escaped)."""


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
        rows = driver.fetch(self._connection, "SELECT analyzer FROM catalog_state WHERE id = 1")
        if not rows or rows[0][0] is None:
            raise CorruptIndex.found("the catalog_state row is missing")
        return str(rows[0][0])

    def _tools_where(self, column: str, values: Sequence[Any]) -> list[StoredTool]:
        read = tool_reader(self._connection.dialect)
        found: list[StoredTool] = []
        for part in chunks(values):
            wanted, params = driver.in_list("value", part)
            rows = driver.fetch(self._connection, f"{TOOL_SELECT} WHERE {column} IN {wanted}", params)
            found.extend(read(row) for row in rows)
        return found

    def tools_by_ids(self, ids: Sequence[int]) -> dict[int, StoredTool]:
        return {tool.id: tool for tool in self._tools_where("id", list(ids))}

    def tools_by_names(self, names: Sequence[str]) -> dict[str, StoredTool]:
        return {tool.name: tool for tool in self._tools_where("name", lookup_keys(names))}

    def names_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for part in chunks(list(ids)):
            wanted, params = driver.in_list("id", part)
            rows = driver.fetch(self._connection, f"SELECT id, name FROM tools WHERE id IN {wanted}", params)
            found.update(dict(rows))
        return found

    def all_tools(self, *, server: str | None = None, source: str | None = None) -> list[StoredTool]:
        """Catalog tools in catalog order (the order they were first added)."""
        if not all(matchable(value) for value in (server, source) if value is not None):
            return []
        chosen = {"server_name": server, "source": source}
        params = {column: value for column, value in chosen.items() if value is not None}
        where = " AND ".join(f"{column} = :{column}" for column in params)
        statement = f"{TOOL_SELECT}{f' WHERE {where}' if where else ''} ORDER BY id"
        read = tool_reader(self._connection.dialect)
        return [read(row) for row in driver.fetch(self._connection, statement, params)]

    def summary(self) -> dict[str, Any]:
        """What ``tool-index stats`` shows: sizes, average length, per-source and per-server counts."""
        groups = IndexReads(self._connection).group_stats()
        tools = sum(g.doc_count for g in groups.values())
        total_len = sum(g.total_len for g in groups.values())
        by_source: dict[str, int] = dict(
            driver.fetch(self._connection, "SELECT source, COUNT(*) FROM tools GROUP BY source")
        )
        by_server: dict[str, int] = dict(
            driver.fetch(
                self._connection,
                "SELECT server_name, COUNT(*) FROM tools WHERE server_name IS NOT NULL GROUP BY server_name",
            )
        )
        ((terms,),) = driver.fetch(self._connection, "SELECT COUNT(*) FROM terms")
        ((postings,),) = driver.fetch(self._connection, "SELECT COALESCE(SUM(df), 0) FROM term_stats")
        return {
            "tools": tools,
            "terms": int(terms),
            "postings": int(postings),
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
        where = ""
        params: dict[str, Any] = {}
        if not everything:
            chosen = [f"NOT ({MCP_NAMES})"]
            params["mcp_names"] = "mcp/_/_%"
            for column, values in (("server_name", servers), ("name", names)):
                if values:
                    wanted, binds = driver.in_list(column, list(values))
                    chosen.append(f"{column} IN {wanted}")
                    params.update(binds)
            where = f" WHERE {' OR '.join(chosen)}"
        rows = driver.fetch(
            self._connection, f"SELECT name, grp, load_mode FROM tools{where} ORDER BY id", params
        )
        return [(name, int(grp), load_mode) for name, grp, load_mode in rows]

    def group_members(self, grp: int) -> list[tuple[str, str | None]]:
        """``(name, server_name)`` of every tool in a corpus group."""
        rows = driver.fetch(
            self._connection, "SELECT name, server_name FROM tools WHERE grp = :grp", {"grp": grp}
        )
        return [(name, server) for name, server in rows]

    def tool_origins(self) -> list[tuple[str, str | None, str | None]]:
        """``(name, server_name, mcp_tool_name)`` of every catalog tool."""
        rows = driver.fetch(self._connection, "SELECT name, server_name, mcp_tool_name FROM tools")
        return [(name, server, tool) for name, server, tool in rows]

    def servers(self) -> set[str]:
        """The servers the catalog holds tools of."""
        rows = driver.fetch(
            self._connection, "SELECT DISTINCT server_name FROM tools WHERE server_name IS NOT NULL"
        )
        return {server for (server,) in rows}

    def group_server_counts(self, grp: int) -> dict[str | None, int]:
        rows = driver.fetch(
            self._connection,
            "SELECT server_name, COUNT(*) FROM tools WHERE grp = :grp GROUP BY server_name",
            {"grp": grp},
        )
        return {server: int(count) for server, count in rows}


class IndexReads:
    """Group and term statistics and the postings of the catalog's tools."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def group_stats(self) -> dict[int, GroupStats]:
        rows = driver.fetch(self._connection, "SELECT grp, doc_count, total_len FROM group_stats")
        stats = {grp: GroupStats(int(count), int(total)) for grp, count, total in rows}
        missing = sorted(set(GROUPS) - stats.keys())
        if missing:
            raise CorruptIndex.found(f"no group_stats row for group {missing[0]}")
        return stats

    def term_stats(self, terms: Sequence[str]) -> dict[str, tuple[int, dict[int, TermStats]]]:
        """``{term: (term_id, {group: stats})}`` for the terms that are in the catalog."""
        found: dict[str, tuple[int, dict[int, TermStats]]] = {}
        for part in chunks(list(terms)):
            wanted, params = driver.in_list("text", part)
            rows = driver.fetch(
                self._connection,
                "SELECT terms.text, terms.id, term_stats.grp, term_stats.df, term_stats.max_tf "
                f"FROM terms JOIN term_stats ON term_stats.term_id = terms.id WHERE terms.text IN {wanted}",
                params,
            )
            for text, term_id, grp, df, max_tf in rows:
                found.setdefault(text, (term_id, {}))[1][grp] = TermStats(int(df), int(max_tf))
        return found

    def posting_blocks(self, term_id: int) -> list[tuple[int, packed.PostingBlock]]:
        """Every posting of one term as ``(group, block)``, in group order; each block's arrays
        (tool ids, tfs and document lengths, in the unsigned widths they are stored in or wider)
        are sorted by tool id."""
        from store import _postings as packed

        return packed.term_blocks(self._connection, term_id)

    def forward_postings(self, tool_ids: Sequence[int]) -> np.ndarray:
        """The postings ``tool_ids`` hold (``store._changes.CHANGE_DTYPE``), read from their indexed
        terms: what scoring a few documents needs, without any term's whole postings. A pruned search
        reads thousands of rows: their entries are joined as bytes and laid out in one pass, not an
        array per tool."""
        import numpy as np

        from store import _postings as packed
        from store._changes import CHANGE_DTYPE

        rows: list[Any] = []
        for part in chunks(list(tool_ids)):
            rows.extend(forward_rows(self._connection, part))
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
        from store import _postings as packed

        found: dict[int, frozenset[int]] = {tool_id: frozenset() for tool_id in tool_ids}
        for part in chunks(list(tool_ids)):
            wanted, params = driver.in_list("id", part)
            for tool_id, indexed in driver.fetch(
                self._connection, f"SELECT id, indexed_terms FROM tools WHERE id IN {wanted}", params
            ):
                found[tool_id] = frozenset(packed.forward_entries(indexed, tool_id)["term_id"].tolist())
        return found

    def postings_of_tools(self, tool_ids: Sequence[int]) -> dict[int, list[StoredPosting]]:
        """The postings ``tool_ids`` hold, from their indexed terms, with the term texts, per tool,
        ordered by term id."""
        found: dict[int, list[StoredPosting]] = {}
        texts: dict[int, str] = {}
        for part in chunks(list(tool_ids)):
            rows = forward_rows(self._connection, part)
            forward = forward_terms(rows)
            remember_texts(self._connection, texts, listed_term_ids(forward))
            for tool_id, grp, doc_len, _ in rows:
                found[tool_id] = [
                    StoredPosting(term_id, texts.get(term_id), grp, tf, doc_len)
                    for term_id, tf in zip(*forward[tool_id], strict=True)
                ]
        return found
