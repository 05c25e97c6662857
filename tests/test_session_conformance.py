"""Every case and step of ../shared/conformance/sessions.json, on each backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from discovery import ToolCallError, ToolIndex
from discovery._ranking.ranker import PRUNE_FROM
from tests.conftest import SHARED, shared_json


def _cases() -> list[dict[str, Any]]:
    path = SHARED / "conformance" / "sessions.json"
    if not path.exists():
        return []
    return list(json.loads(path.read_text(encoding="utf-8"))["cases"])


def _state(session: Any) -> dict[str, Any]:
    return {"active": session.active, "selected": session.selected, "total_tools": session.total_tools}


@pytest.mark.parametrize("prune_from", [PRUNE_FROM, 0], ids=["default", "pruned"])
@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["name"])
def test_session_case(index: ToolIndex, case: dict[str, Any], prune_from: int) -> None:
    """Each case as written, and again with every search taking the pruned path where it can
    (``prune_from`` 0): a session's corpus leaves out its active tools, and the answers must not
    change."""
    shared_json("conformance/sessions.json")
    index.ranker.prune_from = prune_from
    index.upsert_tools(case["catalog"])
    settings = dict(case["settings"])
    if case.get("requested"):
        settings["requested"] = case["requested"]
    session = index.session(f"case-{case['name']}", **settings)
    initial = case["expect_initial"]
    assert session.effective_mode == initial["effective_mode"]
    assert _state(session) == {key: initial[key] for key in ("active", "selected", "total_tools")}
    for number, step in enumerate(case["steps"]):
        if step["op"] == "search":
            expect = step["expect"]
            if "error" in expect:
                with pytest.raises(ToolCallError) as raised:
                    session.search_tool.execute(f"call-{number}", step["params"])
                assert str(raised.value) == expect["error"]
            else:
                result = session.search_tool.execute(f"call-{number}", step["params"])
                assert result.content == expect["content"]
                assert result.details == expect["details"]
        elif step["op"] == "set_active":
            session.set_active(step["names"])
        elif step["op"] == "description":
            assert session.search_tool.description == step["expect"]["description"]
        else:
            pytest.fail(f"unknown step {step['op']}")
        assert _state(session) == step["state_after"], f"after step {number}"
