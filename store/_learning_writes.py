"""The learned field, written: the switch and K, credits added, removed or replaced, and the sums
and journal kept with them (``_learning`` holds the reads, and says how the rows relate)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection

from store import _driver as driver
from store._learning import JOURNAL_KEPT, Credit, LearningReads, LearningState
from store._sql import chunks


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


def _add_sums(
    connection: Connection, counts: Counter[tuple[str, str]], identities: Counter[tuple[str, str]]
) -> None:
    """Add ``counts`` (sessions per term and tool; negative to take away) and ``identities``
    (distinct identities, likewise) to the sums, dropping what reaches 0."""
    rows = sorted(counts.items())
    driver.execute_many(
        connection,
        "INSERT INTO learned_terms (term, tool_name, sessions, identities) "
        "VALUES (:term, :tool_name, :sessions, :identities) "
        "ON CONFLICT (term, tool_name) DO UPDATE SET sessions = learned_terms.sessions + excluded.sessions, "
        "identities = learned_terms.identities + excluded.identities",
        [(term, tool, count, identities[(term, tool)]) for (term, tool), count in rows],
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


def _credit_filter(
    tool_names: Sequence[str] | None, session: tuple[str, str] | None, identity: str | None
) -> tuple[str, dict[str, Any]]:
    if session is not None:
        return " WHERE identity = :identity AND session_id = :session_id", {
            "identity": session[0],
            "session_id": session[1],
        }
    if identity is not None:
        return " WHERE identity = :identity", {"identity": identity}
    if tool_names is None:
        return "", {}
    names, params = driver.in_list("tool_name", tool_names)
    return f" WHERE tool_name IN {names}", params


def _taught_by(
    connection: Connection, identity: str, pairs: Iterable[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Which of the (term, tool) ``pairs`` ``identity`` has a credit of."""
    wanted = set(pairs)
    found: set[tuple[str, str]] = set()
    for part in chunks(sorted({term for term, _ in wanted})):
        terms, params = driver.in_list("term", part)
        rows = driver.fetch(
            connection,
            "SELECT DISTINCT term, tool_name FROM learned_credits "
            f"WHERE identity = :identity AND term IN {terms}",
            {"identity": identity, **params},
        )
        found.update(pair for term, tool in rows if (pair := (str(term), str(tool))) in wanted)
    return found


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

    def set_min_identities(self, min_identities: int) -> None:
        """Set K; the journal does not describe what that changes, so every cache reloads."""
        driver.execute(
            self._connection,
            "UPDATE learning_state SET min_identities = :k WHERE id = 1",
            {"k": min_identities},
        )
        _reset(self._connection)

    def add_credits(self, credits: Iterable[Credit]) -> int:
        """Store the credits not stored yet and add them to the sums; how many were new.

        The caller holds the session's lock (every credit of a session comes from its own log), so
        no other writer adds the same credit meanwhile; the sums are updated by upserts, which
        concurrent writers of other sessions do not lose. A (term, tool) counts an identity when
        its first credit of it is stored."""
        wanted = list(dict.fromkeys(credits))
        if not wanted:
            return 0
        new: list[Credit] = []
        for (identity, session_id, tool_name), terms in _grouped(wanted).items():
            held: set[str] = set()
            for part in chunks(terms):
                held_terms, params = driver.in_list("term", part)
                held.update(
                    row[0]
                    for row in driver.fetch(
                        self._connection,
                        "SELECT term FROM learned_credits WHERE identity = :identity "
                        "AND session_id = :session_id AND tool_name = :tool_name "
                        f"AND term IN {held_terms}",
                        {"identity": identity, "session_id": session_id, "tool_name": tool_name, **params},
                    )
                )
            new += [(identity, session_id, term, tool_name) for term in terms if term not in held]
        if not new:
            return 0
        teachers: Counter[tuple[str, str]] = Counter()
        for identity in sorted({credit[0] for credit in new}):
            pairs = {(term, tool) for who, _, term, tool in new if who == identity}
            teachers.update(pairs - _taught_by(self._connection, identity, pairs))
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_credits (identity, session_id, term, tool_name) "
            "VALUES (:identity, :session_id, :term, :tool_name)",
            new,
        )
        _add_sums(self._connection, Counter((term, tool) for _, _, term, tool in new), teachers)
        _journaled(self._connection, ((term, tool) for _, _, term, tool in new))
        return len(new)

    def remove_credits(
        self,
        *,
        tool_names: Sequence[str] | None = None,
        session: tuple[str, str] | None = None,
        identity: str | None = None,
    ) -> int:
        """Remove the credits of ``tool_names`` (all tools when nothing is named), of one
        ``session`` (identity, id), or of one ``identity``, and take them out of the sums; how many
        were removed."""
        where, params = _credit_filter(tool_names, session, identity)
        rows = driver.fetch(
            self._connection,
            f"SELECT identity, session_id, term, tool_name FROM learned_credits{where}",
            params,
        )
        if not rows:
            return 0
        if tool_names is None and session is None and identity is None:
            for table in ("learned_credits", "learned_terms", "learned_tools"):
                driver.execute(self._connection, f"DELETE FROM {table}")
            _reset(self._connection)
            return len(rows)
        driver.execute(self._connection, f"DELETE FROM learned_credits{where}", params)
        taken: Counter[tuple[str, str]] = Counter()
        for _, _, term, tool in rows:
            taken[(term, tool)] -= 1
        teachers: Counter[tuple[str, str]] = Counter()
        for who in sorted({str(row[0]) for row in rows}):
            pairs = {(str(term), str(tool)) for owner, _, term, tool in rows if owner == who}
            teachers.subtract(pairs - _taught_by(self._connection, who, pairs))
        _add_sums(self._connection, taken, teachers)
        _journaled(self._connection, taken)
        return len(rows)

    def replace_all(self, credits: Iterable[Credit]) -> int:
        """Make ``credits`` the whole learned field (a rebuild from the logs); how many there are."""
        rows = sorted(set(credits))
        for table in ("learned_credits", "learned_terms", "learned_tools"):
            driver.execute(self._connection, f"DELETE FROM {table}")
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_credits (identity, session_id, term, tool_name) "
            "VALUES (:identity, :session_id, :term, :tool_name)",
            rows,
        )
        counts = Counter((term, tool) for _, _, term, tool in rows)
        taught = {(identity, term, tool) for identity, _, term, tool in rows}
        teachers = Counter((term, tool) for _, term, tool in taught)
        driver.execute_many(
            self._connection,
            "INSERT INTO learned_terms (term, tool_name, sessions, identities) "
            "VALUES (:term, :tool_name, :sessions, :identities)",
            [(term, tool, count, teachers[(term, tool)]) for (term, tool), count in sorted(counts.items())],
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


def _grouped(credits: Sequence[Credit]) -> dict[tuple[str, str, str], list[str]]:
    """``credits``' terms per (identity, session, tool), in order."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for identity, session_id, term, tool_name in credits:
        grouped.setdefault((identity, session_id, tool_name), []).append(term)
    return grouped
