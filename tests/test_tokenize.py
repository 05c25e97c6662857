"""The tokenizer of contract §3: the conformance vectors, worked cases and invariants."""

from __future__ import annotations

import json
from typing import Any

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from discovery._text.tokenizer import tokenize
from tests.conftest import CONFORMANCE
from tests.examples import examples


def _conformance_cases() -> list[Any]:
    path = CONFORMANCE / "tokenize.json"
    if not path.exists():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=f"{path} is not present"))]
    cases = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return [
        pytest.param(case["input"], case["tokens"], id=f"case{number}") for number, case in enumerate(cases)
    ]


@pytest.mark.parametrize(("text", "tokens"), _conformance_cases())
def test_conformance_vector(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # contract §3, verbatim.
        ("MCPTool", ["mcp", "tool"]),
        ("HTTPSServer", ["https", "server"]),
        ("HTTPSServerURLParser", ["https", "server", "url", "parser"]),
        ("fooBar", ["foo", "bar"]),
        ("v2Beta", ["v2", "beta"]),
        ("café", ["cafe"]),
        ("İstanbul ΣΑΣ", ["istanbul", "σας"]),
        ("ﬁle①²x", ["file12x"]),
        ("a_b-c.d", ["a", "b", "c", "d"]),
        ("日本語テキスト", ["日本語テキスト"]),
        # camelCase, acronyms and digits.
        ("getHTTPResponseCode", ["get", "http", "response", "code"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("ABC", ["abc"]),
        ("ABCd", ["ab", "cd"]),
        ("aB", ["a", "b"]),
        ("a1B2c3", ["a1", "b2c3"]),
        ("oauth2Token", ["oauth2", "token"]),
        ("123abc456", ["123abc456"]),
        ("S3Bucket", ["s3", "bucket"]),
        ("IPv6Address", ["i", "pv6", "address"]),
        ("mcp__github__create_issue", ["mcp", "github", "create", "issue"]),
        ("snake_case-and-kebab.case", ["snake", "case", "and", "kebab", "case"]),
        # Combining marks vanish, even mid-word and in runs, after NFKD.
        ("e\u0301te\u0301", ["ete"]),
        ("a\u0300\u0301\u0302b", ["ab"]),
        ("\u0301", []),
        ("Å", ["a"]),
        ("ǅungla", ["dzungla"]),
        # Final sigma: word-final capital sigma lowers to ς, elsewhere to σ.
        ("ΟΔΟΣ", ["οδος"]),
        ("Σ", ["σ"]),
        ("ΣΑΣ ΣΑ", ["σας", "σα"]),
        # Separators: lone surrogates (a summary cut through a pair), NUL, U+FFFD, punctuation.
        ("ab\ud83dcd", ["ab", "cd"]),
        ("ab\udc00", ["ab"]),
        ("a\x00b", ["a", "b"]),
        ("a\ufffdb", ["a", "b"]),
        ("emoji😀inside", ["emoji", "inside"]),
        ("  \t\n ", []),
        ("", []),
        ("---", []),
        ("a   b", ["a", "b"]),
    ],
)
def test_worked_case(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


_WORD = regex.compile(r"[\p{L}\p{N}]+")

# Code points Python's own Unicode database (used for NFKD and lowercasing) knows. The `regex`
# module ships a newer database: a letter assigned after it (U+1C89, say) is uppercase to the
# regex but has no lowercase mapping in `str.lower`, which breaks idempotence on those only.
_ASSIGNED_TEXT = st.text(st.characters(exclude_categories=["Cn"]), max_size=40)
_MIXED_TEXT = st.text(
    st.one_of(
        st.sampled_from("aAbBzZ09_- .ΣσİéÉ\u0301ﬁ²日\x00\ud83d"), st.characters(exclude_categories=["Cn"])
    ),
    max_size=40,
)


@settings(max_examples=examples(100), deadline=None)
@given(st.one_of(_ASSIGNED_TEXT, _MIXED_TEXT))
@example("ΟΔΟΣ")
@example("HTTPSServer\x00v2Beta")
def test_tokens_are_lowercase_words(text: str) -> None:
    for token in tokenize(text):
        assert token
        assert token == token.lower()
        assert _WORD.fullmatch(token), token


@settings(max_examples=examples(100), deadline=None)
@given(st.one_of(_ASSIGNED_TEXT, _MIXED_TEXT))
@example("ABCdef ΣΑΣ")
def test_tokenizing_tokens_again_changes_nothing(text: str) -> None:
    tokens = tokenize(text)
    assert tokenize(" ".join(tokens)) == tokens


@settings(max_examples=examples(500), deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=80))
def test_the_ascii_path_equals_the_unicode_path(text: str) -> None:
    from discovery._text.tokenizer import ascii_tokens, unicode_tokens

    assert ascii_tokens(text) == unicode_tokens(text)


@settings(max_examples=examples(1000), deadline=None)
@given(text=st.text(alphabet="aAbBzZ09 _-.", max_size=24))
def test_the_ascii_path_splits_case_boundaries_as_the_unicode_path(text: str) -> None:
    """Dense in the places the two paths could differ: runs of capitals, digits, separators."""
    from discovery._text.tokenizer import ascii_tokens, unicode_tokens

    assert ascii_tokens(text) == unicode_tokens(text)
