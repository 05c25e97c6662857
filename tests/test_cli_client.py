"""``tool-index client``: the gateway's entry for a client, printed or merged into its file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TOOL_INDEX = str(Path(sys.executable).absolute().parent / "tool-index")


def run(cwd: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home or cwd), "XDG_CONFIG_HOME": str((home or cwd) / "xdg")}
    return subprocess.run(
        [sys.executable, "-m", "discovery.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def exactly(document: dict[str, Any]) -> str:
    """What the command prints: the document, indented by two."""
    return json.dumps(document, indent=2) + "\n"


def test_prints_the_entry_with_absolute_paths(tmp_path: Path) -> None:
    done = run(
        tmp_path, "--db", "tools.db", "client", "claude-code", "--config", "servers.json", "--session", "s"
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == exactly(
        {
            "mcpServers": {
                "tool-index": {
                    "command": TOOL_INDEX,
                    "args": [
                        "--db",
                        str(tmp_path / "tools.db"),
                        "serve",
                        "--config",
                        str(tmp_path / "servers.json"),
                        "--session",
                        "s",
                    ],
                }
            }
        }
    )
    sqlite = run(tmp_path, "client", "vscode", "--config", "/etc/s.json", "--db", "sqlite:///rel/t.db")
    assert sqlite.stdout == exactly(
        {
            "servers": {
                "tool-index": {
                    "type": "stdio",
                    "command": TOOL_INDEX,
                    "args": [
                        "--db",
                        f"sqlite:///{tmp_path / 'rel/t.db'}",
                        "serve",
                        "--config",
                        "/etc/s.json",
                    ],
                }
            }
        }
    )


def test_write_merges_into_a_file_with_comments_and_keeps_a_backup(tmp_path: Path) -> None:
    target = tmp_path / ".vscode" / "mcp.json"
    target.parent.mkdir()
    original = '{\n  // mine\n  "servers": {"github": {"command": "gh"},},\n  "inputs": [],\n}\n'
    target.write_text(original, encoding="utf-8")
    done = run(tmp_path, "--db", "t.db", "client", "vscode", "--config", "s.json", "--write")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote servers.tool-index to {target} (the previous file is {target}.bak)\n"
    assert (tmp_path / ".vscode" / "mcp.json.bak").read_text(encoding="utf-8") == original
    written = json.loads(target.read_text(encoding="utf-8"))
    assert list(written) == ["servers", "inputs"]
    assert written["servers"]["github"] == {"command": "gh"}
    assert written["servers"]["tool-index"]["args"][:2] == ["--db", str(tmp_path / "t.db")]


@pytest.mark.parametrize(
    ("client", "where"),
    [
        ("claude-code", ".mcp.json"),
        ("cursor", "home/.cursor/mcp.json"),
        ("claude-desktop", "home/xdg/Claude/claude_desktop_config.json"),
    ],
)
def test_write_to_a_new_default_file(tmp_path: Path, client: str, where: str) -> None:
    done = run(tmp_path, "client", client, "--config", "s.json", "--write", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote mcpServers.tool-index to {tmp_path / where}\n"
    assert list(json.loads((tmp_path / where).read_text(encoding="utf-8"))["mcpServers"]) == ["tool-index"]


@pytest.mark.parametrize("text", ["{bad", '{"mcpServers": []}', "/* open"])
def test_write_refuses_a_file_it_cannot_read(tmp_path: Path, text: str) -> None:
    target = tmp_path / "c.json"
    target.write_text(text, encoding="utf-8")
    done = run(tmp_path, "client", "cursor", "--config", "s.json", "--write", str(target))
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: cannot read {target}: ")
    assert target.read_text(encoding="utf-8") == text
    assert not (tmp_path / "c.json.bak").exists()
