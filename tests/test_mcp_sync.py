"""``tool-index sync`` against upstream servers run as processes, over stdio and HTTP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from discovery import ToolIndex
from tests.mcp_helpers import UPSTREAM, cli, http_upstream, upstream_entry, write_config

pytestmark = pytest.mark.slow

SECRET = "tok-3f9a1c77e2"


def tools_json(db: str) -> list[dict[str, object]]:
    done = cli(db, "tools", "--json")
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, object]] = json.loads(done.stdout)
    return listed


def test_sync_reads_every_page_and_writes_what_import_would(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'synced.db'}"
    config = write_config(tmp_path, {"big": upstream_entry("--tools", "120", "--page", "7")})
    done = cli(db, "sync", "--config", str(config))
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "big: added 126, updated 0, unchanged 0, removed 0\n",
        "",
    )
    # The same list imported from a file, with --server and --replace.
    listing = tmp_path / "big.json"
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import mcp_upstream; "
        "print(json.dumps({'tools': [t.model_dump(by_alias=True, mode='json', exclude_none=True) "
        "for t in mcp_upstream.base_tools(120)]}))"
    )
    import subprocess

    listing.write_text(
        subprocess.run(
            [sys.executable, "-c", script, str(UPSTREAM.parent)], capture_output=True, text=True, check=True
        ).stdout
    )
    imported = f"sqlite:///{tmp_path / 'imported.db'}"
    assert cli(imported, "import", str(listing), "--server", "big", "--replace").returncode == 0
    assert tools_json(db) == tools_json(imported)
    again = cli(db, "sync", "--config", str(config))
    assert again.stdout == "big: added 0, updated 0, unchanged 126, removed 0\n"


def test_sync_removes_and_updates_like_replace(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    state = tmp_path / "state.json"
    config = write_config(tmp_path, {"s": upstream_entry("--tools", "3", "--state", str(state))})
    assert cli(db, "sync", "--config", str(config)).returncode == 0
    state.write_text(json.dumps({"echo": "Echo, now with a new description"}), encoding="utf-8")
    fewer = write_config(tmp_path, {"s": upstream_entry("--tools", "1", "--state", str(state))})
    done = cli(db, "sync", "--config", str(fewer))
    assert done.stdout == "s: added 0, updated 1, unchanged 6, removed 2\n"
    with ToolIndex.open(db) as index:
        assert index.tool("mcp__s__echo").description == "Echo, now with a new description"


def test_a_failing_server_keeps_its_tools_and_does_not_stop_the_others(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    first = write_config(tmp_path, {"a": upstream_entry(), "b": upstream_entry()})
    assert cli(db, "sync", "--config", str(first)).returncode == 0
    broken = write_config(
        tmp_path,
        {
            "a": {"command": str(tmp_path / "no-such-server")},
            "b": upstream_entry("--tools", "2"),
            "c": {"command": sys.executable, "args": ["-c", "print('not json-rpc at all')"]},
            "d": {"type": "http", "url": "http://127.0.0.1:9/mcp"},  # nothing listens on the discard port
        },
    )
    done = cli(db, "sync", "--config", str(broken))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert (
        lines[0] == f"a: failed: server 'a': cannot start: command not found ({tmp_path / 'no-such-server'})"
    )
    assert lines[1] == "b: added 2, updated 0, unchanged 6, removed 0"
    assert lines[2].startswith("c: failed: server 'c': ")
    assert lines[3] == "d: failed: server 'd': cannot connect to its url"
    assert done.stderr == "Error: 3 of 4 servers failed: a, c, d\n"
    with ToolIndex.open(db) as index:
        assert len(index.tools(server="a")) == 6
        assert len(index.tools(server="b")) == 8


NPM_404 = (
    "import sys\n"
    "sys.stderr.write('npm warn exec The following package was not found\\n')\n"
    "sys.stderr.write('npm error code E404\\n')\n"
    "sys.stderr.write('npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fmistyped\\n')\n"
    "sys.exit(1)\n"
)


def test_a_server_that_fails_to_start_is_reported_with_its_own_last_words(tmp_path: Path) -> None:
    """A mistyped npm package: npx writes npm's 404 on stderr and exits; sync says so, in the
    server's words, and the upstream log still gets all of its stderr."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(tmp_path, {"npm": {"command": sys.executable, "args": ["-c", NPM_404]}})
    log = tmp_path / "upstream.log"
    done = cli(db, "sync", "--config", str(config), "--upstream-log", str(log))
    assert done.returncode == 1
    assert done.stdout.startswith("npm: failed: server 'npm': connection failed: ")
    assert done.stdout.endswith(
        " (its stderr ended: npm warn exec The following package was not found | npm error code E404 | "
        "npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fmistyped)\n"
    )
    assert "npm error code E404\n" in log.read_text(encoding="utf-8")


def test_sync_over_http_with_a_secret_header_stores_no_secret(tmp_path: Path) -> None:
    db_path = tmp_path / "tools.db"
    db = f"sqlite:///{db_path}"
    with http_upstream("--tools", "4", "--page", "3") as url:
        config = write_config(
            tmp_path,
            {
                "web": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
                "local": upstream_entry(env={"API_TOKEN": "${WEB_TOKEN}"}),
            },
        )
        import os

        env = {**os.environ, "WEB_TOKEN": SECRET}
        done = cli(db, "sync", "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "web: added 10, updated 0, unchanged 0, removed 0",
        "local: added 6, updated 0, unchanged 0, removed 0",
    ]
    assert SECRET not in done.stdout + done.stderr
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("tools.db*"))
    assert SECRET.encode() not in stored


def test_a_python_host_calls_tools_without_serve(tmp_path: Path) -> None:
    """The library's API for hosts: the servers of a config, connected when first called."""
    import anyio

    from discovery._mcp.failures import UpstreamError
    from discovery._mcp.names import UnknownServer
    from discovery._mcp.upstreams import Upstreams

    config = write_config(tmp_path, {"up": upstream_entry(), "down": {"command": str(tmp_path / "absent")}})

    async def run() -> None:
        async with Upstreams.from_config(config, timeout=20) as upstreams:
            echoed = await upstreams.call("mcp__up__echo", {"text": "host"})
            assert (echoed.structured_content, echoed.is_error) == ({"echo": "host"}, False)
            assert [tool.name for tool in await upstreams.list_tools("up")][:2] == ["echo", "fail"]
            with pytest.raises(UpstreamError, match=r"^server 'down': cannot start: command not found"):
                await upstreams.call("mcp__down__anything", {})
            with pytest.raises(UnknownServer):
                await upstreams.call("mcp__elsewhere__x", {})

    anyio.run(run)


def test_a_relative_cwd_is_the_config_files_and_a_missing_one_is_named(db_url: str, tmp_path: Path) -> None:
    """The gateway runs from another directory than the config's: ``cwd`` still means the config's
    ``work`` directory, where the upstream finds its relative ``--state`` file."""
    configs = tmp_path / "configs"
    (configs / "work").mkdir(parents=True)
    (configs / "work" / "state.json").write_text(json.dumps({"echo": "Echo from the work directory"}))
    (configs / "a-file").write_text("")
    servers = {
        "rel": {**upstream_entry("--state", "state.json"), "cwd": "work"},
        "gone": {**upstream_entry(), "cwd": "no-such-dir"},
        "file": {**upstream_entry(), "cwd": "a-file"},
        "nocmd": {"command": str(tmp_path / "no-such-server"), "cwd": "work"},
    }
    config = write_config(configs, servers)
    done = cli(db_url, "sync", "--config", str(config))
    assert done.stdout.splitlines() == [
        "rel: added 6, updated 0, unchanged 0, removed 0",
        f"gone: failed: server 'gone': cannot start: working directory not found ({configs / 'no-such-dir'})",
        "file: failed: server 'file': cannot start: working directory is not a directory "
        f"({configs / 'a-file'})",
        f"nocmd: failed: server 'nocmd': cannot start: command not found ({tmp_path / 'no-such-server'})",
    ]
    assert (done.returncode, done.stderr) == (1, "Error: 3 of 4 servers failed: gone, file, nocmd\n")
    with ToolIndex.open(db_url) as index:
        assert index.tool("mcp__rel__echo").description == "Echo from the work directory"


def test_sync_reads_a_vs_code_file_and_skips_entries_that_need_an_input(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    entry = json.dumps(upstream_entry("--tools", "1"))
    config = tmp_path / "mcp.json"
    config.write_text(
        "{\n  // VS Code's format: comments, trailing commas, inputs\n"
        '  "inputs": [{"type": "promptString", "id": "key", "password": true},],\n'
        f'  "servers": {{"local": {entry}, /* needs a prompt */ "asks": {{"command": "x", '
        '"args": ["--key", "${input:key}"]},},\n}\n',
        encoding="utf-8",
    )
    done = cli(db, "sync", "--config", str(config))
    assert (done.returncode, done.stdout) == (0, "local: added 7, updated 0, unchanged 0, removed 0\n")
    assert done.stderr == (
        f"Warning: {config}: server 'asks' is skipped: it uses VS Code's ${{input:key}}, which tool-index "
        "cannot prompt for; put the value in an environment variable and write ${VAR} instead\n"
    )
    named = cli(db, "sync", "--config", str(config), "--server", "asks")
    assert named.returncode == 1
    assert named.stderr.splitlines()[-1].startswith(f"Error: {config}: server 'asks' cannot be started: ")


def test_many_servers_sync_a_few_at_a_time_each_timed_from_its_own_start(tmp_path: Path) -> None:
    """30 stdio servers, at most 3 running at once, with a timeout that all of them together
    exceed: each is timed from its own start, so every one syncs."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    live = tmp_path / "live"
    live.mkdir()
    servers = {
        f"s{i:02d}": upstream_entry("--tools", "1", "--live-dir", str(live), "--start-delay", "0.2")
        for i in range(30)
    }
    config = write_config(tmp_path, servers)
    done = cli(db, "sync", "--config", str(config), "--max-starting", "3", "--timeout", "10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"{name}: added 7, updated 0, unchanged 0, removed 0" for name in servers
    ]
    counts = [int(line) for line in (live / "counts").read_text().split()]
    assert len(counts) == 30 and max(counts) <= 3
    assert not list(live.glob("*.live"))  # every server was stopped
    with ToolIndex.open(db) as index:
        assert index.stats()["tools"] == 30 * 7


def test_a_list_of_many_pages_has_one_deadline_for_all_of_them(tmp_path: Path) -> None:
    """Each page comes well within the timeout; all of them together do not."""
    db = f"sqlite:///{tmp_path / 'tools.db'}"
    config = write_config(
        tmp_path,
        {
            "slow": upstream_entry("--tools", "24", "--page", "2", "--page-delay", "0.5"),
            "quick": upstream_entry(),
        },
    )
    done = cli(db, "sync", "--config", str(config), "--timeout", "3")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "slow: failed: server 'slow': tools/list (all its pages) took longer than 3 s",
        "quick: added 6, updated 0, unchanged 0, removed 0",
    ]


def test_an_error_of_the_gateways_own_in_a_call_is_its_own_never_the_servers(tmp_path: Path) -> None:
    """What the caller got wrong (arguments no JSON can carry) is raised as it is: the server is
    not reported as failing, and its connection is kept for the next call."""
    import anyio
    from pydantic_core import PydanticSerializationError

    from discovery._mcp.upstreams import Upstreams

    config = write_config(tmp_path, {"up": upstream_entry()})

    async def run() -> None:
        async with Upstreams.from_config(config, timeout=20) as upstreams:
            await upstreams.call("mcp__up__echo", {"text": "first"})
            upstream = upstreams.upstream("up")
            connection = upstream.live
            with pytest.raises(PydanticSerializationError):
                await upstreams.call("mcp__up__echo", {"text": object()})
            assert upstream.live is connection and upstream.last_error is None
            echoed = await upstreams.call("mcp__up__echo", {"text": "again"})
            assert (echoed.structured_content, echoed.is_error) == ({"echo": "again"}, False)

    anyio.run(run)
