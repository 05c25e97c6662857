"""The analyzer as a property of an index: chosen when a catalog is created, changed by
``reindex`` in one transaction, used by every search, explain and verify, on both backends.

The ``enhanced`` search is checked against a brute-force BM25+ written here from contract §4, over
terms the analyzer's own functions make (those are pinned in ``test_quality_enhanced``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from discovery import ToolIndex
from discovery._diagnostics.explain import explain
from discovery._diagnostics.verify import verify
from discovery._text import enhanced
from discovery.errors import AnalyzerMismatch, UnknownAnalyzer
from store import _migrate as migrate
from tests.catalogs import generated_catalog
from tests.examples import examples
from tests.test_ranking import Hit, reference_ranking

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "discovery" / "examples" / "demo-catalog.jsonl"


def enhanced_ranking(catalog: list[dict[str, Any]], query: str, *, mode: str = "all") -> list[Hit]:
    """contract §4's formula, evaluated in its order, over the enhanced analyzer's terms."""
    return reference_ranking(
        catalog, query, mode=mode, analyzer=(enhanced.document_tokens, enhanced.query_tokens)
    )


def searched(index: ToolIndex, query: str, *, mode: str = "all") -> list[Hit]:
    return [(hit.name, hit.score) for hit in index.search(query, limit=10_000, mode=mode)]


# Inflections and stop words, so that stems merge terms and queries lose their filler.
WORDS = [
    "issue",
    "issues",
    "Issuing",
    "schedule",
    "scheduling",
    "Schedules",
    "message",
    "messages",
    "posted",
    "posting",
    "createIssues",
    "listPullRequests",
    "the",
    "for",
    "a",
    "you",
]
NAMES = [
    "notes",
    "grep",
    "find_messages",
    "schedule_event",
    "tool1",
    "read",
    *(
        f"mcp__{server}__{tool}"
        for server in ("github", "cal")
        for tool in ("create_issue", "post", "listEvents")
    ),
]
TEXT = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)
QUERIES = st.lists(st.sampled_from([*WORDS, "can", "me", "nothing", "2"]), min_size=1, max_size=6).map(
    " ".join
)


@st.composite
def catalogs(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=10))
    records = []
    for name in names:
        record: dict[str, Any] = {
            "name": name,
            "description": draw(TEXT),
            "schema_keys": sorted(draw(st.sets(st.sampled_from(["issue_ids", "message", "scheduled_at"])))),
            "load_mode": draw(st.sampled_from(["discoverable", "discoverable", "none", "essential"])),
        }
        if draw(st.booleans()):
            record["label"] = draw(TEXT)
        if name.startswith("mcp__"):
            _, server, tool = name.split("__")
            record.update(server_name=server, mcp_tool_name=tool, label=f"{server}/{tool}")
        records.append(record)
    return records


RANDOM = settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def enhanced_index(db_url: str) -> Iterator[ToolIndex]:
    opened = ToolIndex.open(db_url, analyzer="enhanced")
    try:
        yield opened
    finally:
        opened.close()


@RANDOM
@given(
    catalog=catalogs(),
    queries=st.lists(QUERIES, min_size=1, max_size=3),
    mode=st.sampled_from(["all", "mcp-only"]),
)
def test_enhanced_search_equals_the_brute_force_reference(
    enhanced_index: ToolIndex, catalog: list[dict[str, Any]], queries: list[str], mode: str
) -> None:
    enhanced_index.upsert_tools(catalog, replace=True)
    for query in queries:
        assert searched(enhanced_index, query, mode=mode) == enhanced_ranking(catalog, query, mode=mode)


def test_inflections_meet_only_under_enhanced(db_url: str) -> None:
    records = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        index.upsert_tools(records)
        assert index.analyzer == "enhanced" and index.stats()["analyzer"] == f"enhanced/{enhanced.VERSION}"
        hits = [name for name, _ in searched(index, "scheduling meetings")]
        assert hits[:2] == ["mcp__calendar__create_event", "mcp__calendar__find_free_slots"]
        index.reindex("reference")
        assert index.analyzer == "reference" and searched(index, "scheduling meetings") == []


def stats_without_generation(index: ToolIndex) -> dict[str, Any]:
    return {key: value for key, value in index.stats().items() if key != "generation"}


QUERY_SAMPLE = ["create an issue", "post the messages", "scheduling", "list pull requests", "files for me"]


@pytest.mark.slow
def test_reindex_round_trip_equals_fresh_imports(tmp_path: Path, db_url: str) -> None:
    catalog = generated_catalog(300, seed=11)
    fresh = {}
    for name in ("reference", "enhanced"):
        with ToolIndex.open(f"sqlite:///{tmp_path / name}.db", analyzer=name) as index:
            index.upsert_tools(catalog)
            fresh[name] = (stats_without_generation(index), [searched(index, q) for q in QUERY_SAMPLE])
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(catalog)
        before = index.tools()
        for name in ("enhanced", "reference", "enhanced"):
            assert index.reindex(name) == len(catalog)
            assert (stats_without_generation(index), [searched(index, q) for q in QUERY_SAMPLE]) == fresh[
                name
            ]
            report = verify(index)
            assert report.ok, report.problems
        assert index.tools() == before  # same rows, same ids
        # A record imported again is unchanged: a reindex keeps each record's digest.
        assert index.upsert_tools(catalog).counts()["unchanged"] == len(catalog)


def test_another_process_sees_the_new_analyzer(sqlite_url: str) -> None:
    with ToolIndex.open(sqlite_url) as reader, ToolIndex.open(sqlite_url) as writer:
        writer.upsert_tools(generated_catalog(50))
        assert searched(reader, "issues") == []  # the reference tokens hold only "issue"
        writer.reindex("enhanced")
        assert searched(reader, "issues") == searched(writer, "issue") != []


def test_explain_and_sessions_use_the_index_analyzer(enhanced_index: ToolIndex) -> None:
    records = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    enhanced_index.upsert_tools(records)
    expected = searched(enhanced_index, "scheduling meetings")
    top, score = expected[0]
    explained = explain(enhanced_index, "scheduling meetings", top)
    assert [term.term for term in explained.terms] == ["schedul", "meet"]
    assert sum(term.contribution for term in explained.terms) == pytest.approx(score, rel=1e-12)
    session = enhanced_index.session("s", discovery_mode="all")
    assert [hit.name for hit in session.preview("scheduling meetings", 3)] == [n for n, _ in expected[:3]]
    details = session.search_tool.execute("c1", {"query": "scheduling meetings", "limit": 3}).details
    assert [tool["name"] for tool in details["tools"]] == [n for n, _ in expected[:3]]


def test_an_empty_catalog_takes_the_analyzer_asked_for(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        assert index.analyzer == "reference"
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        assert index.analyzer == "enhanced"
    with ToolIndex.open(db_url) as index:  # no analyzer: whatever the catalog has
        assert index.analyzer == "enhanced"


def test_opening_a_catalog_with_another_analyzer_is_refused(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(generated_catalog(20))
        before = index.stats()
    with pytest.raises(AnalyzerMismatch, match="'reference' analyzer, not 'enhanced'") as raised:
        ToolIndex.open(db_url, analyzer="enhanced")
    assert (raised.value.stored, raised.value.requested) == ("reference", "enhanced")
    with ToolIndex.open(db_url, analyzer="reference") as index:
        assert index.stats() == before


def test_an_unknown_analyzer_opens_nothing(tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(
        UnknownAnalyzer, match="unknown analyzer 'stemmed'; the analyzers are reference, enhanced"
    ):
        ToolIndex.open(f"sqlite:///{path}", analyzer="stemmed")
    assert not path.exists()
    with ToolIndex.open(f"sqlite:///{path}") as index:
        index.upsert_tools(generated_catalog(5))
        with pytest.raises(UnknownAnalyzer):
            index.reindex("Enhanced")
        assert index.analyzer == "reference"


def test_verify_checks_postings_against_the_index_analyzer(sqlite_url: str) -> None:
    with ToolIndex.open(sqlite_url, analyzer="enhanced") as index:
        index.upsert_tools(generated_catalog(30))
        assert verify(index).ok
    # The catalog claims the reference analyzer while its postings are stems: verify says so.
    engine = create_engine(sqlite_url)
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE catalog_state SET analyzer = 'reference', generation = generation + 1")
        )
    engine.dispose()
    with ToolIndex.open(sqlite_url) as index:
        report = verify(index)
        assert not report.ok and any("indexed terms" in problem for problem in report.problems)
    with create_engine(sqlite_url).begin() as connection:
        connection.execute(text("UPDATE catalog_state SET analyzer = 'porter'"))
    with ToolIndex.open(sqlite_url) as index:
        assert verify(index).problems == ["catalog_state: analyzer 'porter' is not one this tool-index knows"]


def test_databases_before_the_analyzer_column_are_reference(empty_db_url: str) -> None:
    engine = create_engine(empty_db_url)
    try:
        migrate.upgrade(engine, "0003")
        migrate.upgrade(engine)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT analyzer FROM catalog_state")).scalar() == "reference"
    finally:
        engine.dispose()


KILLED_REINDEX = textwrap.dedent(
    """
    import os, sys
    import store._aggregates
    from discovery import ToolIndex

    def die(*_args, **_kwargs):  # every posting is written by now; the aggregates are next
        os._exit(9)

    store._aggregates.apply_aggregates = die  # looked up there when the aggregates are applied
    ToolIndex.open(sys.argv[1]).reindex("enhanced")
    """
)


@pytest.mark.slow
def test_a_reindex_killed_midway_leaves_the_old_index(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(generated_catalog(200))
        before = (index.stats(), [searched(index, q) for q in QUERY_SAMPLE])
    done = subprocess.run(
        [sys.executable, "-c", KILLED_REINDEX, db_url],
        cwd=REPO,
        timeout=120,
        check=False,
        capture_output=True,
    )
    assert done.returncode == 9, done.stderr
    with ToolIndex.open(db_url) as index:
        assert (index.stats(), [searched(index, q) for q in QUERY_SAMPLE]) == before
        assert verify(index).ok


# the command line -------------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "discovery.cli._main", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.slow
def test_cli_unknown_analyzer_names_are_one_error(tmp_path: Path) -> None:
    db = str(tmp_path / "tools.db")
    for args in (["import", "--analyzer", "snowball", "--example"], ["reindex", "--analyzer", "snowball"]):
        done = cli("--db", db, *args)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == "Error: unknown analyzer 'snowball'; the analyzers are reference, enhanced\n"
        assert not Path(db).exists()
    assert cli("--db", db, "import", "--example").returncode == 0
    done = cli("--db", db, "eval", "--analyzer", "reference,snowball", str(tmp_path / "absent.jsonl"))
    assert done.returncode == 1 and done.stderr.startswith("Error: unknown analyzer 'snowball'")


@pytest.mark.slow
def test_cli_analyzer_lifecycle(tmp_path: Path) -> None:
    db = str(tmp_path / "tools.db")
    assert cli("--db", db, "import", "--analyzer", "enhanced", "--example").returncode == 0
    assert json.loads(cli("--db", db, "stats", "--json").stdout)["analyzer"] == f"enhanced/{enhanced.VERSION}"
    assert "analyzer:   enhanced" in cli("--db", db, "stats").stdout
    refused = cli("--db", db, "import", "--analyzer", "reference", "--example")
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: the catalog at ")
    assert "'enhanced' analyzer, not 'reference'" in refused.stderr
    assert "tool-index reindex --analyzer reference" in refused.stderr
    again = cli("--db", db, "import", "--example")  # no --analyzer: the catalog's own
    assert again.returncode == 0 and "unchanged" in again.stdout
    done = cli("--db", db, "reindex", "--analyzer", "reference")
    assert (done.returncode, done.stdout) == (
        0,
        f"reindexed 26 tools with the reference analyzer (was enhanced/{enhanced.VERSION})\n",
    )
    assert cli("--db", db, "verify").returncode == 0
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"query": "scheduling meetings", "relevant": ["mcp__calendar__create_event"]}) + "\n",
        encoding="utf-8",
    )
    compared = cli(
        "--db", db, "eval", str(queries), "--k", "1,5", "--analyzer", "reference,enhanced", "--json"
    )
    assert compared.returncode == 0, compared.stderr
    results = json.loads(compared.stdout)["analyzers"]
    assert (results["reference"]["recall@5"], results["enhanced"]["recall@5"]) == (0.0, 1.0)
    assert json.loads(cli("--db", db, "stats", "--json").stdout)["analyzer"] == "reference"  # eval only read
