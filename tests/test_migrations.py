"""Migrations, tested the pytest-alembic way on every backend: one head, upgrade from empty, models
in sync with the migrations, down to base and back, and the way ``ensure_schema`` treats each
state a database can be in (contract §9: one clear error, nothing modified)."""

from __future__ import annotations

import importlib
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import JSON, Engine, bindparam, inspect, text

from discovery import ToolIndex
from discovery._catalog.indexing import content_hash, indexed_tool
from discovery._catalog.models import ToolRecord
from discovery._diagnostics.verify import verify
from store import Reader
from store import _migrate as migrate
from store import _postings as packed_postings
from store._digests import json_digest
from store._engine import make_engine
from store._schema import metadata
from store.errors import DatabaseUnavailable, SchemaOutdated, SchemaTooNew
from tests.catalogs import WORKED_EXAMPLE, generated_catalog
from tests.conftest import REPO
from tests.nibbles import unpack_values

MODEL_TABLES = set(metadata.tables)


@pytest.fixture
def engine(empty_db_url: str) -> Iterator[Engine]:
    """An engine on an empty database."""
    created = make_engine(empty_db_url)
    try:
        yield created
    finally:
        created.dispose()


def tables(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(inspect(connection).get_table_names())


def revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return migrate.current_revision(connection)


def set_revision(engine: Engine, value: str) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": value})


def scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(migrate.alembic_config())


def revisions_from_base() -> list[str]:
    return [script.revision for script in reversed(list(scripts().walk_revisions()))]


def test_single_head_which_the_models_name() -> None:
    assert scripts().get_heads() == [migrate.HEAD_REVISION]
    assert migrate.head_revision() == migrate.HEAD_REVISION
    assert migrate.known_revisions() == set(revisions_from_base())


def test_revisions_form_one_chain_from_base() -> None:
    chain = revisions_from_base()
    assert scripts().get_revision(chain[0]).down_revision is None
    for previous, current in itertools.pairwise(chain):
        assert scripts().get_revision(current).down_revision == previous


def test_upgrade_from_empty(engine: Engine) -> None:
    assert revision(engine) is None
    migrate.upgrade(engine)
    assert revision(engine) == migrate.HEAD_REVISION
    assert tables(engine) == MODEL_TABLES | {"alembic_version"}
    with engine.connect() as connection:
        assert connection.execute(text("SELECT id, generation FROM catalog_state")).all() == [(1, 0)]
        rows = connection.execute(text("SELECT grp, doc_count, total_len FROM group_stats ORDER BY grp"))
        assert rows.all() == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]


def test_models_match_migrations(engine: Engine) -> None:
    migrate.upgrade(engine)
    assert migrate.pending_model_changes(engine) == []


def test_pending_model_changes_are_told_in_words(engine: Engine) -> None:
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("DROP INDEX ix_tools_server_name"))
        connection.execute(text("CREATE INDEX ix_tools_label ON tools (label)"))
        connection.execute(text("ALTER TABLE tools ADD COLUMN notes TEXT"))
        connection.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY)"))
    expected = [
        "the database has table invoices, which the models do not",
        "the database lacks index ix_tools_server_name on tools",
        "the database has index ix_tools_label on tools, which the models do not",
        "the database has column tools.notes, which the models do not",
    ]
    if engine.dialect.name == "postgresql":  # SQLite cannot alter a column in place
        with engine.begin() as connection:
            connection.execute(text("ALTER TABLE tools ALTER COLUMN label DROP NOT NULL"))
        expected.append("column tools.label: nullable is True in the database, False in the models")
    assert sorted(migrate.pending_model_changes(engine)) == sorted(expected)


def test_each_kind_of_difference_has_words() -> None:
    tools = metadata.tables["tools"]
    unique = next(c for c in metadata.tables["terms"].constraints if c.name == "uq_terms_text")
    changes: list[Any] = [
        ("add_table", tools),
        ("remove_constraint", unique),
        ("add_column", None, "tools", tools.c.label),
        [
            ("modify_type", None, "tools", "grp", {}, "TEXT", "INTEGER"),
            ("modify_nullable", None, "tools", "grp", {}, True, False),
        ],
    ]
    assert [migrate.describe_change(change) for change in changes] == [
        "the database lacks table tools",
        "the database has constraint uq_terms_text on terms, which the models do not",
        "the database lacks column tools.label",
        "column tools.grp: type is TEXT in the database, INTEGER in the models; "
        "column tools.grp: nullable is True in the database, False in the models",
    ]


def test_downgrade_to_base_and_upgrade_back(engine: Engine) -> None:
    migrate.upgrade(engine)
    migrate.downgrade(engine, "base")
    assert revision(engine) is None
    assert tables(engine) <= {"alembic_version"}
    migrate.upgrade(engine)
    assert revision(engine) == migrate.HEAD_REVISION
    assert migrate.pending_model_changes(engine) == []


def test_each_revision_steps_down_and_up_again(engine: Engine) -> None:
    previous = "base"
    for current in revisions_from_base():
        migrate.upgrade(engine, current)
        assert revision(engine) == current
        migrate.downgrade(engine, previous)
        migrate.upgrade(engine, current)
        assert revision(engine) == current
        previous = current


def test_a_migrated_database_holds_a_catalog_that_verifies(empty_db_url: str) -> None:
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
        assert verify(index).ok
    with ToolIndex.open(empty_db_url, upgrade=False) as reopened:
        assert [hit.name for hit in reopened.search("github", limit=2)] == [
            "mcp__github_create_issue",
            "mcp__github_list_pull_requests",
        ]


# --- ensure_schema, state by state ---------------------------------------------------------------


def test_ensure_schema_creates_an_empty_database(engine: Engine) -> None:
    migrate.ensure_schema(engine, upgrade_if_old=False)
    assert revision(engine) == migrate.HEAD_REVISION
    assert tables(engine) == MODEL_TABLES | {"alembic_version"}


OPEN_TWICE = """
import sys
from discovery import ToolIndex
for upgrade in (True, False):
    ToolIndex.open(sys.argv[1], upgrade=upgrade).close()
print(sorted(name for name in sys.modules if name.partition(".")[0] == "alembic"))
"""


def test_ensure_schema_leaves_a_current_database_alone(empty_db_url: str, engine: Engine) -> None:
    # A process that opens a database at head, allowed to upgrade it or not, never runs alembic
    # (it is not even imported), and the database is left as it was.
    migrate.upgrade(engine)
    before = (revision(engine), tables(engine))
    opened = subprocess.run(
        [sys.executable, "-c", OPEN_TWICE, empty_db_url],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert (opened.returncode, opened.stdout, opened.stderr) == (0, "[]\n", "")
    assert (revision(engine), tables(engine)) == before
    assert migrate.pending_model_changes(engine) == []


def test_a_database_at_base_counts_as_empty(engine: Engine) -> None:
    # Downgraded to base: alembic_version exists (empty), nothing else. Creating the schema is
    # not an upgrade, so even upgrade_if_old=False creates it.
    migrate.upgrade(engine)
    migrate.downgrade(engine, "base")
    assert "alembic_version" in tables(engine)
    migrate.ensure_schema(engine, upgrade_if_old=False)
    assert revision(engine) == migrate.HEAD_REVISION


def test_a_newer_schema_is_refused_and_left_untouched(empty_db_url: str, engine: Engine) -> None:
    migrate.upgrade(engine)
    set_revision(engine, "9999_from_the_future")
    before = tables(engine)
    with pytest.raises(SchemaTooNew) as raised:
        ToolIndex.open(empty_db_url)
    assert str(raised.value) == (
        "the database schema is at revision 9999_from_the_future, newer than this tool-index "
        f"(head {migrate.HEAD_REVISION}); upgrade tool-index"
    )
    assert (revision(engine), tables(engine)) == ("9999_from_the_future", before)


def test_foreign_tables_are_refused_and_left_untouched(empty_db_url: str, engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)"))
    with pytest.raises(DatabaseUnavailable) as raised:
        ToolIndex.open(empty_db_url)
    assert str(raised.value) == (
        "the database holds tables but no tool-index schema revision; "
        "point --db at a tool-index database or an empty one"
    )
    assert tables(engine) == {"invoices"}


@pytest.fixture
def older_schema(engine: Engine) -> Engine:
    """A database one revision behind head."""
    migrate.upgrade(engine, revisions_from_base()[-2])
    return engine


def test_an_older_schema_without_upgrade_is_refused(older_schema: Engine, empty_db_url: str) -> None:
    with pytest.raises(SchemaOutdated) as raised:
        migrate.ensure_schema(older_schema, upgrade_if_old=False)
    assert str(raised.value) == (
        f"the database schema is at revision {revision(older_schema)}, "
        f"this tool-index needs {migrate.HEAD_REVISION}; run `tool-index db upgrade`"
    )
    with pytest.raises(SchemaOutdated):
        ToolIndex.open(empty_db_url, upgrade=False)


def test_an_older_schema_is_upgraded_when_allowed(older_schema: Engine) -> None:
    migrate.ensure_schema(older_schema, upgrade_if_old=True)
    assert revision(older_schema) == migrate.HEAD_REVISION
    assert migrate.pending_model_changes(older_schema) == []


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are not the tables you are looking for\n" * 200)
    with pytest.raises(DatabaseUnavailable, match="is not a usable SQLite database"):
        ToolIndex.open(f"sqlite:///{path}")
    assert path.read_bytes() == b"these are not the tables you are looking for\n" * 200


# --- 0001 → 0002: row-per-posting to packed blocks, with data, both ways -----------------------

QUERIES = ["create an issue", "list pull requests", "post a message to a channel", "sync report", "zzz"]


def write_0001_catalog(engine: Engine, records: list[dict[str, Any]]) -> None:
    """Store ``records`` the way revision 0001 did: a row per posting, aggregates beside them,
    the digest of the record's standard JSON."""
    indexed = [indexed_tool(ToolRecord.model_validate(record)) for record in records]
    term_ids = {term: i for i, term in enumerate(sorted({t for tool in indexed for t in tool.terms}), 1)}
    postings: list[dict[str, int]] = []
    stats: dict[tuple[int, int], tuple[int, int]] = {}
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO terms (id, text) VALUES (:id, :text)"),
            [{"id": i, "text": term} for term, i in term_ids.items()],
        )
        for tool_id, ((tool, terms), record) in enumerate(zip(indexed, records, strict=True), 1):
            connection.execute(
                text(
                    "INSERT INTO tools (id, name, label, description, summary, source, server_name, "
                    "mcp_tool_name, schema_keys, input_schema, load_mode, grp, doc_len, content_hash) "
                    "VALUES (:id, :name, :label, :description, :summary, :source, :server_name, "
                    ":mcp_tool_name, :schema_keys, :input_schema, :load_mode, :grp, :doc_len, :content_hash)"
                ),
                {
                    "id": tool_id,
                    **{f: getattr(tool, f) for f in ("name", "label", "description", "summary", "source")},
                    **{f: getattr(tool, f) for f in ("server_name", "mcp_tool_name", "load_mode", "grp")},
                    "schema_keys": tool.schema_keys_json,
                    "input_schema": tool.input_schema_json,
                    "doc_len": tool.doc_len,
                    "content_hash": json_digest(ToolRecord.model_validate(record).model_dump()),
                },
            )
            for term, tf in terms.items():
                key = (term_ids[term], tool.grp)
                postings.append(
                    {"term": key[0], "grp": tool.grp, "tool": tool_id, "tf": tf, "len": tool.doc_len}
                )
                df, max_tf = stats.get(key, (0, 0))
                stats[key] = (df + 1, max(max_tf, tf))
        connection.execute(
            text(
                "INSERT INTO postings (term_id, grp, tool_id, tf, doc_len) "
                "VALUES (:term, :grp, :tool, :tf, :len)"
            ),
            postings,
        )
        connection.execute(
            text("INSERT INTO term_stats (term_id, grp, df, max_tf) VALUES (:term, :grp, :df, :max_tf)"),
            [{"term": t, "grp": g, "df": df, "max_tf": m} for (t, g), (df, m) in stats.items()],
        )
        for grp in (0, 1, 2):
            members = [tool for tool, _ in indexed if tool.grp == grp]
            connection.execute(
                text("UPDATE group_stats SET doc_count = :n, total_len = :total WHERE grp = :grp"),
                {"n": len(members), "total": sum(tool.doc_len for tool in members), "grp": grp},
            )
        connection.execute(text("UPDATE catalog_state SET generation = 1"))
        if connection.dialect.name == "postgresql":  # the ids above were given, not drawn
            for table in ("terms", "tools"):
                sequence = f"pg_get_serial_sequence('{table}', 'id')"
                connection.execute(text(f"SELECT setval({sequence}, (SELECT max(id) FROM {table}))"))


def posting_rows(engine: Engine) -> list[tuple[str, str, int, int, int]]:
    """The 0001 postings table as (term, tool, group, tf, length), sorted."""
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT terms.text, tools.name, postings.grp, postings.tf, postings.doc_len FROM postings "
                "JOIN terms ON terms.id = postings.term_id JOIN tools ON tools.id = postings.tool_id"
            )
        )
        return sorted((a, b, int(c), int(d), int(e)) for a, b, c, d, e in rows)


def answers(index: ToolIndex) -> list[list[tuple[str, float]]]:
    return [[(hit.name, hit.score) for hit in index.search(query, limit=10)] for query in QUERIES]


def test_upgrade_from_0001_keeps_the_catalog(empty_db_url: str, engine: Engine, tmp_path: Path) -> None:
    catalog = [*WORKED_EXAMPLE, *generated_catalog(120)]
    migrate.upgrade(engine, "0001")
    write_0001_catalog(engine, catalog)
    before = posting_rows(engine)
    migrate.upgrade(engine)
    with (
        ToolIndex.open(empty_db_url) as upgraded,
        ToolIndex.open(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh,
    ):
        fresh.upsert_tools(catalog)
        assert verify(upgraded).problems == []
        assert answers(upgraded) == answers(fresh)
        # Revision 0005 recomputed the digests: an unchanged catalog rewrites nothing.
        assert upgraded.upsert_tools(catalog).unchanged == [record["name"] for record in catalog]
        assert upgraded.stats()["postings"] == fresh.stats()["postings"] == len(before)
        # Writes after the upgrade go through the new layout and keep it sound.
        upgraded.upsert_tools([{**catalog[5], "description": "Now about invoices"}])
        upgraded.remove_tools([catalog[7]["name"]])
        assert verify(upgraded).problems == []


def test_downgrade_to_0001_unpacks_blocks_and_overrides(
    empty_db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = [*WORKED_EXAMPLE, *generated_catalog(120)]
    migrate.upgrade(engine, "0001")
    write_0001_catalog(engine, catalog)
    expected = posting_rows(engine)
    migrate.upgrade(engine)
    # Later writes leave overrides in the delta: every change becomes one, none is merged.
    monkeypatch.setattr(packed_postings, "REWRITE_FACTOR", 0)
    monkeypatch.setattr(packed_postings, "MERGE_SLACK", 10**9)
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools([{**catalog[3], "description": "Rotate the deploy keys"}])
        index.upsert_tools([catalog[3]])
        index.remove_tools([catalog[9]["name"]])
        index.upsert_tools([catalog[9]])
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM posting_delta")).scalar_one() > 0
    migrate.downgrade(engine, "0001")
    assert posting_rows(engine) == expected
    migrate.upgrade(engine)
    with ToolIndex.open(empty_db_url) as index:
        assert verify(index).problems == []


# --- 0004 → 0005: content digests recomputed, both ways ----------------------------------------


def stored_digests(engine: Engine) -> dict[str, str]:
    with engine.connect() as connection:
        return {
            name: digest for name, digest in connection.execute(text("SELECT name, content_hash FROM tools"))
        }


def test_revision_0005_recomputes_every_digest_and_0004_gets_them_back(
    empty_db_url: str, engine: Engine
) -> None:
    # More tools than the migration rewrites in one step, the last step short.
    batch = importlib.import_module("migrations.versions.0005_record_digest").BATCH
    catalog = [
        *WORKED_EXAMPLE,
        *generated_catalog(batch + 40),
        {"name": "odd", "input_schema": {"default": None, "maximum": 1e16, "enum": ["é", 2**70]}},
    ]
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(catalog)
    current = stored_digests(engine)
    records = {record["name"]: ToolRecord.model_validate(record) for record in catalog}
    assert current == {name: content_hash(record) for name, record in records.items()}
    migrate.downgrade(engine, "0004")
    assert stored_digests(engine) == {
        name: json_digest(record.model_dump(exclude={"mcp_meta"})) for name, record in records.items()
    }
    migrate.upgrade(engine)
    assert stored_digests(engine) == current
    with ToolIndex.open(empty_db_url) as index:
        assert verify(index).problems == []
        assert index.upsert_tools(catalog).unchanged == list(records)


# --- 0005 → 0006: posting blocks narrowed, and widened back ------------------------------------


def stored_blocks(engine: Engine, *, narrow: bool = True) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Per key, a block's ``size`` (and ``widths`` when ``narrow``), then its three arrays."""
    columns = f"size, {'widths, ' if narrow else ''}tool_ids, tfs, doc_lens"
    with engine.connect() as connection:
        rows = connection.execute(text(f"SELECT term_id, grp, {columns} FROM posting_blocks")).all()
    return {
        (row[0], row[1]): tuple(bytes(value) if isinstance(value, memoryview) else value for value in row[2:])
        for row in rows
    }


LONG_SCHEMA = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(150)}}


def test_revision_0006_narrows_every_block_and_0005_widens_them_back(
    empty_db_url: str, engine: Engine
) -> None:
    batch = importlib.import_module("migrations.versions.0006_narrow_posting_blocks").BATCH
    # More blocks than one step of the migration takes, and lengths past one byte.
    words = ("".join(letters) for letters in itertools.product("bcdfghjklmnpqrstvwxz", repeat=3))
    many = [{"name": f"bulk{n}", "description": " ".join(itertools.islice(words, 100))} for n in range(40)]
    catalog = [
        *WORKED_EXAMPLE,
        *generated_catalog(40),
        *many,
        {"name": "long", "description": "ledger " * 100, "input_schema": LONG_SCHEMA},
    ]
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(catalog)
        before = answers(index)
    narrow = stored_blocks(engine)
    assert len(narrow) > batch  # the migration takes more than one step each way
    assert {row[1] for row in narrow.values()} >= {411, 412}

    migrate.downgrade(engine, "0005")
    assert "widths" not in {column["name"] for column in inspect(engine).get_columns("posting_blocks")}
    wide = stored_blocks(engine, narrow=False)
    assert wide.keys() == narrow.keys()
    for key, (size, tool_ids, tfs, doc_lens) in wide.items():
        narrow_size, widths, *narrow_arrays = narrow[key]
        assert (len(tool_ids), len(tfs), len(doc_lens)) == (8 * size, 4 * size, 4 * size)
        assert size == narrow_size
        dtypes = packed_postings.LAYOUTS[widths]
        for stored, packed, dtype, wide_dtype in zip(
            (tool_ids, tfs, doc_lens), narrow_arrays, dtypes, ("<i8", "<i4", "<i4"), strict=True
        ):
            assert np.frombuffer(stored, wide_dtype).tolist() == np.frombuffer(packed, dtype).tolist()

    migrate.upgrade(engine)
    assert stored_blocks(engine) == narrow
    with ToolIndex.open(empty_db_url) as index:
        assert answers(index) == before
        assert verify(index).problems == []


# --- 0008 → 0009: what a server says of a tool beyond the record ---------------------------------


def test_revision_0009_adds_mcp_meta_and_keeps_every_digest(empty_db_url: str, engine: Engine) -> None:
    listed = {
        "name": "mcp__clock__now",
        "server_name": "clock",
        "mcp_tool_name": "now",
        "mcp_meta": {"title": "Now", "annotations": {"readOnlyHint": True}},
    }
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
    before = stored_digests(engine)
    migrate.downgrade(engine, "0008")
    assert "mcp_meta" not in {column["name"] for column in inspect(engine).get_columns("tools")}
    assert stored_digests(engine) == before
    migrate.upgrade(engine)
    with ToolIndex.open(empty_db_url) as index:
        assert stored_digests(engine) == before  # records without mcp_meta keep their digests
        assert index.upsert_tools(WORKED_EXAMPLE).unchanged == [record["name"] for record in WORKED_EXAMPLE]
        index.upsert_tools([listed])
        assert index.tool("mcp__clock__now").mcp_meta == listed["mcp_meta"]
        assert verify(index).problems == []
    migrate.downgrade(engine, "0008")  # the column goes, the tool stays
    with engine.connect() as connection:
        kept = text("SELECT count(*) FROM tools WHERE name = 'mcp__clock__now'")
        assert connection.execute(kept).scalar() == 1


# --- 0009 → 0010: tool vectors from int8 to packed 4-bit values, both ways ----------------------


def stored_vectors(engine: Engine) -> dict[str, tuple[str, float, bytes]]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT tool_name, content_hash, scale, vector FROM tool_vectors"))
        return {name: (digest, float(scale), bytes(vector)) for name, digest, scale, vector in rows}


def test_revision_0010_packs_every_int8_vector_in_4_bits_and_0009_gets_int8_back(
    empty_db_url: str, engine: Engine
) -> None:
    # More vectors than one step of the migration takes; an odd dimension count, a zero vector
    # and a stale vector among them.
    batch = importlib.import_module("migrations.versions.0010_packed_4bit_vectors").BATCH
    catalog = [*WORKED_EXAMPLE, *generated_catalog(batch + 40)]
    dimensions = 385
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(catalog)
    migrate.downgrade(engine, "0009")
    hashes = stored_digests(engine)
    names = sorted(hashes)
    rng = np.random.default_rng(3)
    raw = rng.standard_normal((len(names), dimensions))
    raw[7] = 0.0
    unit = raw / np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-30)
    # The int8 form revision 0008 stored: values in −127..127, the scale max|v| / 127.
    int8: dict[str, tuple[float, np.ndarray]] = {}
    for name, vector in zip(names, unit, strict=True):
        largest = float(np.abs(vector).max())
        scale = float(np.float32(largest / 127)) if largest > 0 else 1.0
        int8[name] = (scale, np.clip(np.rint(vector / scale), -127, 127).astype(np.int8))
    stale = names[11]
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE embedding_state SET model = 'm', model_digest = 'd', dimensions = :d WHERE id = 1"),
            {"d": dimensions},
        )
        connection.execute(
            text("INSERT INTO tool_vectors (tool_name, content_hash, scale, vector) VALUES (:n, :h, :s, :v)"),
            [
                {
                    "n": name,
                    "h": "0" * 64 if name == stale else hashes[name],
                    "s": scale,
                    "v": values.tobytes(),
                }
                for name, (scale, values) in int8.items()
            ],
        )
    queries = rng.standard_normal((5, dimensions))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    migrate.upgrade(engine)
    upgraded = stored_vectors(engine)
    assert sorted(upgraded) == names
    for name, (digest, scale, stored) in upgraded.items():
        assert digest == ("0" * 64 if name == stale else hashes[name])
        old_scale, old_values = int8[name]
        values = np.array(unpack_values(stored, dimensions), dtype=np.float64)
        largest = int(np.abs(old_values).max())
        if largest == 0:
            assert (scale, values.tolist()) == (1.0, [0.0] * dimensions)
            continue
        assert scale == pytest.approx(largest * old_scale / 7, rel=1e-6)
        assert np.abs(values).max() == 7
        # Each value within half a 4-bit step of the int8 one, so each cosine within half a step
        # times the query's L1 norm.
        old = old_values.astype(np.float64) * old_scale
        assert np.abs(values * scale - old).max() <= scale * (0.5 + 1e-5)
        for query in queries:
            assert abs(scale * (values @ query) - old @ query) <= scale * 0.5 * np.abs(query).sum() + 1e-9
    with engine.connect() as connection:
        loaded = Reader(connection).vectors.current(dimensions)
        ids = {name: tool_id for name, tool_id in connection.execute(text("SELECT name, id FROM tools"))}
    assert sorted(loaded.tool_ids.tolist()) == sorted(ids[name] for name in names if name != stale)
    assert (loaded.rows.dtype, loaded.rows.shape[1]) == (np.dtype(np.uint8), (dimensions + 1) // 2)

    migrate.downgrade(engine, "0009")
    downgraded = stored_vectors(engine)
    for name, (digest, scale, stored) in downgraded.items():
        assert (digest, scale) == upgraded[name][:2]
        values = np.frombuffer(stored, np.int8).tolist()
        assert values == unpack_values(upgraded[name][2], dimensions)
    migrate.upgrade(engine)
    again = stored_vectors(engine)
    assert {name: stored for name, (_, _, stored) in again.items()} == {
        name: stored for name, (_, _, stored) in upgraded.items()
    }
    for name, (_, scale, _) in again.items():
        assert scale == pytest.approx(upgraded[name][1], rel=1e-6)
    with ToolIndex.open(empty_db_url) as index:
        assert verify(index).problems == []


# --- 0011 → 0012: the stored first answers dropped ----------------------------------------------


def test_revision_0012_drops_the_first_answers_and_0011_makes_the_table_again(
    empty_db_url: str, engine: Engine
) -> None:
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
    before = stored_digests(engine)
    assert "first_answers" not in tables(engine)
    migrate.downgrade(engine, "0011")
    assert "first_answers" in tables(engine)
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO first_answers (key, stamp, answer, written_at) VALUES ('k', 's', '{}', 't')")
        )
    migrate.upgrade(engine, "0012")
    assert "first_answers" not in tables(engine)
    assert revision(engine) == "0012"
    assert stored_digests(engine) == before  # the catalog is untouched both ways
    migrate.downgrade(engine, "0011")  # the table comes back empty: what it held was a copy
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM first_answers")).scalar() == 0
    migrate.upgrade(engine)
    with ToolIndex.open(empty_db_url) as index:
        assert verify(index).problems == []


# --- 0012 → 0015: what each synced server is, and which host's config synced it ---------------------


def test_revision_0015_records_server_origins_and_downgrade_keeps_the_tools(
    empty_db_url: str, engine: Engine
) -> None:
    """Servers synced before have no row (their next sync records one); a row written at 0015 reads
    back as written, and a downgrade drops the table with the catalog untouched."""
    from datetime import UTC, datetime

    from store import Store
    from store._servers import ServerOrigin

    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
    migrate.downgrade(engine, "0012")
    assert "mcp_servers" not in tables(engine)
    before = stored_digests(engine)
    migrate.upgrade(engine)
    assert revision(engine) == migrate.HEAD_REVISION
    assert stored_digests(engine) == before
    store = Store(engine)
    with store.reading() as reader:
        assert reader.servers.all() == {}
    origin = ServerOrigin("time", "f" * 64, "stdio", "uvx", "host-a", "/srv/a/mcp.json")
    synced = datetime(2026, 12, 6, 7, 40, 12, tzinfo=UTC)
    with store.writing() as writer:
        writer.servers.record(origin, synced, claimed=True)
    with store.reading() as reader:
        stored = reader.servers.get("time")
    assert stored is not None and (stored.origin, stored.synced_at) == (origin, synced)
    migrate.downgrade(engine, "0012")
    assert "mcp_servers" not in tables(engine)
    assert stored_digests(engine) == before
    migrate.upgrade(engine)
    with store.reading() as reader:
        assert reader.servers.all() == {}


# --- 0012 → 0013: sessions keyed by identity and id ---------------------------------------------


def session_rows(engine: Engine) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Every session at 0013 by (identity, id): its lists, event count and log, as read back."""
    with engine.connect() as connection:
        reader = Reader(connection)
        return {
            state.key: (
                state.active,
                state.selected,
                state.event_count,
                [
                    (e.seq, e.event.kind, e.event.params, e.event.activated)
                    for e in reader.sessions.events(state.key)
                ],
            )
            for state in reader.sessions.all()
        }


def test_revision_0013_keys_sessions_by_identity_keeping_ids_and_logs(
    empty_db_url: str, engine: Engine
) -> None:
    with ToolIndex.open(empty_db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
        for session_id in ("mine", "theirs"):
            session = index.session(session_id, discovery_mode="all")
            session.search_tool.execute("c1", {"query": "issue"})
    before = session_rows(engine)
    migrate.downgrade(engine, "0012")
    with engine.begin() as connection:  # a 0012 gateway with --tokens made "theirs" for alice
        connection.execute(
            text(
                "INSERT INTO session_events (session_id, seq, kind, params, activated, created_at) "
                "SELECT id, event_count + 1, 'owner', :params, :activated, updated_at FROM sessions "
                "WHERE id = 'theirs'"
            ).bindparams(bindparam("params", type_=JSON), bindparam("activated", type_=JSON)),
            {"params": {"identity": "alice"}, "activated": []},
        )
        connection.execute(text("UPDATE sessions SET event_count = event_count + 1 WHERE id = 'theirs'"))
    migrate.upgrade(engine)
    after = session_rows(engine)
    assert sorted(after) == [("alice", "theirs"), ("local", "mine")]
    assert after[("local", "mine")] == before[("local", "mine")]
    active, selected, count, log = after[("alice", "theirs")]
    was_active, was_selected, was_count, was_log = before[("local", "theirs")]
    assert (active, selected, count, log[:-1]) == (was_active, was_selected, was_count + 1, was_log)
    assert log[-1][1:3] == ("owner", {"identity": "alice"})
    with ToolIndex.open(empty_db_url) as index:
        assert index.session("theirs", identity="alice").selected == selected
        assert index.session("theirs").selected == []  # the local identity's is another, new session
        index.session("mine", identity="bob")
        assert verify(index).problems == []

    with pytest.raises(RuntimeError, match=r"sessions 'mine', 'theirs' of different identities share an id"):
        migrate.downgrade(engine, "0012")
    with ToolIndex.open(empty_db_url) as index:
        index.delete_session("theirs")
        index.delete_session("mine")
    migrate.downgrade(engine, "0012")  # bob's 'mine' gets an owner entry: 0012 gateways keep it his
    with engine.connect() as connection:
        owners = connection.execute(
            text("SELECT session_id, params FROM session_events WHERE kind = 'owner' ORDER BY session_id")
        ).all()
        assert [
            (session_id, json.loads(params) if isinstance(params, str) else params)
            for session_id, params in owners
        ] == [
            ("mine", {"identity": "bob"}),
            ("theirs", {"identity": "alice"}),
        ]
    migrate.upgrade(engine)
    assert sorted(session_rows(engine)) == [("alice", "theirs"), ("bob", "mine")]
    with ToolIndex.open(empty_db_url) as index:
        assert verify(index).problems == []


# --- 0015 → 0016: learned credits keyed by identity ---------------------------------------------


def credit_rows(engine: Engine) -> set[tuple[str, ...]]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM learned_credits")).all()
    return {tuple(str(value) for value in row) for row in rows}


def test_revision_0016_keys_credits_by_identity_and_counts_the_identities(
    empty_db_url: str, engine: Engine
) -> None:
    """alice's and bob's ``p`` taught the same term to different tools: 0015 holds them keyed by
    the shared id, 0016 gives each identity its own again (an id two identities hold goes to
    those whose log called the tool), with the identities counted, K at 2, and ``verify``
    agreeing; downgrade keys them by id again."""
    issue, pulls = "mcp__github_create_issue", "mcp__github_list_pull_requests"
    with ToolIndex.open(empty_db_url, learning=True) as index:
        index.upsert_tools(WORKED_EXAMPLE)
        for number, (identity, session_id, query, tool) in enumerate(
            (
                ("alice", "p", "issue tracker bug", issue),
                ("bob", "p", "issue pull review", pulls),
                ("bob", "r", "issue", issue),
            )
        ):
            session = index.session(session_id, identity=identity, discovery_mode="all")
            session.search_tool.execute(f"c{number}", {"query": query})
            session.record_call(tool)
        expected = credit_rows(engine)
        assert verify(index).problems == []
    assert ("alice", "p", "bug", issue) in expected and ("bob", "p", "review", pulls) in expected
    migrate.downgrade(engine, "0015")
    assert credit_rows(engine) == {(s, term, tool) for _, s, term, tool in expected}
    with engine.connect() as connection:
        assert (
            connection.execute(
                text("SELECT sessions FROM learned_terms WHERE term = 'issue' AND tool_name = :tool"),
                {"tool": issue},
            ).scalar()
            == 2
        )
    migrate.upgrade(engine)
    assert credit_rows(engine) == expected
    with ToolIndex.open(empty_db_url) as index:
        assert index.min_identities == 2
        assert verify(index).problems == []
        terms = {taught.term: taught for taught in index.learned(issue).terms}
        assert (terms["issue"].sessions, terms["issue"].identities, terms["issue"].shared) == (2, 2, True)
        assert (terms["bug"].sessions, terms["bug"].identities, terms["bug"].shared) == (1, 1, False)
