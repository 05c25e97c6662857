"""Learning counts teachers, not sessions (issue 57): what an identity taught ranks for its own
sessions at once and for the others only once K distinct identities taught the same (term,
tool), 2K for a destructive tool; forgetting an identity leaves the rankings of an index where it
never called anything. On both backends, in this process (the processes and the gateway are in
``test_learning_teachers.py``)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from discovery import ToolIndex, ToolIndexError
from discovery._diagnostics.explain import explain_query
from discovery._diagnostics.verify import verify
from discovery._params import searched_query
from discovery._rules import read_only_corpus
from tests.test_cli import DEMO, fails, ok
from tests.test_learning import TEACHER, with_demo

CODE_WORD = "zorblax"
"""A word no tool's text holds: whatever ranks for it was learned."""
QUERIES = (CODE_WORD, "notify the team", f"{CODE_WORD} team", "create an issue", "delete everything")
VIEWERS = ("local", "alice", "bob", "carol", "mallory")
CALL_IDS = itertools.count()


def teach(index: ToolIndex, identity: str, session_id: str, query: str, tool: str) -> None:
    """A session of ``identity`` searches ``query`` and calls ``tool``, in this process."""
    session = index.session(session_id, identity=identity, discovery_mode="all")
    session.search_tool.execute(f"c{next(CALL_IDS)}", {"query": query})
    session.record_call(tool)


def scores(index: ToolIndex, query: str, identity: str) -> list[tuple[str, float]]:
    return [(hit.name, hit.score) for hit in index.search(query, limit=100, identity=identity)]


def learned_tf(index: ToolIndex, query: str, name: str, identity: str) -> dict[str, int]:
    """The learned terms of ``query`` as ``explain`` shows them to ``identity``, with their tf."""
    corpus = read_only_corpus("all", identity)
    explained = explain_query(index, searched_query(query), name, corpus=corpus)
    return {part.term: part.tf for part in explained.learned if part.tf}


def test_what_one_identity_taught_ranks_for_it_and_for_others_once_k_identities_taught_it(
    db_url: str,
) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        assert index.min_identities == 2
        teach(index, "alice", "p", CODE_WORD, TEACHER)
        assert [name for name, _ in scores(index, CODE_WORD, "alice")] == [TEACHER]
        for other in ("local", "bob", "mallory"):  # the oracle: nothing, in scores and in explain
            assert scores(index, CODE_WORD, other) == []
            assert learned_tf(index, CODE_WORD, TEACHER, other) == {}
        assert learned_tf(index, CODE_WORD, TEACHER, "alice") == {CODE_WORD: 1}
        teach(index, "bob", "p", CODE_WORD, TEACHER)  # a second identity: shared
        assert learned_tf(index, CODE_WORD, TEACHER, "carol") == {CODE_WORD: 2}
        assert learned_tf(index, CODE_WORD, TEACHER, "alice") == {CODE_WORD: 2}  # 1 own + bob
        assert scores(index, CODE_WORD, "carol") == scores(index, CODE_WORD, "alice")
        teach(index, "alice", "q", CODE_WORD, TEACHER)  # alice's second session counts for her
        assert learned_tf(index, CODE_WORD, TEACHER, "alice") == {CODE_WORD: 3}
        assert learned_tf(index, CODE_WORD, TEACHER, "carol") == {CODE_WORD: 2}
        assert verify(index).problems == []


def test_a_sybil_of_many_sessions_moves_nothing_for_another_identity(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        before = {(query, viewer): scores(index, query, viewer) for query in QUERIES for viewer in VIEWERS}
        for number in range(12):
            teach(index, "mallory", f"s{number}", f"{CODE_WORD} notify the team", TEACHER)
        assert learned_tf(index, CODE_WORD, TEACHER, "mallory") == {CODE_WORD: 12}
        for query in QUERIES:
            for viewer in VIEWERS:
                if viewer != "mallory":
                    assert scores(index, query, viewer) == before[(query, viewer)], (query, viewer)
        teach(index, "alice", "p", CODE_WORD, TEACHER)  # once shared, mallory counts once
        assert learned_tf(index, CODE_WORD, TEACHER, "carol") == {CODE_WORD: 2}
        assert verify(index).problems == []


def test_a_destructive_tool_needs_twice_k_identities(db_url: str) -> None:
    name = "mcp__forge__delete_repository"
    record: dict[str, Any] = {
        "name": name,
        "description": "Delete a repository for good.",
        "mcp_meta": {"annotations": {"destructiveHint": True}},
    }
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        index.upsert_tools([record])
        for teacher in ("alice", "bob", "carol"):
            teach(index, teacher, "p", CODE_WORD, name)
            assert scores(index, CODE_WORD, "mallory") == []
        summary = index.learned(name, identity="alice")
        assert (summary.destructive, summary.threshold) == (True, 4)
        assert [(t.term, t.identities, t.shared, t.yours) for t in summary.terms] == [
            (CODE_WORD, 3, False, True)
        ]
        teach(index, "dave", "p", CODE_WORD, name)
        assert learned_tf(index, CODE_WORD, name, "mallory") == {CODE_WORD: 4}
        assert index.learned(name).terms[0].shared is True


def test_k_is_the_index_s_and_changing_it_changes_what_is_shared(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True, min_identities=3) as index:
        with_demo(index)
        teach(index, "alice", "p", CODE_WORD, TEACHER)
        teach(index, "bob", "p", CODE_WORD, TEACHER)
        assert scores(index, CODE_WORD, "carol") == []
        assert index.set_learning(None, min_identities=2) is True
        assert learned_tf(index, CODE_WORD, TEACHER, "carol") == {CODE_WORD: 2}
        assert index.stats()["learning"]["min_identities"] == 2
        for wrong in (1, 0, -3):
            with pytest.raises(ToolIndexError, match="at least 2"):
                index.set_learning(True, min_identities=wrong)
        assert index.min_identities == 2
    with ToolIndex.open(db_url) as index:
        assert index.min_identities == 2
        assert learned_tf(index, CODE_WORD, TEACHER, "carol") == {CODE_WORD: 2}


def test_deleting_one_identity_s_session_keeps_what_another_s_of_the_same_id_taught(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        teach(index, "alice", "my-project", CODE_WORD, TEACHER)
        teach(index, "bob", "my-project", CODE_WORD, TEACHER)
        index.delete_session("my-project", identity="alice")
        assert learned_tf(index, CODE_WORD, TEACHER, "bob") == {CODE_WORD: 1}
        assert scores(index, CODE_WORD, "alice") == []
        assert verify(index).problems == []


def played(index: ToolIndex, *, with_mallory: bool) -> None:
    """alice and bob teach what they need; mallory, when played, pushes a tool of her choice."""
    with_demo(index)
    for identity in ("alice", "bob"):
        teach(index, identity, "p", "notify the team", TEACHER)
        teach(index, identity, "q", f"{CODE_WORD} create an issue", "mcp__gitforge__create_issue")
    if with_mallory:
        for number in range(3):
            teach(
                index, "mallory", f"m{number}", f"{CODE_WORD} notify the team", "mcp__gitforge__create_issue"
            )
            teach(index, "mallory", f"n{number}", "delete everything", TEACHER)


def test_forgetting_an_identity_leaves_the_rankings_of_an_index_it_never_taught(
    db_url: str, tmp_path: Any
) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        played(index, with_mallory=True)
        assert index.forget_learning(identity="mallory") > 0
        assert verify(index).problems == []
        with ToolIndex.open(str(tmp_path / "never.db"), learning=True) as never:
            played(never, with_mallory=False)
            for query in QUERIES:
                for viewer in VIEWERS:
                    assert scores(index, query, viewer) == scores(never, query, viewer), (query, viewer)
        index.set_learning(False)
        index.set_learning(True)  # computed anew from the logs: mallory's calls stay forgotten
        assert verify(index).problems == []
        assert all(taught.yours is False for taught in index.learned(TEACHER, identity="mallory").terms)
        with pytest.raises(ToolIndexError, match="not both"):
            index.forget_learning([TEACHER], identity="mallory")


def test_the_audit_names_tools_taught_by_few_hands_or_beyond_their_words(db_url: str) -> None:
    from discovery._quality.learning_alarm import FEW_IDENTITIES, MANY_TERMS, learning_alarms
    from discovery._sessions.learning import TERMS_PER_CALL

    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        teach(index, "alice", "p", "notify the team", TEACHER)
        with index.store.reading() as reader:
            assert learning_alarms(reader) == []  # one teacher, one session: nothing to say
        for number in range(12):
            teach(index, "mallory", f"s{number}", f"{CODE_WORD} notify the team", TEACHER)
        note = "mcp__notes__create_note"
        with index.store.reading() as reader:
            (text,) = reader.index.term_ids_of_tools([index.tools_by_names([note])[note].id]).values()
        calls = -(-(4 * len(text) + 1) // TERMS_PER_CALL)  # words no tool's text holds, 16 a call
        words = [f"w{number:03d}" for number in range(calls * TERMS_PER_CALL)]
        for number in range(calls):
            teach(index, "bob", f"h{number}", " ".join(words[number * 16 : number * 16 + 16]), note)
        with index.store.reading() as reader:
            alarms = {alarm.name: alarm for alarm in learning_alarms(reader)}
        assert sorted(alarms) == sorted([note, TEACHER])
        assert (alarms[TEACHER].identities, alarms[TEACHER].sessions, alarms[TEACHER].reasons) == (
            2,
            13,
            (FEW_IDENTITIES,),
        )
        found = alarms[note]
        assert (found.learned_terms, found.text_terms) == (len(words), len(text))
        assert (found.reasons, found.destructive) == ((MANY_TERMS,), False)
    shown = ok(db_url, "audit", "--k", "1")
    counted = f"1 identities, {calls} sessions, {len(words)} learned terms against {len(text)} of its text"
    assert f"  {note}  {counted}: {MANY_TERMS}\n" in shown
    listed = json.loads(ok(db_url, "audit", "--k", "1", "--json"))["learning"]
    assert [(alarm["name"], alarm["reasons"]) for alarm in listed] == sorted(
        [(note, [MANY_TERMS]), (TEACHER, [FEW_IDENTITIES])]
    )


def test_the_command_line_sets_and_shows_k(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    assert ok(db_url, "learning", "on", "--min-identities", "3").startswith(
        "learning:       on\nmin identities: 3 (6 for a destructive tool)\n"
    )
    assert json.loads(ok(db_url, "stats", "--json"))["learning"]["min_identities"] == 3
    assert "shared at 3 identities" in ok(db_url, "stats")
    assert fails(db_url, "learning", "on", "--min-identities", "1") == (
        "Error: min_identities must be at least 2, not 1: below that one identity's evidence would "
        "rank for every other\n"
    )
    assert "--min-identities goes with on or off" in fails(
        db_url, "learning", "status", "--min-identities", "2", code=2
    )
    assert ok(db_url, "learning", "off", "--min-identities", "2").startswith(
        "learning:       off\nmin identities: 2 (4 for a destructive tool)\n"
    )
    assert fails(db_url, "learned", "--forget-identity", " ") == "Error: an identity must not be blank\n"


def test_what_adopted_sessions_taught_moves_with_them(db_url: str) -> None:
    """A tokens gateway adopting the sessions of its names made before realms (alice becomes
    alice@team): their credits are their new identity's, and verify agrees."""
    from discovery._sessions.listing import adopt_identities

    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        teach(index, "alice", "p", CODE_WORD, TEACHER)
        assert adopt_identities(index.store, {"alice": "alice@team"}) == {"alice": (1, 0)}
        assert learned_tf(index, CODE_WORD, TEACHER, "alice@team") == {CODE_WORD: 1}
        assert learned_tf(index, CODE_WORD, TEACHER, "alice") == {}
        assert verify(index).problems == []
