"""Incremental writes keep the index exact: any sequence of upserts, updates, replacing imports and
removals gives the index a fresh import of the final catalog gives (contract §2, §4)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from discovery import ToolIndex
from discovery._diagnostics.verify import verify
from discovery.errors import ServerNameCollision
from store import _catalog as catalog
from store import _postings as postings
from tests.conftest import BACKENDS, PG_ENV, scratch_database
from tests.examples import examples
from tests.test_ranking import MCP_NAMES, PLAIN_NAMES, WORDS, tool_records

Record = dict[str, Any]
Operation = tuple[str, Any]
QUERIES = [*WORDS, "github slack", "mcp tool", "issue issue post", "owner repo", "a_b", "git"]


@pytest.fixture(params=BACKENDS)
def fresh_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], ToolIndex]]:
    """A factory of empty indexes on one backend, all closed and dropped after the test."""
    if request.param == "postgresql" and not os.environ.get(PG_ENV):
        pytest.skip(f"set {PG_ENV} to a PostgreSQL URL to run the PostgreSQL backend")
    with ExitStack() as stack:
        open_indexes: list[ToolIndex] = []

        def make() -> ToolIndex:
            # Hypothesis runs many examples in one test: keep only the two newest indexes open,
            # so the examples do not pile up server connections.
            while len(open_indexes) >= 2:
                open_indexes.pop(0).close()
            url = stack.enter_context(scratch_database(str(request.param), tmp_path))
            index = ToolIndex.open(url)
            open_indexes.append(index)
            stack.callback(index.close)
            return index

        yield make


def snapshot(index: ToolIndex) -> dict[str, Any]:
    """Everything a reader can observe: the records, the statistics and the rankings."""
    stats = index.stats()
    return {
        "tools": sorted(
            (tool.name, repr(tool.as_record()), tool.grp, tool.doc_len) for tool in index.tools()
        ),
        "stats": {key: stats[key] for key in ("tools", "terms", "postings", "avgdl", "sources", "servers")},
        "rankings": {
            (query, mode): [(hit.name, hit.score) for hit in index.search(query, limit=1000, mode=mode)]
            for query in QUERIES
            for mode in ("all", "mcp-only")
        },
    }


def apply(model: dict[str, Record], operation: Operation) -> None:
    """What an operation does to the catalog, by contract §2 (the model the index must match)."""
    kind, argument = operation
    if kind == "remove":
        for name in argument:
            model.pop(name, None)
        return
    scope, records = (None, argument) if kind == "upsert" else argument
    if kind == "replace":
        keep = {record["name"] for record in records}
        for name in [name for name, record in model.items() if name not in keep]:
            if scope is None or model[name].get("server_name") == scope:
                del model[name]
    for record in records:
        model[record["name"]] = record


def refused(model: dict[str, Record], operation: Operation) -> bool:
    """Whether a write of one server's tools takes a name another server's record has: then it is
    refused whole (``ServerNameCollision``) and changes nothing."""
    kind, argument = operation
    if kind != "replace" or argument[0] is None:
        return False
    server, records = argument
    owners = [model[record["name"]].get("server_name") for record in records if record["name"] in model]
    return any(owner is not None and owner != server for owner in owners)


def run(index: ToolIndex, operation: Operation) -> None:
    kind, argument = operation
    if kind == "remove":
        index.remove_tools(argument)
    elif kind == "upsert":
        index.upsert_tools(argument)
    else:
        server, records = argument
        index.upsert_tools(records, replace=True, server=server)


NAMES = st.sampled_from(PLAIN_NAMES[:8] + MCP_NAMES)


@st.composite
def batches(draw: st.DrawFn) -> list[Record]:
    names = draw(st.lists(NAMES, max_size=6))  # repeats: the last record of a name wins
    return [draw(tool_records(name)) for name in names]


OPERATIONS = st.one_of(
    st.tuples(st.just("upsert"), batches()),
    st.tuples(st.just("remove"), st.lists(st.one_of(NAMES, st.just("never-added")), max_size=4)),
    st.tuples(
        st.just("replace"), st.tuples(st.sampled_from([None, "github", "slack", "Git", "absent"]), batches())
    ),
)


LAYOUTS: dict[str, dict[tuple[Any, str], int]] = {
    "default": {},
    # Every change an override, never merged: reads apply the whole delta.
    "overrides only": {(postings, "REWRITE_FACTOR"): 0, (postings, "MERGE_SLACK"): 10**9},
    # Every change merged into its block at once: the delta stays empty.
    "blocks only": {(postings, "REWRITE_FACTOR"): 10**9},
    # Overrides merged after a few: both paths, and merges of blocks that have overrides.
    "frequent merges": {
        (postings, "REWRITE_FACTOR"): 0,
        (postings, "MERGE_SLACK"): 2,
        (postings, "MERGE_FRACTION"): 2,
    },
    # Two tools a batch: a name given twice in one write may come back in a later batch.
    "small batches": {(catalog, "WRITE_BATCH"): 2},
}


@pytest.fixture(params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How writes split between posting blocks and overrides (``store._postings``' thresholds),
    and how many tools a write takes at a time."""
    for (module, name), value in LAYOUTS[request.param].items():
        monkeypatch.setattr(module, name, value)
    return str(request.param)


@pytest.mark.slow
@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=8))
def test_incremental_writes_equal_a_fresh_import(
    fresh_index: Callable[[], ToolIndex], layout: str, operations: list[Operation]
) -> None:
    incremental = fresh_index()
    model: dict[str, Record] = {}
    for operation in operations:
        if refused(model, operation):
            with pytest.raises(ServerNameCollision):
                run(incremental, operation)
            continue
        run(incremental, operation)
        apply(model, operation)
    scratch = fresh_index()
    scratch.upsert_tools(list(model.values()))
    assert {tool.name for tool in incremental.tools()} == set(model)
    assert snapshot(incremental) == snapshot(scratch)
    assert verify(incremental).problems == []
    assert verify(scratch).problems == []


# --- generations and reports ---------------------------------------------------------------------


def tool(name: str, description: str = "", **fields: Any) -> Record:
    if name.startswith("mcp__"):
        _, server, tool_name = name.split("__")
        fields = {"server_name": server, "mcp_tool_name": tool_name, **fields}
    return {"name": name, "description": description, **fields}


GITHUB = [tool("mcp__github__create_issue", "Create an issue"), tool("mcp__github__list_prs", "List pulls")]
SLACK = [tool("mcp__slack__post", "Post a message"), tool("mcp__slack__read", "Read messages")]
BUILTINS = [tool("grep", "Search file contents"), tool("find", "Find files")]


def generation(index: ToolIndex) -> int:
    return int(index.stats()["generation"])


def test_an_unchanged_upsert_does_not_bump_the_generation(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB + BUILTINS)
    before = generation(index)
    report = index.upsert_tools(GITHUB + BUILTINS)
    assert report.counts() == {"added": 0, "updated": 0, "unchanged": 4, "removed": 0}
    assert generation(index) == before
    index.upsert_tools(GITHUB + BUILTINS, replace=True)
    index.remove_tools(["not-there"])
    assert generation(index) == before


def test_every_change_bumps_the_generation_once(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB)
    first = generation(index)
    report = index.upsert_tools([tool("mcp__github__create_issue", "Open an issue"), *BUILTINS])
    assert (report.added, report.updated, report.unchanged) == (
        ["grep", "find"],
        ["mcp__github__create_issue"],
        [],
    )
    assert generation(index) == first + 1
    assert index.remove_tools(["grep", "nope"]) == ["grep"]
    assert generation(index) == first + 2


def test_an_update_replaces_the_old_postings(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB)
    index.upsert_tools([tool("mcp__github__create_issue", "Open a ticket")])
    assert [hit.name for hit in index.search("ticket")] == ["mcp__github__create_issue"]
    assert [hit.name for hit in index.search("an")] == []
    assert verify(index).ok


def test_a_name_given_twice_keeps_its_last_record(index: ToolIndex) -> None:
    report = index.upsert_tools([tool("grep", "first"), tool("find"), tool("grep", "second")])
    assert report.added == ["grep", "find"]
    assert index.tool("grep").description == "second"
    assert verify(index).ok


@pytest.mark.parametrize("batch", [1, 2, 1000])
def test_a_name_given_again_in_a_later_batch(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    monkeypatch.setattr(catalog, "WRITE_BATCH", batch)
    index.upsert_tools([tool("grep", "Search file contents"), tool("ls", "List files")])
    report = index.upsert_tools(
        [tool("grep", "first"), tool("find"), tool("grep", "Search file contents"), tool("ls", "Listing")]
    )
    # Judged against the catalog before the write: grep ends as it was, whatever came between.
    assert (report.added, report.updated, report.unchanged) == (["find"], ["ls"], ["grep"])
    assert [t.name for t in index.tools()] == ["grep", "ls", "find"]
    assert index.tool("grep").description == "Search file contents"
    assert [hit.name for hit in index.search("first")] == []
    report = index.upsert_tools([tool("cat", "one"), tool("cat", "two"), tool("cat", "three")])
    assert (report.added, index.tool("cat").description) == (["cat"], "three")
    assert verify(index).problems == []


# --- replace scopes ------------------------------------------------------------------------------


def names(index: ToolIndex) -> list[str]:
    return sorted(tool.name for tool in index.tools())


def test_replace_for_a_server_removes_only_that_servers_missing_tools(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB + SLACK + BUILTINS)
    report = index.upsert_tools([GITHUB[0]], replace=True, server="github")
    assert report.counts() == {"added": 0, "updated": 0, "unchanged": 1, "removed": 1}
    assert report.removed == ["mcp__github__list_prs"]
    assert names(index) == sorted(["mcp__github__create_issue", *(t["name"] for t in SLACK + BUILTINS)])
    assert verify(index).ok


def test_replace_for_a_server_keeps_other_servers_tools_it_is_given(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB + SLACK)
    extra = tool("mcp__slack__archive", "Archive a channel")
    report = index.upsert_tools([extra], replace=True, server="github")
    assert (report.added, sorted(report.removed)) == (
        ["mcp__slack__archive"],
        sorted(t["name"] for t in GITHUB),
    )
    assert names(index) == sorted([extra["name"], *(t["name"] for t in SLACK)])


def test_replace_with_nothing_for_a_server_empties_that_server(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB + SLACK)
    report = index.upsert_tools([], replace=True, server="slack")
    assert sorted(report.removed) == sorted(t["name"] for t in SLACK)
    assert names(index) == sorted(t["name"] for t in GITHUB)
    assert index.stats()["servers"] == {"github": 2}


def test_replace_without_a_server_replaces_the_whole_catalog(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB + SLACK + BUILTINS)
    report = index.upsert_tools([BUILTINS[1], SLACK[0]], replace=True)
    assert sorted(report.removed) == sorted(["grep", *(t["name"] for t in GITHUB), "mcp__slack__read"])
    assert report.unchanged == ["find", "mcp__slack__post"]
    assert names(index) == ["find", "mcp__slack__post"]
    assert verify(index).ok


def test_removing_every_tool_leaves_empty_aggregates(index: ToolIndex) -> None:
    index.upsert_tools(GITHUB + SLACK + BUILTINS)
    index.remove_tools([t["name"] for t in GITHUB + SLACK + BUILTINS])
    stats = index.stats()
    assert (stats["tools"], stats["terms"], stats["postings"]) == (0, 0, 0)
    assert verify(index).ok
    assert index.search("issue") == []
