"""The learned field's rows: the learning switch, the credits sessions gave, and their sums.

A credit is one (identity, session, query term, tool): the rule that makes them from a session's
log is ``discovery._sessions.learning``'s; here they are only stored, summed and read.
``learned_terms`` (sessions and distinct identities per term and tool) and ``learned_tools`` are
kept equal to the sums of ``learned_credits`` by every write of ``LearningWrites`` that changes
credits, in the unit's transaction, and every such change bumps the learned generation so that
other processes reload what they cached of it. Which sums rank for whom (K identities, 2K for a
destructive tool) is the ranker's arithmetic; the store gives it the counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from store import _driver as driver
from store._sql import chunks
from store.errors import CorruptIndex

if TYPE_CHECKING:
    # numpy and the posting arrays' modules are imported where arrays are made: a gateway's
    # start and first answer read no postings (tests/test_mcp_startup.py).
    import numpy as np

Credit = tuple[str, str, str, str]
"""``(identity, session id, term, tool name)``."""

DESTRUCTIVE = {
    "sqlite": "COALESCE(json_type(t.mcp_meta, '$.annotations.destructiveHint') = 'true', 0)",
    "postgresql": "COALESCE((t.mcp_meta -> 'annotations' ->> 'destructiveHint') = 'true', false)",
}
"""Per dialect, whether the tool ``t``'s MCP annotations say ``destructiveHint: true`` (as
``discovery._sessions.learning.destructive`` reads them)."""


JOURNAL_KEPT = 4096
"""Learned generations whose changes the journal keeps; a cache further behind reloads all."""


@dataclass(frozen=True, slots=True)
class LearningState:
    enabled: bool
    generation: int
    reset_generation: int = 0
    """The last change the journal does not describe: a cache from before it reloads all."""
    min_identities: int = 2
    """K: the distinct identities a (term, tool) needs before it ranks for others."""

    def journaled_since(self, generation: int) -> bool:
        """Whether the journal holds every change after ``generation`` up to this state."""
        return self.reset_generation <= generation and self.generation - generation <= JOURNAL_KEPT


@dataclass(frozen=True, slots=True)
class StoredLearnedPostings:
    """The catalog tools holding one learned term, ascending by id, and a count per tool: how
    many distinct identities taught it (``postings``), or how many of one identity's sessions
    (``own_postings``). Two int64 arrays. A tool's group is the same in every term it holds, so it
    is read with the tools (``learned_tools``), not with each posting."""

    ids: np.ndarray
    tf: np.ndarray


@dataclass(frozen=True, slots=True)
class LearnedChange:
    """A (term, tool) sum that changed, as it is now: the tool's catalog id and group (``None``
    and 0 when it is not a catalog tool), whether it has a learned field, how many distinct
    identities taught it the term (0: none), and whether it is destructive."""

    term: str
    tool_name: str
    tool_id: int | None
    grp: int
    learned: bool
    identities: int
    destructive: bool = False


POSTINGS_BLOCK = 4096
"""Learned postings read per fetch."""


@dataclass(frozen=True, slots=True)
class LearnedTool:
    """A catalog tool with a learned field: its id and group."""

    tool_id: int
    grp: int


@dataclass(frozen=True, slots=True)
class LearnedTerm:
    term: str
    sessions: int
    identities: int


@dataclass(frozen=True, slots=True)
class TeachingCounts:
    """Per tool with a learned field: how many identities and sessions taught it anything, and
    how many (term, tool) pairs it learned."""

    tool_name: str
    identities: int
    sessions: int
    terms: int


class LearningReads:
    """The learned field: its switch, the credits and their sums."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def state(self) -> LearningState:
        """The learning switch and generations."""
        return self._state(lock=None)

    def _state(self, *, lock: str | None) -> LearningState:
        """The learning switch and generations; ``lock`` (``"share"`` for a writer about to credit,
        ``"update"`` for one about to recompute, switch or forget) holds the row on PostgreSQL until
        the transaction ends, so a call logged while learning is switched on is either seen by the
        recomputation or credited by its own writer. SQLite's writers are serialized already."""
        statement = (
            "SELECT enabled, generation, reset_generation, min_identities FROM learning_state WHERE id = 1"
        )
        if lock is not None and self._connection.dialect.name != "sqlite":
            statement += " FOR SHARE" if lock == "share" else " FOR UPDATE"
        rows = driver.fetch(self._connection, statement)
        if not rows:
            raise CorruptIndex.found("the learning_state row is missing")
        enabled, generation, reset, k = rows[0]
        return LearningState(bool(enabled), int(generation), int(reset), int(k))

    def with_catalog_generation(self) -> tuple[int, LearningState]:
        """The catalog generation and the learning state in one statement: every read-only search
        starts here."""
        rows = driver.fetch(
            self._connection,
            "SELECT c.generation, l.enabled, l.generation, l.reset_generation, l.min_identities "
            "FROM catalog_state c, learning_state l WHERE c.id = 1 AND l.id = 1",
        )
        if not rows:
            raise CorruptIndex.found("the catalog_state or learning_state row is missing")
        generation, enabled, learned, reset, k = rows[0]
        return int(generation), LearningState(bool(enabled), int(learned), int(reset), int(k))

    def _destructive(self) -> str:
        return DESTRUCTIVE[self._connection.dialect.name]

    def changes_since(self, generation: int) -> list[LearnedChange]:
        """The (term, tool) sums changed after ``generation`` (complete when ``journaled_since``),
        with what a process that cached the field needs to catch up: one statement, since every
        search after another session's call runs it."""
        rows = driver.fetch(
            self._connection,
            "SELECT DISTINCT j.term, j.tool_name, t.id, t.grp, lk.tool_name, lt.identities, "
            f"{self._destructive()} "
            "FROM learned_journal j "
            "LEFT JOIN tools t ON t.name = j.tool_name "
            "LEFT JOIN learned_tools lk ON lk.tool_name = j.tool_name "
            "LEFT JOIN learned_terms lt ON lt.term = j.term AND lt.tool_name = j.tool_name "
            "WHERE j.generation > :generation",
            {"generation": generation},
        )
        return [
            LearnedChange(
                str(term),
                str(tool),
                None if tool_id is None else int(tool_id),
                0 if grp is None else int(grp),
                learned := tool_id is not None and field is not None,
                int(identities or 0) if learned else 0,
                bool(destroys),
            )
            for term, tool, tool_id, grp, field, identities, destroys in rows
        ]

    def credits(self) -> set[Credit]:
        rows = driver.fetch(
            self._connection, "SELECT identity, session_id, term, tool_name FROM learned_credits"
        )
        return {(str(who), str(s), str(term), str(tool)) for who, s, term, tool in rows}

    def sums(self) -> tuple[dict[tuple[str, str], tuple[int, int]], dict[str, int]]:
        """The stored sums: (sessions, identities) per (term, tool), and length per tool."""
        terms = driver.fetch(
            self._connection, "SELECT term, tool_name, sessions, identities FROM learned_terms"
        )
        tools = driver.fetch(self._connection, "SELECT tool_name, length FROM learned_tools")
        return (
            {(str(term), str(tool)): (int(count), int(who)) for term, tool, count, who in terms},
            {str(tool): int(length) for tool, length in tools},
        )

    def postings(
        self, terms: Sequence[str], min_identities: int, min_destructive: int
    ) -> dict[str, StoredLearnedPostings]:
        """The learned postings of ``terms`` among the catalog's tools that at least
        ``min_identities`` identities taught (``min_destructive`` for a tool whose annotations say
        it is destructive), with how many did, by term (a term no catalog tool learned so is
        absent).

        The tools' ids come from the catalog's name index alone, without reading their rows; the rows
        are read a block at a time into arrays, so a common term's many postings never stand as one
        Python object each all at once."""
        statement = (
            "SELECT lt.term, t.id, lt.identities FROM learned_terms lt "
            "JOIN tools t ON t.name = lt.tool_name WHERE lt.identities >= :k AND lt.term IN {wanted} "
            f"AND lt.identities >= CASE WHEN {self._destructive()} THEN :k_destructive ELSE :k END "
            "ORDER BY lt.term, t.id"
        )
        return self._postings(statement, terms, {"k": min_identities, "k_destructive": min_destructive})

    def own_postings(self, identity: str, terms: Sequence[str]) -> dict[str, StoredLearnedPostings]:
        """The catalog tools ``identity`` taught each of ``terms``, with how many of its sessions
        did, by term (one statement per 500 terms)."""
        statement = (
            "SELECT c.term, t.id, COUNT(*) FROM learned_credits c JOIN tools t ON t.name = c.tool_name "
            "WHERE c.identity = :identity AND c.term IN {wanted} GROUP BY c.term, t.id ORDER BY c.term, t.id"
        )
        return self._postings(statement, terms, {"identity": identity})

    def _postings(
        self, statement: str, terms: Sequence[str], fixed: dict[str, Any]
    ) -> dict[str, StoredLearnedPostings]:
        """``statement``'s (term, tool id, count) rows, ordered by term then id, for ``terms``."""
        import numpy as np

        runs: list[list[Any]] = []  # [term, rows], in the rows' order
        ids: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        for part in chunks(sorted(set(terms))):  # a query's terms are many: each part is one IN
            wanted, params = driver.in_list("term", part)
            rendered = statement.format(wanted=wanted)
            blocks = driver.fetch_blocks(self._connection, rendered, {**fixed, **params}, size=POSTINGS_BLOCK)
            for block in blocks:
                column_terms, column_ids, column_tfs = zip(*block, strict=True)
                ids.append(np.array(column_ids, dtype=np.int64))
                tfs.append(np.array(column_tfs, dtype=np.int64))
                for term, run in groupby(column_terms):  # each term's rows are one run
                    count = sum(1 for _ in run)
                    if runs and runs[-1][0] == term:
                        runs[-1][1] += count
                    else:
                        runs.append([term, count])
        if not runs:
            return {}
        all_ids, all_tfs = np.concatenate(ids), np.concatenate(tfs)
        found: dict[str, StoredLearnedPostings] = {}
        start = 0
        for term, count in runs:
            found[str(term)] = StoredLearnedPostings(
                all_ids[start : start + count], all_tfs[start : start + count]
            )
            start += count
        return found

    def learned_tools(self) -> dict[str, LearnedTool]:
        """The catalog tools with a learned field, by name."""
        rows = driver.fetch(
            self._connection,
            "SELECT lk.tool_name, t.id, t.grp FROM learned_tools lk JOIN tools t ON t.name = lk.tool_name",
        )
        return {str(name): LearnedTool(int(tool_id), int(grp)) for name, tool_id, grp in rows}

    def learned_of(self, tool_name: str) -> list[LearnedTerm]:
        """What ``tool_name`` learned: its terms, taught by most identities first, then by most
        sessions, then by term."""
        rows = driver.fetch(
            self._connection,
            "SELECT term, sessions, identities FROM learned_terms WHERE tool_name = :tool_name "
            "ORDER BY identities DESC, sessions DESC, term",
            {"tool_name": tool_name},
        )
        return [LearnedTerm(str(term), int(count), int(who)) for term, count, who in rows]

    def terms_taught_by(self, identity: str, tool_name: str) -> set[str]:
        """The terms ``identity`` taught ``tool_name``."""
        rows = driver.fetch(
            self._connection,
            "SELECT DISTINCT term FROM learned_credits WHERE identity = :identity AND tool_name = :tool_name",
            {"identity": identity, "tool_name": tool_name},
        )
        return {str(term) for (term,) in rows}

    def teaching(self, tool_name: str | None = None) -> list[TeachingCounts]:
        """Per tool with a learned field (or ``tool_name`` alone), how many identities and sessions
        taught it and how many terms it learned, by tool name."""
        where, params = (
            ("", {}) if tool_name is None else (" WHERE tool_name = :tool_name", {"tool_name": tool_name})
        )
        rows = driver.fetch(
            self._connection,
            "SELECT w.tool_name, w.identities, s.sessions, p.terms FROM "
            f"(SELECT tool_name, COUNT(DISTINCT identity) AS identities FROM learned_credits{where} "
            "GROUP BY tool_name) w "
            "JOIN (SELECT tool_name, COUNT(*) AS sessions FROM "
            f"(SELECT DISTINCT tool_name, identity, session_id FROM learned_credits{where}) d "
            "GROUP BY tool_name) s ON s.tool_name = w.tool_name "
            f"JOIN (SELECT tool_name, COUNT(*) AS terms FROM learned_terms{where} GROUP BY tool_name) p "
            "ON p.tool_name = w.tool_name ORDER BY w.tool_name",
            params,
        )
        return [
            TeachingCounts(str(name), int(who), int(count), int(terms)) for name, who, count, terms in rows
        ]

    def summary(self) -> tuple[int, int, int, int]:
        """``(tools with a learned field, learned (term, tool) pairs, sessions that taught,
        identities that taught)``."""
        tools = driver.fetch(self._connection, "SELECT COUNT(*) FROM learned_tools")[0][0]
        pairs = driver.fetch(self._connection, "SELECT COUNT(*) FROM learned_terms")[0][0]
        taught = driver.fetch(
            self._connection,
            "SELECT COUNT(*) FROM (SELECT DISTINCT identity, session_id FROM learned_credits) d",
        )[0][0]
        return int(tools), int(pairs), int(taught), self.teaching_identities()

    def teaching_identities(self) -> int:
        """How many identities taught anything."""
        rows = driver.fetch(self._connection, "SELECT COUNT(DISTINCT identity) FROM learned_credits")
        return int(rows[0][0])
