"""A call runs on exactly the server and tool that the record the model saw names, even when two
configured servers give the same catalog name: server ``a``'s tool ``b__c`` and server ``a__b``'s
tool ``c`` are both ``mcp__a__b__c``. The second to be synced is refused and never overwrites the
first's record. Real upstream processes, real ``sync`` and ``serve`` processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from discovery import ToolIndex
from tests.mcp_helpers import call, cli, search, stdio_gateway, text_of, upstream_entry, write_config

pytestmark = pytest.mark.slow

NAME = "mcp__a__b__c"
SERVERS = {"a": upstream_entry("--tool", "b__c"), "a__b": upstream_entry("--tool", "c")}
ANSWERS = {"a": "b__c: done", "a__b": "c: done"}
"""What each server's colliding tool answers: its own upstream name."""


def collision(loser: str, owner: str) -> str:
    tool = {"a": "b__c", "a__b": "c"}
    return (
        f"{loser}: failed: {NAME} is already server {owner!r}'s tool {tool[owner]!r}, so server {loser!r} "
        f"cannot have it (the two servers' catalog names collide); nothing of {loser!r} was written: "
        "rename one of the two servers"
    )


def owner_of(db: str) -> tuple[str | None, str | None]:
    with ToolIndex.open(db) as index:
        tool = index.tool(NAME)
        return tool.server_name, tool.mcp_tool_name


async def call_colliding(db: str, config: Path) -> str:
    async with stdio_gateway(db, config, "--session", "s") as client:
        found = await search(client, "extra tool", limit=5)
        assert NAME in found["activated_tools"], found
        result = await call(client, NAME, {})
        assert not result.is_error, text_of(result)
        return text_of(result)


@pytest.mark.parametrize("first", ["a", "a__b"])
def test_the_second_server_to_sync_a_colliding_name_is_refused_and_calls_go_to_the_first(
    db_url: str, tmp_path: Path, first: str
) -> None:
    config = write_config(tmp_path, SERVERS)
    other = "a__b" if first == "a" else "a"
    assert cli(db_url, "sync", "--config", str(config), "--server", first).returncode == 0
    done = cli(db_url, "sync", "--config", str(config))
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert lines[first] == "added 0, updated 0, unchanged 7, removed 0"
    assert f"{other}: {lines[other]}" == collision(other, first)
    assert (done.returncode, done.stderr) == (1, f"Error: 1 of 2 servers failed: {other}\n")
    assert owner_of(db_url) == (first, {"a": "b__c", "a__b": "c"}[first])
    with ToolIndex.open(db_url) as index:
        assert index.tools(server=other) == []
    assert anyio.run(call_colliding, db_url, config) == ANSWERS[first]


def test_servers_synced_at_once_keep_one_owner_and_the_call_follows_the_record(
    db_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, SERVERS)
    done = cli(db_url, "sync", "--config", str(config))
    assert done.returncode == 1
    owner, _ = owner_of(db_url)
    assert owner in ANSWERS
    loser = "a__b" if owner == "a" else "a"
    assert collision(loser, owner) in done.stdout.splitlines()
    assert anyio.run(call_colliding, db_url, config) == ANSWERS[owner]
    again = cli(db_url, "sync", "--config", str(config))
    assert owner_of(db_url)[0] == owner and collision(loser, owner) in again.stdout.splitlines()


def test_a_record_imported_for_one_server_is_called_on_it_even_when_the_longer_name_is_configured(
    db_url: str, tmp_path: Path
) -> None:
    """Before, the name was split by the longest configured server name: ``a__b``, tool ``c``."""
    listing = tmp_path / "a.json"
    listing.write_text(
        '{"tools": [{"name": "b__c", "description": "Extra tool b__c of this server"}]}', encoding="utf-8"
    )
    assert cli(db_url, "import", str(listing), "--server", "a").returncode == 0
    config = write_config(tmp_path, SERVERS)
    assert anyio.run(call_colliding, db_url, config) == "b__c: done"


def test_the_python_host_api_refuses_a_name_two_servers_give(tmp_path: Path) -> None:
    from discovery._mcp.names import UnknownServer
    from discovery._mcp.upstreams import Upstreams

    config = write_config(tmp_path, SERVERS)

    async def run() -> Any:
        async with Upstreams.from_config(config, timeout=20) as upstreams:
            with pytest.raises(UnknownServer, match=r"could be server 'a__b'.s tool 'c' or server 'a'.s"):
                await upstreams.call(NAME, {})
            direct = await upstreams.call_upstream(upstreams.upstream("a"), "b__c", {})
            assert text_of(direct) == "b__c: done"

    anyio.run(run)


def test_an_import_for_another_server_never_takes_over_a_record(db_url: str, tmp_path: Path) -> None:
    """``import --server`` is the path sync writes through: the same refusal, the catalog unchanged."""
    first = tmp_path / "a.json"
    first.write_text('{"tools": [{"name": "b__c", "description": "Tool b__c of a"}]}', encoding="utf-8")
    second = tmp_path / "ab.json"
    second.write_text('{"tools": [{"name": "c", "description": "Tool c of a__b"}]}', encoding="utf-8")
    assert cli(db_url, "import", str(first), "--server", "a").returncode == 0
    for replace in ([], ["--replace"]):
        done = cli(db_url, "import", str(second), "--server", "a__b", *replace)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            f"Error: {NAME} is already server 'a''s tool 'b__c', so server 'a__b' cannot have it (the two "
            "servers' catalog names collide); nothing of 'a__b' was written: rename one of the two servers\n"
        )
    assert owner_of(db_url) == ("a", "b__c")
    with ToolIndex.open(db_url) as index:
        assert index.tool(NAME).description == "Tool b__c of a"
