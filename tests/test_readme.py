"""The README's quickstart and Python API run as written, so the README cannot rot."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _described_tool(printed: str) -> None:
    description, parameters = ast.literal_eval(printed)
    assert description.startswith("Search hidden tool metadata to discover and activate tools.\n")
    assert parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "tool search query"},
            "limit": {"type": "integer", "minimum": 1, "description": "max matches"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def _session_record(printed: str) -> None:
    record = ast.literal_eval(printed)  # {"id", "settings", "active", "selected", "calls": [...]}
    assert list(record) == ["id", "settings", "active", "selected", "calls"]
    assert (record["id"], record["settings"]["discovery_mode"]) == ("chat-42", "all")
    assert (record["active"], record["selected"]) == (["search_tool_bm25"], [])
    assert [call["kind"] for call in record["calls"]] == ["create", "search", "set_active", "reset"]


# What each statement of the Python API block prints when it is run at the interpreter's prompt
# (an expression shows its value's repr; a ``print`` call, its text), keyed by the statement. The
# block's comments say what these are; the test holds the block to them, and fails when the block
# prints something not listed here or no longer runs a statement listed here.
PYTHON_API_PRINTS: dict[str, str | Callable[[str], None]] = {
    "report.added, report.updated, report.unchanged, report.removed": (
        "(['mcp__github__create_issue'], [], [], [])"
    ),
    # The unrounded double: all of its 17 significant digits.
    "hits[0].name, hits[0].score": "('mcp__github__create_issue', 2.6158997750847983)",
    'index.remove_tools(["mcp__github__create_issue"])': "['mcp__github__create_issue']",
    "tool.description, tool.parameters": _described_tool,
    # '{"query":…,"activated_tools":[…],"match_count":…,"total_tools":…}', with nothing left in the
    # catalog by then.
    "result.content": repr(
        '{"query":"open a pull request","activated_tools":[],"match_count":0,"total_tools":0}'
    ),
    "result.details": (
        "{'query': 'open a pull request', 'limit': 5, 'total_tools': 0, 'activated_tools': [], "
        "'active_selected_tools': [], 'tools': []}"
    ),
    "session.active, session.selected, session.total_tools": "(['search_tool_bm25'], [], 0)",
    'session.preview("create an issue", limit=3)': "[]",
    'session.set_active(["read", "bash", "search_tool_bm25"])': "['search_tool_bm25']",
    "session.active_tools()": "[]",
    "session.reset()": "['search_tool_bm25']",
    'index.session_record("chat-42")': _session_record,
    'index.import_session_file(path, "chat-42")': (
        "RestoredSelection(session_id='chat-42', found=True, restored=[], "
        "missing=['mcp__github__create_issue'])"
    ),
}


def printed_at_the_prompt(code: str, namespace: dict[str, Any]) -> dict[str, str]:
    """Run ``code`` one statement at a time, as pasted at the interpreter's prompt, and return
    what each statement that printed anything printed, keyed by its source without comments."""
    shown: dict[str, str] = {}
    for statement in ast.parse(code).body:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            if isinstance(statement, ast.Expr):
                value = eval(compile(ast.Expression(statement.value), "README.md", "eval"), namespace)
                if value is not None:
                    print(repr(value))
            else:
                exec(compile(ast.Module([statement], type_ignores=[]), "README.md", "exec"), namespace)
        if out.getvalue():
            shown[ast.unparse(statement)] = out.getvalue().removesuffix("\n")
    return shown


def test_python_api_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    host_file = tmp_path / "host.jsonl"
    host_file.write_text(
        json.dumps({"id": "1", "parentId": None, "timestamp": "t", "type": "mcp_tool_selection",
                    "selectedToolNames": ["mcp__github__create_issue"]}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    (api,) = code_blocks("Python API", "python")
    namespace: dict[str, Any] = {"path": host_file}
    shown = printed_at_the_prompt(api, namespace)  # the README's own code, as a user runs it
    expected = {
        ast.unparse(ast.parse(statement).body[0]): check for statement, check in PYTHON_API_PRINTS.items()
    }
    assert sorted(shown) == sorted(expected)
    for statement, printed in shown.items():
        check = expected[statement]
        if callable(check):
            check(printed)
        else:
            assert printed == check, statement
    tool = namespace["tool"]  # .name "search_tool_bm25", .label "SearchTools"
    assert (tool.name, tool.label) == ("search_tool_bm25", "SearchTools")
    assert (tmp_path / "tools.db").exists()
