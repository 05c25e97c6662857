"""The ``enhanced`` analyzer: stems for documents, stop words out of queries, and the invariants the
store will rely on (one term per reference token, so lengths stay the reference's)."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from discovery._text import enhanced
from discovery._text.tokenizer import tokenize
from tests.examples import examples

texts = st.text(st.characters(codec="utf-8"), max_size=60) | st.sampled_from(
    ["Scheduling meetings", "createIssue for the repos", "who", "the the", "Can't you?", "日本語 σας 123"]
)


def test_inflections_meet() -> None:
    assert enhanced.document_tokens("schedule_event") == enhanced.query_tokens("scheduling events")
    assert enhanced.document_tokens("listPullRequests") == ["list", "pull", "request"]


def test_a_request_loses_its_filler() -> None:
    assert enhanced.query_tokens("Can you help me schedule a meeting for the team?") == [
        "help",
        "schedul",
        "meet",
        "team",
    ]
    assert enhanced.query_term_counts("issues about the issue") == {"issu": 2}


def test_a_query_of_stop_words_only_keeps_them() -> None:
    assert enhanced.query_tokens("who") == ["who"]
    assert enhanced.query_tokens("The the") == ["the", "the"]
    assert enhanced.query_tokens("?!") == []


def test_stop_words_are_tokens_of_the_snowball_list() -> None:
    assert {"the", "can", "don", "t", "you", "for"} <= enhanced.STOP_WORDS
    assert {"list", "get", "find", "search", "file"}.isdisjoint(enhanced.STOP_WORDS)
    for word in enhanced.STOP_WORDS:
        assert tokenize(word) == [word]


def test_other_scripts_and_numbers_pass_unchanged() -> None:
    assert enhanced.document_tokens("日本語テキスト σας 2024 v2") == ["日本語テキスト", "σας", "2024", "v2"]


@given(texts)
def test_one_term_per_reference_token(text: str) -> None:
    """So a tool's weighted length, and the corpus's average, are the reference analyzer's."""
    assert len(enhanced.document_tokens(text)) == len(tokenize(text))


@given(texts)
def test_terms_are_single_tokens(text: str) -> None:
    """A stem is itself one token: terms can be stored and looked up like the reference's."""
    for term in enhanced.document_tokens(text):
        assert term and tokenize(term) == [term]


@given(texts)
def test_query_terms_are_the_stems_of_its_content_tokens(text: str) -> None:
    tokens = tokenize(text)
    content = [token for token in tokens if token not in enhanced.STOP_WORDS] or tokens
    assert enhanced.query_tokens(text) == [enhanced.stem(token) for token in content]
    assert set(enhanced.query_tokens(text)) <= set(enhanced.document_tokens(text))


@settings(max_examples=examples(20), deadline=None)
@given(
    st.lists(
        st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=12), max_size=40
    )
)
def test_threads_stem_alike(words: list[str]) -> None:
    expected = [enhanced.stem(word) for word in words]
    enhanced.stem.cache_clear()
    results: list[list[str]] = []

    def work() -> None:
        results.append([enhanced.stem(word) for word in words])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4
