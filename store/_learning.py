"""The learned field's rows: the learning switch, the credits sessions gave, and their sums.

A credit is one (session, query term, tool): the rule that makes them from a session's log is
``discovery.learning``'s; here they are only stored, summed and read. ``learned_terms`` and
``learned_tools`` are kept equal to the sums of ``learned_credits`` by every write of
``LearningWrites`` that changes credits, in the unit's transaction, and every such change bumps
the learned generation so that other processes reload what they cached of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
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

Credit = tuple[str, str, str]
"""``(session id, term, tool name)``."""


JOURNAL_KEPT = 4096
"""Learned generations whose changes the journal keeps; a cache further behind reloads all."""


@dataclass(frozen=True, slots=True)
class LearningState:
    enabled: bool
    generation: int
    reset_generation: int = 0
    """The last change the journal does not describe: a cache from before it reloads all."""

    def journaled_since(self, generation: int) -> bool:
        """Whether the journal holds every change after ``generation`` up to this state."""
        return self.reset_generation <= generation and self.generation - generation <= JOURNAL_KEPT


@dataclass(frozen=True, slots=True)
class StoredLearnedPostings:
    """The catalog tools holding one learned term, ascending by id, and how many sessions taught
    the term to each (its tf): two int64 arrays. A tool's group is the same in every term it
    holds, so it is read with the tools (``learned_tools``), not with each posting."""

    ids: np.ndarray
    tf: np.ndarray


def _bump(connection: Connection) -> int:
    """The next learned generation, taken under the row's lock (held until the transaction ends,
    so generations commit in order)."""
    driver.execute(connection, "UPDATE learning_state SET generation = generation + 1 WHERE id = 1")
    return int(driver.fetch(connection, "SELECT generation FROM learning_state WHERE id = 1")[0][0])


def _journaled(connection: Connection, changed: Iterable[tuple[str, str]]) -> None:
    """Bump the generation and journal the (term, tool) sums it changed."""
    generation = _bump(connection)
    driver.execute_many(
        connection,
        "INSERT INTO learned_journal (generation, term, tool_name) VALUES (:generation, :term, :tool_name)",
        [(generation, term, tool) for term, tool in sorted(set(changed))],
    )
    driver.execute(
        connection,
        "DELETE FROM learned_journal WHERE generation <= :oldest",
        {"oldest": generation - JOURNAL_KEPT},
    )


def _reset(connection: Connection) -> None:
    """Bump the generation for a change the journal does not describe."""
    generation = _bump(connection)
    driver.execute(
        connection,
        "UPDATE learning_state SET reset_generation = :generation WHERE id = 1",
        {"generation": generation},
    )
    driver.execute(connection, "DELETE FROM learned_journal")


@dataclass(frozen=True, slots=True)
class LearnedChange:
    """A (term, tool) sum that changed, as it is now: the tool's catalog id and group (``None``
    and 0 when it is not a catalog tool), whether it has a learned field, and the term's tf there
    (0: none)."""

    term: str
    tool_name: str
    tool_id: int | None
    grp: int
    learned: bool
    tf: int


def _add_sums(connection: Connection, counts: Counter[tuple[str, str]]) -> None:
    """Add ``counts`` (per term and tool; negative to take away) to the sums, dropping what
    reaches 0."""
    rows = sorted(counts.items())
    driver.execute_many(
        connection,
        "INSERT INTO learned_terms (term, tool_name, sessions) VALUES (:term, :tool_name, :sessions) "
        "ON CONFLICT (term, tool_name) DO UPDATE SET sessions = learned_terms.sessions + excluded.sessions",
        [(term, tool, count) for (term, tool), count in rows],
    )
    lengths: Counter[str] = Counter()
    for (_, tool), count in rows:
        lengths[tool] += count
    driver.execute_many(
        connection,
        "INSERT INTO learned_tools (tool_name, length) VALUES (:tool_name, :length) "
        "ON CONFLICT (tool_name) DO UPDATE SET length = learned_tools.length + excluded.length",
        sorted(lengths.items()),
    )
    if any(count < 0 for count in counts.values()):
        driver.execute(connection, "DELETE FROM learned_terms WHERE sessions <= 0")
        driver.execute(connection, "DELETE FROM learned_tools WHERE length <= 0")


def _credit_filter(tool_names: Sequence[str] | None, session_id: str | None) -> tuple[str, dict[str, Any]]:
    if session_id is not None:
        return " WHERE session_id = :session_id", {"session_id": session_id}
    if tool_names is None:
        return "", {}
    names, params = driver.in_list("tool_name", tool_names)
    return f" WHERE tool_name IN {names}", params


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
        statement = "SELECT enabled, generation, reset_generation FROM learning_state WHERE id = 1"
        if lock is not None and self._connection.dialect.name != "sqlite":
            statement += " FOR SHARE" if lock == "share" else " FOR UPDATE"
        rows = driver.fetch(self._connection, statement)
        if not rows:
            raise CorruptIndex.found("the learning_state row is missing")
        return LearningState(bool(rows[0][0]), int(rows[0][1]), int(rows[0][2]))

    def with_catalog_generation(self) -> tuple[int, LearningState]:
        """The catalog generation and the learning state in one statement: every read-only search
        starts here."""
        rows = driver.fetch(
            self._connection,
            "SELECT c.generation, l.enabled, l.generation, l.reset_generation "
            "FROM catalog_state c, learning_state l WHERE c.id = 1 AND l.id = 1",
        )
        if not rows:
            raise CorruptIndex.found("the catalog_state or learning_state row is missing")
        generation, enabled, learned, reset = rows[0]
        return int(generation), LearningState(bool(enabled), int(learned), int(reset))

    def changes_since(self, generation: int) -> list[LearnedChange]:
        """The (term, tool) sums changed after ``generation`` (complete when ``journaled_since``),
        with what a process that cached the field needs to catch up: one statement, since every
        search after another session's call runs it."""
        rows = driver.fetch(
            self._connection,
            "SELECT DISTINCT j.term, j.tool_name, t.id, t.grp, lk.tool_name, lt.sessions "
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
                int(sessions or 0) if learned else 0,
            )
            for term, tool, tool_id, grp, field, sessions in rows
        ]

    def credits(self) -> set[Credit]:
        rows = driver.fetch(self._connection, "SELECT session_id, term, tool_name FROM learned_credits")
        return {(str(s), str(term), str(tool)) for s, term, tool in rows}

    def sums(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """The stored sums: sessions per (term, tool), and length per tool."""
        terms = driver.fetch(self._connection, "SELECT term, tool_name, sessions FROM learned_terms")
        tools = driver.fetch(self._connection, "SELECT tool_name, length FROM learned_tools")
        return (
            {(str(term), str(tool)): int(count) for term, tool, count in terms},
            {str(tool): int(length) for tool, length in tools},
        )

    def postings(self, terms: Sequence[str]) -> dict[str, StoredLearnedPostings]:
        """The learned postings of ``terms`` among the catalog's tools, by term (a term no catalog
        tool learned is absent).

        The tools' ids come from the catalog's name index alone, without reading their rows; the rows
        are read a block at a time into arrays, so a common term's many postings never stand as one
        Python object each all at once."""
        import numpy as np

        runs: list[list[Any]] = []  # [term, rows], in the rows' order
        ids: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        for part in chunks(sorted(set(terms))):  # a query's terms are many: each part is one IN
            wanted, params = driver.in_list("term", part)
            statement = (
                "SELECT lt.term, t.id, lt.sessions FROM learned_terms lt "
                f"JOIN tools t ON t.name = lt.tool_name WHERE lt.term IN {wanted} ORDER BY lt.term, t.id"
            )
            for block in driver.fetch_blocks(self._connection, statement, params, size=POSTINGS_BLOCK):
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

    def lengths(self, tool_names: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for part in chunks(tool_names):
            names, params = driver.in_list("tool_name", part)
            rows = driver.fetch(
                self._connection,
                f"SELECT tool_name, length FROM learned_tools WHERE tool_name IN {names}",
                params,
            )
            found.update((str(tool), int(length)) for tool, length in rows)
        return found

    def learned_of(self, tool_name: str) -> list[LearnedTerm]:
        """What ``tool_name`` learned: its terms, most taught first, then by term."""
        rows = driver.fetch(
            self._connection,
            "SELECT term, sessions FROM learned_terms WHERE tool_name = :tool_name "
            "ORDER BY sessions DESC, term",
            {"tool_name": tool_name},
        )
        return [LearnedTerm(str(term), int(count)) for term, count in rows]

    def teaching_sessions(self, tool_name: str) -> int:
        """How many sessions taught ``tool_name`` anything."""
        rows = driver.fetch(
            self._connection,
            "SELECT COUNT(DISTINCT session_id) FROM learned_credits WHERE tool_name = :tool_name",
            {"tool_name": tool_name},
        )
        return int(rows[0][0])

    def summary(self) -> tuple[int, int, int]:
        """``(tools with a learned field, learned (term, tool) pairs, sessions that taught)``."""
        tools = driver.fetch(self._connection, "SELECT COUNT(*) FROM learned_tools")[0][0]
        pairs = driver.fetch(self._connection, "SELECT COUNT(*) FROM learned_terms")[0][0]
        taught = driver.fetch(self._connection, "SELECT COUNT(DISTINCT session_id) FROM learned_credits")[0][
            0
        ]
        return int(tools), int(pairs), int(taught)


class LearningWrites(LearningReads):
    """The learned field, written: the switch, credits added, removed or replaced."""

    def locked_state(self) -> LearningState:
        """The switch, locked for update until the unit ends."""
        return self._state(lock="update")

    def state_for_crediting(self) -> LearningState:
        """The switch, read by a writer that credits calls when it is on: locked for update then
        (two writers holding it shared could not both upgrade), shared otherwise. SQLite's writer
        already holds the whole database, so one plain read is enough there."""
        state = self.state()
        if self._connection.dialect.name == "sqlite":
            return state
        return self._state(lock="update" if state.enabled else "share")

    def set_enabled(self, enabled: bool) -> None:
        driver.execute(
            self._connection,
            "UPDATE learning_state SET enabled = :enabled WHERE id = 1",
            {"enabled": int(enabled)},
        )
        _reset(self._connection)

    def add_credits(self, credits: Iterable[Credit]) -> int:
        """Store the credits not stored yet and add them to the sums; how many were new.

        The caller holds the session's lock (every credit of a session comes from its own log), so
        no other writer adds the same credit meanwhile; the sums are updated by upserts, which
        concurrent writers of other sessions do not lose."""
        wanted = list(dict.fromkeys(credits))
        if not wanted:
            return 0
        new: list[Credit] = []
        for session_id, tool_name in dict.fromkeys((s, t) for s, _, t in wanted):
            terms = [term for s, term, t in wanted if s == session_id and t == tool_name]
            held: set[str] = set()
            for part in chunks(terms):
                held_terms, params = driver.in_list("term", part)
                held.update(
                    row[0]
                    for row in driver.fetch(
                        self._connection,
                        "SELECT term FROM learned_credits "
                        "WHERE session_id = :session_id AND tool_name = :tool_name "
                        f"AND term IN {held_terms}",
                        {"session_id": session_id, "tool_name": tool_name, **params},
                    )
                )
            new += [(session_id, term, tool_name) for term in terms if term not in held]
        if not new:
            return 0
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_credits (session_id, term, tool_name) "
            "VALUES (:session_id, :term, :tool_name)",
            new,
        )
        _add_sums(self._connection, Counter((term, tool) for _, term, tool in new))
        _journaled(self._connection, ((term, tool) for _, term, tool in new))
        return len(new)

    def remove_credits(
        self, *, tool_names: Sequence[str] | None = None, session_id: str | None = None
    ) -> int:
        """Remove the credits of ``tool_names`` (all tools when ``None``), or of one session, and
        take them out of the sums; how many were removed."""
        where, params = _credit_filter(tool_names, session_id)
        rows = driver.fetch(
            self._connection, f"SELECT session_id, term, tool_name FROM learned_credits{where}", params
        )
        if not rows:
            return 0
        if tool_names is None and session_id is None:
            for table in ("learned_credits", "learned_terms", "learned_tools"):
                driver.execute(self._connection, f"DELETE FROM {table}")
            _reset(self._connection)
            return len(rows)
        driver.execute(self._connection, f"DELETE FROM learned_credits{where}", params)
        taken: Counter[tuple[str, str]] = Counter()
        for _, term, tool in rows:
            taken[(term, tool)] -= 1
        _add_sums(self._connection, taken)
        _journaled(self._connection, taken)
        return len(rows)

    def replace_all(self, credits: Iterable[Credit]) -> int:
        """Make ``credits`` the whole learned field (a rebuild from the logs); how many there are."""
        rows = sorted(set(credits))
        for table in ("learned_credits", "learned_terms", "learned_tools"):
            driver.execute(self._connection, f"DELETE FROM {table}")
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_credits (session_id, term, tool_name) "
            "VALUES (:session_id, :term, :tool_name)",
            rows,
        )
        counts = Counter((term, tool) for _, term, tool in rows)
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_terms (term, tool_name, sessions) VALUES (:term, :tool_name, :sessions)",
            [(term, tool, count) for (term, tool), count in sorted(counts.items())],
        )
        lengths: Counter[str] = Counter()
        for (_, tool), count in counts.items():
            lengths[tool] += count
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_tools (tool_name, length) VALUES (:tool_name, :length)",
            sorted(lengths.items()),
        )
        _reset(self._connection)
        return len(rows)
