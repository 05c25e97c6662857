"""URLs mean what the user meant or are one ``Error:`` line; no credential is printed; a database
that is not ours is left exactly as it was."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from discovery import DatabaseUnavailable, ToolIndex
from discovery.cli._main import main
from store._urls import display_url, hide_secrets, parse_url
from tests.examples import examples

DEMO = Path(__file__).resolve().parent.parent / "discovery" / "examples" / "demo-catalog.jsonl"


def cli(db: str, *args: str, cwd: Path) -> Result:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["--db", db, *args], catch_exceptions=False, prog_name="tool-index")
    finally:
        os.chdir(old)


def one_error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def files_in(directory: Path) -> dict[str, str]:
    files = [path for path in directory.iterdir() if path.is_file()]
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


# --- a refused database is left untouched -----------------------------------------------------

REFUSING = [
    ("stats",),
    ("tools",),
    ("search", "weather"),
    ("import", str(DEMO)),
    ("verify",),
    ("db", "upgrade"),
    ("sessions",),
]


@pytest.mark.parametrize("command", REFUSING, ids=[" ".join(c[:1]) for c in REFUSING])
def test_a_foreign_sqlite_database_is_refused_and_left_exactly_as_it_was(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        connection.execute("INSERT INTO notes (body) VALUES ('keep me')")
    before = files_in(tmp_path)
    line = one_error_line(cli(str(path), *command, cwd=tmp_path))
    assert "no tool-index schema revision" in line
    assert files_in(tmp_path) == before  # no -wal, no -shm, not a byte changed
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_database_of_ours_is_switched_to_wal(tmp_path: Path) -> None:
    path = tmp_path / "ours.db"
    ToolIndex.open(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- URLs mean what the user meant --------------------------------------------------------------


def test_a_sqlite_uri_filename_opens_that_file_read_only(tmp_path: Path) -> None:
    with ToolIndex.open(f"sqlite:///{tmp_path / 'ro.db'}") as index:
        index.upsert_tools([{"name": "get_weather", "description": "Weather for a city."}])
    before = files_in(tmp_path)
    for url in ("file:ro.db?mode=ro", "sqlite:///ro.db?mode=ro&uri=true", "file:ro.db"):
        result = cli(url, "search", "weather", cwd=tmp_path)
        assert result.exit_code == 0, (url, result.output)
        assert "get_weather" in result.stdout
        assert set(files_in(tmp_path)) <= set(before) | {"ro.db-wal", "ro.db-shm"}, url
    line = one_error_line(cli("file:ro.db?mode=ro", "remove", "get_weather", cwd=tmp_path))
    assert "read-only" in line


def test_a_home_path_is_the_users_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    for url in ("~/x.db", "sqlite:///~/y.db"):
        assert cli(url, "import", str(DEMO), cwd=tmp_path / "work").exit_code == 0
    assert sorted(p.name for p in (tmp_path / "home").iterdir() if p.suffix == ".db") == ["x.db", "y.db"]
    assert list((tmp_path / "work").iterdir()) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("", "the database URL is empty"),
        ("   ", "the database URL is empty"),
        ("postgresql:/user:pw@host/db", "has a scheme (postgresql:) but no '//'"),
        ("sqlite:x.db", "has a scheme (sqlite:) but no '//'"),
        ("sqlite:///x.db?timeout=abc", "timeout='abc' is not a number of seconds"),
        ("sqlite:///x.db?timeout=-1", "timeout='-1' is not a number of seconds"),
        ("sqlite:///x.db?journal=wal", "unknown SQLite option journal"),
        ("postgresql://u@127.0.0.1:1/db?connect_timeout=x", "bad URL option"),
        ("postgresql://u@127.0.0.1:1/db?bogus=1", "bad URL option"),
    ],
)
def test_a_url_that_cannot_mean_a_database_is_one_error_line(tmp_path: Path, url: str, expected: str) -> None:
    line = one_error_line(cli(url, "stats", cwd=tmp_path))
    assert expected in line
    assert "pw" not in line
    assert list(tmp_path.iterdir()) == []  # nothing created
    with pytest.raises(DatabaseUnavailable):
        ToolIndex.open(url)


# --- no credential is ever printed --------------------------------------------------------------

SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://user:{SECRET}@127.0.0.1:1/db",
        f"postgresql://user@127.0.0.1:1/db?password={SECRET}",
        f"postgresql://user@127.0.0.1:1/db?sslpassword={SECRET}&password={SECRET}",
        f"postgresql://user@127.0.0.1:1/db?connect_timeout=x&password={SECRET}",
        f"postgresql://user:{SECRET}@127.0.0.1:notaport/db",
        f"postgresql://user@127.0.0.1:notaport/db?password={SECRET}",
    ],
)
def test_no_form_of_password_is_printed(tmp_path: Path, url: str) -> None:
    result = cli(url, "stats", cwd=tmp_path)
    assert result.exit_code == 1
    assert SECRET not in result.output
    assert SECRET not in hide_secrets(url)


def test_stats_shows_the_url_without_its_query_password(db_url: str, tmp_path: Path) -> None:
    separator = "&" if "?" in db_url else "?"
    url = f"{db_url}{separator}password={SECRET}" if db_url.startswith("postgresql") else db_url
    ToolIndex.open(url).close()  # reading commands never create a database
    result = cli(url, "stats", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    assert SECRET not in display_url(url)


@settings(max_examples=examples(300), deadline=None)
@given(
    secret=st.text(st.characters(blacklist_characters="&#", blacklist_categories=["Cs"]), min_size=1),
    name=st.sampled_from(["password", "sslpassword", "PASSWORD"]),
)
def test_a_query_secret_never_survives_display(secret: str, name: str) -> None:
    from urllib.parse import quote

    secret = f"Zq9{secret}"  # a text found nowhere else in the URL
    url = f"postgresql://user@127.0.0.1:5432/db?{name}={quote(secret, safe='')}&application_name=x"
    shown = display_url(parse_url(url))
    assert quote(secret, safe="") not in shown
    assert f"{name}=%2A%2A%2A" in shown
    assert quote(secret, safe="") not in hide_secrets(url)
