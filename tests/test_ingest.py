"""Catalog files to tool records (contract §2): formats, detection, and one clear error per bad record."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, cast

import pytest

from discovery import InvalidRecord, ToolIndex, ToolRecord
from discovery._catalog.formats import UnreadableCatalog, listed_tools, parse_catalog, read_catalog
from discovery._files import MAX_NESTING
from tests.conftest import migrated_sqlite_url, shared_path

GITHUB_TOOLS = {
    "tools": [
        {
            "name": "create_issue",
            "title": "Create issue",
            "description": "Create a GitHub issue",
            "inputSchema": {"type": "object", "properties": {"title": {}, "repo": {}}},
            "annotations": {"readOnlyHint": False},
        },
        {"name": "list_issues", "description": "List issues", "inputSchema": {"type": "object"}},
    ],
    "nextCursor": None,
}
QUERIES = [
    "create a pull request",
    "read file",
    "search the web",
    "git commit",
    "take a screenshot of the page",
    "notion database query",
    "train tickets",
    "current time in a timezone",
    "memory graph entities",
    "list issues",
    "click",
]


def write(path: Path, value: Any) -> Path:
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=2), encoding="utf-8")
    return path


def names(records: list[ToolRecord]) -> list[str]:
    return [record.name for record in records]


def test_jsonl_records_take_their_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path / "catalog.jsonl",
        '{"name": "read", "description": "Read a file", "input_schema": {"properties": {"path": {}}}}\n'
        "\n"
        '{"name": "mcp__x__y", "schema_keys": ["b", "a"], "load_mode": "essential"}\n',
    )
    result = read_catalog([path])
    assert result.skipped == []
    read, mcp = result.records
    assert (read.label, read.source, read.summary, read.schema_keys) == (
        "read",
        "builtin",
        "Read a file",
        ("path",),
    )
    assert (mcp.source, mcp.schema_keys, mcp.load_mode) == ("mcp", ("a", "b"), "essential")


def test_json_array_and_jsonl_give_the_same_records(tmp_path: Path) -> None:
    records = [
        {"name": "read", "description": "Read a file"},
        {"name": "mcp__s__t", "label": "s/t", "server_name": "s", "mcp_tool_name": "t"},
    ]
    array = read_catalog([write(tmp_path / "a.json", records)]).records
    lines = read_catalog(
        [write(tmp_path / "b.jsonl", "".join(json.dumps(r) + "\n" for r in records))]
    ).records
    assert array == lines
    assert names(array) == ["read", "mcp__s__t"]


def test_a_single_record_object_is_a_catalog(tmp_path: Path) -> None:
    path = write(tmp_path / "one.json", {"name": "read", "description": "Read a file"})
    assert names(read_catalog([path]).records) == ["read"]


def test_tools_list_uses_the_file_stem_as_server(tmp_path: Path) -> None:
    result = read_catalog([write(tmp_path / "github.json", GITHUB_TOOLS)])
    create, listed = result.records
    assert create == ToolRecord(
        name="mcp__github__create_issue",
        label="github/create_issue",
        description="Create a GitHub issue",
        source="mcp",
        server_name="github",
        mcp_tool_name="create_issue",
        input_schema={"type": "object", "properties": {"title": {}, "repo": {}}},
        mcp_meta={"title": "Create issue", "annotations": {"readOnlyHint": False}},
    )
    assert create.schema_keys == ("repo", "title")
    assert listed.mcp_meta is None  # a tool its server says nothing more of
    assert (listed.name, listed.schema_keys) == ("mcp__github__list_issues", ())


def test_server_option_overrides_the_stem(tmp_path: Path) -> None:
    result = read_catalog([write(tmp_path / "github.json", GITHUB_TOOLS)], server="gh")
    assert names(result.records) == ["mcp__gh__create_issue", "mcp__gh__list_issues"]


def test_a_json_rpc_reply_holding_a_tools_list(tmp_path: Path) -> None:
    reply = {"jsonrpc": "2.0", "id": 1, "result": GITHUB_TOOLS}
    assert names(read_catalog([write(tmp_path / "gh.json", reply)]).records)[0] == "mcp__gh__create_issue"


def test_a_live_tools_list_gives_the_records_its_file_gives() -> None:
    """What ``sync`` writes: a server's tools/list as values, checked as in a file."""
    tools: list[Any] = [
        *cast("list[Any]", GITHUB_TOOLS["tools"]),
        {"name": "größe", "description": "Größe \ud800 — 最短", "inputSchema": {"a": [{"b": None}]}},
    ]
    text = json.dumps({"tools": tools}, ensure_ascii=False)
    expected = parse_catalog(text, where="f", server="gh").records
    assert listed_tools(tools, where="server 'gh' tools/list", server="gh").records == expected
    bad = [*tools, {"name": "", "description": "no name"}]
    with pytest.raises(InvalidRecord) as raised:
        listed_tools(bad, where="server 'gh' tools/list", server="gh")
    assert str(raised.value).startswith("server 'gh' tools/list:[3]: name: ")


def test_stdin_reads_either_format() -> None:
    stdin = io.BytesIO(json.dumps(GITHUB_TOOLS).encode())
    assert len(read_catalog(["-"], server="github", stdin=stdin).records) == 2
    stdin = io.BytesIO(b'{"name": "read"}\n{"name": "bash"}\n')
    assert names(read_catalog(["-"], stdin=stdin).records) == ["read", "bash"]


def test_a_tools_list_on_stdin_needs_a_server() -> None:
    with pytest.raises(UnreadableCatalog) as raised:
        read_catalog(["-"], stdin=io.BytesIO(json.dumps(GITHUB_TOOLS).encode()))
    assert str(raised.value) == "<stdin>: an MCP tools/list result needs --server NAME"


def test_stdin_is_read_once() -> None:
    with pytest.raises(UnreadableCatalog, match=r"standard input \('-'\) can be read only once"):
        read_catalog(["-", "-"], stdin=io.BytesIO(b"[]"))


def test_with_a_server_every_record_must_belong_to_it(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"name": "mcp__a__x", "server_name": "a"}\n{"name": "read"}\n')
    with pytest.raises(InvalidRecord) as raised:
        read_catalog([path], server="a")
    assert str(raised.value) == f"{path}:2: server_name is None, not --server 'a'"


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"name": "read"}]).encode())
    assert names(read_catalog([path]).records) == ["read"]


def test_a_megabyte_description_is_kept_whole() -> None:
    description = "word " * 200_000
    (record,) = parse_catalog(json.dumps({"name": "big", "description": description}), where="x").records
    assert record.description == description
    assert len(record.summary) == 200


BAD_RECORDS = [
    pytest.param(
        '{"name": "a"}\n{"name": ""}\n',
        "f:2: name: String should have at least 1 character",
        id="jsonl-empty-name",
    ),
    pytest.param(
        '{"name": "a"}\n{"name": "b", "colour": 1}\n',
        "f:2: colour: Extra inputs are not permitted",
        id="jsonl-unknown-field",
    ),
    pytest.param(
        '{"name": "a"}\n{"name": "b",\n', "f:2: invalid JSON: Expecting property name", id="jsonl-bad-line"
    ),
    pytest.param(
        '[\n  {"name": "a"},\n\n  {"name": "b", "source": "cloud"}\n]',
        "f:4: source: Input should be 'builtin', 'mcp', 'extension' or 'custom'",
        id="array-line-of-element",
    ),
    pytest.param(
        '[{"name": "a"}, 7]', "f:1: record: Input should be a valid dictionary", id="array-not-object"
    ),
    pytest.param(
        '{"tools": [\n {"name": "ok"},\n {"description": "no name"}\n]}',
        "f:3: name: Field required",
        id="tools-list-missing-name",
    ),
    pytest.param(
        '{"tools": [{"name": "x"}],\n "tools": [\n {"name": "ok"},\n {"name": "y", "inputSchema": []}]}',
        "f:4: inputSchema: Input should be a valid dictionary",
        id="tools-list-last-duplicate-key-wins",
    ),
    pytest.param('{"name": "a"}\n{"name": "  "}\n', "f:2: name: must not be blank", id="blank-name"),
    pytest.param(
        '{"name": "a\\u0000b"}\n',
        "f:1: name: must not contain NUL or unpaired surrogate characters",
        id="nul-in-name",
    ),
    pytest.param(
        '{"name": "a", "input_schema": ' + '{"a": ' * MAX_NESTING + "1" + "}" * MAX_NESTING + "}",
        f"f:1: nested deeper than {MAX_NESTING} levels",
        id="nested-too-deep",
    ),
    pytest.param(
        '{"name": "a"}\n' + "[" * 100_000 + "]" * 100_000 + "\n",
        "f:2: JSON nested too deeply",
        id="jsonl-line-beyond-recursion",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_RECORDS)
def test_a_bad_record_names_its_line(text: str, message: str) -> None:
    with pytest.raises(InvalidRecord) as raised:
        parse_catalog(text, where="f", default_server="s")
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(("text", "message"), BAD_RECORDS)
def test_skip_invalid_keeps_the_good_records(text: str, message: str) -> None:
    result = parse_catalog(text, where="f", default_server="s", skip_invalid=True)
    assert len(result.skipped) == 1
    assert result.skipped[0].startswith(message)
    assert len(result.records) <= 1


FILE_ERRORS = [
    pytest.param("", "f: empty file; expected a JSON array or JSON lines", id="empty"),
    pytest.param(" \n\t\n", "f: empty file", id="blank"),
    pytest.param('{"a": 1,\n "b": }', "f:2: invalid JSON: Expecting value (column 7)", id="invalid-json"),
    pytest.param('"hello"', "f: not a catalog; expected a JSON array", id="a-string"),
    pytest.param('{"servers": []}', "f: not a catalog", id="another-object"),
    pytest.param(
        '{"name": "a", "input_schema": {"x": NaN}}', "f: invalid JSON: NaN is not valid JSON", id="nan"
    ),
    pytest.param(
        '{"name": "a", "input_schema": {"x": ' + "9" * 5000 + "}}",
        "f: invalid JSON: Exceeds the limit (4300 digits) for integer string conversion",
        id="huge-integer",
    ),
    pytest.param("[" * 100_000 + "]" * 100_000, "f: JSON nested too deeply", id="deep-array"),
]


@pytest.mark.parametrize(("text", "message"), FILE_ERRORS)
@pytest.mark.parametrize("skip_invalid", [False, True])
def test_a_file_that_is_not_a_catalog_is_one_error(text: str, message: str, skip_invalid: bool) -> None:
    with pytest.raises(UnreadableCatalog) as raised:
        parse_catalog(text, where="f", skip_invalid=skip_invalid)
    assert str(raised.value).startswith(message)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UnreadableCatalog, match=r"missing.json: cannot read: No such file or directory$"):
        read_catalog([tmp_path / "missing.json"])
    with pytest.raises(UnreadableCatalog, match=r": cannot read: Is a directory$"):
        read_catalog([tmp_path])
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(b'[{"name": "caf\xe9"}]')
    with pytest.raises(
        UnreadableCatalog, match=r"latin1.json: not UTF-8 text \(invalid byte at offset 14\)$"
    ):
        read_catalog([latin1])


def test_a_blank_server_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableCatalog, match="--server must not be empty"):
        read_catalog([write(tmp_path / "github.json", GITHUB_TOOLS)], server=" ")


def tools_list_files() -> list[Path]:
    return sorted(shared_path("data/mcp-tools-list").glob("*.json"))


def test_both_formats_of_the_real_catalog_give_the_same_records() -> None:
    from_jsonl = read_catalog([shared_path("data/mcp-catalog.jsonl")]).records
    from_tools_lists = read_catalog(tools_list_files()).records
    assert len(tools_list_files()) == 74
    assert len(from_jsonl) == len(from_tools_lists) == 757
    assert sorted(from_jsonl, key=lambda r: r.name) == sorted(from_tools_lists, key=lambda r: r.name)


def snapshot(index: ToolIndex) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Every stored record, the statistics, and the rankings of QUERIES in both modes."""
    records = {tool.name: tool.as_record() for tool in index.tools()}
    stats = {key: value for key, value in index.stats().items() if key != "generation"}
    rankings = [
        [(hit.name, hit.score) for hit in index.search(query, limit=20, mode=mode)]
        for query in QUERIES
        for mode in ("all", "mcp-only")
    ]
    return records, stats, rankings


def test_both_formats_of_the_real_catalog_give_the_same_index(index: ToolIndex, tmp_path: Path) -> None:
    index.upsert_tools(read_catalog([shared_path("data/mcp-catalog.jsonl")]).records)
    with ToolIndex.open(migrated_sqlite_url(tmp_path / "from-tools-lists.db")) as other:
        other.upsert_tools(read_catalog(tools_list_files()).records)
        expected, actual = snapshot(index), snapshot(other)
    assert len(expected[0]) == 757
    assert all(expected[2]), "every query finds something"
    assert actual == expected


def test_what_a_server_says_beyond_the_record_is_kept_and_updated(db_url: str, tmp_path: Path) -> None:
    """Title, annotations, output schema and icons of a listed tool are stored with it (never
    indexed): a change of them alone is an update, and a record naming other keys is refused."""
    tools = cast("list[dict[str, Any]]", GITHUB_TOOLS["tools"])
    output = {"type": "object", "properties": {"url": {"type": "string"}}}
    icons = [{"src": "https://example.com/gh.png", "mimeType": "image/png"}]
    first = {"tools": [{**tools[0], "outputSchema": output, "icons": icons}, tools[1]]}
    with ToolIndex.open(db_url) as index:
        index.upsert_tools(read_catalog([write(tmp_path / "github.json", first)]).records)
        assert index.tool("mcp__github__create_issue").mcp_meta == {
            "title": "Create issue",
            "annotations": {"readOnlyHint": False},
            "outputSchema": output,
            "icons": icons,
        }
        assert index.tool("mcp__github__list_issues").mcp_meta is None
        assert [hit.name for hit in index.search("create issue", 1)] == ["mcp__github__create_issue"]
        changed = {"tools": [{**tools[0], "annotations": {"destructiveHint": True}}, tools[1]]}
        report = index.upsert_tools(read_catalog([write(tmp_path / "github.json", changed)]).records)
        assert (report.updated, report.unchanged) == (
            ["mcp__github__create_issue"],
            ["mcp__github__list_issues"],
        )
        assert index.tool("mcp__github__create_issue").mcp_meta == {
            "title": "Create issue",
            "annotations": {"destructiveHint": True},
        }
        with pytest.raises(InvalidRecord, match=r"mcp_meta: .*'secret': only title, annotations"):
            index.upsert_tools([{"name": "x", "mcp_meta": {"secret": 1}}])
