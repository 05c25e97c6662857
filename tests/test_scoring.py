"""BM25+ of contract §4, one formula term at a time, and the invariants that make ranking sane."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from discovery._params import query_terms
from discovery._ranking.bm25 import (
    DELTA,
    K1,
    B,
    average_length,
    idf,
    js_log,
    length_norm,
    round6,
    term_score,
    term_upper_bound,
)
from discovery._ranking.fields import (
    FIELD_WEIGHTS,
    document_term_frequencies,
    field_term_frequencies,
    field_texts,
)
from discovery.errors import QueryWithoutTerms
from tests.examples import examples


def test_constants_are_the_reference_ones() -> None:
    assert (K1, B, DELTA) == (1.2, 0.75, 1.0)
    assert dict(FIELD_WEIGHTS) == {
        "name": 6,
        "label": 4,
        "mcp_tool_name": 4,
        "server_name": 2,
        "summary": 2,
        "schema_key": 1,
    }


# Expected values are JavaScript's (Node 20: ``Math.log(1 + (N - df + 0.5) / (df + 0.5))``); the
# first differs from the platform ``math.log`` by one ulp.
@pytest.mark.parametrize(
    ("n_docs", "df", "expected"),
    [
        (3, 1, 0.9808292530117264),
        (3, 3, 0.13353139262452257),
        (757, 40, 2.9293814115298784),
        (757, 409, 0.6157464823492476),
        (3000, 1, 7.601235737332202),
        (1, 0, 1.3862943611198906),
        (0, 0, 0.6931471805599453),
    ],
)
def test_idf(n_docs: int, df: int, expected: float) -> None:
    assert idf(n_docs, df) == expected


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        # Arguments where V8's fdlibm ``Math.log`` and a correctly rounded log disagree.
        (1.8734368085861206, 0.6277746096121082),
        (1.399591088294983, 0.33618011416830573),
        (1.6855700016021729, 0.522103786483181),
        (5.4734774066797645, 1.6999141377892282),
        # Special and edge values.
        (1.0, 0.0),
        (2.0, 0.6931471805599453),
        (0.5, -0.6931471805599453),
        (5e-324, -744.4400719213812),
        (1.7976931348623157e308, 709.782712893384),
        (0.0, -math.inf),
        (math.inf, math.inf),
    ],
)
def test_js_log_is_javascripts_math_log(x: float, expected: float) -> None:
    assert js_log(x) == expected


def test_js_log_of_a_negative_number_is_nan() -> None:
    assert math.isnan(js_log(-1.0))


def test_idf_stays_positive_when_every_document_has_the_term() -> None:
    assert idf(1_000_000, 1_000_000) > 0


@pytest.mark.parametrize(
    ("doc_len", "avgdl", "expected"),
    [
        (10, 10.0, 1.2),
        (0, 10.0, 1.2 * 0.25),
        (20, 10.0, 1.2 * (1 - 0.75 + 0.75 * 2.0)),
        (80, 97.15719947159842, 1.0410670582476749),
    ],
)
def test_length_norm(doc_len: int, avgdl: float, expected: float) -> None:
    assert length_norm(doc_len, avgdl) == expected


def test_term_score_is_the_reference_expression() -> None:
    norm = length_norm(80, 97.15719947159842)
    assert term_score(1, 2.9293814115298784, 16, norm) == 8.980306822092457
    assert term_score(2, 1.5, 6, 1.2) == 2 * 1.5 * ((6 * 2.2) / (6 + 1.2) + 1.0)


def test_term_upper_bound_is_the_score_at_length_zero() -> None:
    assert term_upper_bound(1, 2.0, 7) == term_score(1, 2.0, 7, length_norm(0, 50.0))


@pytest.mark.parametrize(
    ("n_docs", "total_len", "expected"),
    [(0, 0, 1.0), (0, 50, 1.0), (4, 0, 1.0), (4, 10, 2.5), (757, 73548, 73548 / 757)],
)
def test_average_length(n_docs: int, total_len: int, expected: float) -> None:
    assert average_length(n_docs, total_len) == expected


def test_query_terms_keep_first_appearance_order_and_count_repeats() -> None:
    counts = query_terms("Issue github ISSUE createIssue, github!")
    assert list(counts.items()) == [("issue", 3), ("github", 2), ("create", 1)]
    with pytest.raises(QueryWithoutTerms):
        query_terms("?!")


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        # Halves (exact after scaling by 1e6) round up: not to even, and not as ``round`` does
        # on the decimal expansion (2.0000005 is 2.00000049999… as a double).
        (2.0000005, 2.000001),
        (2.5e-06, 3e-06),
        (1.25e-05, 1.3e-05),
        (4.5e-06, 5e-06),
        (1.4103244, 1.410324),
        (27.675714665391855, 27.675715),
        (15.128600296475387, 15.1286),
        (0.0, 0.0),
        (7.0, 7.0),
    ],
)
def test_round6_rounds_half_up(score: float, expected: float) -> None:
    assert round6(score) == expected


def test_fields_of_an_mcp_tool_in_reference_order() -> None:
    pairs = field_texts(
        name="mcp__gh__create_issue",
        label="gh/create_issue",
        mcp_tool_name="create_issue",
        server_name="gh",
        summary="Create an issue",
        schema_keys=["owner", "repo"],
    )
    assert pairs == [
        ("name", "mcp__gh__create_issue"),
        ("label", "gh/create_issue"),
        ("mcp_tool_name", "create_issue"),
        ("server_name", "gh"),
        ("summary", "Create an issue"),
        ("schema_key", "owner"),
        ("schema_key", "repo"),
    ]
    assert field_term_frequencies(pairs) == {
        "name": {"mcp": 6, "gh": 6, "create": 6, "issue": 6},
        "label": {"gh": 4, "create": 4, "issue": 4},
        "mcp_tool_name": {"create": 4, "issue": 4},
        "server_name": {"gh": 2},
        "summary": {"create": 2, "an": 2, "issue": 2},
        "schema_key": {"owner": 1, "repo": 1},
    }
    assert document_term_frequencies(pairs) == {
        "mcp": 6,
        "gh": 12,
        "create": 16,
        "issue": 16,
        "an": 2,
        "owner": 1,
        "repo": 1,
    }


def test_builtin_fields_leave_out_empty_mcp_fields() -> None:
    pairs = field_texts(
        name="grep", label="grep", mcp_tool_name=None, server_name="", summary="", schema_keys=[]
    )
    assert pairs == [("name", "grep"), ("label", "grep"), ("summary", "")]
    assert document_term_frequencies(pairs) == {"grep": 10}


_FIELD_TEXT = st.text(st.sampled_from("abcAB _-1"), max_size=12)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(FIELD_WEIGHTS)), _FIELD_TEXT), max_size=8))
def test_document_tf_is_the_sum_of_field_tfs(pairs: list[tuple[str, str]]) -> None:
    totals: dict[str, int] = {}
    for bucket in field_term_frequencies(pairs).values():
        for term, tf in bucket.items():
            totals[term] = totals.get(term, 0) + tf
    assert document_term_frequencies(pairs) == totals


_N_DOCS = st.integers(min_value=1, max_value=200_000)
_AVGDL = st.floats(min_value=0.5, max_value=5_000, allow_nan=False)
_LENGTH = st.integers(min_value=0, max_value=100_000)
_TF = st.integers(min_value=1, max_value=100_000)
_QTF = st.integers(min_value=1, max_value=20)


@settings(max_examples=examples(100), deadline=None)
@given(_N_DOCS, st.data(), _QTF, _TF, _LENGTH, _AVGDL)
def test_a_matched_term_adds_at_least_idf_times_delta(
    n_docs: int, data: st.DataObject, qtf: int, tf: int, doc_len: int, avgdl: float
) -> None:
    df = data.draw(st.integers(min_value=1, max_value=n_docs))
    weight = idf(n_docs, df)
    score = term_score(qtf, weight, tf, length_norm(doc_len + tf, avgdl))
    assert score >= qtf * weight * DELTA
    assert score <= term_upper_bound(qtf, weight, tf)


@settings(max_examples=examples(100), deadline=None)
@given(_QTF, _TF, _TF, _LENGTH, _AVGDL, st.floats(min_value=0.01, max_value=20))
def test_more_tf_never_lowers_a_score(
    qtf: int, tf: int, more: int, doc_len: int, avgdl: float, weight: float
) -> None:
    assume(more > tf)
    # ``doc_len`` counts the document's other terms: its length is that plus the term's tf.
    norm = length_norm(doc_len + tf, avgdl)
    # Same document length: the saturation curve only rises.
    assert term_score(qtf, weight, more, norm) >= term_score(qtf, weight, tf, norm)
    # The extra occurrences lengthen the document too: still never lower.
    longer = length_norm(doc_len + more, avgdl)
    assert term_score(qtf, weight, more, longer) >= term_score(qtf, weight, tf, norm)


@settings(max_examples=examples(100), deadline=None)
@given(_N_DOCS, st.data())
def test_rarer_terms_weigh_more(n_docs: int, data: st.DataObject) -> None:
    df = data.draw(st.integers(min_value=1, max_value=n_docs))
    rarer = data.draw(st.integers(min_value=0, max_value=df))
    assert idf(n_docs, rarer) >= idf(n_docs, df) > 0
