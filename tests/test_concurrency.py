"""Real processes writing to one database at once, on each backend."""

from __future__ import annotations

import functools
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from discovery import ToolIndex
from discovery._diagnostics.verify import verify
from discovery._rules import replay
from store import SessionKey
from store import _migrate as migrate
from store._reads import CatalogReads
from tests.catalogs import SERVERS, generated_catalog

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
QUERIES = ["create issue", "list message", "search page", "delete branch", "sync user report", "watch pod"]


def run_workers(job: str, url: str, arguments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Start one ``job`` process per argument set at once; wait for all; every one must succeed."""
    return run_jobs(url, [(job, args) for args in arguments])


def run_jobs(url: str, jobs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Start one process per ``(job, arguments)`` at once; wait for all; every one must succeed."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.workers", job, url, json.dumps(args)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job, args in jobs
    ]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_eight_processes_share_sessions_without_losing_anything(index: ToolIndex, db_url: str) -> None:
    index.upsert_tools(generated_catalog(400))
    session_ids = ["shared-a", "shared-b", "shared-c"]
    for session_id in session_ids:
        index.session(session_id, discovery_mode="mcp-only")
    arguments = [
        {"worker": worker, "sessions": session_ids, "count": 25, "queries": QUERIES, "limit": 2}
        for worker in range(8)
    ]
    results = run_workers("search_many", db_url, arguments)
    assert all(result["errors"] == [] for result in results)
    activated_by_workers = {name for result in results for names in result["activated"] for name in names}
    searches = 0
    selected_everywhere: set[str] = set()
    for session_id in session_ids:
        record = index.session_record(session_id)
        calls = [call for call in record["calls"] if call["kind"] == "search"]
        searches += len(calls)
        assert len({call["call_id"] for call in calls}) == len(calls)
        assert len(record["selected"]) == len(set(record["selected"])), "a selection was recorded twice"
        assert len(record["active"]) == len(set(record["active"]))
        logged = [name for call in calls for name in call["activated"]]
        assert record["selected"] == logged, "every activation is kept, in log order"
        with index.store.reading() as reader:
            assert replay(reader.sessions.events(SessionKey("local", session_id))) == (
                record["active"],
                record["selected"],
            )
        selected_everywhere |= set(record["selected"])
    assert searches == 8 * 25
    assert selected_everywhere == activated_by_workers


def test_session_searches_run_while_the_catalog_changes_under_them(index: ToolIndex, db_url: str) -> None:
    # Searches hold the catalog steady while they rank and log; writers change it between them.
    # Whatever interleaving happens, no call fails, no write is lost and the stored index stays
    # exactly what its tools tokenize to.
    index.upsert_tools(generated_catalog(300, seed=5, servers=SERVERS[:6]))
    session_ids = ["busy-a", "busy-b"]
    for session_id in session_ids:
        index.session(session_id, discovery_mode="mcp-only")
    searchers = [
        ("search_many", {"worker": n, "sessions": session_ids, "count": 20, "queries": QUERIES, "limit": 3})
        for n in range(4)
    ]
    churners = [
        ("churn_catalog", {"server": server, "count": 40, "seed": 50 + number, "rounds": 4})
        for number, server in enumerate(SERVERS[6:8])
    ]
    results = run_jobs(db_url, searchers + churners)
    assert all(result["errors"] == [] for result in results[: len(searchers)])
    for result in results[len(searchers) :]:
        assert result["generations"] == sorted(result["generations"])
    for session_id in session_ids:
        record = index.session_record(session_id)
        calls = [call for call in record["calls"] if call["kind"] == "search"]
        assert len(calls) == 2 * 20
        with index.store.reading() as reader:
            replayed = replay(reader.sessions.events(SessionKey("local", session_id)))
        assert replayed == (record["active"], record["selected"])
    for number, server in enumerate(SERVERS[6:8]):
        expected: set[str] = set()
        for round_number in range(4):
            tools = generated_catalog(40, seed=50 + number + round_number, servers=[server])
            names = [tool["name"] for tool in tools]
            expected = (expected | set(names)) - set(names[::2])
        assert {tool.name for tool in index.tools(server=server)} == expected
    from discovery._diagnostics.verify import verify

    report = verify(index)
    assert report.ok, report.problems


def test_four_importers_equal_one_sequential_import(index: ToolIndex, db_url: str, tmp_path: Path) -> None:
    plans = [[SERVERS[i], SERVERS[(i + 1) % 4], SERVERS[4 + i]] for i in range(4)]
    run_workers("import_servers", db_url, [{"servers": plan, "per_server": 60, "seed": 3} for plan in plans])
    with ToolIndex.open(f"sqlite:///{tmp_path / 'sequential.db'}") as sequential:
        for server in dict.fromkeys(server for plan in plans for server in plan):
            sequential.upsert_tools(generated_catalog(60, seed=3, servers=[server]))
        assert _comparable(index) == _comparable(sequential)
    from discovery._diagnostics.verify import verify

    report = verify(index)
    assert report.ok, report.problems


def _comparable(index: ToolIndex) -> dict[str, Any]:
    stats = index.stats()
    stats.pop("generation")
    records = sorted((tool.as_record() for tool in index.tools()), key=lambda record: record["name"])
    searches = {query: [(hit.name, hit.score) for hit in index.search(query, limit=20)] for query in QUERIES}
    return {"stats": stats, "records": records, "searches": searches}


@contextmanager
def threads_switching_often() -> Iterator[None]:
    """Let the interpreter switch threads after every few bytecodes, where races show."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def fork_child(work: Callable[[], None]) -> int:
    """Run `work` in a forked child and return its pid. The child reports through its exit
    status only (0 when `work` returned) and never returns to pytest."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            work()
            status = 0
        except Exception:  # noqa: BLE001 - the child's failure, whatever it is, must reach stderr
            traceback.print_exc()
        finally:
            os._exit(status)
    return pid


def test_an_index_opened_before_a_fork_serves_the_parent_and_its_children(index: ToolIndex) -> None:
    """A host that opens the index and then forks its workers (a pre-forking server): each
    process gets connections of its own, so the parent and its children search, call and write
    at once, and nothing is lost. Children that used the parent's connections broke its
    PostgreSQL connection and their own calls."""
    index.upsert_tools(generated_catalog(200))
    parent = index.session("parent", discovery_mode="mcp-only")
    # The pool now holds a connection that has been used.
    parent.search_tool.execute("warm", {"query": "create issue", "limit": 1})
    calls = 15

    def search_and_call(session_id: str) -> None:
        session = index.session(session_id, discovery_mode="mcp-only")
        for number in range(calls):
            query = QUERIES[number % len(QUERIES)]
            index.search(query, limit=3)
            session.search_tool.execute(f"call-{number}", {"query": query, "limit": 1})

    def child_work(child: int) -> None:
        search_and_call(f"child-{child}")
        index.upsert_tools([{"name": f"forked_{child}", "description": "written by a forked child"}])

    children = [fork_child(functools.partial(child_work, child)) for child in range(3)]
    search_and_call("parent")
    assert [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children] == [0, 0, 0]
    assert {f"forked_{child}" for child in range(3)} <= {tool.name for tool in index.tools()}
    for session_id, expected in [("parent", 2 + calls), *((f"child-{c}", 1 + calls) for c in range(3))]:
        assert len(index.session_record(session_id)["calls"]) == expected  # create (and warm), then each call
    assert verify(index).problems == []


def test_processes_opening_one_new_session_at_once_all_get_it(index: ToolIndex) -> None:
    """Six processes open the same new session id at the same instant, ten times over: all of
    them succeed and the session is made once. On PostgreSQL each could find no session and
    insert it; all but one failed on the primary key."""
    index.upsert_tools(generated_catalog(60))
    index.search("warm the pool")

    def open_at_start(session_id: str, start: float) -> None:
        while time.time() < start:
            pass
        index.session(session_id, discovery_mode="all")

    for round_no in range(10):
        start = time.time() + 0.2
        children = [fork_child(functools.partial(open_at_start, f"race-{round_no}", start)) for _ in range(6)]
        assert [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children] == [0] * 6
        calls = index.session_record(f"race-{round_no}")["calls"]
        assert [call["kind"] for call in calls] == ["create"]


OPEN_AND_CLOSE = """
import sys, time
from discovery import ToolIndex
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # imports done: start together
ToolIndex.open(sys.argv[1]).close()
"""


def test_processes_opening_an_empty_database_at_once_all_succeed(empty_db_url: str) -> None:
    # Each process finds no schema and migrates; the migration lock (on SQLite, the write lock)
    # makes all but one wait and then find the schema at head (without it they collide creating
    # the same tables).
    start = str(time.time() + 4)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_CLOSE, empty_db_url, start],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    errors = [worker.communicate(timeout=120)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 4, errors
    with ToolIndex.open(empty_db_url) as index:
        assert migrate.pending_model_changes(index.store.engine) == []


def test_threads_share_one_index_while_the_catalog_changes(index: ToolIndex) -> None:
    """Six threads search, preview and call the search tool through one index (one set of
    caches) while a seventh rewrites tools: no call fails, and once the writer stops every
    thread ranks exactly what one thread alone does."""
    catalog = generated_catalog(400, seed=11)
    index.upsert_tools(catalog)
    names = [tool["name"] for tool in catalog if tool["name"].startswith("mcp__")]
    shared = []
    for number in range(3):
        session = index.session(f"threads-{number}", discovery_mode="all")
        session.set_active([*random.Random(number).sample(names, 20), "search_tool_bm25"])
        shared.append(session)
    errors: list[str] = []
    writing = threading.Event()
    writing.set()

    def search(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for call in range(60):
                query, session = rng.choice(QUERIES), rng.choice([None, *shared])
                if session is None:
                    index.search(query, limit=5)
                elif call % 2:
                    session.preview(query, 5)
                else:
                    session.search_tool.execute(f"t{seed}-{call}", {"query": query, "limit": 2})
        except Exception:  # noqa: BLE001 - a thread's failure, whatever it is, must reach the test
            errors.append(traceback.format_exc())

    def write() -> None:
        rng = random.Random(3)
        try:
            while writing.is_set():
                tool = rng.choice(catalog)
                index.upsert_tools([{**tool, "description": f"{tool.get('description', '')} {rng.random()}"}])
        except Exception:  # noqa: BLE001 - a thread's failure, whatever it is, must reach the test
            errors.append(traceback.format_exc())

    with threads_switching_often():
        writer = threading.Thread(target=write)
        searchers = [threading.Thread(target=search, args=(seed,)) for seed in range(6)]
        for thread in [writer, *searchers]:
            thread.start()
        for thread in searchers:
            thread.join()
        writing.clear()
        writer.join()
    assert errors == []

    def answers() -> list[list[tuple[str, float]]]:
        return [
            [(hit.name, hit.score) for hit in (index.search(q, 5) if s is None else s.preview(q, 5))]
            for q in QUERIES
            for s in [None, *shared]
        ]

    alone = answers()
    together: list[list[list[tuple[str, float]]]] = []
    with threads_switching_often():
        readers = [threading.Thread(target=lambda: together.append(answers())) for _ in range(4)]
        for thread in readers:
            thread.start()
        for thread in readers:
            thread.join()
    assert together == [alone] * 4


def test_a_thread_reading_an_older_snapshot_never_fills_the_newer_one(
    index: ToolIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread A, inside the index's caches, stops while reading tool rows of its (older)
    snapshot; meanwhile thread B removes one of those tools and searches, which finds the newer
    generation and takes a snapshot of it. What A then reads goes into its own snapshot only:
    the removed tool is not known in the newer one."""
    index.upsert_tools(generated_catalog(50, seed=2))
    names = [tool.name for tool in index.tools()][:5]
    inside, b_done = threading.Event(), threading.Event()
    lookup = CatalogReads.tools_by_names
    reader = threading.current_thread()

    def pausing_lookup(view: CatalogReads, wanted: Any) -> Any:
        if threading.current_thread() is reader and not inside.is_set():
            inside.set()
            b_done.wait(timeout=60)  # B takes the newer snapshot while A is inside
        return lookup(view, wanted)

    def remove_and_search() -> None:
        inside.wait()
        index.remove_tools([names[0]])
        index.search("tool", limit=1)
        b_done.set()

    monkeypatch.setattr(CatalogReads, "tools_by_names", pausing_lookup)
    b = threading.Thread(target=remove_and_search)
    b.start()
    with index.store.reading() as snapshot:
        assert index.ranker.known_names(snapshot, names) == set(names)  # A's snapshot
    b.join()
    with index.store.reading() as snapshot:
        assert index.ranker.known_names(snapshot, names) == set(names[1:])
