"""The README's quickstart and Python API run as written, so the README cannot rot, and it stays a
user's guide: short, with dated figures and commits left to bench/results.md and docs/."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def code_blocks(section: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of a ``## section`` of the README."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, flags=re.DOTALL)


def test_first_command_runs_the_main_job(tmp_path: Path) -> None:
    """Everything after the install step of the first command, with the installed script."""
    first = code_blocks("Two commands", "sh")[0].strip()
    steps = [step.strip() for step in first.split("&&")]
    assert steps[0].startswith("python3 -m venv") and "pip install -e ." in steps[1]
    script = Path(sys.executable).parent / "tool-index"
    default = tmp_path / "default.db"
    env = {**os.environ, "TOOL_INDEX_DB": f"sqlite:///{default}"}
    outputs = []
    for step in steps[2:]:
        argv = shlex.split(step)
        assert argv[0] == ".venv/bin/tool-index"
        done = subprocess.run(
            [str(script), *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
        )
        outputs.append(done.stdout)
    assert outputs[0].startswith("added 26,")
    assert "gitforge/create_pull_request" in outputs[1]
    # The example's made-up tools stay out of the database the gateway uses.
    assert (tmp_path / "example.db").exists() and not default.exists()


def test_second_command_is_what_ci_runs() -> None:
    second = code_blocks("Two commands", "sh")[1].strip()
    assert second == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && bash .ci/test"
    assert "bash .ci/test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_python_api_runs_as_printed(tmp_path: Path) -> None:
    """The block alone in a new process and an empty directory: nothing defined for it."""
    (block,) = code_blocks("Python API", "python")
    assert len(block.splitlines()) <= 30
    script = tmp_path / "api.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "{'added': 2, 'updated': 0, 'unchanged': 0, 'removed': 0}"
    assert lines[1].startswith("[('mcp__weather__get_forecast', ")
    content = json.loads(lines[2])
    assert content["activated_tools"] == ["mcp__weather__get_forecast"]
    active = ["search_tool_bm25", "mcp__weather__get_forecast"]
    assert lines[3:] == [repr(active), repr(active), repr(active[1:])]  # the same after resume
    assert "UnknownToolNames: not in the catalog, left out of the active list: 'mcp__nope'" in done.stderr
    assert (tmp_path / "tools.db").exists()


MAX_LINES = 300
COMMIT_HASH = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9A-Za-z])")
"""An abbreviated or full commit hash: 7 to 40 lowercase hex digits standing alone. A number
written in decimal digits only (``--sizes 1000000``) is not one."""


def test_commit_hash_pattern() -> None:
    text = "at commit 40dc0e1, (a8cdea8..40dc0e1), f602afe; " + "0123456789abcdef" * 2 + "01234567"
    assert COMMIT_HASH.findall(text) == ["40dc0e1", "a8cdea8", "40dc0e1", "f602afe", text[-40:]]
    assert not COMMIT_HASH.findall("--sizes 1000000, 12 hex digits, store.IndexedBatch, 0xdeadbeef1")


def test_readme_is_a_short_guide_without_commit_hashes() -> None:
    lines = README.splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"
    found = [(number, match) for number, line in enumerate(lines, 1) for match in COMMIT_HASH.findall(line)]
    assert not found, f"commit hashes in README.md (dated figures go to bench/results.md): {found}"
