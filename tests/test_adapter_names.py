"""Wire names: valid for the providers, one per catalog name, the same in every process."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from discovery.adapters import _names as names_module
from discovery.adapters._names import WireNames, is_wire_name, wire_name
from discovery.adapters.errors import WireNameCollision
from tests.providers import LONG_NAME, REPO_ROOT

# Names as catalogs hold them: any Unicode (lone surrogates too), often close to the 64-character
# limit, often sharing a long prefix (one server's tools), sometimes already ending like a digest.
PREFIX = "mcp__playwright-executeautomation__playwright_"
any_text = st.text(min_size=1, max_size=90)
near_limit = st.text(alphabet="abcXYZ019_-.:/ ", min_size=60, max_size=70)
same_server = st.text(alphabet="abc_", min_size=1, max_size=30).map(lambda tail: PREFIX + tail)
digest_like = st.from_regex(rf"[a-z]{{1,20}}_[0-9a-f]{{{names_module.DIGEST_LENGTH}}}", fullmatch=True)
names = st.one_of(any_text, near_limit, same_server, digest_like)


@given(names)
def test_every_wire_name_is_valid(name: str) -> None:
    assert is_wire_name(wire_name(name))


@given(st.sets(names, min_size=2, max_size=60))
def test_distinct_names_get_distinct_wire_names_and_the_way_back(catalog: set[str]) -> None:
    table = WireNames(catalog)
    assert len(table) == len(catalog)
    for name in catalog:
        assert table[table.wire(name)] == name


@given(names)
def test_a_wire_name_is_a_function_of_the_name_alone(name: str) -> None:
    assert wire_name(name) == wire_name(str(name)) == WireNames([name, "other"]).wire(name)


@given(st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True))
def test_names_the_providers_accept_stay_as_they_are_unless_they_end_like_a_digest(name: str) -> None:
    mapped = wire_name(name) != name
    digits = names_module.DIGEST_LENGTH
    ends_like_a_digest = (
        len(name) > digits + 1
        and name[-digits - 1] == "_"
        and all(c in "0123456789abcdef" for c in name[-digits:])
    )
    assert mapped == ends_like_a_digest


@given(
    st.from_regex(r"[a-zA-Z0-9_-]{1,40}", fullmatch=True), st.text(alphabet="0123456789abcdef", min_size=16)
)
def test_a_name_ending_like_a_digest_is_mapped(start: str, digits: str) -> None:
    name = f"{start}_{digits[-names_module.DIGEST_LENGTH :]}"
    assert wire_name(name) != name and is_wire_name(wire_name(name))


def test_a_real_long_name_keeps_a_readable_prefix() -> None:
    wire = wire_name(LONG_NAME)
    assert len(LONG_NAME) == 66 and len(wire) == 64
    assert wire.startswith("mcp__playwright-executeautomation__playwright_c")
    assert wire_name("search_tool_bm25") == "search_tool_bm25"
    assert wire_name("mcp__github__create_issue") == "mcp__github__create_issue"
    assert wire_name("mcp__café/ünïcode tool").startswith("mcp__cafe_unicode_tool_")
    assert wire_name("日本語") != wire_name("中文") and is_wire_name(wire_name("日本語"))


def test_the_same_names_get_the_same_wire_names_in_another_process() -> None:
    catalog = [LONG_NAME, "mcp__docs.example/search pages", "tool_0123456789ab", "\ud800 lone", "read"]
    script = (
        "import sys\n"
        "from discovery.adapters._names import wire_name\n"
        f"print(repr([wire_name(name) for name in {catalog!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert done.stdout.strip() == repr([wire_name(name) for name in catalog])


def test_the_way_back_knows_only_the_names_it_was_given() -> None:
    table = WireNames(["read", LONG_NAME])
    assert table.catalog(wire_name(LONG_NAME)) == LONG_NAME
    assert table.catalog("mcp__unknown") is None
    assert table.catalog(LONG_NAME) is None  # the catalog name is not a wire name


def test_a_name_equal_to_another_names_wire_name_is_kept_apart() -> None:
    wire = wire_name(LONG_NAME)
    table = WireNames([LONG_NAME, wire])
    assert len(table) == 2 and wire_name(wire) != wire
    assert table.catalog(wire) == LONG_NAME and table.catalog(wire_name(wire)) == wire


def test_a_digest_collision_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 48-bit collision cannot be found here; with one hex digit kept, seventeen names that share
    # their readable prefix must collide, and the table refuses the set rather than route a call
    # to the wrong tool.
    monkeypatch.setattr(names_module, "DIGEST_LENGTH", 1)
    catalog = [f"{PREFIX}{'x' * 20}{n}" for n in range(17)]
    with pytest.raises(WireNameCollision, match=r"catalog names '.*' and '.*' both map to the wire name"):
        WireNames(catalog)


def test_without_strict_every_name_of_a_shared_wire_name_is_left_out_in_any_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(names_module, "DIGEST_LENGTH", 1)
    catalog = [f"{PREFIX}{'x' * 20}{n}" for n in range(17)]
    wires = [wire_name(name) for name in catalog]
    unique = {name for name, wire in zip(catalog, wires, strict=True) if wires.count(wire) == 1}
    for order in (catalog, catalog[::-1], sorted(catalog, key=wire_name)):
        table = WireNames(["read", *order], strict=False)
        assert {table[wire] for wire in table} == {"read", *unique}
        assert all(table.offers(name) == (name in unique) for name in catalog)
        assert {name for shared in table.collisions.values() for name in shared} == set(catalog) - unique
        assert all(table.catalog(wire) is None for wire in table.collisions)
