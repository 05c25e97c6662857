"""``tool-index client``: the gateway's entry for a client, printed or merged into its file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from discovery._mcp.config import load_config
from discovery._mcp.jsonc import to_json

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
    text = target.read_text(encoding="utf-8")
    assert text.startswith('{\n  // mine\n  "servers": {"github": {"command": "gh"},')
    written = json.loads(to_json(text))
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


def test_claude_codes_user_scope(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text('{"numStartups": 3, "projects": {}}', encoding="utf-8")
    done = run(tmp_path, "client", "claude-code", "--user", "--config", "s.json", "--write", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote mcpServers.tool-index to {home / '.claude.json'} ")
    written = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    assert list(written) == ["numStartups", "projects", "mcpServers"]
    refused = run(tmp_path, "client", "cursor", "--user", "--config", "s.json", home=home)
    assert (refused.returncode, refused.stderr.splitlines()[-1]) == (2, "Error: --user is for claude-code")


SERVERS = """{
  "mcpServers": {
    // the team's servers
    "github": {"command": "gh-mcp"},
    "slack": {"command": "slack-mcp",},
  },
  "toolIndex": {"deny": ["github/delete_*"]},
}
"""


def test_a_gateway_is_never_written_into_the_file_it_fronts(tmp_path: Path) -> None:
    """The usual one-file setup would make a gateway that starts itself: refused, with the one
    command that works, which moves the servers into a file of their own."""
    target = tmp_path / ".mcp.json"
    target.write_text(SERVERS, encoding="utf-8")
    refused = run(tmp_path, "client", "claude-code", "--config", ".mcp.json", "--write")
    assert refused.returncode == 1
    advice = "tool-index client claude-code --config .mcp.json --write --move-to"
    assert refused.stderr == (
        f"Error: {target} is the config the gateway fronts: written there, the gateway would start itself. "
        f"Move its servers into a file of their own, with the gateway in their place: {advice} "
        f"{tmp_path / '.mcp.servers.json'}\n"
    )
    assert target.read_text(encoding="utf-8") == SERVERS and not (tmp_path / ".mcp.json.bak").exists()
    moved = run(tmp_path, *refused.stderr.split(": ")[-1].split()[1:], "--session", "s")
    assert moved.returncode == 0, moved.stderr
    servers = tmp_path / ".mcp.servers.json"
    assert moved.stdout.splitlines()[0] == f"moved the servers of {target} to {servers}"
    assert "// the team's servers" in servers.read_text(encoding="utf-8")
    config = load_config(servers)
    assert list(config.servers) == ["github", "slack"]
    assert config.tool_filter.deny == ("github/delete_*",)
    gateway = json.loads(to_json(target.read_text(encoding="utf-8")))
    assert list(gateway) == ["mcpServers"] and list(gateway["mcpServers"]) == ["tool-index"]
    assert gateway["mcpServers"]["tool-index"]["args"][-4:] == ["--config", str(servers), "--session", "s"]
    assert (tmp_path / ".mcp.json.bak").read_text(encoding="utf-8") == SERVERS
    again = run(tmp_path, *refused.stderr.split(": ")[-1].split()[1:])
    assert (again.returncode, again.stderr) == (1, f"Error: {servers} exists: --move-to makes a new file\n")


@pytest.mark.parametrize("special", ["fifo", "directory"])
def test_write_reads_only_a_regular_file(tmp_path: Path, special: str) -> None:
    target = tmp_path / "c.json"
    if special == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    done = run(tmp_path, "client", "cursor", "--config", "s.json", "--write", str(target))
    assert (done.returncode, done.stderr) == (1, f"Error: cannot read {target}: not a regular file\n")
