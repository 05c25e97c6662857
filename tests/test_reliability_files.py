"""Every file a user names is read within the same bounds (``discovery._files``): catalogs
(``import``), MCP configs (``sync`` and ``serve --config``), labelled query files (``eval``) and
host session files (``session import-jsonl``). An endless file, one beyond the size limit, a line
beyond the line limit or JSON nested too deeply is one ``Error: <file>: …`` line and exit 1 from
the command, never a traceback nor unbounded memory. Commands run in process; those that could
wait on a FIFO run as processes of their own, so that a wait fails the test instead of holding it,
and the memory bound is checked in a process whose address space is capped."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp_helpers import WAIT, cli
from tests.test_cli import run as run_in_process

LIMIT = 100_000
COMMANDS = {
    "import": (["import"], "catalog", "record"),
    "sync": (["sync", "--config"], "config file", None),
    "serve": (["serve", "--config"], "config file", None),
    "eval": (["eval"], "query file", "query"),
    "import-jsonl": (["session", "import-jsonl"], "session file", "entry"),
}
"""Each command reading a file: its arguments before the path, what the file is called in
messages, and what one line of it holds (``None``: not a JSON-lines file)."""
AFTER = {"import-jsonl": ["--id", "h"]}


Outcome = tuple[int, str, str]
"""A command's exit code, stdout and stderr."""


def run(db_url: str, command: str, path: Path | str, **env: str) -> Outcome:
    args, _, _ = COMMANDS[command]
    done = run_in_process(db_url, *args, str(path), *AFTER.get(command, []), env=dict(env))
    return done.exit_code, done.stdout, done.stderr


def run_process(db_url: str, command: str, path: Path | str) -> Outcome:
    args, _, _ = COMMANDS[command]
    done = cli(db_url, *args, str(path), *AFTER.get(command, []))
    return done.returncode, done.stdout, done.stderr


def assert_one_error(done: Outcome, expected: str) -> None:
    assert done == (1, "", f"Error: {expected}\n")


def larger_message(path: Path | str, what: str) -> str:
    return (
        f"{path}: larger than {LIMIT} bytes, the most a {what} may hold; "
        "split it, or set TOOL_INDEX_MAX_INPUT_BYTES to allow more"
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("command", COMMANDS)
def test_an_endless_file_is_refused_at_the_limit(db_url: str, command: str) -> None:
    done = run(db_url, command, "/dev/zero", TOOL_INDEX_MAX_INPUT_BYTES=str(LIMIT))
    if command in REGULAR_ONLY:
        assert_one_error(done, "/dev/zero: cannot read: not a regular file")
    else:
        assert_one_error(done, larger_message("/dev/zero", COMMANDS[command][1]))


REGULAR_ONLY = ("sync", "serve")
"""The commands whose file a gateway reads again while it serves: only a regular file is read."""


@pytest.mark.parametrize("command", REGULAR_ONLY)
def test_a_fifo_config_is_refused_without_waiting(db_url: str, tmp_path: Path, command: str) -> None:
    """A FIFO nobody writes would hold the command forever if it were opened as a file (a
    directory is a usage error before anything is read)."""
    path = tmp_path / "mcp.json"
    os.mkfifo(path)
    assert_one_error(run_process(db_url, command, path), f"{path}: cannot read: not a regular file")


@pytest.mark.parametrize("command", ["sync", "serve"])
def test_an_upstream_log_fifo_nothing_reads_is_refused_without_waiting(
    sqlite_db_url: str, tmp_path: Path, command: str
) -> None:
    """The one file these commands write: opening a FIFO for writing waits for a reader, which
    would hold the command before it starts."""
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}', encoding="utf-8")
    log = tmp_path / "upstream.log"
    os.mkfifo(log)
    done = cli(sqlite_db_url, command, "--config", str(config), "--upstream-log", str(log))
    assert done.returncode == 2
    assert f"Invalid value for --upstream-log: cannot write {log}: a FIFO that nothing reads" in done.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_beyond_the_limit_is_refused(db_url: str, tmp_path: Path, command: str) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (LIMIT + 1))
    done = run(db_url, command, path, TOOL_INDEX_MAX_INPUT_BYTES=str(LIMIT))
    assert_one_error(done, larger_message(path, COMMANDS[command][1]))


DEEP = {
    "import": "{path}: JSON nested too deeply",
    "sync": "{path}: JSON nested too deeply",
    "serve": "{path}: JSON nested too deeply",
    "eval": "{path}:1: JSON nested too deeply",
    "import-jsonl": "{path}:1: JSON nested too deeply",
}


@pytest.mark.parametrize("command", COMMANDS)
def test_json_nested_too_deeply_is_refused(db_url: str, tmp_path: Path, command: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000 + "\n", encoding="utf-8")
    assert_one_error(run(db_url, command, path), DEEP[command].format(path=path))


@pytest.mark.parametrize("command", ["sync", "serve"])
def test_a_config_that_parses_but_nests_beyond_the_limit_is_refused(
    db_url: str, tmp_path: Path, command: str
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"a": {"env": ' + "[" * 300 + "]" * 300 + "}}}", encoding="utf-8")
    assert_one_error(run(db_url, command, path), f"{path}: JSON nested deeper than 128 levels")


FIRST_LINE = {
    "import": '{"name": "short", "description": "A valid record."}',
    "eval": '{"query": "short", "relevant": ["short"]}',
    "import-jsonl": '{"id": "1"}',
}
"""A valid first line, so the file is JSON lines and the long second line is reached."""


@pytest.mark.parametrize("command", [name for name, (_, _, line) in COMMANDS.items() if line])
def test_a_line_beyond_the_line_limit_is_refused(db_url: str, tmp_path: Path, command: str) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text(FIRST_LINE[command] + '\n{"query": "' + "x" * 5000 + '"}\n', encoding="utf-8")
    done = run(db_url, command, path, TOOL_INDEX_MAX_LINE_BYTES="4096")
    assert_one_error(
        done,
        f"{path}, line 2: longer than 4096 bytes, the most one {COMMANDS[command][2]} may take; "
        "set TOOL_INDEX_MAX_LINE_BYTES to allow more",
    )


def capped_memory() -> None:
    limit = 2 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("command", ["sync", "eval"])
def test_an_endless_file_at_the_default_limit_fits_in_bounded_memory(tmp_path: Path, command: str) -> None:
    """With the default limit and the address space capped, the read stops at the limit: one error
    line, not a MemoryError."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOL_INDEX_MAX_")}
    args, what, _ = COMMANDS[command]
    done = subprocess.run(
        [sys.executable, "-m", "discovery.cli", "--db", f"sqlite:///{tmp_path / 't.db'}", *args, "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        env={**env, "OPENBLAS_NUM_THREADS": "1"},
        preexec_fn=capped_memory,
        check=False,
    )
    endless = (
        f"Error: /dev/zero: larger than {512 * 1024 * 1024} bytes, the most a {what} may hold; "
        "split it, or set TOOL_INDEX_MAX_INPUT_BYTES to allow more\n"
    )
    # An MCP config is read only when it is a regular file, so sync refuses before reading at all.
    refused = "Error: /dev/zero: cannot read: not a regular file\n"
    assert (done.returncode, done.stderr) == (1, refused if command == "sync" else endless)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_training_file_is_read_within_the_same_bounds(db_url: str, tmp_path: Path) -> None:
    """``eval --learn-from`` reads its training file as every other file is read."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"query": "read a file", "relevant": ["read"]}\n', encoding="utf-8")
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 200_000 + "\n", encoding="utf-8")
    cases = [
        (
            "/dev/zero",
            {"TOOL_INDEX_MAX_INPUT_BYTES": str(LIMIT)},
            larger_message("/dev/zero", "training file"),
        ),
        (str(deep), {}, f"{deep}:1: JSON nested too deeply"),
    ]
    for path, env, expected in cases:
        done = run_in_process(db_url, "eval", str(queries), "--learn-from", path, env=dict(env))
        assert_one_error((done.exit_code, done.stdout, done.stderr), expected)
