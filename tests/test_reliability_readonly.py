"""A WAL database in a read-only directory, opened by a user who may not write either: every read
command works and prints what it prints on a writable copy; a write is one ``Error:`` line; a
``-wal`` file whose changes cannot be read without a ``-shm`` file is one line saying what to do.

Root ignores file permissions, so as root the commands run as ``nobody`` (``setpriv``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case runs a dozen CLI processes

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "discovery" / "examples" / "demo-catalog.jsonl"
NOBODY = 65534
READS = [
    ("stats",),
    ("tools",),
    ("search", "weather forecast"),
    ("search", "weather forecast", "--json"),
    ("show", "read"),
    ("explain", "weather forecast", "mcp__calendar__list_events"),
    ("verify",),
    ("sessions",),
    ("session", "show", "s1"),
]


def as_reader() -> list[str]:
    """The prefix that runs a command as a user without write access to the test's files."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no user here is refused writes")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import discovery"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        # A checkout under a directory only root may enter (``mktemp -d`` makes one).
        pytest.skip(f"user {NOBODY} cannot import this checkout: {probe.stderr.strip().splitlines()[-1]}")
    return prefix


def tool_index(db: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120", "HOME": "/nonexistent"}
    env.pop("TOOL_INDEX_DB", None)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "discovery.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


@pytest.fixture
def directory() -> Iterator[Path]:
    """A directory the other user can enter (pytest's own tmp_path is private to its owner)."""
    made = Path(tempfile.mkdtemp(prefix="tool-index-ro-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        for path in (made, *made.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(made)


def prepared(directory: Path) -> Path:
    db = directory / "tools.db"
    assert tool_index(db, "import", str(DEMO)).returncode == 0
    assert tool_index(db, "search", "weather forecast", "--session", "s1", "--mode", "all").returncode == 0
    return db


def frozen(directory: Path) -> None:
    for path in directory.iterdir():
        path.chmod(0o444)
    directory.chmod(0o555)


def left_in_the_wal(db: Path) -> None:
    """A committed change still in the ``-wal`` file: its writer died before any checkpoint."""
    script = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "c.execute(\"UPDATE tools SET description = 'Changed in the WAL.' WHERE name = 'read'\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db)], check=True)
    assert Path(f"{db}-wal").stat().st_size > 0


def test_every_read_works_in_a_read_only_directory(directory: Path) -> None:
    prefix = tuple(as_reader())
    db = prepared(directory)
    with contextlib.closing(sqlite3.connect(db)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    writable = {command: tool_index(db, *command) for command in READS}
    frozen(directory)
    assert not Path(f"{db}-shm").exists()
    for command in READS:
        result = tool_index(db, *command, prefix=prefix)
        assert (result.returncode, result.stderr) == (0, ""), (command, result.stderr)
        assert result.stdout == writable[command].stdout, command
    assert sorted(path.name for path in directory.iterdir()) == ["tools.db"]


@pytest.mark.parametrize("command", [("remove", "read"), ("search", "weather", "--session", "s1")])
def test_a_write_is_one_error_line(directory: Path, command: tuple[str, ...]) -> None:
    prefix = tuple(as_reader())
    db = prepared(directory)
    frozen(directory)
    result = tool_index(db, *command, prefix=prefix)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: sqlite:///{db} is read-only ("), result.stderr
    assert lines[0].endswith("use a writable file or server for changes")


def test_changes_left_in_the_wal_without_a_shm_file_say_what_to_do(directory: Path) -> None:
    prefix = tuple(as_reader())
    db = prepared(directory)
    left_in_the_wal(db)
    Path(f"{db}-shm").unlink()  # copied without it, say
    frozen(directory)
    result = tool_index(db, "show", "read", prefix=prefix)
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: sqlite:///{db} is read-only and its tools.db-wal file holds changes that need a "
        f"tools.db-shm file beside it, which cannot be made in the read-only {directory}: open it "
        "once with write access to the directory (any tool-index command does), or copy the "
        "database with its -wal file to a writable directory\n"
    )
    directory.chmod(0o755)  # what the message says: one command with write access
    assert tool_index(db, "stats").returncode == 0
    frozen(directory)
    result = tool_index(db, "show", "read", prefix=prefix)
    assert result.returncode == 0 and "Changed in the WAL." in result.stdout, result.stderr


def test_changes_in_the_wal_with_its_shm_file_are_read(directory: Path) -> None:
    prefix = tuple(as_reader())
    db = prepared(directory)
    left_in_the_wal(db)
    frozen(directory)
    result = tool_index(db, "show", "read", prefix=prefix)
    assert result.returncode == 0 and "Changed in the WAL." in result.stdout, result.stderr
