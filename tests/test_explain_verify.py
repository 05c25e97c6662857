"""``explain`` adds up to the search score exactly; ``verify`` accepts a sound index and names
each kind of corruption, made here with raw SQL behind the store's back."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from discovery import ToolIndex, ToolIndexError
from discovery._catalog.indexing import indexed_tool
from discovery._catalog.models import ToolRecord
from discovery._diagnostics import verify as verify_module
from discovery._diagnostics.explain import NotInCorpus, explain
from discovery._diagnostics.verify import CHECKS, VerifyReport, verify
from discovery._diagnostics.weak import weak_matches
from discovery._ranking.bm25 import round6
from discovery._ranking.fields import FIELD_WEIGHTS
from discovery._text.enhanced import STOP_WORDS
from discovery.errors import QueryWithoutTerms
from store import StoredTool
from store import _audit as audit
from store.errors import CorruptIndex, ToolNotFound
from tests.catalogs import generated_catalog
from tests.conftest import BACKENDS, scratch_database, shared_path
from tests.examples import examples

CREATE_ISSUE = "mcp__github__create_issue"


@pytest.fixture(scope="module", params=BACKENDS)
def real(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolIndex]:
    """The real catalog, imported once per backend. Tests that corrupt it restore it."""
    lines = shared_path("data/mcp-catalog.jsonl").read_text(encoding="utf-8").splitlines()
    with scratch_database(str(request.param), tmp_path_factory.mktemp("real")) as url:
        index = ToolIndex.open(url)
        try:
            index.upsert_tools(json.loads(line) for line in lines if line.strip())
            yield index
        finally:
            index.close()


def scalar(index: ToolIndex, sql: str, **params: Any) -> Any:
    with index.store.engine.connect() as connection:
        return connection.execute(text(sql), params).scalar_one()


def execute(index: ToolIndex, sql: str, **params: Any) -> None:
    with index.store.engine.begin() as connection:
        connection.execute(text(sql), params)


@contextmanager
def corrupted(index: ToolIndex, damage: str, repair: str, **params: Any) -> Iterator[None]:
    """Commit ``damage``; afterwards commit ``repair`` and check the index is sound again."""
    execute(index, damage, **params)
    try:
        yield
    finally:
        execute(index, repair, **params)
    assert verify(index).problems == []


def ids(index: ToolIndex, name: str, term: str) -> dict[str, int]:
    return {
        "tool": scalar(index, "SELECT id FROM tools WHERE name = :n", n=name),
        "term": scalar(index, "SELECT id FROM terms WHERE text = :t", t=term),
    }


# --- explain -------------------------------------------------------------------------------------


def real_cases() -> list[dict[str, Any]]:
    path = shared_path("conformance/ranking-real.json")
    return list(json.loads(path.read_text(encoding="utf-8"))["cases"])


@pytest.mark.parametrize("mode", ["all", "mcp-only"])
def test_explained_scores_equal_search_scores_exactly(real: ToolIndex, mode: str) -> None:
    checked = 0
    for case in real_cases()[::8]:
        for hit in real.search(case["query"], limit=case["limit"], mode=mode):
            explanation = explain(real, case["query"], hit.name, mode=mode)
            assert explanation.score == hit.score, (case["query"], hit.name)
            checked += 1
    assert checked > 150


def test_explanation_of_a_worked_example(real: ToolIndex) -> None:
    explanation = explain(real, "create github issue issue", CREATE_ISSUE)
    assert (explanation.n_docs, explanation.avgdl, explanation.doc_len) == (757, 97.15719947159842, 80)
    assert [(t.term, t.qtf, t.df, t.tf) for t in explanation.terms] == [
        ("create", 1, 40, 16),
        ("github", 1, 119, 12),
        ("issue", 2, 30, 16),
    ]
    create = explanation.terms[0]
    assert [(part.field, part.weight, part.tf) for part in create.fields] == [
        ("name", 6, 6),
        ("label", 4, 4),
        ("mcp_tool_name", 4, 4),
        ("summary", 2, 2),
    ]
    assert create.idf == 2.9293814115298784
    assert create.contribution == 8.980306822092457
    hit = real.search("create github issue issue", limit=1)[0]
    assert (hit.name, hit.score) == (CREATE_ISSUE, explanation.score)
    total = 0.0
    for term in explanation.terms:
        total += term.contribution
    assert explanation.score == total


def test_field_parts_split_each_contribution_by_tf_share(real: ToolIndex) -> None:
    explanation = explain(
        real, "list pull requests for a repository owner", "mcp__github__list_pull_requests"
    )
    for term in explanation.terms:
        assert sum(part.tf for part in term.fields) == term.tf
        assert [part.field for part in term.fields] == [
            f for f in FIELD_WEIGHTS if f in {p.field for p in term.fields}
        ]
        if term.tf:
            assert math.isclose(
                sum(part.contribution for part in term.fields), term.contribution, rel_tol=1e-12
            )
            for part in term.fields:
                assert part.contribution == term.contribution * part.tf / term.tf


def test_unmatched_terms_are_listed_and_add_nothing(real: ToolIndex) -> None:
    explanation = explain(real, "issue zzzunknown github", CREATE_ISSUE)
    unknown = explanation.terms[1]
    assert (unknown.term, unknown.df, unknown.tf, unknown.contribution, unknown.fields) == (
        "zzzunknown",
        0,
        0,
        0.0,
        [],
    )
    scores = {hit.name: hit.score for hit in real.search("issue zzzunknown github", limit=50)}
    assert explanation.score == scores[CREATE_ISSUE]


def test_explanation_as_rows_and_json(real: ToolIndex) -> None:
    explanation = explain(real, "github issue", CREATE_ISSUE)
    document = explanation.as_dict()
    assert json.loads(json.dumps(document)) == document
    assert document["score"] == explanation.score
    assert document["score6"] == round6(explanation.score)
    assert {key: document[key] for key in ("query", "name", "mode", "n_docs", "doc_len")} == {
        "query": "github issue",
        "name": CREATE_ISSUE,
        "mode": "all",
        "n_docs": 757,
        "doc_len": 80,
    }
    assert [term["term"] for term in document["terms"]] == ["github", "issue"]
    rows = explanation.rows()
    assert [row["term"] for row in rows] == ["github", "issue"]
    assert rows[0]["fields"] == "name:6 label:4 server_name:2"
    assert set(rows[0]) == {"term", "qtf", "df", "idf", "tf", "fields", "contribution"}


def test_explain_excludes_what_the_read_only_corpus_excludes(index: ToolIndex) -> None:
    index.upsert_tools(
        [
            {"name": "read", "description": "read files from disk"},  # essential by default
            {"name": "cat", "description": "print files"},
            {"name": "resolve", "description": "files"},  # internal
            {"name": "pin", "description": "files", "load_mode": "essential"},
            {
                "name": "mcp__fs__read_file",
                "description": "read files",
                "server_name": "fs",
                "mcp_tool_name": "read_file",
            },
        ]
    )
    for mode, n_docs in (("all", 2), ("mcp-only", 1)):
        hit = index.search("read files", mode=mode)[0]
        explanation = explain(index, "read files", hit.name, mode=mode)
        assert (hit.name, explanation.n_docs, explanation.score) == ("mcp__fs__read_file", n_docs, hit.score)
    assert [term.df for term in explain(index, "read files", "cat").terms] == [1, 2]
    for name, mode in (("read", "all"), ("pin", "all"), ("resolve", "all"), ("cat", "mcp-only")):
        with pytest.raises(NotInCorpus, match="is never ranked in mode"):
            explain(index, "files", name, mode=mode)


def test_explain_errors(index: ToolIndex) -> None:
    index.upsert_tools([{"name": "cat", "description": "print files"}])
    with pytest.raises(ToolNotFound, match="no tool named 'dog'"):
        explain(index, "files", "dog")
    with pytest.raises(QueryWithoutTerms):
        explain(index, "?!", "cat")
    with pytest.raises(ToolIndexError, match="unknown search mode"):
        explain(index, "files", "cat", mode="off")


# --- verify: sound indexes -----------------------------------------------------------------------


def test_verify_accepts_a_fresh_import_of_the_real_catalog(real: ToolIndex) -> None:
    report = verify(real)
    assert report.ok and report.problems == []
    stats = real.stats()
    catalog_keys = ("tools", "postings", "groups", "term_stats", "terms")
    assert {key: report.checked[key] for key in catalog_keys} == {
        "tools": 757,
        "postings": stats["postings"],
        "groups": 3,
        "term_stats": stats["terms"],
        "terms": stats["terms"],
    }


def test_verify_accepts_an_empty_index(index: ToolIndex) -> None:
    report = verify(index)
    assert (report.ok, report.checked["tools"], report.checked["postings"]) == (True, 0, 0)


def test_verify_streams_tools_in_batches(index: ToolIndex) -> None:
    count = verify_module.BATCH_SIZE + 1  # a whole batch and one tool in the next
    catalog = generated_catalog(count)
    index.upsert_tools(catalog)
    assert verify(index).checked["tools"] == count
    last = catalog[-1]["name"]
    execute(index, "UPDATE tools SET indexed_terms = :empty WHERE name = :n", empty=b"", n=last)
    assert any(problem.startswith(f"tool {last!r}, indexed terms: ") for problem in verify(index).problems)


# --- verify: corruptions, each named -------------------------------------------------------------

# A fresh import writes whole blocks and no overrides, so an override row added here is the only
# one, and deleting it restores the index.
OVERRIDE = "INSERT INTO posting_delta (term_id, grp, tool_id, tf, doc_len) VALUES (:term, 2, :tool, :tf, 80)"
NO_OVERRIDE = "DELETE FROM posting_delta WHERE term_id = :term AND grp = 2 AND tool_id = :tool"


def test_a_changed_posting_tf(real: ToolIndex) -> None:
    key = ids(real, CREATE_ISSUE, "issue")
    with corrupted(real, OVERRIDE, NO_OVERRIDE, tf=17, **key):
        report = verify(real)
        assert not report.ok
        assert (
            f"tool {CREATE_ISSUE!r}, term index, term 'issue': stored tf 17, its record gives 16"
            in report.problems
        )


def test_a_missing_posting(real: ToolIndex) -> None:
    key = ids(real, CREATE_ISSUE, "issue")
    with corrupted(real, OVERRIDE, NO_OVERRIDE, tf=0, **key):
        problems = verify(real).problems
        assert (
            f"tool {CREATE_ISSUE!r}, term index: posting of term 'issue' is missing (its record gives tf 16)"
            in problems
        )
        assert "term 'issue' in group 2: stored df 30, its postings give 29" in problems
        assert CREATE_ISSUE not in [hit.name for hit in real.search("issue")]


def test_lost_indexed_terms(real: ToolIndex) -> None:
    packed = scalar(real, "SELECT indexed_terms FROM tools WHERE name = :name", name=CREATE_ISSUE)
    with corrupted(
        real,
        "UPDATE tools SET indexed_terms = :empty WHERE name = :name",
        "UPDATE tools SET indexed_terms = :packed WHERE name = :name",
        empty=b"",
        packed=bytes(packed),
        name=CREATE_ISSUE,
    ):
        problems = verify(real).problems
        missing = "posting of term 'issue' is missing (its record gives tf 16)"
        assert f"tool {CREATE_ISSUE!r}, indexed terms: {missing}" in problems
        assert not any(", term index" in problem for problem in problems)


def test_a_torn_posting_block(real: ToolIndex) -> None:
    key = ids(real, CREATE_ISSUE, "issue")
    tfs = bytes(scalar(real, "SELECT tfs FROM posting_blocks WHERE term_id = :term AND grp = 2", **key))
    with corrupted(
        real,
        "UPDATE posting_blocks SET tfs = :torn WHERE term_id = :term AND grp = 2",
        "UPDATE posting_blocks SET tfs = :tfs WHERE term_id = :term AND grp = 2",
        torn=tfs[:-1],
        tfs=tfs,
        term=key["term"],
    ):
        problems = verify(real).problems
        assert problems and all(f"posting block of term id {key['term']}, group 2" in p for p in problems)
        fresh = ToolIndex.open(
            real.store.engine.url.render_as_string(hide_password=False)
        )  # no cached postings
        try:
            with pytest.raises(CorruptIndex, match=f"posting block of term id {key['term']}, group 2"):
                fresh.search("create an issue")
        finally:
            fresh.close()


def test_a_changed_df(real: ToolIndex) -> None:
    key = ids(real, CREATE_ISSUE, "github")
    with corrupted(
        real,
        "UPDATE term_stats SET df = df + 1 WHERE term_id = :term AND grp = 2",
        "UPDATE term_stats SET df = df - 1 WHERE term_id = :term AND grp = 2",
        **key,
    ):
        assert verify(real).problems == ["term 'github' in group 2: stored df 120, its postings give 119"]


def test_a_changed_max_tf(real: ToolIndex) -> None:
    key = ids(real, CREATE_ISSUE, "github")
    max_tf = scalar(real, "SELECT max_tf FROM term_stats WHERE term_id = :term AND grp = 2", **key)
    with corrupted(
        real,
        "UPDATE term_stats SET max_tf = max_tf - 1 WHERE term_id = :term AND grp = 2",
        "UPDATE term_stats SET max_tf = max_tf + 1 WHERE term_id = :term AND grp = 2",
        **key,
    ):
        assert verify(real).problems == [
            f"term 'github' in group 2: stored max_tf {max_tf - 1}, its postings give {max_tf}"
        ]


def test_a_missing_term_stats_row(real: ToolIndex) -> None:
    key = ids(real, CREATE_ISSUE, "github")
    max_tf = scalar(real, "SELECT max_tf FROM term_stats WHERE term_id = :term AND grp = 2", **key)
    with corrupted(
        real,
        "DELETE FROM term_stats WHERE term_id = :term AND grp = 2",
        "INSERT INTO term_stats (term_id, grp, df, max_tf) VALUES (:term, 2, 119, :max_tf)",
        max_tf=max_tf,
        **key,
    ):
        assert verify(real).problems == [
            f"term 'github' in group 2: no term_stats row, its postings give df 119, max_tf {max_tf}"
        ]


def test_a_changed_group_total(real: ToolIndex) -> None:
    total = scalar(real, "SELECT total_len FROM group_stats WHERE grp = 2")
    with corrupted(
        real,
        "UPDATE group_stats SET total_len = total_len + 5 WHERE grp = 2",
        "UPDATE group_stats SET total_len = total_len - 5 WHERE grp = 2",
    ):
        assert verify(real).problems == [
            f"group 2 (mcp): stored total_len {total + 5}, its tools' lengths sum to {total}"
        ]


def test_a_changed_group_count(real: ToolIndex) -> None:
    with corrupted(
        real,
        "UPDATE group_stats SET doc_count = doc_count - 1 WHERE grp = 2",
        "UPDATE group_stats SET doc_count = doc_count + 1 WHERE grp = 2",
    ):
        assert verify(real).problems == ["group 2 (mcp): stored doc_count 756, the catalog has 757"]


def test_an_orphan_term(real: ToolIndex) -> None:
    with corrupted(
        real, "INSERT INTO terms (text) VALUES ('zzorphan')", "DELETE FROM terms WHERE text = 'zzorphan'"
    ):
        term_id = scalar(real, "SELECT id FROM terms WHERE text = 'zzorphan'")
        assert verify(real).problems == [f"term 'zzorphan' (id {term_id}) has no postings"]


def test_a_tool_length_out_of_step(real: ToolIndex) -> None:
    with corrupted(
        real,
        "UPDATE tools SET doc_len = doc_len + 1 WHERE name = :name",
        "UPDATE tools SET doc_len = doc_len - 1 WHERE name = :name",
        name=CREATE_ISSUE,
    ):
        problems = verify(real).problems
        assert f"tool {CREATE_ISSUE!r}: stored doc_len 81, its record gives 80" in problems
        longer = "posting doc_len 80, the tool's is 81"
        assert f"tool {CREATE_ISSUE!r}, term index, term 'issue': {longer}" in problems
        assert any(problem.startswith("group 2 (mcp): stored total_len ") for problem in problems)


def test_a_record_edited_without_reindexing(real: ToolIndex) -> None:
    summary = scalar(real, "SELECT summary FROM tools WHERE name = :name", name=CREATE_ISSUE)
    with corrupted(
        real,
        "UPDATE tools SET summary = 'Open a ticket' WHERE name = :name",
        "UPDATE tools SET summary = :summary WHERE name = :name",
        name=CREATE_ISSUE,
        summary=summary,
    ):
        problems = verify(real).problems
        assert f"tool {CREATE_ISSUE!r}: stored content hash does not match its record" in problems
        for where in ("indexed terms", "term index"):
            assert (
                f"tool {CREATE_ISSUE!r}, {where}: posting of term 'ticket' is missing (its record gives tf 2)"
                in problems
            )
            changed = "stored tf 16, its record gives 14"
            assert f"tool {CREATE_ISSUE!r}, {where}, term 'issue': {changed}" in problems


# --- verify: the report ---------------------------------------------------------------------------


def test_more_checks_can_be_appended(index: ToolIndex) -> None:
    def sessions_replay(connection: Any, report: VerifyReport) -> None:
        report.count("sessions", 2)
        report.problem("session 's-1': replaying its log gives ['a'], stored ['a', 'b']")

    report = verify(index, checks=[*CHECKS, sessions_replay])
    assert (report.ok, report.checked["sessions"]) == (False, 2)
    assert report.problems == ["session 's-1': replaying its log gives ['a'], stored ['a', 'b']"]


def test_problems_beyond_the_cap_are_counted(index: ToolIndex) -> None:
    cap = verify_module.MAX_PROBLEMS
    index.upsert_tools(generated_catalog(cap + 1))
    execute(index, "UPDATE tools SET indexed_terms = :empty", empty=b"")  # a problem per tool at least
    report = verify(index)
    assert len(report.problems) == cap and report.omitted > 0
    assert report.found == cap + report.omitted and not report.ok


# --- verify's whole-map comparison against the posting-by-posting one (no ../shared needed) -------

POSTING_FIELDS = st.tuples(
    st.integers(1, 6), st.sampled_from([1, 2]), st.integers(1, 4), st.sampled_from([80, 81])
)


@settings(max_examples=examples(300), deadline=None)
@given(
    listed=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4)), max_size=6),
    held=st.lists(POSTING_FIELDS, max_size=6),
)
def test_term_maps_agree_with_the_postings_they_summarize(
    listed: list[tuple[int, int]], held: list[tuple[int, int, int, int]]
) -> None:
    """``terms_listed``/``terms_held`` (what verify compares first) say a tool is sound exactly
    when its postings, taken one by one, are: no term twice, the tool's group and length."""
    tool = StoredTool(1, "t", "t", "", "", "builtin", None, None, [], None, "discoverable", 2, 80)
    texts = {term_id: f"term{term_id}" for term_id in range(1, 6)}  # id 6 has no terms row
    audited = audit.AuditedTool(
        tool,
        "hash",
        ([term_id for term_id, _ in listed], [tf for _, tf in listed]),
        ([p[0] for p in held], [p[1] for p in held], [p[2] for p in held], [p[3] for p in held]),
        texts,
    )
    by_one = {p.term: p.tf for p in audited.postings}
    assert audited.terms_listed() == (by_one if len(by_one) == len(listed) else None)
    held_by_one = {p.term: p.tf for p in audited.indexed}
    sound = len(held_by_one) == len(held) and all(p.grp == 2 and p.doc_len == 80 for p in audited.indexed)
    assert audited.terms_held() == (held_by_one if sound else None)


def test_postings_at_odds_with_their_tool_are_named(index: ToolIndex) -> None:
    index.upsert_tools(generated_catalog(40, seed=5))
    tool = index.tools()[7]
    terms = indexed_tool(ToolRecord.model_validate(tool.as_record())).terms
    term, tf = sorted(terms.items())[0]
    with index.store.engine.connect() as connection:
        others = connection.execute(text("SELECT id, text FROM terms ORDER BY id")).all()
    other_id, other = next((term_id, text) for term_id, text in others if text not in terms)
    place = {"grp": tool.grp, "tool": scalar(index, "SELECT id FROM tools WHERE name = :n", n=tool.name)}
    wrong = (
        "INSERT INTO posting_delta (term_id, grp, tool_id, tf, doc_len) "
        "VALUES (:term, :grp, :tool, :tf, :len)"
    )
    undo = "DELETE FROM posting_delta WHERE term_id = :term AND grp = :grp AND tool_id = :tool"
    where = f"tool {tool.name!r}, term index"
    term_id = ids(index, tool.name, term)["term"]
    with corrupted(index, wrong, undo, term=term_id, tf=tf, len=tool.doc_len + 1, **place):
        expected = f"{where}, term {term!r}: posting doc_len {tool.doc_len + 1}, the tool's is {tool.doc_len}"
        assert expected in verify(index).problems
    with corrupted(index, wrong, undo, term=other_id, tf=3, len=tool.doc_len, **place):
        problems = verify(index).problems
        assert f"{where}: posting of term {other!r} (tf 3) is not in its record" in problems
        assert not any(p.startswith(f"tool {tool.name!r}, indexed terms") for p in problems)


# --- more kinds of damage, on a small catalog (no ../shared needed) --------------------------------


@pytest.fixture
def small(index: ToolIndex) -> ToolIndex:
    index.upsert_tools(generated_catalog(30, seed=11))
    assert verify(index).problems == []
    return index


def first_tool(index: ToolIndex) -> StoredTool:
    return index.tools()[0]


def test_a_term_stats_row_for_a_group_without_postings(small: ToolIndex) -> None:
    term_id = scalar(small, "SELECT MIN(id) FROM terms")
    term = scalar(small, "SELECT text FROM terms WHERE id = :term", term=term_id)
    with corrupted(
        small,
        "INSERT INTO term_stats (term_id, grp, df, max_tf) VALUES (:term, 0, 3, 1)",
        "DELETE FROM term_stats WHERE term_id = :term AND grp = 0",
        term=term_id,
    ):
        assert verify(small).problems == [
            f"term {term!r} in group 0: term_stats holds df 3, max_tf 1 but it has no postings"
        ]


def test_a_missing_group_stats_row(small: ToolIndex) -> None:
    count = scalar(small, "SELECT doc_count FROM group_stats WHERE grp = 2")
    total = scalar(small, "SELECT total_len FROM group_stats WHERE grp = 2")
    with corrupted(
        small,
        "DELETE FROM group_stats WHERE grp = 2",
        "INSERT INTO group_stats (grp, doc_count, total_len) VALUES (2, :count, :total)",
        count=count,
        total=total,
    ):
        assert verify(small).problems == [
            f"group 2 (mcp): no group_stats row (the catalog has {count} tools there)"
        ]


def test_a_tool_moved_to_another_group(small: ToolIndex) -> None:
    tool = first_tool(small)
    with corrupted(
        small,
        "UPDATE tools SET grp = 1 WHERE name = :n",
        "UPDATE tools SET grp = 2 WHERE name = :n",
        n=tool.name,
    ):
        problems = verify(small).problems
        assert f"tool {tool.name!r}: stored group 1, its record belongs to group 2" in problems


def test_a_stored_record_that_is_no_longer_valid(small: ToolIndex) -> None:
    tool = first_tool(small)
    with corrupted(
        small,
        "UPDATE tools SET load_mode = 'sometimes' WHERE name = :n",
        "UPDATE tools SET load_mode = :mode WHERE name = :n",
        n=tool.name,
        mode=tool.load_mode,
    ):
        problems = verify(small).problems
        assert len(problems) == 1
        assert problems[0].startswith(f"tool {tool.name!r}: its stored record is invalid: load_mode: ")


def test_postings_of_a_tool_that_is_not_in_the_catalog(small: ToolIndex) -> None:
    term_id = scalar(small, "SELECT MIN(id) FROM terms")
    with corrupted(
        small,
        "INSERT INTO posting_delta (term_id, grp, tool_id, tf, doc_len) VALUES (:term, 2, 999999, 1, 5)",
        "DELETE FROM posting_delta WHERE tool_id = 999999",
        term=term_id,
    ):
        assert "1 postings belong to no catalog tool" in verify(small).problems


def test_a_session_selecting_a_tool_twice_or_missing_a_log_entry(small: ToolIndex) -> None:
    session = small.session("v", discovery_mode="mcp-only")
    activated = session.search_tool.execute("c1", {"query": small.tools()[0].name, "limit": 2}).details[
        "activated_tools"
    ]
    assert len(activated) == 2 and verify(small).problems == []
    stored = scalar(small, "SELECT selected FROM sessions WHERE id = 'v'")
    doubled = json.dumps([*activated, activated[0]])
    with corrupted(
        small,
        "UPDATE sessions SET selected = :doubled WHERE id = 'v'",
        "UPDATE sessions SET selected = :stored WHERE id = 'v'",
        doubled=doubled,
        stored=stored if isinstance(stored, str) else json.dumps(stored),
    ):
        assert (
            f"session 'v': a tool is selected twice: {[*activated, activated[0]]}" in verify(small).problems
        )
    last = scalar(small, "SELECT MAX(seq) FROM session_events WHERE session_id = 'v'")
    with corrupted(
        small,
        "UPDATE session_events SET seq = :gap WHERE session_id = 'v' AND seq = :last",
        "UPDATE session_events SET seq = :last WHERE session_id = 'v' AND seq = :gap",
        last=last,
        gap=last + 5,
    ):
        assert verify(small).problems == ["session 'v': its log has gaps in its sequence numbers"]


@pytest.mark.parametrize(
    "query", ["the a", "create a pull request", "list the files of a directory", "get the weather for a city"]
)
@pytest.mark.parametrize("mode", ["all", "mcp-only"])
def test_weak_matches_are_those_whose_matched_terms_are_all_in_half_the_corpus(
    real: ToolIndex, query: str, mode: str
) -> None:
    """The display's weak flag, against explain's own per-term df on the real catalog: "the",
    "a", "of", "for" are stop words, "a" alone is also in more than half of its tools."""
    names = [hit.name for hit in real.search(query, 50, mode=mode)]
    expected = set()
    for name in names:
        explanation = explain(real, query, name, mode=mode)
        matched = [term for term in explanation.terms if term.tf > 0]
        if all(term.term in STOP_WORDS or 2 * term.df >= explanation.n_docs for term in matched):
            expected.add(name)
    assert weak_matches(real, query, names, mode=mode) == expected
    if query == "the a":
        assert expected == set(names)  # nothing but filler to match
    else:
        assert names[0] not in expected
    assert weak_matches(real, query, ["no_such_tool"], mode=mode) == set()
