"""The tie-break orders: UCA collation (a precomputed table for ASCII, ``pyuca`` beyond) and
JavaScript's UTF-16 sort."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from discovery._text.collation import collation_key, utf16_sort_key
from tests.test_ranking import COLLATOR

NON_ASCII = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1).filter(lambda t: not t.isascii())


@given(st.text(st.characters(codec="ascii")))
@example("")
@example("Tool_1 tool-1 TOOL1 tool.1")
@example("\x00\x1f\x7f")  # ignorable controls
def test_ascii_names_get_pyucas_keys_from_the_table(name: str) -> None:
    assert collation_key(name) == tuple(COLLATOR.sort_key(name))


@settings(deadline=None)  # the first non-ASCII key loads pyuca's table (some 250 ms)
@given(NON_ASCII)
@example("café")
@example("Äpfel")
@example("ǅemal ﬁle Ⅻ")
@example("𝔤𝔦𝔱𝔥𝔲𝔟")
def test_other_names_get_pyucas_keys(name: str) -> None:
    assert collation_key(name) == tuple(COLLATOR.sort_key(name))


def test_utf16_order_puts_astral_characters_before_the_end_of_the_basic_plane() -> None:
    # Code points order U+FFFD before U+1F600; UTF-16 code units (0xD83D...) the other way round.
    names = ["\ufffd", "\U0001f600", "z", "Z"]
    assert sorted(names, key=utf16_sort_key) == ["Z", "z", "\U0001f600", "\ufffd"]
