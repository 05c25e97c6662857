"""Analyzer versions: an index records the version of the analyzer its terms were made with, and
one made by another version is refused (search, explain, import, open, verify) until reindexed,
never searched with terms of another kind. The digest pins what this version of ``enhanced`` makes,
so a change to its terms cannot ship without a new version."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from discovery import ToolIndex
from discovery._diagnostics.explain import explain
from discovery._diagnostics.verify import verify
from discovery._index import reindexed
from discovery._params import stored_analyzer_named
from discovery._text import enhanced
from discovery._text.analyzers import REFERENCE, find_analyzer, stored_version
from discovery.errors import AnalyzerOutdated, UnknownAnalyzer
from tests.catalogs import NOUNS, VERBS, WORDS, generated_catalog
from tests.test_cli import fails, ok, run

ENHANCED_DIGESTS = {2: "9ce0e2a3dbecbf9b84f167dcdf8d029ee3e53146cadb1bc20ca4767f03bf93f7"}
"""Per version of ``enhanced``, the digest of the terms it makes of ``PROBE``."""

PROBE = [
    *VERBS,
    *NOUNS,
    *WORDS,
    *enhanced.SNOWBALL_ENGLISH_STOP_WORDS.split(),
    "Scheduling the schedules",
    "running runner runs",
    "ponies' généralement",
    "façade Ünïcode",
    "getUserID HTTPServer2 snake_case_name",
    "数据库 查询",
    "the the",
    "who",
    "12 345 6.7",
    "a tool to read files",
    "which tools",
]


def terms_digest() -> str:
    lines = [" ".join(enhanced.document_tokens(t)) + "\t" + " ".join(enhanced.query_tokens(t)) for t in PROBE]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def test_the_enhanced_terms_are_those_of_its_version() -> None:
    assert terms_digest() == ENHANCED_DIGESTS.get(enhanced.VERSION), (
        "the enhanced analyzer makes other terms than its version recorded: raise enhanced.VERSION "
        "(indexes built before are then refused until reindexed) and record the new digest here"
    )


def test_stored_values_name_the_version() -> None:
    assert REFERENCE.stored == "reference"
    analyzer = find_analyzer("enhanced")
    assert analyzer is not None and (analyzer.version, analyzer.stored) == (enhanced.VERSION, CURRENT)
    assert stored_version("enhanced") == ("enhanced", 1)
    assert stored_version("enhanced/2") == ("enhanced", 2)
    assert stored_version("enhanced/17") == ("enhanced", 17)
    for odd in (
        "enhanced/",
        "enhanced/0",
        "enhanced/02",
        "enhanced/x",
        "enhanced/-1",
        "enhanced/²",
        "enhanced/2/3",
    ):
        assert stored_version(odd) == ("enhanced", None), odd
    with pytest.raises(UnknownAnalyzer):
        stored_analyzer_named("porter/2")
    with pytest.raises(AnalyzerOutdated, match="an unknown version \\('enhanced/x'\\)"):
        stored_analyzer_named("enhanced/x")


CURRENT = f"enhanced/{enhanced.VERSION}"
"""How a catalog records this release's ``enhanced`` (version 1 was recorded by its name alone)."""


def stored(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            value: str = connection.execute(text("SELECT analyzer FROM catalog_state")).scalar_one()
            return value
    finally:
        engine.dispose()


def test_an_index_of_an_older_version_is_refused_until_reindexed(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = generated_catalog(40, seed=7)
    query = "create messages for the issues"
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        index.upsert_tools(catalog)
        before = [(hit.name, hit.score) for hit in index.search(query, 10)]
        name = before[0][0]
    assert stored(db_url) == CURRENT
    made, later = enhanced.VERSION, enhanced.VERSION + 1

    monkeypatch.setattr(enhanced, "VERSION", later)  # a release whose enhanced makes other terms
    reindex = "run `tool-index reindex --analyzer enhanced` to rebuild it"
    message = (
        f"indexed with version {made} of the 'enhanced' analyzer, whose terms differ from this "
        f"tool-index's version {later}; {reindex}"
    )
    with ToolIndex.open(db_url) as index:
        with pytest.raises(AnalyzerOutdated, match=f"version {made} of the 'enhanced' analyzer") as raised:
            index.search(query, 10)
        assert message in str(raised.value)
        assert (raised.value.version, raised.value.current) == (made, later)
        with pytest.raises(AnalyzerOutdated):
            explain(index, query, name)
        with pytest.raises(AnalyzerOutdated):
            index.upsert_tools(generated_catalog(3, seed=8))
        assert verify(index).problems == [f"catalog_state: the catalog is {message}"]
    with pytest.raises(AnalyzerOutdated, match=f"version {made} of the 'enhanced' analyzer"):
        ToolIndex.open(db_url, analyzer="enhanced")
    assert stored(db_url) == CURRENT  # nothing was written

    with ToolIndex.open(db_url) as index:
        assert index.reindex("enhanced") == len(catalog)
        assert stored(db_url) == f"enhanced/{later}"
        assert index.analyzer == "enhanced"
        assert [(hit.name, hit.score) for hit in index.search(query, 10)] == before
        assert verify(index).ok
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        assert index.stats()["analyzer"] == f"enhanced/{later}"


def test_an_index_of_a_newer_version_is_refused(db_url: str) -> None:
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        index.upsert_tools(generated_catalog(10, seed=3))
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE catalog_state SET analyzer = 'enhanced/9', generation = generation + 1")
        )
    engine.dispose()
    with ToolIndex.open(db_url) as index:
        with pytest.raises(
            AnalyzerOutdated, match="version 9 of the 'enhanced' analyzer, from a newer tool-index"
        ):
            index.search("messages", 5)
        index.reindex("enhanced")
        assert index.search("messages", 5)
    assert stored(db_url) == CURRENT


def test_an_empty_catalog_of_another_version_takes_this_one(db_url: str) -> None:
    with ToolIndex.open(db_url, analyzer="enhanced"):
        pass
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE catalog_state SET analyzer = 'enhanced/9', generation = generation + 1")
        )
    engine.dispose()
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        assert index.analyzer == "enhanced"
    assert stored(db_url) == CURRENT


def test_cli_says_to_reindex_an_older_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'tools.db'}"
    with ToolIndex.open(url, analyzer="enhanced") as index:
        index.upsert_tools(generated_catalog(12, seed=5))
    made = enhanced.VERSION
    monkeypatch.setattr(enhanced, "VERSION", made + 1)
    error = fails(url, "search", "messages")
    assert error.startswith(f"Error: the catalog is indexed with version {made} of the 'enhanced' analyzer")
    assert "tool-index reindex --analyzer enhanced" in error
    assert f"reindexed 12 tools with the enhanced analyzer (was {CURRENT})" in ok(
        url, "reindex", "--analyzer", "enhanced"
    )
    assert ok(url, "search", "messages")


def test_sync_rebuilds_an_older_version_of_its_own_file_not_a_shared_server(
    db_url: str, tmp_path: Path
) -> None:
    """A gateway's SQLite file is its own: ``sync`` (and ``serve``) rebuild it once, said on stderr.
    A PostgreSQL catalog may be shared with hosts on older releases: left to ``reindex``."""
    with ToolIndex.open(db_url, analyzer="enhanced") as index:
        index.upsert_tools(generated_catalog(12, seed=5))
    engine = create_engine(db_url)
    with engine.begin() as connection:  # as version 1 recorded itself
        connection.execute(
            text("UPDATE catalog_state SET analyzer = 'enhanced', generation = generation + 1")
        )
    engine.dispose()
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}', encoding="utf-8")
    result = run(db_url, "sync", "--config", str(config))
    if not db_url.startswith("sqlite"):
        assert result.exit_code == 1 and "version 1 of the 'enhanced' analyzer" in result.stderr
        assert stored(db_url) == "enhanced"
        return
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"Reindexed 12 tools with version {enhanced.VERSION} of the enhanced analyzer "
        "(the catalog was made with version 1)\n"
    )
    assert stored(db_url) == CURRENT
    with ToolIndex.open(db_url) as index:  # a second process finds it rebuilt under the lock
        assert reindexed(index.store, "enhanced", if_outdated=True) is None
        assert verify(index).ok
    assert run(db_url, "sync", "--config", str(config)).stderr == ""
