"""Learning from use: the crediting rule, the learned field against a brute-force BM25+, the switch,
forgetting, persistence across processes and the command line — on every backend."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from discovery import ToolIndex
from discovery._params import query_terms
from discovery._ranking import learned as learned_module
from discovery._ranking import learned_field
from discovery._ranking import topk as topk_module
from discovery._ranking.bm25 import js_log
from discovery._ranking.cache import ByTerm
from discovery._ranking.fields import LEARNED_WEIGHT
from discovery._ranking.learned import (
    LearnedPostings,
    LearnedTerm,
    Roster,
    TextMatches,
    Universe,
    add_learned,
    laid_out,
    learned_membership,
    learned_term,
)
from discovery._rules import Corpus
from discovery._sessions.learning import TERMS_PER_CALL, credits_of_log
from discovery._text.analyzers import REFERENCE
from discovery._text.tokenizer import tokenize
from store import Event, LearnedChange, LoggedEvent, SessionKey, Writer
from store import _learning as stored_learning
from store._engine import write_transaction
from store.errors import ToolNotFound
from tests.catalogs import rank
from tests.test_cli import DEMO, REPO, fails, ok
from tests.test_ranking import (
    COLLATOR,
    ESSENTIAL_NAMES,
    INTERNAL_NAMES,
    MODE_GROUPS,
    QUERIES,
    RANDOM,
    catalogs,
    in_corpus,
    weighted_terms,
)

Step = tuple[str, str, bool]
"""``("search", query, _)`` or ``("call", tool name, ok)``."""


# --- the rule, on logs written by hand ------------------------------------------------------------


def log(*steps: Step | tuple[str, str] | tuple[str, str, str]) -> list[LoggedEvent]:
    """A session log: searches that succeeded and showed nothing (``("search", q)``) or showed
    tools (``("found", q, "name,name")``), failed searches
    (``("failed-search", q)``), calls (``("call", name, ok)``) and other events (``("pin", "")``)."""
    stamp = datetime(2026, 12, 4, tzinfo=UTC)
    events = [Event(kind="create", params={"active": []})]
    for step in steps:
        kind, value, *rest = step
        if kind == "search":
            events.append(Event(kind="search", params={"query": value}, details={"query": value.strip()}))
        elif kind == "found":  # a search that showed the tools named in rest[0]
            tools = [{"name": name} for name in str(rest[0]).split(",")]
            events.append(
                Event(kind="search", params={"query": value}, details={"query": value, "tools": tools})
            )
        elif kind == "failed-search":
            events.append(Event(kind="search", params={"query": value}, error="Query must contain …"))
        elif kind == "call":
            ok_call = bool(rest[0]) if rest else True
            events.append(
                Event(kind="tool_call", tool_name=value, params={"tool": value, "is_error": not ok_call})
            )
        else:
            events.append(Event(kind=kind, params={}))
    return [LoggedEvent(seq, event, stamp) for seq, event in enumerate(events, start=1)]


def taught_terms(index: ToolIndex, name: str) -> list[tuple[str, int]]:
    """What ``name`` learned, as (term, sessions that taught it)."""
    return [(taught.term, taught.sessions) for taught in index.learned(name).terms]


def credited(*steps: Step | tuple[str, str] | tuple[str, str, str]) -> dict[str, set[str]]:
    """What each tool learned from one session's log: ``{tool: terms}``."""
    found: dict[str, set[str]] = {}
    for _, _, term, tool in credits_of_log(SessionKey("local", "s"), log(*steps), REFERENCE):
        found.setdefault(tool, set()).add(term)
    return found


def test_a_chain_of_searches_teaches_every_call_that_follows_it() -> None:
    assert credited(
        ("search", "notify the team"),
        ("search", "slack message"),
        ("call", "slack_post_message", True),
        ("call", "slack_add_reaction", True),
    ) == {
        "slack_post_message": {"notify", "the", "team", "slack", "message"},
        "slack_add_reaction": {"notify", "the", "team", "slack", "message"},
    }


def test_a_call_learns_only_the_run_of_searches_just_before_its_run_of_calls() -> None:
    assert credited(
        ("search", "read a file"),
        ("call", "read_file", True),
        ("pin", ""),
        ("search", "send mail"),
        ("call", "send_email", True),
        ("call", "read_file", True),
    ) == {"read_file": {"read", "a", "file", "send", "mail"}, "send_email": {"send", "mail"}}


def test_failed_calls_calls_before_any_search_and_failed_searches_teach_nothing() -> None:
    assert credited(("call", "early", True), ("search", "weather"), ("call", "broken", False)) == {}
    assert credited(
        ("search", "weather"),
        ("failed-search", "!!!"),
        ("search", "forecast"),
        ("call", "get_forecast", True),
    ) == {"get_forecast": {"weather", "forecast"}}


def test_a_planning_agent_teaches_a_tool_only_the_request_that_found_it() -> None:
    assert credited(
        ("found", "what time is it in Tokyo", "get_current_time"),
        ("found", "remember that Alice likes tea", "memory_store"),
        ("found", "add two numbers", "add"),
        ("found", "read a text file", "read_text_file,read_media_file"),
        ("call", "read_text_file", True),
        ("call", "get_current_time", True),
    ) == {
        "read_text_file": {"read", "a", "text", "file"},
        "get_current_time": {"what", "time", "is", "it", "in", "tokyo"},
    }


def test_requests_that_found_nothing_before_the_one_that_found_the_tool_teach_it() -> None:
    assert credited(
        ("found", "read a file", "read_file"),
        ("search", "notify the team"),
        ("search", "tell everyone"),
        ("found", "slack message", "post_message"),
        ("call", "post_message", True),
    ) == {"post_message": {"notify", "the", "team", "tell", "everyone", "slack", "message"}}
    # A tool no search showed learns the run's last request (and the empty ones right before it).
    assert credited(
        ("found", "send mail", "send_email"),
        ("search", "a reminder"),
        ("call", "set_timer", True),
    ) == {"set_timer": {"a", "reminder"}}


def test_a_call_learns_the_last_search_that_showed_its_tool() -> None:
    assert credited(
        ("found", "send mail", "send_email"),
        ("found", "read file", "read_file"),
        ("call", "send_email", True),
    ) == {"send_email": {"send", "mail"}}


def test_a_select_request_names_tools_and_teaches_none_of_its_words() -> None:
    """``select:`` names the tools; its words would teach each tool the others' names."""
    assert (
        credited(
            ("found", "select:read_text_file,get_current_time", "read_text_file,get_current_time"),
            ("call", "read_text_file", True),
            ("call", "get_current_time", True),
        )
        == {}
    )
    # The requests that found nothing before it said the need: those teach.
    assert credited(
        ("search", "open the notes file"),
        ("found", "SELECT:read_text_file", "read_text_file"),
        ("call", "read_text_file", True),
    ) == {"read_text_file": {"open", "the", "notes", "file"}}


def test_a_call_credits_at_most_terms_per_call_terms_in_query_order() -> None:
    words = [f"w{i:03d}" for i in range(3 * TERMS_PER_CALL)]
    assert credited(("found", " ".join(words), "tool"), ("call", "tool", True)) == {
        "tool": set(words[:TERMS_PER_CALL])
    }
    assert credited(
        ("search", " ".join(words[TERMS_PER_CALL - 2 :])),
        ("found", " ".join(words[: TERMS_PER_CALL - 2]), "tool"),
        ("call", "tool", True),
    ) == {"tool": set(words[:TERMS_PER_CALL])}  # the request that found it first


def test_a_call_naming_its_searches_learns_those_alone() -> None:
    logged = log(("found", "notify the team", "post"), ("found", "read a file", "read_file"))
    call = Event(kind="tool_call", tool_name="post", params={"tool": "post", "learned_from": [2]})
    resumed = Event(kind="tool_call", tool_name="post", params={"tool": "post", "learned_from": []})
    stamp = logged[0].created_at
    entries = [*logged, LoggedEvent(4, call, stamp), LoggedEvent(5, resumed, stamp)]
    assert {
        (term, tool) for _, _, term, tool in credits_of_log(SessionKey("local", "s"), entries, REFERENCE)
    } == {
        ("notify", "post"),
        ("the", "post"),
        ("team", "post"),
    }


def test_a_session_teaches_a_term_to_a_tool_once() -> None:
    steps: list[Step | tuple[str, str]] = []
    for _ in range(50):
        steps += [("search", "post post post"), ("call", "post_message", True)]
    assert credits_of_log(SessionKey("local", "s"), log(*steps), REFERENCE) == {
        ("local", "s", "post", "post_message")
    }


# --- the learned field against a brute-force BM25+ ---------------------------------------------------


def learned_reference(
    catalog: list[dict[str, Any]],
    taught: dict[str, Counter[str]],
    query: str,
    *,
    mode: str = "all",
    excluded: frozenset[str] = frozenset(),
) -> list[tuple[str, float]]:
    """The learned field's BM25+, then the tool-text one of the contract, term by term in query order:
    ``taught[tool][term]`` sessions taught ``term`` to ``tool``. Everything is recounted here."""
    documents = {
        record["name"]: weighted_terms(record)
        for record in catalog
        if in_corpus(record, mode) and record["name"] not in excluded
    }
    learned = {name: taught[name] for name in documents if taught.get(name)}
    n_docs = len(documents)
    lengths = {name: sum(terms.values()) for name, terms in documents.items()}
    avgdl = (sum(lengths.values()) / n_docs if n_docs else 0.0) or 1.0
    query_counts = Counter(tokenize(query))
    hits = []
    for name, terms in documents.items():
        score = 0.0
        for term, qtf in query_counts.items():
            tf = learned.get(name, Counter())[term]
            if tf:
                df = sum(
                    1 for other in documents if term in documents[other] or term in learned.get(other, {})
                )
                idf = js_log(1 + (n_docs - df + 0.5) / (df + 0.5))
                norm = 1.2  # k1: the learned field is not length-normalised (b = 0)
                score += LEARNED_WEIGHT * qtf * idf * ((tf * (1.2 + 1)) / (tf + norm) + 1.0)
        for term, qtf in query_counts.items():
            tf = terms.get(term, 0)
            if tf:
                df = sum(1 for other in documents.values() if term in other)
                idf = js_log(1 + (n_docs - df + 0.5) / (df + 0.5))
                norm = 1.2 * (1 - 0.75 + 0.75 * (lengths[name] / avgdl))
                score += qtf * idf * ((tf * (1.2 + 1)) / (tf + norm) + 1.0)
        if score > 0:
            hits.append((name, score))
    return sorted(hits, key=lambda hit: (-hit[1], COLLATOR.sort_key(hit[0]), hit[0]))


def taught_by(
    scripts: Sequence[Sequence[Step]], shown: Sequence[Sequence[set[str]]], catalog_names: set[str]
) -> dict[str, Counter[str]]:
    """The rule, written again over the scripts the sessions played (``shown``: what each of a
    script's steps showed): per tool, how many sessions taught each term. A call learns the last
    search of its run that showed its tool (else the run's last), and the searches right before
    that one that showed nothing."""
    taught: dict[str, Counter[str]] = {}
    for script, showed in zip(scripts, shown, strict=True):
        credits: set[tuple[str, str]] = set()
        run: list[tuple[str, set[str]]] = []
        after_calls = True
        for (kind, value, ok_call), found in zip(script, showed, strict=True):
            if kind == "search":
                run = [(value, found)] if after_calls else [*run, (value, found)]
                after_calls = False
                continue
            after_calls = True
            if not (ok_call and value in catalog_names and run):
                continue
            at = max((i for i, (_, names) in enumerate(run) if value in names), default=len(run) - 1)
            chosen = [run[at][0]]
            for query, names in run[:at][::-1]:
                if names:
                    break
                chosen.append(query)
            terms = list(dict.fromkeys(term for query in chosen for term in tokenize(query)))
            credits |= {(term, value) for term in terms[:TERMS_PER_CALL]}
        for term, tool in credits:
            taught.setdefault(tool, Counter())[term] += 1
    return taught


def play(index: ToolIndex, scripts: Sequence[Sequence[Step]]) -> list[list[set[str]]]:
    """Each script as a session of its own: searches through the search tool, calls recorded;
    what each step showed (a call: nothing)."""
    shown: list[list[set[str]]] = []
    for number, script in enumerate(scripts):
        session = index.session(f"s{number}", discovery_mode="all")
        showed: list[set[str]] = []
        for call, (kind, value, ok_call) in enumerate(script):
            if kind == "search":
                result = session.search_tool.execute(f"c{call}", {"query": value})
                showed.append({tool["name"] for tool in result.details["tools"]})
            else:
                session.record_call(value, ok=ok_call)
                showed.append(set())
        shown.append(showed)
    return shown


@st.composite
def sessions_over(draw: st.DrawFn, names: list[str]) -> list[list[Step]]:
    step = st.one_of(
        st.tuples(st.just("search"), QUERIES, st.just(True)),
        st.tuples(st.just("call"), st.sampled_from(names), st.booleans()),
    )
    return draw(st.lists(st.lists(step, max_size=6), max_size=4))


LAYOUTS = {
    "default": {},
    "by id": {"UNIVERSE_SHARE": 10**9},
    "gathered": {"UNIVERSE_SHARE": 0, "COMPACT_SHARE": 0, "SCAN_SHARE": 0},
    "gathered compact": {"UNIVERSE_SHARE": 0, "COMPACT_SHARE": 10**9, "SCAN_SHARE": 10**9},
}
"""How the learned parts reach the scores (``learned.add_learned``): as their sizes decide, each
in place at its ids, or through the learned tools' gathered scores, per posting or laid out over
them; and the top found among the terms' documents or by scanning the scores."""


def laid_out_as(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    for name, value in LAYOUTS[layout].items():
        monkeypatch.setattr(topk_module if name == "SCAN_SHARE" else learned_module, name, value)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@RANDOM
@given(catalog=catalogs(), data=st.data())
def test_the_learned_field_ranks_as_the_brute_force_reference(
    index: ToolIndex,
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    catalog: list[dict[str, Any]],
    data: st.DataObject,
) -> None:
    laid_out_as(monkeypatch, layout)
    index.upsert_tools(catalog, replace=True)
    for number in range(len(index.sessions())):
        index.delete_session(f"s{number}")
    index.set_learning(True)
    names = [record["name"] for record in catalog if in_corpus(record, "all")]
    if not names:
        return
    scripts = data.draw(sessions_over(names))
    taught = taught_by(scripts, play(index, scripts), set(names))
    mode = data.draw(st.sampled_from(["all", "mcp-only"]))
    excluded = frozenset(data.draw(st.sets(st.sampled_from(names)))) | ESSENTIAL_NAMES | INTERNAL_NAMES
    for query in data.draw(st.lists(QUERIES, min_size=1, max_size=3)):
        expected = learned_reference(catalog, taught, query, mode=mode, excluded=excluded)
        corpus = Corpus(MODE_GROUPS[mode], excluded)
        assert [(hit.name, hit.score) for hit in rank(index, query, corpus, None).hits] == expected
        limit = data.draw(st.integers(min_value=1, max_value=8))
        assert [(hit.name, hit.score) for hit in rank(index, query, corpus, limit).hits] == expected[:limit]
        index.ranker.prune_from = 0  # the pruned search: the same, bit for bit
        assert [(hit.name, hit.score) for hit in rank(index, query, corpus, limit).hits] == expected[:limit]
        index.ranker.prune_from = None
        whole = learned_reference(catalog, taught, query)
        assert [(hit.name, hit.score) for hit in index.search(query, limit=100)] == whole[:100]
    from discovery._diagnostics.verify import verify

    assert verify(index).problems == []


@st.composite
def learned_parts(draw: st.DrawFn) -> tuple[np.ndarray, list[LearnedTerm], Universe]:
    """Text scores over a catalog, some of its tools with a learned field, and parts each held by
    some of those tools, with values of any magnitude."""
    size = draw(st.integers(min_value=1, max_value=60))
    values = st.floats(min_value=0, max_value=1e6, allow_subnormal=True)
    scores = np.array(draw(st.lists(values, min_size=size, max_size=size)))
    scores[sorted(draw(st.sets(st.integers(0, size - 1))))] = 0.0
    universe = Universe(np.array(sorted(draw(st.sets(st.integers(0, size - 1), min_size=1))), dtype=np.intp))
    parts = []
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        held = sorted(draw(st.sets(st.sampled_from(universe.ids.tolist()), min_size=1)))
        ids = np.array(held, dtype=np.intp)
        added = np.array(draw(st.lists(values.filter(bool), min_size=ids.size, max_size=ids.size)))
        parts.append(LearnedTerm("t", 1.0, 1, ids, added, added, at=universe.positions(ids)))
    return scores, parts, universe


@given(drawn=learned_parts(), data=st.data())
def test_learned_parts_add_the_same_bits_in_place_or_gathered(
    drawn: tuple[np.ndarray, list[LearnedTerm], Universe], data: st.DataObject
) -> None:
    """Through an array of the learned tools' own, per posting or laid out over them (adding 0
    where a part's term is absent), each score gets the bits of adding each part at its ids to
    0.0 in order."""
    scores, parts, universe = drawn
    scores[:] = 0.0
    expected = scores.copy()
    for part in parts:
        for i, value in zip(part.ids.tolist(), part.values.tolist(), strict=True):
            expected[i] = expected[i] + value
    compact = data.draw(st.lists(st.booleans(), min_size=len(parts), max_size=len(parts)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learned_module, "COMPACT_SHARE", 10**9)
        laid = [laid_out(part, universe) if lay else part for part, lay in zip(parts, compact, strict=True)]
        assert [part.compact is not None for part in laid] == compact
        for share in (0, 10**9):  # gathered, in place
            got = scores.copy()
            patch.setattr(learned_module, "UNIVERSE_SHARE", share)
            add_learned(got, laid, universe, np.zeros(got.size))
            assert got.view(np.int64).tolist() == expected.view(np.int64).tolist()


@pytest.mark.parametrize("postings", [3, 40, 5000])
@pytest.mark.parametrize("corpus_share", [1.0, 0.5])
def test_learned_values_are_the_formula_s_per_posting(postings: int, corpus_share: float) -> None:
    """A learned part's values, taken from a table over its tfs when they are fewer than its
    postings, are the bits of the formula evaluated per posting, in or out of a corpus; the
    field is not length-normalised, so its norm is k1 whatever the tool."""
    rng = np.random.default_rng(postings)
    ids = np.sort(rng.choice(postings * 3, postings, replace=False))
    groups = np.where(rng.random(postings) < corpus_share, 1, 2)
    tfs = rng.integers(1, 6, postings)
    rows = zip(ids.tolist(), groups.tolist(), tfs.tolist(), strict=True)
    held = LearnedPostings.of(list(rows))
    universe = Universe(ids.astype(np.intp))
    text = TextMatches(postings * 3, 0, np.zeros(0, dtype=np.intp))
    membership = learned_membership(held, (1,), np.zeros(0, dtype=np.intp), text, universe)
    assert membership is not None
    part = learned_term("t", 2, membership, postings * 3)
    kept = groups == 1
    expected = [part.weight * ((tf * (1.2 + 1)) / (tf + 1.2) + 1.0) for tf in tfs[kept].tolist()]
    assert part.ids.tolist() == ids[kept].tolist()
    assert part.values.view(np.int64).tolist() == np.array(expected).view(np.int64).tolist()


def test_the_roster_completes_stored_postings_with_groups() -> None:
    """A term's stored postings (ids, tfs) get each tool's group; a tool the roster does not
    hold is left out; tools join and leave it."""
    roster = Roster.of([(9, 2), (3, 1), (5, 2)])
    assert roster.ids.tolist() == [3, 5, 9]
    held = roster.postings(np.array([3, 4, 9], np.int64), np.array([1, 2, 3], np.int64))
    assert held is not None
    assert [held.ids.tolist(), held.grp.tolist(), held.tf.tolist()] == [[3, 9], [1, 2], [1, 3]]
    assert roster.postings(np.array([4], np.int64), np.array([1], np.int64)) is None
    assert Roster.of([]).postings(np.array([3], np.int64), np.array([1], np.int64)) is None
    changed = roster.with_tools({5: None, 4: 1, 9: 2})
    assert [changed.ids.tolist(), changed.grp.tolist()] == [[3, 4, 9], [1, 1, 2]]
    assert roster.ids.tolist() == [3, 5, 9]


def test_values_kept_by_term_go_together_and_within_their_limit() -> None:
    """What the ranker keeps per learned term: a term's values are dropped together (a call
    that taught it), and when the limit is reached everything goes."""
    kept: ByTerm[int, str] = ByTerm(limit=3)
    kept.put("a", 1, "a1")
    kept.put("a", 2, "a2")
    kept.put("a", 2, "a2 again")  # the same key: no room taken
    kept.put("b", 1, "b1")
    assert kept.holds("a", 2) and kept.get("a", 2) == "a2 again" and not kept.holds("b", 2)
    kept.drop(["a", "absent"])
    assert not kept.holds("a", 1) and kept.holds("b", 1)
    kept.put("c", 1, "c1")
    kept.put("d", 1, "d1")
    kept.put("e", 1, "e1")  # three held: full, so all went first
    assert [kept.holds(term, 1) for term in "bcde"] == [False, False, False, True]


def test_patched_postings_take_new_tfs_and_tools() -> None:
    held = LearnedPostings.of([(3, 1, 1), (9, 2, 3)])
    assert held.patched({}) is held
    added = held.patched({5: (2, 1), 9: (2, 4)})
    assert added is not None and added.ids.tolist() == [3, 5, 9] and added.tf.tolist() == [1, 1, 4]
    removed = held.patched({3: (1, 0)})
    assert removed is not None and removed.ids.tolist() == [9]
    assert held.patched({3: (1, 0), 9: (2, 0)}) is None


def with_demo(index: ToolIndex) -> None:
    index.upsert_tools([json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()])


def names_of(index: ToolIndex, query: str) -> list[tuple[str, float]]:
    return [(hit.name, hit.score) for hit in index.search(query, limit=5)]


TEACHER = "mcp__chatops__post_message"


def score_of(index: ToolIndex, query: str, name: str) -> float:
    return {hit.name: hit.score for hit in index.search(query, limit=100)}.get(name, 0.0)


def test_off_by_default_and_switching_keeps_everything(index: ToolIndex) -> None:
    with_demo(index)
    assert index.learning is False
    before = names_of(index, "notify the team")
    unlearned = score_of(index, "notify the team", TEACHER)
    session = index.session("t", discovery_mode="all")
    session.search_tool.execute("c1", {"query": "notify the team"})
    session.record_call(TEACHER)
    assert names_of(index, "notify the team") == before  # off: logged, nothing learned
    assert index.learned(TEACHER).terms == []
    assert index.set_learning(True) is True  # on: learned from the log written while off
    learned = names_of(index, "notify the team")
    assert score_of(index, "notify the team", TEACHER) > unlearned
    assert taught_terms(index, TEACHER) == [("notify", 1), ("team", 1), ("the", 1)]
    assert index.set_learning(True) is False
    index.set_learning(False)
    assert names_of(index, "notify the team") == before  # exactly the unlearned ranking
    index.set_learning(True)
    assert names_of(index, "notify the team") == learned


def test_a_planning_agent_and_a_rephrasing_one_in_real_sessions(index: ToolIndex) -> None:
    with_demo(index)
    index.set_learning(True)
    planner = index.session("planner", discovery_mode="all", answer="rich")
    for number, query in enumerate(("list calendar events", "run a warehouse query", "read a file")):
        planner.search_tool.execute(f"c{number}", {"query": query})
    planner.record_call("read")
    assert taught_terms(index, "read") == [("a", 1), ("file", 1), ("read", 1)]
    rephraser = index.session("rephraser", discovery_mode="all", answer="rich")
    nothing = rephraser.search_tool.execute("c1", {"query": "ping everybody"})
    assert nothing.details["tools"] == []  # the rich answer lists no tool: the agent rephrases
    rephraser.search_tool.execute("c2", {"query": "post a chat message"})
    rephraser.record_call(TEACHER)
    assert {taught.term for taught in index.learned(TEACHER).terms} == {
        "ping",
        "everybody",
        "post",
        "a",
        "chat",
        "message",
    }
    from discovery._diagnostics.verify import verify

    assert verify(index).problems == []


HUGE_QUERIES = {
    "300,000 words": " ".join(f"w{i}" for i in range(300_000)) + " post message",
    "a megabyte of one word": "x" * 1_000_000,
    "a megabyte of words": " ".join(f"q{i}" for i in range(120_000)) + " post message",
}


@pytest.mark.slow
@pytest.mark.parametrize("which", list(HUGE_QUERIES))
def test_a_huge_request_ends_in_a_result_and_its_call_teaches_a_few_terms(db_url: str, which: str) -> None:
    """Searched with learning on, by a process of its own, then the tool it found called: the
    search answers, and the call credits at most ``TERMS_PER_CALL`` terms."""
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        taught = index.session("taught", discovery_mode="all")
        taught.search_tool.execute("c1", {"query": "post message w1 q1 x"})
        taught.record_call(TEACHER)  # the learned field holds a few of the huge request's words
    script = (
        "import sys, json; from discovery import ToolIndex\n"
        "with ToolIndex.open(sys.argv[1]) as index:\n"
        "    session = index.session('huge', discovery_mode='all')\n"
        "    result = session.search_tool.execute('c1', {'query': sys.stdin.read(), 'limit': 3})\n"
        "    names = [tool['name'] for tool in result.details['tools']]\n"
        "    for name in names:\n"
        "        session.record_call(name)\n"
        "    print(json.dumps(names))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, db_url],
        input=HUGE_QUERIES[which],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = json.loads(done.stdout)
    with ToolIndex.open(db_url) as index:
        for name in names:
            prior = 5 if name == TEACHER else 0  # the words the first session taught it
            assert len(index.learned(name).terms) <= TERMS_PER_CALL + prior
        if which != "a megabyte of one word":
            assert TEACHER in names
        from discovery._diagnostics.verify import verify

        assert verify(index).problems == []


def test_learned_marks_a_tool_whose_annotations_say_it_may_destroy(db_url: str) -> None:
    name = "mcp__forge__delete_repository"
    record: dict[str, Any] = {
        "name": name,
        "description": "Delete a repository for good.",
        "mcp_meta": {"annotations": {"destructiveHint": True}},
    }
    ok(db_url, "import", str(DEMO))
    with ToolIndex.open(db_url, learning=True) as index:
        index.upsert_tools([record])
        session = index.session("s", discovery_mode="all")
        session.search_tool.execute("c1", {"query": "remove a repository"})
        session.record_call(name)
        assert index.learned(name).destructive is True
        assert index.learned(TEACHER).destructive is False
    assert ok(db_url, "learned", name).startswith(
        f"{name}: 3 learned terms from 1 sessions of 1 identities (learning on; destructive "
        "(its MCP annotations say destructiveHint): shared at 4 identities)\n"
    )
    assert json.loads(ok(db_url, "learned", name, "--json"))["destructive"] is True


def test_the_setting_is_the_index_s_and_persists(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        assert index.learning is True
    with ToolIndex.open(db_url) as index:  # omitted: kept
        assert index.learning is True
    with ToolIndex.open(db_url, learning=False) as index:
        assert index.learning is False


def test_forget_a_tool_forget_all_and_deleted_sessions(index: ToolIndex) -> None:
    with_demo(index)
    index.set_learning(True)
    before = names_of(index, "notify the team")
    for session_id in ("a", "b"):
        session = index.session(session_id, discovery_mode="all")
        session.search_tool.execute("c1", {"query": "notify the team"})
        session.record_call(TEACHER)
        session.record_call("mcp__gitforge__create_issue")
    assert index.learned(TEACHER).sessions == 2
    assert index.forget_learning([TEACHER]) == 6
    assert index.learned(TEACHER).terms == []
    index.set_learning(False)
    index.set_learning(True)  # recomputed from the logs: the forgotten calls still teach nothing
    assert index.learned(TEACHER).terms == []
    assert taught_terms(index, "mcp__gitforge__create_issue") == [("notify", 2), ("team", 2), ("the", 2)]
    index.delete_session("a")
    assert taught_terms(index, "mcp__gitforge__create_issue") == [("notify", 1), ("team", 1), ("the", 1)]
    assert index.forget_learning() == 3
    assert names_of(index, "notify the team") == before
    from discovery._diagnostics.verify import verify

    assert verify(index).problems == []


def test_recording_a_call_checks_its_input_and_changes_nothing_on_error(index: ToolIndex) -> None:
    with_demo(index)
    session = index.session("t", discovery_mode="all")
    with pytest.raises(ToolNotFound, match="no tool named 'nope'"):
        session.record_call("nope")
    assert [call["kind"] for call in index.session_record("t")["calls"]] == ["create"]


def test_a_call_recorded_in_one_process_is_searched_with_in_another(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        index.session("t", discovery_mode="all").search_tool.execute("c1", {"query": "notify the team"})
        first = score_of(index, "notify the team", TEACHER)  # what this process caches
        script = (
            "import sys; from discovery import ToolIndex\n"
            "with ToolIndex.open(sys.argv[1]) as index:\n"
            "    session = index.session('t')\n"
            "    if sys.argv[2] == 'search':\n"
            "        session.search_tool.execute('c2', {'query': 'notify the team'})\n"
            f"    session.record_call({TEACHER!r})\n"
        )
        # A call before any search of its process teaches nothing: this one resumed the session.
        subprocess.run([sys.executable, "-c", script, db_url, "call"], check=True, cwd=REPO)
        assert score_of(index, "notify the team", TEACHER) == first
        assert index.learned(TEACHER).terms == []
        subprocess.run([sys.executable, "-c", script, db_url, "search"], check=True, cwd=REPO)
        assert score_of(index, "notify the team", TEACHER) > first


def status_lines(state: str, tools: int, terms: int, sessions: int, identities: int) -> str:
    """What ``learning status`` prints, at K = 2."""
    return (
        f"learning:       {state}\nmin identities: 2 (4 for a destructive tool)\n"
        f"tools:          {tools}\nterms:          {terms}\nsessions:       {sessions}\n"
        f"identities:     {identities}\n"
    )


def test_cli_learning_learned_and_session_call(db_url: str) -> None:
    ok(db_url, "import", str(DEMO))
    assert ok(db_url, "learning", "status") == status_lines("off", 0, 0, 0, 0)
    ok(db_url, "search", "notify the team", "--session", "s1", "--mode", "all")
    assert ok(db_url, "session", "call", "s1", TEACHER) == f"recorded {TEACHER} in s1\n"
    assert ok(db_url, "session", "call", "s1", "chatops/post_message", "--failed") == (
        f"recorded {TEACHER} in s1 (failed)\n"
    )
    # Each command is a process of its own: a call it records follows no search of its own.
    assert ok(db_url, "learning", "on") == status_lines("on", 0, 0, 0, 0)
    ok(db_url, "learning", "off")
    with ToolIndex.open(db_url) as index:  # a host that searches, then calls
        session = index.session("s2", discovery_mode="all")
        session.search_tool.execute("c1", {"query": "notify the team"})
        session.record_call(TEACHER)
    assert ok(db_url, "learning", "on") == status_lines("on", 1, 3, 1, 1)
    assert ok(db_url, "learning", "on").startswith("learning was already on\n")
    assert ok(db_url, "learned", TEACHER) == (
        f"{TEACHER}: 3 learned terms from 1 sessions of 1 identities (learning on; shared at 2 identities)\n"
        "term    identities  sessions  shared\n"
        "notify  1           1         no\n"
        "team    1           1         no\n"
        "the     1           1         no\n"
    )
    assert json.loads(ok(db_url, "learned", TEACHER, "--json")) == {
        "name": TEACHER,
        "learning": "on",
        "destructive": False,
        "min_identities": 2,
        "threshold": 2,
        "sessions": 1,
        "identities": 1,
        "terms": [
            {"term": t, "sessions": 1, "identities": 1, "shared": False} for t in ("notify", "team", "the")
        ],
    }
    shown = ok(db_url, "session", "show", "s1")
    assert f"tool_call {TEACHER}: ok" in shown and f"tool_call {TEACHER}: failed" in shown
    shown = ok(db_url, "explain", "notify the team", TEACHER)
    assert shown.startswith(f"{TEACHER}  score 5.558998  (mode all)\n")  # the learned terms alone
    assert shown.endswith(
        "learned field: not length-normalised (its norm is k1 for every tool)\n"
        "learned term  qtf  df  weight    tf  score\n"
        "notify        1    1   1.365015  1   2.730029\n"
        "the           1    12  0.304883  1   0.609766\n"
        "team          1    2   1.109602  1   2.219203\n"
    )
    explained = json.loads(ok(db_url, "explain", "notify the team", TEACHER, "--json"))
    assert [(part["term"], part["tf"]) for part in explained["learned"]] == [
        ("notify", 1),
        ("the", 1),
        ("team", 1),
    ]
    found = json.loads(ok(db_url, "search", "notify the team", "--limit", "30", "--json"))["tools"]
    assert {tool["name"]: tool["score"] for tool in found}[TEACHER] == round(explained["score"], 6)
    assert (
        "learning:   on (1 tools learned 3 terms from 1 sessions of 1 identities; shared at 2 identities)"
        in ok(db_url, "stats")
    )
    assert ok(db_url, "learned", "--forget", TEACHER) == f"forgot 3 learned credits of {TEACHER}\n"
    assert ok(db_url, "learned", "--forget-all") == "forgot 0 learned credits of every tool\n"
    assert fails(db_url, "learned", "nope") == (
        "Error: no tool named 'nope' in the catalog, and nothing learned under that name\n"
    )
    assert fails(db_url, "session", "call", "s1", "nope") == "Error: no tool named 'nope' in the catalog\n"
    assert ok(db_url, "verify").startswith("ok:")
    assert ok(db_url, "learning", "off") == status_lines("off", 0, 0, 0, 0)


def test_the_adapters_record_calls_by_wire_name(index: ToolIndex) -> None:
    from discovery.adapters import anthropic, openai

    with_demo(index)
    index.set_learning(True)
    session = index.session("agent", discovery_mode="all")
    session.search_tool.execute("c1", {"query": "notify the team on chat"})
    assert anthropic.record_call(session, TEACHER) == TEACHER
    assert openai.record_call(session, "mcp__gitforge__create_issue") is None  # not active: nothing
    assert openai.record_call(session, TEACHER, ok=False) == TEACHER
    calls = [call["params"] for call in index.session_record("agent")["calls"] if call["kind"] == "tool_call"]
    # The call that ran names the search it learns from (the log's second entry).
    assert calls == [
        {"tool": TEACHER, "is_error": False, "learned_from": [2]},
        {"tool": TEACHER, "is_error": True},
    ]
    assert index.learned(TEACHER).sessions == 1


# --- concurrency and kills ---------------------------------------------------------------------

TEACHING = """
import sys
from discovery import ToolIndex
url, prefix, count, identity = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with ToolIndex.open(url) as index:
    for number in range(count):
        whose = identity.format(n=number % 3)
        session = index.session(f"{prefix}-{number}", identity=whose, discovery_mode="all")
        session.search_tool.execute("c1", {"query": f"notify the team {prefix}"})
        session.record_call("mcp__chatops__post_message")
        session.record_call("mcp__gitforge__create_issue")
        print(number, flush=True)
"""


@pytest.mark.slow
def test_concurrent_sessions_in_processes_lose_no_credit(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", TEACHING, db_url, f"w{worker}", "8", f"w{worker}"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
        for worker in range(4)
    ]
    assert [worker.wait(timeout=600) for worker in workers] == [0, 0, 0, 0]
    with ToolIndex.open(db_url) as index:
        from discovery._diagnostics.verify import verify

        assert verify(index).problems == []
        terms = dict(taught_terms(index, TEACHER))
        assert (index.learned(TEACHER).sessions, index.learned(TEACHER).identities) == (32, 4)
        assert (terms["notify"], terms["team"]) == (32, 32)
        assert {taught.term: taught.identities for taught in index.learned(TEACHER).terms}["notify"] == 4
        assert all(terms[f"w{worker}"] == 8 for worker in range(4))


@pytest.mark.slow
def test_kill_9_while_calls_are_recorded_leaves_a_sound_index(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
    teacher = subprocess.Popen(
        [sys.executable, "-c", TEACHING, db_url, "k", "100000", "k{n}"],  # three identities in turn
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert teacher.stdout is not None
    for _ in range(5):  # a few sessions done, then killed in the middle of whatever it is doing
        teacher.stdout.readline()
    teacher.kill()
    teacher.wait(timeout=60)
    result = subprocess.run(
        [sys.executable, "-m", "discovery.cli._main", "--db", db_url, "verify"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    with ToolIndex.open(db_url) as index:
        assert index.learned(TEACHER).sessions >= 5
        assert index.learned(TEACHER).identities == 3  # verify checked their counts too


def test_a_process_catches_up_with_what_others_taught_from_the_journal(db_url: str) -> None:
    """One process keeps searching while another records calls: after every call, its next search
    equals a search by a fresh process (which reads everything anew), in the whole catalog and in
    corpora that leave out the tool taught or another."""
    corpora = [
        Corpus(MODE_GROUPS["all"], frozenset({TEACHER})),
        Corpus(MODE_GROUPS["all"], frozenset({"mcp__notes__create_note"})),
    ]
    with ToolIndex.open(db_url, learning=True) as index, ToolIndex.open(db_url) as other:
        with_demo(index)
        queries = ["notify the team", "create issue chat", "team notes"]
        for number, tool in enumerate(
            [TEACHER, "mcp__gitforge__create_issue", TEACHER, "mcp__notes__create_note"]
        ):
            for query in queries:
                index.search(query, limit=10)  # cached here before the change
                for corpus in corpora:
                    rank(index, query, corpus, None)
            session = other.session(f"teacher-{number}", discovery_mode="all")
            session.search_tool.execute("c1", {"query": queries[number % 3]})
            session.record_call(tool)
            with ToolIndex.open(db_url) as fresh:
                for query in queries:
                    assert index.search(query, limit=10) == fresh.search(query, limit=10)
                    for corpus in corpora:
                        assert rank(index, query, corpus, None) == rank(fresh, query, corpus, None)
        other.delete_session("teacher-0")  # journaled too: the credits of a session go with it
        with ToolIndex.open(db_url) as fresh:
            assert index.search("notify the team", limit=10) == fresh.search("notify the team", limit=10)


def test_eval_learns_from_a_training_file_in_a_throwaway_copy(db_url: str, tmp_path: Path) -> None:
    ok(db_url, "import", str(DEMO))
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": "ping the crew", "relevant": [TEACHER]}) + "\n")
    training = tmp_path / "train.jsonl"
    training.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {"query": "ping the crew", "tools": [], "session": "a"},  # found nothing useful…
                {"query": "crew chat", "tools": [TEACHER], "session": "a"},  # …then this, and called
                {"query": "ping everyone on the crew channel", "tools": [TEACHER]},
            ]
        )
        + "\n"
    )
    before = json.loads(ok(db_url, "eval", str(queries), "--json"))
    after = json.loads(ok(db_url, "eval", str(queries), "--learn-from", str(training), "--json"))
    assert before["recall@1"] == 0.0 and after["recall@1"] == 1.0
    assert ok(db_url, "eval", str(queries), "--learn-from", str(training)).startswith(
        "1 queries, mode all, analyzer reference, learning from 3 requests\n"
    )
    assert ok(db_url, "learning", "status").startswith(
        "learning:       off\n"
    )  # the index itself is untouched
    assert ok(db_url, "sessions") == "No sessions.\n"
    training.write_text(json.dumps({"query": "x", "tools": ["nope"]}) + "\n")
    assert fails(db_url, "eval", str(queries), "--learn-from", str(training)) == (
        f'Error: {training}:1: no tool named "nope" in the catalog\n'
    )


def test_learned_postings_are_read_as_arrays_by_term(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each term's postings: the catalog tools that learned it, ascending by id, with the
    identities that taught it (each session here its own identity); a tool outside the catalog is
    left out, a term nobody learned is absent, and a term's rows read over several blocks stay one
    term's."""
    with_demo(index)
    names = [json.loads(line)["name"] for line in DEMO.read_text().splitlines() if line.strip()]
    terms = ("chat", "note", "team")
    credits = [
        (f"s{n % 3}", f"s{n % 3}", term, name) for n, name in enumerate(names) for term in terms[: 1 + n % 3]
    ]
    credits += [(f"s{3 + n % 2}", f"s{3 + n % 2}", "team", name) for n, name in enumerate(names[::2])]
    credits += [("s0", "s0", "team", "mcp__gone__tool"), ("s0", "s0", "zzz", "mcp__gone__tool")]
    with write_transaction(index.store.engine) as connection:
        Writer(connection).learning.replace_all(credits)
    monkeypatch.setattr(stored_learning, "POSTINGS_BLOCK", 2)
    with index.store.reading() as reader:
        found = reader.learning.postings([*terms, "zzz", "absent"], 1, 1)
        ids = {name: tool.id for name, tool in reader.catalog.tools_by_names(names).items()}
    counts = Counter((term, tool) for _, _, term, tool in set(credits))
    assert sorted(found) == sorted(terms)
    for term in terms:
        expected = sorted((ids[tool], n) for (t, tool), n in counts.items() if t == term and tool in ids)
        assert list(zip(found[term].ids.tolist(), found[term].tf.tolist(), strict=True)) == expected
        assert max(found[term].tf.tolist()) >= (2 if term == "team" else 1)


def test_a_change_keeps_the_learned_parts_it_leaves_as_they_were(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new learned generation that changed nothing keeps the parts computed before it; a change
    of a term's postings computes its part anew, even when its postings were no longer cached."""
    monkeypatch.setattr(learned_field, "LEARNED_TERMS_CACHED", 2)
    corpus = Corpus(MODE_GROUPS["all"], frozenset())
    other = "mcp__notes__create_note"

    def changed(*credits: tuple[str, str, str], forgotten: str | None = None) -> None:
        with write_transaction(index.store.engine) as connection:
            if forgotten is not None:
                Writer(connection).learning.remove_credits(session=("local", forgotten))
            Writer(connection).learning.add_credits(("local", *credit) for credit in credits)

    def parts(query: str) -> list[LearnedTerm]:
        with index.store.reading() as reader:
            found = index.ranker.learned(reader, query_terms(query), corpus)
        return found

    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        changed(("s1", "ping", TEACHER), ("s2", "ping", other), ("s2", "crew", other))
        [before] = parts("ping")
        with index.store.reading() as reader:
            ids = {name: tool.id for name, tool in reader.catalog.tools_by_names([TEACHER, other]).items()}
        assert before.ids.tolist() == sorted(ids.values())
        with write_transaction(index.store.engine) as connection:
            connection.exec_driver_sql("UPDATE learning_state SET generation = generation + 1")
        assert parts("ping")[0] is before
        parts("crew team notes")  # more terms than are cached: those of "ping" are dropped
        assert index.ranker._current is not None and not index.ranker._current.learned.holds("ping")
        changed(("s3", "pong", TEACHER), forgotten="s1")  # the teacher forgets ping, learns pong
        [after] = parts("ping")
        assert after.ids.tolist() == [ids[other]]
        with ToolIndex.open(db_url) as fresh:
            for query in ("ping", "pong crew", "crew team notes"):
                assert rank(index, query, corpus, None) == rank(fresh, query, corpus, None)
        [crew] = parts("crew")
        changed(("s4", "zap", other), ("s4", "zip", other))  # crew's tool learns other terms
        assert parts("crew")[0] is crew  # the field is not length-normalised: crew's part holds
        with ToolIndex.open(db_url) as fresh:
            for query in ("crew", "ping", "zap crew"):
                assert rank(index, query, corpus, None) == rank(fresh, query, corpus, None)


def test_the_journal_says_what_each_change_left(db_url: str) -> None:
    """What a process catching up reads after a generation: each changed (term, tool) as it is
    now — the tool's id and group, whether it has a learned field, the identities that taught it
    the term (each session here its own identity) — in one read."""
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
        with index.store.reading() as reader:
            start = reader.learning.state().generation
            teacher = reader.catalog.tools_by_names([TEACHER])[TEACHER]
        with write_transaction(index.store.engine) as connection:
            Writer(connection).learning.add_credits(
                [("s1", "s1", "ping", TEACHER), ("s2", "s2", "ping", TEACHER)]
            )
            Writer(connection).learning.add_credits(
                [("s1", "s1", "pong", TEACHER), ("s1", "s1", "x", "mcp__gone__tool")]
            )
        with index.store.reading() as reader:
            middle = reader.learning.state().generation
            assert sorted(reader.learning.changes_since(start), key=lambda c: (c.term, c.tool_name)) == [
                LearnedChange("ping", TEACHER, teacher.id, teacher.grp, True, 2),
                LearnedChange("pong", TEACHER, teacher.id, teacher.grp, True, 1),
                LearnedChange("x", "mcp__gone__tool", None, 0, False, 0),
            ]
        with write_transaction(index.store.engine) as connection:
            Writer(connection).learning.remove_credits(session=("s1", "s1"))
        with index.store.reading() as reader:
            after = reader.learning.changes_since(middle)
            assert sorted(after, key=lambda c: (c.term, c.tool_name)) == [
                LearnedChange("ping", TEACHER, teacher.id, teacher.grp, True, 1),
                LearnedChange("pong", TEACHER, teacher.id, teacher.grp, True, 0),
                LearnedChange("x", "mcp__gone__tool", None, 0, False, 0),
            ]
