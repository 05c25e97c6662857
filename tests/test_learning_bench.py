"""The learning bench's protocol: no request tested was learned from, a recurring need is tested
after learning its other wordings, and ``per-task`` makes each training session an identity of
its own, never the one the tests search as."""

from __future__ import annotations

import pytest

from bench.learning import MCP_QUERIES, MCP_RECURRING, mcp_folds, played, read_jsonl, taught_by
from discovery._rules import LOCAL_IDENTITY


@pytest.mark.parametrize("folds", [3, 5])
def test_every_mcp_request_is_tested_once_after_learning_from_the_others(folds: int) -> None:
    requests = len(read_jsonl(MCP_QUERIES)) + len(read_jsonl(MCP_RECURRING))
    split = mcp_folds(folds)
    tested = [query.where for _, once, again in split for query in [*once, *again]]
    assert len(tested) == len(set(tested)) == requests
    for train, once, again in split:
        taught = {request.where for request in train}
        assert taught.isdisjoint(query.where for query in [*once, *again])
        assert len(taught) + len(once) + len(again) == requests
        for query in again:
            need = tuple(group[0] for group in query.groups)
            wordings = [r for r in train if r.where.startswith("recurring:") and r.tools == need]
            assert len(wordings) == 2


@pytest.mark.parametrize("play", ["one", "rephrase"])
def test_per_task_makes_each_session_an_identity_the_tests_are_not(play: str) -> None:
    train, _, _ = mcp_folds()[0]
    sessions = played(train, play)
    assert {request.identity for request in taught_by(sessions, "single")} == {LOCAL_IDENTITY}
    identity_of: dict[str, set[str]] = {}
    for request in taught_by(sessions, "per-task"):
        identity_of.setdefault(request.session, set()).add(request.identity)
    assert all(len(identities) == 1 for identities in identity_of.values())
    identities = [identity for both in identity_of.values() for identity in both]
    assert len(set(identities)) == len(identity_of) and LOCAL_IDENTITY not in identities
