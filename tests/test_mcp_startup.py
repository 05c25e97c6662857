"""What ``sync`` and ``serve`` make of a database: the analyzer of a new one, and what ``serve``
says on stderr when it starts. Real parts: ``tool-index`` processes, upstreams as processes."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from discovery import ToolIndex
from tests.mcp_helpers import cli, stdio_gateway, upstream_entry, write_config

pytestmark = pytest.mark.slow


def analyzer_of(db: str) -> str:
    with ToolIndex.open(db, create=False) as index:
        return index.analyzer


def test_a_new_database_gets_the_enhanced_analyzer_and_an_existing_one_keeps_its_own(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"up": upstream_entry()})
    new = f"sqlite:///{tmp_path / 'new.db'}"
    assert cli(new, "sync", "--config", str(config)).returncode == 0
    assert analyzer_of(new) == "enhanced"
    chosen = f"sqlite:///{tmp_path / 'chosen.db'}"
    assert cli(chosen, "sync", "--config", str(config), "--analyzer", "reference").returncode == 0
    assert analyzer_of(chosen) == "reference"
    existing = f"sqlite:///{tmp_path / 'existing.db'}"
    assert cli(existing, "import", "--example").returncode == 0
    done = cli(existing, "sync", "--config", str(config))
    assert (done.returncode, done.stderr) == (0, "")
    assert analyzer_of(existing) == "reference"
    refused = cli(existing, "sync", "--config", str(config), "--analyzer", "enhanced")
    assert refused.returncode == 1 and refused.stderr.startswith("Error: ")
    assert "reindex" in refused.stderr
    unknown = cli(f"sqlite:///{tmp_path / 'x.db'}", "sync", "--config", str(config), "--analyzer", "fancy")
    assert unknown.returncode == 1 and "fancy" in unknown.stderr
    assert not (tmp_path / "x.db").exists()


def test_serve_says_which_database_and_how_many_tools_each_server_has(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    synced = write_config(tmp_path, {"up": upstream_entry()})
    assert cli(db, "sync", "--config", str(synced), "--deny", "up/stall").returncode == 0
    config = write_config(tmp_path, {"up": upstream_entry(), "later": upstream_entry()})
    errlog = tmp_path / "serve-stderr.txt"

    async def run(db: str) -> None:
        with errlog.open("w") as stream:
            async with stdio_gateway(db, config, "--session", "s", errlog=stream) as client:
                await client.list_tools()

    anyio.run(run, db)
    lines = errlog.read_text().splitlines()
    assert lines[:2] == [
        f"tool-index serve: database {db} (analyzer enhanced)",
        f"tool-index serve: servers of {config}: up 5 tools, later 0 tools",
    ]
    assert not any("Warning" in line for line in lines)
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    anyio.run(run, empty)
    lines = errlog.read_text().splitlines()
    assert lines[:3] == [
        f"tool-index serve: database {empty} (analyzer enhanced)",
        f"tool-index serve: servers of {config}: up 0 tools, later 0 tools",
        f"tool-index serve: Warning: no server of {config} has tools in this database yet: syncing them "
        "in the background; searches find their tools once each is synced",
    ]
