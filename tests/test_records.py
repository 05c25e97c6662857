"""``IndexedBatch``: tools with their terms as columns, as workers send them and writes take them.

Whatever a batch is cut into, each tool keeps exactly its own terms and weights, in order.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from store import IndexedBatch, ToolRow

TERMS = st.dictionaries(
    st.sampled_from(["read", "file", "path", "issue", "ünï", "a" * 70]), st.integers(1, 50)
)


Tool = tuple[ToolRow, dict[str, int]]


def tool(number: int, terms: dict[str, int]) -> Tool:
    row = ToolRow(
        name=f"tool_{number}",
        label=f"tool {number}",
        description="",
        summary="",
        source="builtin",
        server_name=None,
        mcp_tool_name=None,
        schema_keys_json="[]",
        input_schema_json="null",
        load_mode="discoverable",
        grp=1,
        doc_len=sum(terms.values()),
        content_hash=f"{number:064x}",
        mcp_meta_json="null",
    )
    return row, terms


def batch_of(tools: list[Tool]) -> IndexedBatch:
    return IndexedBatch.from_terms([row for row, _ in tools], [terms for _, terms in tools])


@given(st.lists(TERMS, max_size=12))
def test_a_batch_gives_back_the_tools_it_was_made_of(terms: list[dict[str, int]]) -> None:
    tools = [tool(number, held) for number, held in enumerate(terms)]
    batch = batch_of(tools)
    assert batch.tools() == tools
    assert [list(batch.terms_of(i).items()) for i in range(len(batch))] == [list(t.items()) for t in terms]
    assert sorted(set(batch.vocabulary)) == sorted({term for held in terms for term in held})
    assert len(batch.vocabulary) == len(set(batch.vocabulary))


@given(st.lists(TERMS, max_size=12), st.data())
def test_selected_tools_keep_their_own_terms(terms: list[dict[str, int]], data: st.DataObject) -> None:
    tools = [tool(number, held) for number, held in enumerate(terms)]
    batch = batch_of(tools)
    positions = data.draw(st.lists(st.integers(0, len(tools) - 1), max_size=15)) if tools else []
    assert batch.select(positions).tools() == [tools[i] for i in positions]
    size = data.draw(st.integers(1, 5))
    parts = batch.split(size)
    assert all(len(part) <= size for part in parts)
    assert [t for part in parts for t in part.tools()] == tools


def test_selected_rows_may_be_replaced() -> None:
    tools = [tool(0, {"read": 6}), tool(1, {"file": 2, "read": 1})]
    replaced = tools[1][0]._replace(content_hash="x")
    chosen = batch_of(tools).select([1], [replaced])
    assert chosen.rows == [replaced] and chosen.terms_of(0) == {"file": 2, "read": 1}
