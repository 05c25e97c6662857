"""Learning counts teachers, with real processes on both backends (issue 57): a Sybil of many
sessions of one identity, taught from its own process, moves nothing for another identity; K
identities do; the membership oracle finds nothing below K, in scores and in ``explain``;
``learned --forget-identity`` leaves the rankings of an index the identity never taught; and
through a ``serve --tokens`` gateway over HTTP, mallory's single session does not change alice's
fresh search while K = 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from discovery import ToolIndex
from tests.mcp_helpers import call, cli, eventually, http_gateway, search, synced_into
from tests.test_cli import REPO
from tests.test_learning import TEACHER, with_demo
from tests.test_learning_identities import CODE_WORD, played, scores
from tests.test_mcp_identities import as_identity

TEACH = """
import sys
from discovery import ToolIndex
url, identity, prefix, count, query, tool = sys.argv[1:7]
with ToolIndex.open(url) as index:
    for number in range(int(count)):
        session = index.session(f"{prefix}-{number}", identity=identity, discovery_mode="all")
        session.search_tool.execute("c1", {"query": query})
        session.record_call(tool)
"""

QUERIES = (CODE_WORD, "notify the team", f"{CODE_WORD} notify", "create an issue")


def taught_in_a_process(db: str, identity: str, sessions: int, query: str, tool: str = TEACHER) -> None:
    """``sessions`` sessions of ``identity``, each searching ``query`` and calling ``tool``, in a
    process of their own."""
    done = subprocess.run(
        [sys.executable, "-c", TEACH, db, identity, f"{identity}-s", str(sessions), query, tool],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


def searched(db: str, query: str, identity: str) -> list[tuple[str, float]]:
    """A read-only search as ``identity``, by the command line."""
    done = cli(db, "search", query, "--identity", identity, "--limit", "30", "--json")
    assert done.returncode == 0, done.stderr
    return [(tool["name"], tool["score"]) for tool in json.loads(done.stdout)["tools"]]


def explained_tf(db: str, query: str, name: str, identity: str) -> dict[str, int]:
    """The learned terms ``explain`` shows ``identity`` for ``name``, with their tf."""
    done = cli(db, "explain", query, name, "--identity", identity, "--json")
    assert done.returncode == 0, done.stderr
    return {part["term"]: part["tf"] for part in json.loads(done.stdout)["learned"] if part["tf"]}


@pytest.mark.slow
def test_a_sybil_process_moves_nothing_for_others_and_k_identities_do(db_url: str) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
    before = {query: searched(db_url, query, "carol") for query in QUERIES}
    taught_in_a_process(db_url, "mallory", 25, f"{CODE_WORD} notify the team")
    assert {query: searched(db_url, query, "carol") for query in QUERIES} == before
    assert explained_tf(db_url, CODE_WORD, TEACHER, "carol") == {}
    assert explained_tf(db_url, CODE_WORD, TEACHER, "mallory") == {CODE_WORD: 25}
    taught_in_a_process(db_url, "alice", 1, CODE_WORD)  # a second identity: K = 2 reached
    assert [name for name, _ in searched(db_url, CODE_WORD, "carol")] == [TEACHER]
    assert explained_tf(db_url, CODE_WORD, TEACHER, "carol") == {CODE_WORD: 2}
    assert cli(db_url, "verify").returncode == 0


@pytest.mark.slow
def test_the_oracle_finds_nothing_below_k(db_url: str) -> None:
    """alice searches a request holding a code name and calls a tool; mallory, in her own
    process, searching that word alone is shown nothing of it, in scores or in ``explain``."""
    tool = "mcp__notes__create_note"
    with ToolIndex.open(db_url, learning=True) as index:
        with_demo(index)
    as_mallory = ("explain", f"{CODE_WORD} plan", tool, "--identity", "mallory")
    explained_before = cli(db_url, *as_mallory).stdout
    taught_in_a_process(db_url, "alice", 1, f"draft the {CODE_WORD} launch plan", tool)
    assert [name for name, _ in searched(db_url, CODE_WORD, "alice")] == [tool]
    assert searched(db_url, CODE_WORD, "mallory") == []
    assert explained_tf(db_url, CODE_WORD, tool, "mallory") == {}
    # Not even the size of what alice taught: mallory's explain reads as before it.
    assert cli(db_url, *as_mallory).stdout == explained_before
    shown = json.loads(cli(db_url, "learned", tool, "--json").stdout)
    assert [(term["term"], term["shared"]) for term in shown["terms"] if term["term"] == CODE_WORD] == [
        (CODE_WORD, False)
    ]


@pytest.mark.slow
def test_forgetting_an_identity_by_the_command_line_restores_the_rankings(
    db_url: str, tmp_path: Path
) -> None:
    with ToolIndex.open(db_url, learning=True) as index:
        played(index, with_mallory=True)
    shown = cli(db_url, "learned", "--forget-identity", "mallory")
    assert shown.returncode == 0 and shown.stdout.startswith("forgot ")
    assert cli(db_url, "verify").returncode == 0
    with ToolIndex.open(db_url) as index, ToolIndex.open(str(tmp_path / "never.db"), learning=True) as never:
        played(never, with_mallory=False)
        for query in (*QUERIES, "delete everything"):
            for viewer in ("local", "alice", "bob", "mallory"):
                assert scores(index, query, viewer) == scores(never, query, viewer), (query, viewer)


TOKENS = {"alice": "alice-secret-0c1d", "mallory": "mallory-secret-9e7f", "bob": "bob-secret-5a22"}


async def fresh_search(url: str, secret: str, session_id: str, query: str) -> dict[str, Any]:
    async with as_identity(f"{url}?session={session_id}", secret) as client:
        return await search(client, query, limit=3)


@pytest.mark.slow
def test_through_a_tokens_gateway_one_identity_does_not_steer_another(db_url: str, tmp_path: Path) -> None:
    """mallory searches alice's likely request with words that find the tool she wants, and
    calls it; alice's next fresh search answers as before. Once bob, a second identity, does the
    same, it is shared (K = 2) and alice's search finds it."""
    config = synced_into(db_url, tmp_path)
    assert cli(db_url, "learning", "on").returncode == 0
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")
    request = f"{CODE_WORD} status report"
    with http_gateway(db_url, config, "--tokens", str(tokens), "--realm", "team", "--expose-active") as url:

        async def teach(identity: str) -> None:
            async with as_identity(f"{url}?session=steer", TOKENS[identity]) as client:
                await search(client, f"{request} echo a text back", limit=1)
                assert not (await call(client, "mcp__up__echo", {"text": "x"})).is_error

            async def credited() -> bool | None:
                with ToolIndex.open(db_url) as index:
                    taught = index.learned("mcp__up__echo", identity=f"{identity}@team").terms
                return True if any(term.yours for term in taught) else None

            await eventually(credited, f"{identity}'s call is credited")

        async def run() -> None:
            before = await fresh_search(url, TOKENS["alice"], "a1", request)
            await teach("mallory")
            after = await fresh_search(url, TOKENS["alice"], "a2", request)
            assert (after["activated_tools"], after["tools"]) == (before["activated_tools"], before["tools"])
            await teach("bob")
            shared = await fresh_search(url, TOKENS["alice"], "a3", request)
            assert "mcp__up__echo" in [tool["name"] for tool in shared["tools"]]

        anyio.run(run)
    assert cli(db_url, "verify").returncode == 0
