"""``tool-index eval``: metrics of the index's own search against labelled queries, computed by hand
on contract §6's worked example, and every kind of bad query file as one ``Error:`` line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from discovery import ToolIndex
from discovery._quality.evaluate import QueryFileError, evaluate, learn_from, read_queries, read_training
from discovery.cli._main import main
from tests.catalogs import WORKED_EXAMPLE

ISSUE, PULLS, SLACK = "mcp__github_create_issue", "mcp__github_list_pull_requests", "mcp__slack_post_message"
# In the worked example, `github` ranks create_issue then list_pull_requests; `slack message`
# and `github issue` put post_message and create_issue first, and `github issue` never matches
# post_message.
QUERIES = [
    {"query": "github", "relevant": [PULLS]},
    {"query": "slack message", "relevant_groups": [[SLACK, "mcp__github_create_issue"]]},
    {"query": "github issue", "relevant": [ISSUE, SLACK]},
]
IDEAL_2 = 1 + 1 / math.log2(3)


@pytest.fixture
def catalog_url(sqlite_db_url: str) -> str:
    with ToolIndex.open(sqlite_db_url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
    return sqlite_db_url


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def run(db_url: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", db_url, *args], catch_exceptions=False, prog_name="tool-index")


def test_metrics_by_hand(catalog_url: str, tmp_path: Path) -> None:
    queries = read_queries(write_lines(tmp_path / "q.jsonl", QUERIES))
    with ToolIndex.open(catalog_url) as index:
        result = evaluate(index, queries, [5, 1])
    assert result.ks == (1, 5)
    # Per query: first relevant at ranks 2, 1, 1; `github issue` finds one of its two names.
    assert result.recall[1] == pytest.approx((0 + 1 + 0.5) / 3)
    assert result.recall[5] == pytest.approx((1 + 1 + 0.5) / 3)
    assert result.mrr == pytest.approx((1 / 2 + 1 + 1) / 3)
    assert result.ndcg[1] == pytest.approx((0 + 1 + 1) / 3)
    assert result.ndcg[5] == pytest.approx((1 / math.log2(3) + 1 + 1 / IDEAL_2) / 3)
    [miss] = result.misses
    assert (miss.where, miss.query, miss.ranks, miss.matched) == (
        f"{tmp_path / 'q.jsonl'}:3",
        "github issue",
        {ISSUE: 1, SLACK: None},
        2,
    )


def test_json_output(catalog_url: str, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "q.jsonl", QUERIES)
    result = run(catalog_url, "eval", str(path), "--k", "1,5", "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    report = json.loads(result.stdout)
    assert list(report) == ["queries", "recall@1", "recall@5", "mrr", "ndcg@1", "ndcg@5", "misses"]
    assert report["queries"] == 3
    assert report["recall@5"] == pytest.approx(2.5 / 3)
    assert report["misses"] == [
        {"where": f"{path}:3", "query": "github issue", "ranks": {ISSUE: 1, SLACK: None}, "matched": 2}
    ]


def test_text_output_names_the_misses_and_where_they_ranked(catalog_url: str, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "q.jsonl", [*QUERIES, {"query": "github", "relevant": [SLACK]}])
    result = run(catalog_url, "eval", str(path), "--k", "1")
    assert (result.exit_code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[:2] == ["4 queries, mode all, analyzer reference", ""]
    assert lines[3].split() == ["Recall", "0.375"]  # (0 + 1 + 0.5 + 0) / 4
    assert f"  {path}:1  github" in lines
    assert f"    {PULLS} #2" in lines
    assert f"    {ISSUE} #1, {SLACK} not matched" in lines


def test_eval_is_read_only(catalog_url: str, tmp_path: Path) -> None:
    with ToolIndex.open(catalog_url) as index:
        before = index.stats()
    assert run(catalog_url, "eval", str(write_lines(tmp_path / "q.jsonl", QUERIES))).exit_code == 0
    with ToolIndex.open(catalog_url) as index:
        assert (index.stats(), index.sessions()) == (before, [])


def test_mode_mcp_only_leaves_out_the_other_tools(sqlite_db_url: str, tmp_path: Path) -> None:
    with ToolIndex.open(sqlite_db_url) as index:
        index.upsert_tools(
            [*WORKED_EXAMPLE, {"name": "post_note", "description": "Post a note to a channel"}]
        )
    path = write_lines(tmp_path / "q.jsonl", [{"query": "post to a channel", "relevant": ["post_note"]}])
    found = json.loads(run(sqlite_db_url, "eval", str(path), "--k", "1", "--json").stdout)
    hidden = json.loads(
        run(sqlite_db_url, "eval", str(path), "--k", "1", "--json", "--mode", "mcp-only").stdout
    )
    assert (found["recall@1"], hidden["recall@1"]) == (1.0, 0.0)


BAD_LINES = [
    ("not json", "not JSON: Expecting value (column 1)"),
    ("[1, 2]", "expected a JSON object"),
    ({"query": "", "relevant": [ISSUE]}, '"query" must be a non-empty string'),
    ({"query": 3, "relevant": [ISSUE]}, '"query" must be a non-empty string'),
    ({"query": "github"}, 'give exactly one of "relevant" and "relevant_groups"'),
    (
        {"query": "github", "relevant": [ISSUE], "relevant_groups": [[ISSUE]]},
        'give exactly one of "relevant" and "relevant_groups"',
    ),
    ({"query": "github", "relevant": []}, '"relevant" must be a non-empty list of tool names'),
    ({"query": "github", "relevant": [""]}, '"relevant" must be a non-empty list of tool names'),
    (
        {"query": "github", "relevant_groups": [[ISSUE], []]},
        '"relevant_groups" must be a non-empty list of non-empty lists of tool names',
    ),
    ({"query": "github", "relevent": [ISSUE]}, 'unknown key "relevent"'),
    ({"query": "github", "relevant": ["\x1b[31mnope"]}, 'no tool named "\\u001b[31mnope" in the catalog'),
    ({"query": "?!", "relevant": [ISSUE]}, "the query has no letter or number"),
]


@pytest.mark.parametrize(("line", "what"), BAD_LINES, ids=[what for _, what in BAD_LINES])
def test_a_bad_line_is_one_error_naming_the_file_and_line(
    catalog_url: str, tmp_path: Path, line: Any, what: str
) -> None:
    path = write_lines(tmp_path / "q.jsonl", [QUERIES[0], "", line])
    result = run(catalog_url, "eval", str(path))
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {path}:3: {what}\n")


def test_an_empty_or_missing_file_is_an_error(catalog_url: str, tmp_path: Path) -> None:
    empty = write_lines(tmp_path / "empty.jsonl", ["", "  "])
    result = run(catalog_url, "eval", str(empty))
    assert (result.exit_code, result.stderr) == (1, f"Error: {empty}: no queries in the file\n")
    missing = tmp_path / "missing.jsonl"
    result = run(catalog_url, "eval", str(missing))
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {missing}: cannot read: No such file or directory\n",
    )


@pytest.mark.parametrize("ks", ["0", "1,x", "", "-1,5"])
def test_bad_cutoffs_are_usage_errors(catalog_url: str, tmp_path: Path, ks: str) -> None:
    result = run(catalog_url, "eval", str(write_lines(tmp_path / "q.jsonl", QUERIES)), "--k", ks)
    assert result.exit_code == 2
    assert "give positive integers separated by commas" in result.stderr


def test_the_library_checks_its_cutoffs(catalog_url: str, tmp_path: Path) -> None:
    queries = read_queries(write_lines(tmp_path / "q.jsonl", QUERIES))
    with ToolIndex.open(catalog_url) as index, pytest.raises(ValueError, match="positive"):
        evaluate(index, queries, [0])


def test_a_bad_file_raises_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(QueryFileError, match=r"q.jsonl:1: expected a JSON object"):
        read_queries(write_lines(tmp_path / "q.jsonl", ["3"]))


def test_training_lines_are_played_as_their_identities_sessions(catalog_url: str, tmp_path: Path) -> None:
    """A training line's ``identity`` makes its session that identity's (the local one's without):
    one session id under two identities is two sessions."""
    lines = [
        {"query": "slack message", "tools": [SLACK], "session": "s", "identity": "alice"},
        {"query": "github issue", "tools": [ISSUE], "session": "s", "identity": "bob"},
        {"query": "github", "tools": [PULLS], "session": "s"},
        {"query": "github", "tools": [], "session": "s", "identity": "alice"},
    ]
    training = read_training(write_lines(tmp_path / "train.jsonl", lines))
    assert [request.identity for request in training] == ["alice", "bob", "local", "alice"]
    with ToolIndex.open(catalog_url) as index:
        learn_from(index, training)
        played = {(summary.identity, summary.id): summary.searches for summary in index.sessions()}
    assert played == {("alice", "learn-0-s"): 2, ("bob", "learn-1-s"): 1, ("local", "learn-2-s"): 1}


@pytest.mark.parametrize(
    ("identity", "what"),
    [
        ("", "an identity must not be blank"),
        (7, "an identity must be text, not int"),
        ("al\nice", "an identity must be printable text: 'al\\nice'"),
    ],
)
def test_a_bad_identity_in_a_training_file_names_its_line(
    catalog_url: str, tmp_path: Path, identity: Any, what: str
) -> None:
    training = write_lines(tmp_path / "train.jsonl", [{"query": "github", "tools": [], "identity": identity}])
    queries = write_lines(tmp_path / "q.jsonl", QUERIES)
    result = run(catalog_url, "eval", str(queries), "--learn-from", str(training))
    assert (result.exit_code, result.stderr) == (1, f'Error: {training}:1: "identity": {what}\n')
