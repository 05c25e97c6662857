"""Recall@k, MRR and nDCG@k against values computed by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from discovery._quality.metrics import groups_of, mean, ndcg_at, recall_at, reciprocal_rank, satisfied_at

RANKED = ["a", "b", "c", "d", "e"]


def test_groups_of_makes_one_group_per_name_once() -> None:
    assert groups_of(["x", "y", "x"]) == [frozenset({"x"}), frozenset({"y"})]


@pytest.mark.parametrize(
    ("relevant", "k", "expected"),
    [
        (["a"], 1, 1.0),
        (["b"], 1, 0.0),
        (["b"], 2, 1.0),
        (["b", "d"], 2, 0.5),  # one of two found in the first two
        (["b", "d"], 4, 1.0),
        (["b", "z"], 5, 0.5),  # z is never ranked
        (["z"], 5, 0.0),
    ],
)
def test_recall_with_relevant_names(relevant: list[str], k: int, expected: float) -> None:
    assert recall_at(RANKED, groups_of(relevant), k) == expected


@pytest.mark.parametrize(
    ("groups", "k", "expected"),
    [
        ([{"c", "a"}], 1, 1.0),  # any name of the group will do
        ([{"c", "z"}], 2, 0.0),
        ([{"c", "z"}], 3, 1.0),
        ([{"b", "c"}, {"e"}, {"y", "z"}], 3, 1 / 3),  # a group found twice counts once
        ([{"b", "c"}, {"e"}, {"y", "z"}], 5, 2 / 3),
    ],
)
def test_recall_with_groups(groups: list[set[str]], k: int, expected: float) -> None:
    assert recall_at(RANKED, groups, k) == pytest.approx(expected)


def test_recall_of_no_groups_is_zero() -> None:
    assert recall_at(RANKED, [], 5) == 0.0


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([{"a"}], 1.0),
        ([{"c"}], 1 / 3),
        ([{"e"}, {"b"}], 1 / 2),  # the first relevant result, whichever group it satisfies
        ([{"z"}], 0.0),
    ],
)
def test_reciprocal_rank(groups: list[set[str]], expected: float) -> None:
    assert reciprocal_rank(RANKED, groups) == pytest.approx(expected)


def test_ndcg_by_hand() -> None:
    # Relevant b (rank 2) and d (rank 4): DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3).
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at(RANKED, groups_of(["b", "d"]), 5) == pytest.approx(dcg / ideal)
    # At k = 3 only b counts, and the ideal list is still two long.
    assert ndcg_at(RANKED, groups_of(["b", "d"]), 3) == pytest.approx((1 / math.log2(3)) / ideal)
    # At k = 1 the ideal is one result: b at rank 2 is not in it.
    assert ndcg_at(RANKED, groups_of(["b", "d"]), 1) == 0.0
    assert ndcg_at(RANKED, groups_of(["a"]), 5) == 1.0
    assert ndcg_at(RANKED, groups_of(["c"]), 5) == pytest.approx(0.5)  # 1/log2(4)


def test_ndcg_counts_a_result_that_satisfies_two_groups_once() -> None:
    # a is in both groups: one gain at rank 1; the ideal satisfies one group per rank.
    assert ndcg_at(RANKED, [{"a"}, {"a", "z"}], 5) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_satisfied_at_takes_the_first_rank_of_a_repeated_name() -> None:
    assert satisfied_at(["x", "a", "a"], [{"a"}]) == [2]


def test_mean() -> None:
    assert mean([]) == 0.0
    assert mean(iter([1.0, 0.0, 0.5])) == 0.5


names = st.lists(st.sampled_from("abcdefgh"), max_size=8)
group_lists = st.lists(st.frozensets(st.sampled_from("abcdefghxyz"), min_size=1), min_size=1, max_size=4)


@given(names, group_lists, st.integers(min_value=1, max_value=10))
def test_metrics_stay_between_zero_and_one_and_grow_with_k(
    ranked: list[str], groups: list[frozenset[str]], k: int
) -> None:
    for metric in (recall_at(ranked, groups, k), ndcg_at(ranked, groups, k), reciprocal_rank(ranked, groups)):
        assert 0.0 <= metric <= 1.0
    assert recall_at(ranked, groups, k) <= recall_at(ranked, groups, k + 1)
    first = min((rank for rank in satisfied_at(ranked, groups) if rank), default=0)
    assert (recall_at(ranked, groups, k) > 0) == (0 < first <= k)
