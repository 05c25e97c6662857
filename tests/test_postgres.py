"""PostgreSQL as a backend: the same schema and the same rankings as SQLite, no password in any
message, and the PostgreSQL-only paths (server errors, read-only servers).

Tests marked ``on_postgresql`` take ``db_url`` on the PostgreSQL test server only and skip
without ``TOOL_INDEX_TEST_PG``; the others need no server.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, make_url, text

import store
from discovery import ToolIndex
from discovery.errors import QueryWithoutTerms
from store import _migrate as migrate
from store._urls import display_url, parse_url
from tests.conftest import PG_ENV, shared_path

on_postgresql = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
"""Run a test that takes ``db_url`` on the PostgreSQL schema only."""

SECRET_URLS = [
    "postgresql://user:secret@db.example:5432/tools",
    "postgres://user:secret@db.example/tools",
    "postgresql+psycopg://user:secret@db.example/tools?sslmode=require",
]

QUERIES = [
    "create a pull request",
    "list files in a directory",
    "read a file",
    "search the web",
    "git commit changes",
    "take a screenshot of the page",
    "click a button in the browser",
    "get the weather forecast",
    "query a database table",
    "add a comment to an issue",
    "create a notion page",
    "calculate an expression",
    "currency exchange rate",
    "flip a coin",
    "find an airbnb listing",
    "search arxiv papers",
    "docker container logs",
    "write an excel spreadsheet",
    "fetch a url as markdown",
    "memory knowledge graph entities",
    "convert time zone",
    "sequential thinking",
    "hacker news top stories",
    "details",
    "Update",
    "github_create_issue",
    "八字 命理",
    "菜谱 做饭",
    "火车票 查询",
    "🚀 deploy the release",
    "SQL'; DROP TABLE tools;--",
    "a b c d e f g",
]


def real_catalog() -> list[dict[str, Any]]:
    path = shared_path("data/mcp-catalog.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def with_options(url: str, *options: str) -> str:
    """``url`` with more server settings appended to its ``options`` (``-cname=value`` each)."""
    extra = "%20".join(f"-c{option.replace('=', '%3D')}" for option in options)
    if "options=" in url:
        return f"{url}%20{extra}"
    return f"{url}{'&' if '?' in url else '?'}options={extra}"


def schema_shape(engine: Engine) -> dict[str, Any]:
    """Tables with their column names and nullability, indexes and unique constraints."""
    with engine.connect() as connection:
        found = inspect(connection)
        return {
            table: {
                "columns": [(c["name"], c["nullable"]) for c in found.get_columns(table)],
                "primary_key": found.get_pk_constraint(table)["constrained_columns"],
                # PostgreSQL also lists the index behind each unique constraint: leave those out.
                "indexes": sorted(
                    i["name"] or "" for i in found.get_indexes(table) if "duplicates_constraint" not in i
                ),
                "unique": sorted(u["name"] or "" for u in found.get_unique_constraints(table)),
            }
            for table in sorted(found.get_table_names())
        }


@pytest.mark.parametrize("url", SECRET_URLS)
def test_display_url_hides_the_password(url: str) -> None:
    shown = display_url(url)
    assert "secret" not in shown
    assert shown.startswith("postgresql+psycopg://user:***@db.example")
    opened = store.Store.at(url)  # connects lazily: no server needed
    try:
        assert ToolIndex(opened).url == shown
    finally:
        opened.close()


def test_an_unparsable_url_is_refused_without_its_password() -> None:
    with pytest.raises(store.errors.DatabaseUnavailable) as caught:
        parse_url("postgresql://user:secret@db.example:port/tools")
    assert str(caught.value) == (
        "not a database URL: 'postgresql://user:***@db.example:port/tools'; "
        "use sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DATABASE"
    )


def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    with pytest.raises(store.errors.DatabaseUnavailable) as caught:
        ToolIndex.open("postgresql+psycopg://user:secret@127.0.0.1:1/x")
    message = str(caught.value)
    assert message.startswith("cannot reach postgresql+psycopg://user:***@127.0.0.1:1/x (")
    assert message.endswith("); check that the server runs and the URL is right")
    assert "\n" not in message
    assert "secret" not in message
    assert "secret" not in repr(caught.value.__cause__)


def test_a_database_the_server_lacks_is_named_not_called_unreachable() -> None:
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(f"set {PG_ENV} to a PostgreSQL URL to run the PostgreSQL backend")
    missing = make_url(server).set(database=f"absent_{uuid.uuid4().hex[:8]}")
    with pytest.raises(store.errors.DatabaseUnavailable) as caught:
        ToolIndex.open(missing.render_as_string(hide_password=False))
    message = str(caught.value)
    assert ": the server has no such database (" in message
    assert message.endswith(f"); create it (createdb {missing.database}) or fix the URL")
    assert "cannot reach" not in message


@pytest.mark.parametrize("empty_db_url", ["postgresql"], indirect=True)
def test_migrations_build_the_same_schema_on_both_backends(sqlite_url: str, empty_db_url: str) -> None:
    shapes = []
    for url in (sqlite_url, empty_db_url):
        with ToolIndex.open(url) as index:
            with index.store.engine.connect() as connection:
                assert migrate.current_revision(connection) == migrate.head_revision()
            assert migrate.pending_model_changes(index.store.engine) == []
            shapes.append(schema_shape(index.store.engine))
    assert shapes[0] == shapes[1]


@on_postgresql
def test_the_schema_lives_in_the_schema_the_url_names(index: ToolIndex) -> None:
    with index.store.engine.connect() as connection:
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        tables = set(inspect(connection).get_table_names(schema=schema))
    assert schema.startswith("t_")
    assert {"alembic_version", "tools", "posting_blocks", "sessions"} <= tables


@on_postgresql
def test_downgrade_to_base_and_upgrade_again(index: ToolIndex) -> None:
    migrate.downgrade(index.store.engine, "base")
    with index.store.engine.connect() as connection:
        assert set(inspect(connection).get_table_names()) <= {"alembic_version"}
        assert migrate.current_revision(connection) is None
    migrate.upgrade(index.store.engine)
    assert migrate.pending_model_changes(index.store.engine) == []


@on_postgresql
def test_the_real_catalog_ranks_identically_on_both_backends(sqlite_url: str, db_url: str) -> None:
    catalog = real_catalog()
    outcomes = []
    for url in (sqlite_url, db_url):
        with ToolIndex.open(url) as index:
            index.upsert_tools(catalog)
            outcome: dict[str, Any] = {
                "stats": index.stats(),
                "records": [tool.as_record() for tool in index.tools()],
            }
            for mode in ("all", "mcp-only"):
                for query in QUERIES:
                    hits = index.search(query, limit=20, mode=mode)
                    outcome[f"{mode}: {query}"] = [(hit.name, hit.score) for hit in hits]
            with pytest.raises(QueryWithoutTerms):
                index.search("?!", limit=5)
            outcomes.append(outcome)
    sqlite, postgresql = outcomes
    assert sqlite["stats"]["tools"] == len(catalog)
    rankings = [hits for key, hits in sqlite.items() if key.startswith(("all: ", "mcp-only: "))]
    assert sum(1 for hits in rankings if hits) >= len(QUERIES)  # most queries find something
    assert sqlite == postgresql


@on_postgresql
def test_a_read_only_server_refuses_writes_and_still_reads(db_url: str) -> None:
    with ToolIndex.open(db_url) as index:
        index.upsert_tools([{"name": "mcp__files__read_text", "description": "Read a text file"}])
    with ToolIndex.open(with_options(db_url, "default_transaction_read_only=on")) as read_only:
        with pytest.raises(store.errors.ReadOnlyDatabase) as caught:
            read_only.upsert_tools([{"name": "mcp__files__write_text", "description": "Write a text file"}])
        assert "read-only" in str(caught.value)
        assert [hit.name for hit in read_only.search("text file")] == ["mcp__files__read_text"]
    with ToolIndex.open(db_url) as index:
        assert [tool.name for tool in index.tools()] == ["mcp__files__read_text"]


def application_of(index: ToolIndex) -> str:
    with index.store.engine.connect() as connection:
        return str(connection.execute(text("SELECT current_setting('application_name')")).scalar_one())


@on_postgresql
def test_connections_name_who_opened_them_unless_the_url_does(db_url: str) -> None:
    host = socket.gethostname()
    with ToolIndex.open(db_url) as index:
        assert application_of(index) == f"tool-index@{host}"[:63]
    with ToolIndex.open(db_url, application="tool-index search") as index:
        assert application_of(index) == f"tool-index search@{host}"[:63]
    with ToolIndex.open(f"{db_url}&application_name=nightly-import", application="tool-index x") as index:
        assert application_of(index) == "nightly-import"


@pytest.mark.parametrize("name", ["read\x00", "\ud800", "mcp__a__\udfff\x00"])
def test_names_no_backend_can_store_match_nothing(index: ToolIndex, name: str) -> None:
    index.upsert_tools([{"name": "mcp__a__read", "server_name": "a", "description": "Read"}])
    assert index.tools_by_names([name, "mcp__a__read"]).keys() == {"mcp__a__read"}
    with pytest.raises(store.errors.ToolNotFound):
        index.tool(name)
    assert index.tools(server=name) == []
    assert index.remove_tools([name]) == []
