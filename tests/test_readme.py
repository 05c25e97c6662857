"""The README's quickstart and Python API run as written, so the README cannot rot."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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
    env = {**os.environ, "TOOL_INDEX_DB": f"sqlite:///{tmp_path / 'quickstart.db'}"}
    outputs = []
    for step in steps[2:]:
        argv = shlex.split(step)
        assert argv[0] == ".venv/bin/tool-index"
        done = subprocess.run([str(script), *argv[1:]], env=env, capture_output=True, text=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0].startswith("added 26,")
    assert "gitforge/create_pull_request" in outputs[1]


def test_second_command_is_what_ci_runs() -> None:
    second = code_blocks("Two commands", "sh")[1].strip()
    assert second == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && bash .ci/test"
    assert "bash .ci/test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_python_api_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    host_file = tmp_path / "host.jsonl"
    host_file.write_text(
        json.dumps({"id": "1", "parentId": None, "timestamp": "t", "type": "mcp_tool_selection",
                    "selectedToolNames": []}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    (api,) = code_blocks("Python API", "python")
    namespace: dict[str, object] = {"path": host_file}
    exec(compile(api, "README.md", "exec"), namespace)  # the README's own code, as a user runs it
    assert (tmp_path / "tools.db").exists()
