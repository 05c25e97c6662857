"""Sessions on each backend: the worked example of contract §6, persistence, resume, the log."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from discovery import ToolCallError, ToolIndex, ToolIndexError, UnknownToolNames
from discovery._diagnostics.verify import verify
from discovery._results import SearchDetails, compact_json, json_text
from discovery._rules import effective_mode, replay
from discovery._sessions.settings import SessionSettings
from discovery.errors import DiscoveryDisabled, DiscoveryUnavailable, QueryWithoutTerms
from store import Event, SessionKey, Writer
from store.errors import SessionNotFound
from tests.catalogs import WORKED_EXAMPLE, generated_catalog
from tests.examples import examples

REPO = Path(__file__).resolve().parent.parent
CALLS = itertools.count()


@pytest.fixture
def example(index: ToolIndex) -> ToolIndex:
    index.upsert_tools(WORKED_EXAMPLE)
    return index


def search(index: ToolIndex, session_id: str, query: str, **params: Any) -> SearchDetails:
    call_id = f"call-{next(CALLS)}"
    return index.session(session_id).search_tool.execute(call_id, {"query": query, **params}).details


def test_worked_example_first_call(example: ToolIndex) -> None:
    session = example.session("s", discovery_mode="mcp-only")
    result = session.search_tool.execute("c1", {"query": "github"})
    assert result.content == (
        '{"query":"github","activated_tools":["mcp__github_create_issue","mcp__github_list_pull_requests"],'
        '"match_count":2,"total_tools":3}'
    )
    assert [tool["score"] for tool in result.details["tools"]] == [1.410324, 1.403799]
    assert session.total_tools == 1


def test_worked_example_exhausts_the_corpus(example: ToolIndex) -> None:
    example.session("s", discovery_mode="mcp-only")
    first = search(example, "s", "github", limit=1)
    second = search(example, "s", "github", limit=1)
    third = search(example, "s", "github", limit=1)
    assert [t["score"] for t in first["tools"]] == [1.410324] and first["total_tools"] == 3
    assert [t["score"] for t in second["tools"]] == [2.07053] and second["total_tools"] == 2
    assert third["tools"] == [] and third["total_tools"] == 1 and third["activated_tools"] == []
    assert example.session("s").selected == ["mcp__github_create_issue", "mcp__github_list_pull_requests"]


def test_selection_survives_a_new_process(example: ToolIndex, db_url: str) -> None:
    example.session("kept", discovery_mode="mcp-only").search_tool.execute("c1", {"query": "slack"})
    code = (
        "import json, sys\n"
        "from discovery import ToolIndex\n"
        "s = ToolIndex.open(sys.argv[1]).session('kept')\n"
        "print(json.dumps({'active': s.active, 'selected': s.selected, 'mode': s.effective_mode}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, db_url], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert json.loads(out.stdout) == {
        "active": ["search_tool_bm25", "mcp__slack_post_message"],
        "selected": ["mcp__slack_post_message"],
        "mode": "mcp-only",
    }


def test_tools_that_leave_are_skipped_and_come_back(example: ToolIndex) -> None:
    session = example.session("s", discovery_mode="mcp-only")
    session.search_tool.execute("c1", {"query": "slack"})
    example.remove_tools(["mcp__slack_post_message"])
    assert session.selected == [] and session.active == ["search_tool_bm25"]
    with example.store.engine.connect() as connection:
        stored = Writer(connection).sessions.load(SessionKey("local", "s"))
    assert stored is not None and stored.selected == ["mcp__slack_post_message"]  # storage untouched
    example.upsert_tools([WORKED_EXAMPLE[2]])
    assert session.selected == ["mcp__slack_post_message"]
    assert session.total_tools == 2


def test_log_replays_to_the_stored_lists(example: ToolIndex) -> None:
    session = example.session("s", discovery_mode="all", essential_override=["nothing"])
    session.search_tool.execute("c1", {"query": "github", "limit": 1})
    with pytest.warns(UnknownToolNames, match="'unknown'"):
        session.set_active(["search_tool_bm25", "mcp__github_create_issue", "unknown"])
    session.search_tool.execute("c2", {"query": "message"})
    with pytest.raises(ToolCallError):
        session.search_tool.execute("c3", {"query": "   "})
    record = example.session_record("s")
    assert [call["kind"] for call in record["calls"]] == [
        "create",
        "search",
        "set_active",
        "search",
        "search",
    ]
    assert record["calls"][-1]["error"] == "Query is required and must not be empty."
    assert record["calls"][1]["tool"] == "search_tool_bm25"
    with example.store.reading() as reader:
        logged = reader.sessions.events(SessionKey("local", "s"))
    assert replay(logged) == (record["active"], record["selected"])
    assert record["selected"] == ["mcp__github_create_issue", "mcp__slack_post_message"]


def test_times_read_back_in_utc_on_every_backend(db_url: str) -> None:
    """SQLite gives stored times back without an offset and PostgreSQL in the connection's time
    zone (here five and a half hours from UTC); both read back as the UTC time written."""
    if db_url.startswith("postgresql"):
        db_url = db_url.replace("options=-c", "options=-ctimezone%3DAsia/Kolkata%20-c")
    written = datetime.now(UTC)
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
        index.session("t", discovery_mode="mcp-only")
        search(index, "t", "github", limit=1)
        stamps = [summary.updated_at for summary in index.sessions()]
        stamps += [call["time"] for call in index.session_record("t")["calls"]]
    for stamp in map(datetime.fromisoformat, stamps):
        assert stamp.utcoffset() == timedelta(0)
        assert abs(stamp - written) < timedelta(minutes=10)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"default_servers": "github"},
            "invalid session settings: default_servers: must be a list of names, not a single string",
        ),
        (
            {"discovery_mode": "sometimes"},
            "invalid session settings: discovery_mode: Input should be 'auto', 'off', 'mcp-only' or 'all'",
        ),
    ],
)
def test_bad_settings_are_refused_by_name(example: ToolIndex, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolIndexError) as raised:
        example.session("bad", **settings)
    assert str(raised.value) == message
    assert example.sessions() == []


def test_a_handle_on_a_session_deleted_elsewhere_says_so(example: ToolIndex) -> None:
    session = example.session("gone", discovery_mode="mcp-only")
    example.delete_session("gone")
    for call in (
        lambda: session.set_active(["search_tool_bm25"]),
        session.active_tools,
        session.reset,
        lambda: session.preview("github"),
    ):
        with pytest.raises(SessionNotFound, match="no session 'gone' in the store"):
            call()
    with pytest.raises(DiscoveryUnavailable):
        session.search_tool.execute("c", {"query": "github"})
    assert example.sessions() == []


def test_previews_check_like_execute(example: ToolIndex) -> None:
    with pytest.raises(DiscoveryDisabled):
        example.session("off", discovery_mode="off").preview("github")
    with pytest.raises(QueryWithoutTerms):
        example.session("on", discovery_mode="mcp-only").preview("!!!")


def test_reset_restores_the_opening_state(example: ToolIndex) -> None:
    session = example.session("s", discovery_mode="mcp-only", default_servers=["slack"])
    assert session.active == ["mcp__slack_post_message", "search_tool_bm25"]
    session.search_tool.execute("c1", {"query": "github"})
    session.reset()
    assert session.active == ["mcp__slack_post_message", "search_tool_bm25"] and session.selected == []


def test_a_retried_call_id_is_answered_from_the_log(example: ToolIndex) -> None:
    session = example.session("s", discovery_mode="mcp-only")
    first = session.search_tool.execute("same", {"query": "github", "limit": 1})
    again = session.search_tool.execute("same", {"query": "github", "limit": 1})
    assert again == first
    assert len(example.session_record("s")["calls"]) == 2
    with pytest.raises(ToolCallError, match="already used"):
        session.search_tool.execute("same", {"query": "slack"})


def test_deleted_session_is_unavailable(example: ToolIndex) -> None:
    session = example.session("gone", discovery_mode="mcp-only")
    example.delete_session("gone")
    with pytest.raises(DiscoveryUnavailable):
        session.search_tool.execute("c1", {"query": "github"})
    with pytest.raises(SessionNotFound):
        example.delete_session("gone")


def test_resume_with_other_settings_is_refused(example: ToolIndex) -> None:
    example.session("s", discovery_mode="mcp-only")
    assert example.session("s").settings.discovery_mode == "mcp-only"
    assert example.session("s", discovery_mode="mcp-only").id == "s"
    with pytest.raises(ToolIndexError, match="other settings"):
        example.session("s", discovery_mode="all")


@pytest.mark.parametrize(
    ("mode", "legacy", "count", "expected"),
    [
        ("auto", False, 40, "off"),
        ("auto", False, 41, "mcp-only"),
        ("off", True, 0, "mcp-only"),
        ("all", True, 0, "all"),
        ("mcp-only", False, 0, "mcp-only"),
        ("off", False, 1000, "off"),
    ],
)
def test_effective_mode(mode: str, legacy: bool, count: int, expected: str) -> None:
    assert effective_mode(SessionSettings(discovery_mode=mode, mcp_discovery=legacy), count) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "limit", [0, -1, 1.5, True, "2", float("nan"), float("inf"), None.__class__], ids=repr
)
def test_bad_limits_are_refused_and_logged(example: ToolIndex, limit: Any) -> None:
    session = example.session("s", discovery_mode="mcp-only")
    with pytest.raises(ToolCallError, match=r"^Limit must be a positive integer\.$"):
        session.search_tool.execute("c", {"query": "github", "limit": limit})
    assert example.session_record("s")["calls"][-1]["error"] == "Limit must be a positive integer."


def test_huge_and_integral_float_limits_work(example: ToolIndex) -> None:
    session = example.session("s", discovery_mode="mcp-only")
    assert session.search_tool.execute("c1", {"query": "github", "limit": 10**30}).details["limit"] == 10**30
    assert session.search_tool.execute("c2", {"query": "slack", "limit": 2.0}).details["limit"] == 2


@pytest.mark.parametrize(
    "query",
    ["'; DROP TABLE tools; --", "\x00github", "github\ud800", "ΣΑΣ 🚀 github", "100%_github", "a" * 100_000],
)
def test_hostile_queries_search_and_log(example: ToolIndex, query: str) -> None:
    session = example.session("s", discovery_mode="mcp-only")
    result = session.search_tool.execute("c", {"query": query})
    assert json.loads(result.content)["total_tools"] == 3
    assert example.session_record("s")["calls"][-1]["content"] == result.content
    assert example.stats()["tools"] == 3


def test_content_json_matches_javascript_stringify() -> None:
    assert compact_json({"q": 'é\ud800\n"', "n": 1}) == '{"q":"é\\ud800\\n\\"","n":1}'


CONTENT_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)


@settings(max_examples=examples(300), deadline=None)
@given(
    query=CONTENT_TEXT,
    names=st.lists(CONTENT_TEXT, max_size=4),
    count=st.one_of(st.integers(min_value=0, max_value=10**6), st.integers(min_value=2**63)),
)
def test_content_json_is_the_standard_encoding_whichever_encoder_writes_it(
    query: str, names: list[str], count: int
) -> None:
    """Content goes to ``orjson`` first; the text must be exactly ``JSON.stringify``'s."""
    content = {"query": query, "activated_tools": names, "match_count": len(names), "total_tools": count}
    assert compact_json(content) == json_text(content)


def test_a_session_handle_follows_the_catalog_and_a_session_made_anew(index: ToolIndex) -> None:
    """What a session's settings amount to is kept between calls, never past a change."""
    tools = generated_catalog(41)
    index.upsert_tools(tools[:40])
    session = index.session("s")  # auto: 40 registered tools keep discovery off
    with pytest.raises(ToolCallError, match="disabled"):
        session.search_tool.execute("c1", {"query": "tool"})
    index.upsert_tools(tools[40:])  # the 41st turns it on, for the same handle
    assert session.search_tool.execute("c2", {"query": "tool"}).details["total_tools"] > 0
    index.delete_session("s")
    index.session("s", discovery_mode="off")  # same id, other settings, another handle
    with pytest.raises(ToolCallError, match="disabled"):
        session.search_tool.execute("c3", {"query": "tool"})
    assert session.effective_mode == "off"


def test_session_search_matches_a_fresh_corpus(index: ToolIndex) -> None:
    """Statistics from aggregates minus exclusions equal those of the materialized corpus."""
    tools = generated_catalog(120)
    index.upsert_tools(tools)
    session = index.session("s", discovery_mode="mcp-only")
    session.search_tool.execute("c1", {"query": "create issue", "limit": 7})
    active = set(session.active)
    details = session.search_tool.execute("c2", {"query": "repository channel", "limit": 5}).details
    remaining = [tool for tool in tools if tool["name"] not in active]
    with ToolIndex.open(
        str(index.store.engine.url.set(database=f"{index.store.engine.url.database}-fresh"))
        if index.store.engine.dialect.name == "sqlite"
        else "sqlite://"
    ) as fresh:
        fresh.upsert_tools(remaining)
        expected = fresh.search("repository channel", limit=5, mode="mcp-only")
    assert [(t["name"], t["score"]) for t in details["tools"]] == [
        (hit.name, round(hit.score, 6)) for hit in expected
    ]
    assert details["total_tools"] == len(remaining)


def test_import_session_file_restores_the_selection_in_force(example: ToolIndex, tmp_path: Path) -> None:
    entries = [
        {"id": "a", "parentId": None, "timestamp": "t0", "type": "message"},
        {"id": "b", "parentId": "a", "timestamp": "t1", "type": "mcp_tool_selection",
         "selectedToolNames": ["mcp__github_create_issue", "mcp__missing"]},
        {"id": "c", "parentId": "b", "timestamp": "t2", "type": "mcp_tool_selection",
         "selectedToolNames": ["mcp__slack_post_message"]},  # on a branch that is not in force
        {"id": "d", "parentId": "b", "timestamp": "t3", "type": "message"},
    ]  # fmt: skip
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n", encoding="utf-8")
    restored = example.import_session_file(path, "r", discovery_mode="mcp-only")
    assert restored.restored == ["mcp__github_create_issue"] and restored.missing == ["mcp__missing"]
    session = example.session("r")
    assert session.selected == ["mcp__github_create_issue"]
    assert session.active == ["search_tool_bm25", "mcp__github_create_issue"]
    with example.store.reading() as reader:
        assert replay(reader.sessions.events(SessionKey("local", "r"))) == (session.active, session.selected)


def test_verify_replays_every_session_log(example: ToolIndex) -> None:
    from sqlalchemy import text

    from discovery._diagnostics.verify import verify

    session = example.session("v", discovery_mode="mcp-only")
    session.search_tool.execute("c1", {"query": "github", "limit": 1})
    report = verify(example)
    assert report.ok and report.checked["sessions"] == 1
    with example.store.engine.begin() as connection:
        connection.execute(text("UPDATE sessions SET selected = '[]' WHERE id = 'v'"))
    problems = verify(example).problems
    assert len(problems) == 1 and problems[0].startswith("session 'v': its log replays to active")


def test_preview_ranks_the_session_corpus_without_changing_it(example: ToolIndex) -> None:
    session = example.session("p", discovery_mode="mcp-only")
    session.search_tool.execute("c1", {"query": "github", "limit": 1})
    before = example.session_record("p")
    hits = session.preview("github", limit=5)
    assert [(hit.name, round(hit.score, 6)) for hit in hits] == [("mcp__github_list_pull_requests", 2.07053)]
    assert example.session_record("p") == before


def _lookup_steps(index: ToolIndex, session_id: str) -> int:
    """SQLite VM instructions run by a search call's opening statement, for a new call id."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    with index.store.engine.begin() as connection:
        raw = connection.connection.dbapi_connection
        assert raw is not None
        raw.set_progress_handler(count, 1)
        try:
            state, _, answered = Writer(connection).sessions.lock_for_call(
                SessionKey("local", session_id), "never-used"
            )
        finally:
            raw.set_progress_handler(None, 1)
    assert state is not None and answered is None
    return steps


def test_a_new_call_id_is_looked_up_without_reading_the_log(example: ToolIndex) -> None:
    """The answered-call lookup goes through the call-id index: its work does not grow with
    the log (walking the log made every call of a long session slower than the last)."""
    if example.store.engine.url.get_backend_name() != "sqlite":
        pytest.skip("counts SQLite VM steps")
    example.session("long", discovery_mode="mcp-only")
    short = _lookup_steps(example, "long")
    with example.store.engine.begin() as connection:
        state = Writer(connection).sessions.load(SessionKey("local", "long"))
        assert state is not None
        for number in range(3000):
            event = Event(kind="search", tool_name="search_tool_bm25", call_id=f"old-{number}")
            state = Writer(connection).sessions.record(state, event, state.active, state.selected)
        _, _, answered = Writer(connection).sessions.lock_for_call(SessionKey("local", "long"), "old-2999")
    assert answered is not None and answered.seq == 3001
    assert _lookup_steps(example, "long") < 2 * short


# --- identities ---------------------------------------------------------------------------------


def test_session_ids_are_per_identity(example: ToolIndex, db_url: str) -> None:
    alice = example.session("my-project", identity="alice", discovery_mode="all")
    bob = example.session("my-project", identity="bob", discovery_mode="mcp-only")
    assert (alice.identity, bob.identity, example.session("local-one").identity) == ("alice", "bob", "local")
    alice.search_tool.execute("a1", {"query": "issue"})
    bob.search_tool.execute("b1", {"query": "email"})
    assert alice.selected and alice.selected != bob.selected
    with ToolIndex.open(db_url) as other:  # another process resumes each by its own key
        resumed = other.session("my-project", identity="alice")
        assert (resumed.selected, resumed.effective_mode) == (alice.selected, "all")
        assert other.session("my-project", identity="bob").effective_mode == "mcp-only"
        assert [
            call["call_id"] for call in other.session_record("my-project", identity="bob")["calls"][1:]
        ] == ["b1"]
    with pytest.raises(SessionNotFound, match=r"^no session 'my-project' in the store$"):
        example.session_record("my-project")  # the local identity has none
    with pytest.raises(SessionNotFound, match=r"^no session 'my-project' of identity 'carol' in the store$"):
        example.delete_session("my-project", identity="carol")
    example.delete_session("my-project", identity="bob")
    assert sorted((s.identity, s.id) for s in example.sessions()) == [
        ("alice", "my-project"),
        ("local", "local-one"),
    ]
    assert alice.selected  # bob's deletion left alice's session alone
    assert verify(example).problems == []


@pytest.mark.parametrize(
    ("identity", "message"),
    [
        ("", "an identity must not be blank"),
        ("   ", "an identity must not be blank"),
        ("a\nb", "an identity must be printable text"),
        ("a\x00b", "an identity must be printable text"),
        ("a" * 513, "an identity must be at most 512 bytes in UTF-8, not 513"),
        (7, "an identity must be text, not int"),
        (None, "an identity must be text, not NoneType"),
    ],
)
def test_a_bad_identity_is_a_typed_error(example: ToolIndex, identity: Any, message: str) -> None:
    with pytest.raises(ToolIndexError, match=message):
        example.session("s", identity=identity)
    assert example.sessions() == []


def test_the_async_face_and_the_adapters_take_an_identity(example: ToolIndex, db_url: str) -> None:
    from discovery.adapters import openai as adapter
    from discovery.aio import AsyncToolIndex

    async def run() -> list[str]:
        index = await AsyncToolIndex.open(db_url)
        try:
            session = await index.session("chat", identity="alice", discovery_mode="all")
            assert (session.id, session.identity) == ("chat", "alice")
            await session.search("c1", {"query": "issue"})
            return await session.selected()
        finally:
            await index.close()

    selected = asyncio.run(run())
    assert selected and example.session("chat", identity="alice").selected == selected
    local = example.session("chat", discovery_mode="all")
    assert local.selected == []  # the local identity's chat is another session
    # An adapter offers what the session it is given has active: alice's activations, not local's.
    offered = adapter.chat_tools(example.session("chat", identity="alice"))
    assert len(offered) == len(adapter.chat_tools(local)) + len(selected)
