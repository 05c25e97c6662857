"""What ``discovery`` and ``store`` export: the names a user (or ``discovery``) needs, each the
very object its module defines, loaded when first used."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

import discovery
import store
import store.errors
from discovery.errors import UnknownToolNames
from store.errors import StoreError, ToolIndexError
from tests.test_layering import REPO, imports_of, sources

MODELS = {
    "ToolIndex",
    "ImportReport",
    "Session",
    "SessionSettings",
    "SearchTool",
    "ToolResult",
    "ToolRecord",
    "SearchHit",
    "SearchDetails",
    "MatchDetails",
}


@pytest.mark.parametrize("name", discovery.__all__)
def test_each_public_name_is_its_module_s_own(name: str) -> None:
    home = importlib.import_module(discovery._HOMES[name])
    assert getattr(discovery, name) is getattr(home, name)


def test_the_package_exports_the_models_and_the_errors_a_program_catches() -> None:
    errors = set(discovery.__all__) - MODELS
    assert set(discovery.__all__) >= MODELS
    assert {"ToolIndexError", "ToolCallError"} <= errors
    assert all(issubclass(getattr(discovery, name), ToolIndexError) for name in errors - {"UnknownToolNames"})
    assert issubclass(UnknownToolNames, UserWarning)
    assert sorted(discovery._HOMES) == sorted(discovery.__all__)
    assert set(discovery.__all__) <= set(dir(discovery))


def test_a_name_the_package_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'EmptyQuery'"):
        _ = discovery.EmptyQuery


def test_importing_the_package_loads_nothing_until_a_name_is_used() -> None:
    script = (
        "import sys\n"
        "import discovery\n"
        "print(*(name in sys.modules for name in ('sqlalchemy', 'numpy', 'store', 'discovery._index')))\n"
        "discovery.ToolIndex\n"
        "print(*(name in sys.modules for name in ('sqlalchemy', 'numpy', 'store', 'discovery._index')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    # numpy waits for the first search: opening an index (and a gateway's first answer) needs none
    assert done.stdout.splitlines() == ["False False False False", "True False True True"]


STORE_NAMES = 25
"""The most names ``store`` exports: its units and the values that cross them, nothing else."""


def test_the_store_exports_what_discovery_imports_from_it_and_no_more() -> None:
    """``store.__all__`` is the names ``discovery`` imports from ``store`` (the units, the row
    types, the corpus groups, where the database is when none is named), at most
    ``STORE_NAMES`` of them; the errors are ``store.errors``'s own, and the query modules stay
    private."""
    imported = {
        name
        for path in sources("discovery")
        for found in imports_of(path)
        if found.module == "store"
        for name in found.names
        if importlib.util.find_spec(f"store.{name}") is None
    }
    errors = {
        StoreError.__name__,
        ToolIndexError.__name__,
        *(cls.__name__ for cls in _subclasses(StoreError)),
    }
    assert set(store.__all__) == imported
    assert len(store.__all__) <= STORE_NAMES
    assert errors.isdisjoint(store.__all__)
    assert all(getattr(store.errors, name) for name in errors)


@pytest.mark.parametrize("name", store.__all__)
def test_each_store_name_is_its_module_s_own(name: str) -> None:
    home = importlib.import_module(store._HOMES[name])
    assert getattr(store, name) is getattr(home, name)
    assert sorted(store._HOMES) == sorted(store.__all__)


def _subclasses(cls: type[Exception]) -> set[type[Exception]]:
    found: set[type[Exception]] = set()
    for direct in cls.__subclasses__():
        found |= {direct, *_subclasses(direct)}
    return found
