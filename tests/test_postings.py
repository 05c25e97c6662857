"""The packed posting layout against a plain dict: any sequence of changes, split any way between
blocks and overrides, reads back as the postings the changes leave (``store._postings``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

from discovery import ToolIndex
from store import _changes as change_order
from store import _postings as postings
from store._changes import CHANGE_DTYPE, in_key_order, stable_order
from store._engine import read_transaction, write_transaction
from store.errors import CorruptIndex
from tests.examples import examples

Key = tuple[int, int]
Entry = tuple[int, int]  # (tf, doc_len)

CHANGES = st.lists(
    st.tuples(
        st.integers(1, 4),  # term
        st.integers(1, 2),  # group
        st.one_of(st.integers(1, 30), st.sampled_from([2**32 - 1, 2**32, 2**40])),  # tool
        st.one_of(st.just(0), st.integers(1, 50), st.sampled_from([255, 256, 65_535, 65_536, 2**31 - 1])),
        st.one_of(st.integers(1, 200), st.sampled_from([255, 256, 65_535, 65_536])),  # doc_len
    ),
    max_size=40,
)
"""Small values, and values at each edge of the narrow widths a block may be stored in: a block
narrows and widens as its values come and go, and reads back the same."""


def as_changes(rows: list[tuple[int, int, int, int, int]]) -> np.ndarray:
    """One change per (term, group, tool), the last given, as ``write`` takes them."""
    last = {(term, grp, tool): (tf, doc_len) for term, grp, tool, tf, doc_len in rows}
    flat = [(*key, *value) for key, value in last.items()]
    return np.array(flat, dtype=CHANGE_DTYPE)


def expected_after(model: dict[Key, dict[int, Entry]], rows: list[tuple[int, int, int, int, int]]) -> None:
    for term, grp, tool, tf, doc_len in rows:
        entries = model.setdefault((term, grp), {})
        if tf:
            entries[tool] = (tf, doc_len)
        else:
            entries.pop(tool, None)


def stored(index: ToolIndex) -> dict[Key, dict[int, Entry]]:
    with read_transaction(index.store.engine) as connection:
        everything = postings.all_postings(connection)
        per_term = {term: postings.term_postings(connection, term) for term in range(1, 5)}
        blocks = postings.key_blocks(connection, [(t, g) for t in range(1, 5) for g in (1, 2)])
    found: dict[Key, dict[int, Entry]] = {}
    for term, grp, tool, tf, doc_len in everything.tolist():
        found.setdefault((term, grp), {})[tool] = (tf, doc_len)
    # The three readers agree: the whole index, a term at a time, and per key.
    for term, rows in per_term.items():
        assert list(rows["grp"]) == sorted(rows["grp"])
        for tool, tf, doc_len, grp in rows.tolist():
            assert found[(term, grp)][tool] == (tf, doc_len)
        assert rows.size == sum(len(found.get((term, g), {})) for g in (1, 2))
    for key, block in blocks.items():
        values = zip(block.tf.tolist(), block.doc_len.tolist(), strict=True)
        assert dict(zip(block.tool_ids.tolist(), values, strict=True)) == found[key]
        assert list(block.tool_ids) == sorted(set(block.tool_ids.tolist()))
    assert set(blocks) == set(found)
    return found


@pytest.mark.parametrize(
    ("rewrite_factor", "merge_slack", "merge_fraction"),
    [(16, 64, 8), (0, 10**9, 8), (10**9, 64, 8), (0, 3, 2)],
    ids=["default", "overrides only", "blocks only", "frequent merges"],
)
@pytest.mark.parametrize("spliced_overrides", [64, 0], ids=["spliced", "masked"])
@settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(writes=st.lists(CHANGES, min_size=1, max_size=6))
def test_any_changes_read_back_as_the_model(
    sqlite_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    rewrite_factor: int,
    merge_slack: int,
    merge_fraction: int,
    spliced_overrides: int,
    writes: list[list[tuple[int, int, int, int, int]]],
) -> None:
    monkeypatch.setattr(postings, "REWRITE_FACTOR", rewrite_factor)
    monkeypatch.setattr(postings, "MERGE_SLACK", merge_slack)
    monkeypatch.setattr(postings, "MERGE_FRACTION", merge_fraction)
    monkeypatch.setattr(postings, "SPLICED_OVERRIDES", spliced_overrides)
    model: dict[Key, dict[int, Entry]] = {}
    with ToolIndex.open(sqlite_db_url) as index:
        with write_transaction(index.store.engine) as connection:  # hypothesis reuses the database
            connection.exec_driver_sql("DELETE FROM posting_blocks")
            connection.exec_driver_sql("DELETE FROM posting_delta")
        for rows in writes:
            with write_transaction(index.store.engine) as connection:
                postings.write(connection, as_changes(rows))
            expected_after(model, rows)
            assert stored(index) == {key: entries for key, entries in model.items() if entries}


def test_a_one_posting_change_to_a_big_block_becomes_an_override(sqlite_db_url: str) -> None:
    big = np.array([(1, 2, tool, 3, 10) for tool in range(1, 1001)], dtype=CHANGE_DTYPE)
    with ToolIndex.open(sqlite_db_url) as index, write_transaction(index.store.engine) as connection:
        postings.write(connection, big)
        postings.write(connection, np.array([(1, 2, 500, 0, 10)], dtype=CHANGE_DTYPE))
        postings.write(connection, np.array([(1, 2, 5000, 7, 12)], dtype=CHANGE_DTYPE))
        size = connection.exec_driver_sql("SELECT size FROM posting_blocks").scalar_one()
        delta = connection.exec_driver_sql("SELECT tool_id, tf FROM posting_delta ORDER BY tool_id").all()
        block = postings.key_blocks(connection, [(1, 2)])[(1, 2)]
    assert (size, [tuple(row) for row in delta]) == (1000, [(500, 0), (5000, 7)])
    assert block.size == 1000 and 500 not in block.tool_ids and block.tool_ids[-1] == 5000


def test_overrides_are_merged_once_they_are_many(sqlite_db_url: str) -> None:
    big = np.array([(1, 2, tool, 3, 10) for tool in range(1, 1001)], dtype=CHANGE_DTYPE)
    limit = postings.MERGE_SLACK + 1000 // postings.MERGE_FRACTION
    with ToolIndex.open(sqlite_db_url) as index, write_transaction(index.store.engine) as connection:
        postings.write(connection, big)
        for tool in range(2000, 2000 + limit + 1):
            postings.write(connection, np.array([(1, 2, tool, 1, 5)], dtype=CHANGE_DTYPE))
        pending = connection.exec_driver_sql("SELECT COUNT(*) FROM posting_delta").scalar_one()
        size = connection.exec_driver_sql("SELECT size FROM posting_blocks").scalar_one()
    assert pending < limit and size + pending == 1000 + limit + 1


def stored_widths(connection: Connection) -> list[int]:
    rows = connection.exec_driver_sql("SELECT widths FROM posting_blocks ORDER BY term_id")
    return [row[0] for row in rows]


def test_each_array_of_a_block_is_stored_in_the_narrowest_width_that_holds_it(sqlite_db_url: str) -> None:
    blocks = [
        (1, [(7, 3, 10), (9, 1, 4)]),  # 4-byte ids, 1-byte tfs and lengths
        (2, [(7, 256, 10), (9, 1, 300)]),  # 2-byte tfs and lengths
        (3, [(7, 3, 65_536), (2**32, 1, 4)]),  # 8-byte ids, 4-byte lengths
    ]
    rows = [(term, 2, tool, tf, doc_len) for term, entries in blocks for tool, tf, doc_len in entries]
    with ToolIndex.open(sqlite_db_url) as index, write_transaction(index.store.engine) as connection:
        postings.write(connection, np.array(rows, dtype=CHANGE_DTYPE))
        assert stored_widths(connection) == [411, 422, 814]
        lengths = connection.exec_driver_sql(
            "SELECT length(tool_ids), length(tfs), length(doc_lens) FROM posting_blocks ORDER BY term_id"
        ).all()
        assert [tuple(row) for row in lengths] == [(8, 2, 2), (8, 4, 4), (16, 2, 8)]
        for term, entries in blocks:
            found = postings.term_postings(connection, term)
            assert [tuple(row) for row in found[["tool_id", "tf", "doc_len"]].tolist()] == entries


@given(st.lists(st.integers(-(2**40), 2**40) | st.sampled_from([255, 256, 65_535, 65_536, 2**32 - 1, 2**32])))
def test_narrowest_is_the_first_width_whose_dtype_holds_every_value(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    for widths, limits in (
        (postings.ID_WIDTHS, postings.ID_LIMITS),
        (postings.VALUE_WIDTHS, postings.VALUE_LIMITS),
    ):
        fitting = [
            w for w, dtype in sorted(widths.items()) if all(0 <= v <= np.iinfo(dtype).max for v in values)
        ]
        assert postings.narrowest(array, limits) == (fitting[0] if fitting else max(widths))


def test_an_override_wider_than_its_block_is_read_and_merged_exactly(
    sqlite_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = np.array([(1, 2, tool, 3, 10) for tool in range(1, 1001)], dtype=CHANGE_DTYPE)
    with ToolIndex.open(sqlite_db_url) as index, write_transaction(index.store.engine) as connection:
        postings.write(connection, big)
        assert stored_widths(connection) == [411]
        wide = np.array([(1, 2, 500, 70_000, 300), (1, 2, 2**33, 2, 10)], dtype=CHANGE_DTYPE)
        postings.write(connection, wide)  # two overrides beside a block of 1-byte values
        pending = connection.exec_driver_sql("SELECT COUNT(*) FROM posting_delta").scalar_one()
        block = postings.key_blocks(connection, [(1, 2)])[(1, 2)]
        assert pending == 2 and block.size == 1001
        assert (int(block.tf[499]), int(block.doc_len[499]), int(block.tool_ids[-1])) == (70_000, 300, 2**33)
        monkeypatch.setattr(postings, "REWRITE_FACTOR", 10**9)  # the next write merges
        postings.write(connection, np.array([(1, 2, 1, 4, 10)], dtype=CHANGE_DTYPE))
        assert stored_widths(connection) == [842]
        merged = postings.key_blocks(connection, [(1, 2)])[(1, 2)]
        assert merged.tf.tolist() == [4, *block.tf[1:].tolist()]
        assert merged.tool_ids.tolist() == block.tool_ids.tolist()


@pytest.mark.parametrize("widths", [0, 844 + 1, 148, 32767])
def test_a_block_of_unknown_widths_is_a_corrupt_index(sqlite_db_url: str, widths: int) -> None:
    with ToolIndex.open(sqlite_db_url) as index:
        with write_transaction(index.store.engine) as connection:
            two = np.array([(1, 2, 7, 3, 10), (1, 2, 9, 1, 4)], dtype=CHANGE_DTYPE)
            postings.write(connection, two)
            connection.exec_driver_sql(f"UPDATE posting_blocks SET widths = {widths}")
        unknown = pytest.raises(CorruptIndex, match=f"term id 1, group 2: unknown widths {widths}")
        with read_transaction(index.store.engine) as connection, unknown:
            postings.term_postings(connection, 1)


@pytest.mark.parametrize("column", ["tool_ids", "tfs", "doc_lens"])
def test_a_torn_block_is_a_corrupt_index(sqlite_db_url: str, column: str) -> None:
    with ToolIndex.open(sqlite_db_url) as index:
        with write_transaction(index.store.engine) as connection:
            two = np.array([(1, 2, 7, 3, 10), (1, 2, 9, 1, 4)], dtype=CHANGE_DTYPE)
            postings.write(connection, two)
            connection.exec_driver_sql(f"UPDATE posting_blocks SET {column} = substr({column}, 2)")
        torn = pytest.raises(CorruptIndex, match="term id 1, group 2")
        with read_transaction(index.store.engine) as connection, torn:
            postings.term_postings(connection, 1)


@settings(max_examples=examples(200), deadline=None)
@given(codes=st.lists(st.one_of(st.integers(0, 12), st.integers(0, 2**62)), max_size=60))
def test_stable_order_is_a_stable_argsort(codes: list[int]) -> None:
    """Packed with positions where they fit, argsorted where they do not: the same order."""
    array = np.array(codes, dtype=np.int64)
    assert stable_order(array).tolist() == np.argsort(array, kind="stable").tolist()


@settings(max_examples=examples(200), deadline=None)
@given(rows=CHANGES, in_tool_order=st.booleans())
def test_changes_are_written_in_term_group_tool_order(
    rows: list[tuple[int, int, int, int, int]], in_tool_order: bool
) -> None:
    """An import's postings come in tool order and take the stable sort; others the packed one."""
    changes = as_changes(rows)
    if in_tool_order:
        changes = changes[np.argsort(changes["tool_id"], kind="stable")]
    ordered = in_key_order([changes])  # one part: joined and sorted, never bucketed
    keys = list(
        zip(ordered["term_id"].tolist(), ordered["grp"].tolist(), ordered["tool_id"].tolist(), strict=True)
    )
    assert keys == sorted(keys)


@settings(max_examples=examples(200), deadline=None)
@given(rows=CHANGES, in_tool_order=st.booleans(), data=st.data())
def test_changes_in_parts_come_out_in_term_group_tool_order(
    rows: list[tuple[int, int, int, int, int]], in_tool_order: bool, data: st.DataObject
) -> None:
    """Parts in tool order (an import's batches) are placed key by key, others joined and
    sorted: either way every change comes out once, in (term, group, tool) order."""
    changes = as_changes(rows)
    if in_tool_order:
        changes = changes[np.argsort(changes["tool_id"], kind="stable")]
    cuts = sorted(data.draw(st.lists(st.integers(0, changes.size), max_size=5)))
    parts = np.split(changes, cuts)
    ordered = in_key_order(parts)
    expected = changes[np.lexsort((changes["tool_id"], changes["grp"], changes["term_id"]))]
    assert ordered.tolist() == expected.tolist()


def test_an_import_s_parts_are_bucketed_by_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counting sort is the path parts in tool order take (and its answer is the sort's)."""
    bucketed: list[int] = []
    original = change_order._bucketed

    def spy(parts: list[np.ndarray], codes: list[np.ndarray], size: int) -> np.ndarray:
        bucketed.append(size)
        return original(parts, codes, size)

    monkeypatch.setattr(change_order, "_bucketed", spy)
    rows = [(term, 1, tool, term + tool, 10) for tool in range(1, 50) for term in (3, 1, 2) if tool % term]
    changes = as_changes(rows)
    parts = np.split(changes, [10, 11, 40])
    expected = changes[np.lexsort((changes["tool_id"], changes["grp"], changes["term_id"]))]
    assert in_key_order(parts).tolist() == expected.tolist()
    assert bucketed == [changes.size]
