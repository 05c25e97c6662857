"""The layering of STYLE.md, read from the source with ``ast`` (imports inside functions and under
``TYPE_CHECKING`` count too):

- ``store`` never imports ``discovery``;
- ``discovery/tokenize.py`` imports nothing of ours, ``discovery/scoring.py`` only the tokenizer;
- ``discovery/cli.py`` (and ``discovery/cli_quality.py``, its quality commands) are the only modules
  that import ``click``;
- ``discovery`` never builds SQL: from ``sqlalchemy`` it imports only the types ``Connection``,
  ``Engine`` and ``URL`` (to annotate what it hands to ``store``), nothing from the ORM, Core or
  alembic; it imports ``store`` as a package (its exported names and its query modules, never
  ``store.schema``), and from ``store.engine`` only the transaction helpers and the URL defaults.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import store

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("store", "discovery", "migrations")
OURS = {"store", "discovery", "migrations", "bench", "tests"}
SQLALCHEMY_TYPES = {("sqlalchemy", "Connection"), ("sqlalchemy", "Engine"), ("sqlalchemy.engine", "URL")}
STORE_ENGINE_HELPERS = {
    "read_transaction",
    "write_transaction",
    "translated_errors",
    "default_url",
    "ENV_VAR",
}


@dataclass(frozen=True)
class Import:
    """One imported module and, for ``from m import a, b``, the names."""

    module: str
    names: tuple[str, ...] = ()

    @property
    def top(self) -> str:
        return self.module.split(".")[0]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[Import]:
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package)


def imports_in(source: str, package: str) -> list[Import]:
    """Every import of ``source``, a module of ``package``, with relative imports made absolute."""
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            found.append(Import(module, tuple(alias.name for alias in node.names)))
    return found


def sources(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


ALL_SOURCES = [path for package in PACKAGES for path in sources(package)]


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_the_walker_sees_imports() -> None:
    ranking = imports_of(REPO / "discovery" / "ranking.py")
    assert Import("numpy") in ranking
    assert any(imported.module == "store" and "reads" in imported.names for imported in ranking)
    assert Import("discovery.tokenize", ("tokenize",)) in imports_of(REPO / "discovery" / "scoring.py")


def test_relative_imports_resolve() -> None:
    source = "from . import x\nfrom .y import z\nfrom ..store import reads\nimport click\n"
    assert imports_in(source, "discovery.sub") == [
        Import("discovery.sub", ("x",)),
        Import("discovery.sub.y", ("z",)),
        Import("discovery.store", ("reads",)),
        Import("click"),
    ]
    assert module_name(REPO / "discovery" / "__init__.py") == "discovery"


@pytest.mark.parametrize("path", sources("store"), ids=relative)
def test_store_never_imports_discovery(path: Path) -> None:
    assert [i.module for i in imports_of(path) if i.top in {"discovery", "click"}] == []


@pytest.mark.parametrize(("module", "allowed"), [("tokenize", set()), ("scoring", {"discovery.tokenize"})])
def test_tokenizer_and_scoring_are_pure(module: str, allowed: set[str]) -> None:
    ours = {i.module for i in imports_of(REPO / "discovery" / f"{module}.py") if i.top in OURS}
    assert ours == allowed


@pytest.mark.parametrize("path", ALL_SOURCES, ids=relative)
def test_only_the_cli_imports_click(path: Path) -> None:
    uses_click = any(i.top == "click" for i in imports_of(path))
    assert uses_click == (relative(path) in {"discovery/cli.py", "discovery/cli_quality.py"})


@pytest.mark.parametrize("path", sources("discovery"), ids=relative)
def test_discovery_reaches_sql_only_through_store(path: Path) -> None:
    wrong: list[str] = []
    for imported in imports_of(path):
        if imported.top in {"sqlalchemy", "alembic"}:
            names = {(imported.module, name) for name in imported.names} or {(imported.module, "*")}
            wrong.extend(f"{module}.{name}" for module, name in sorted(names - SQLALCHEMY_TYPES))
        elif imported.module == "store":
            wrong.extend(f"store.{name}" for name in imported.names if not _store_exports(name))
        elif imported.module == "store.engine":
            wrong.extend(
                f"store.engine.{name}" for name in imported.names if name not in STORE_ENGINE_HELPERS
            )
        elif imported.top == "store":
            wrong.append(imported.module)
    assert wrong == []


def _store_exports(name: str) -> bool:
    """A name of ``store.__all__``, or a store module other than the ORM models and the engine
    module (``from store import reads`` is fine, ``from store import schema`` is not)."""
    return name in store.__all__ or (
        name not in {"schema", "engine"} and (REPO / "store" / f"{name}.py").exists()
    )


def test_migrations_use_only_the_store_schema() -> None:
    ours = {
        i.module for path in sources("migrations") for i in imports_of(path) if i.top in OURS - {"migrations"}
    }
    assert ours <= {"store.schema"}


def worked_example_db(directory: Path) -> str:
    """A SQLite file holding SPEC §6's worked example, for a new process to open."""
    from discovery import ToolIndex
    from tests.catalogs import WORKED_EXAMPLE

    url = f"sqlite:///{directory / 'tools.db'}"
    with ToolIndex.open(url) as index:
        index.upsert_tools(WORKED_EXAMPLE)
    return url


def test_opening_and_searching_an_index_loads_neither_pydantic_the_orm_nor_numpy_ma(tmp_path: Path) -> None:
    """The record and settings models load when records are validated or sessions opened; a
    process that only searches (the cold start of every CLI search) skips pydantic, and the
    store's tables are Core tables, so it never imports ``sqlalchemy.orm`` either. Nor does
    ranking call what imports ``numpy.ma`` (``np.unique``): 15–35 ms of a cold start."""
    import subprocess
    import sys

    url = worked_example_db(tmp_path)
    script = (
        "import sys\n"
        "from discovery import ToolIndex\n"
        f"hits = ToolIndex.open({url!r}).search('github issue')\n"
        "print(hits[0].name, *(name in sys.modules for name in ('pydantic', 'sqlalchemy.orm', 'numpy.ma')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["mcp__github_create_issue", "False", "False", "False"]


@pytest.mark.parametrize("output", [[], ["--json"]])
def test_a_read_only_search_on_the_command_line_does_not_load_pydantic(
    tmp_path: Path, output: list[str]
) -> None:
    """The commands that read catalog files, explain or verify import what they need themselves,
    so ``tool-index search`` starts without pydantic; a session search does load it."""
    import subprocess
    import sys

    url = worked_example_db(tmp_path)
    script = (
        "import sys\n"
        "from discovery.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n"
        "    print('pydantic' in sys.modules, file=sys.stderr)\n"
    )
    for extra, loaded in (([], "False"), (["--session", "s", "--mode", "mcp-only"], "True")):
        args = ["--db", url, "search", "github issue", *output, *extra]
        done = subprocess.run(
            [sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True, check=True
        )
        assert "create_issue" in done.stdout
        assert done.stderr.split() == [loaded]


@pytest.mark.parametrize("before", ["enabled", "disabled"])
def test_importing_the_package_leaves_the_collector_as_it_found_it(before: str) -> None:
    """The collector waits while the package's imports run, and is then as the process had it."""
    import subprocess
    import sys

    script = (
        "import gc, sys\n"
        f"{'gc.disable()' if before == 'disabled' else ''}\n"
        "import discovery\n"
        "print(gc.isenabled(), 'sqlalchemy' in sys.modules, 'numpy' in sys.modules)\n"
        "print(len(gc.get_objects(generation=0)), len(gc.get_objects(generation=2)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    state, counts = done.stdout.splitlines()
    young, old = counts.split()
    assert state.split() == [str(before == "enabled"), "True", "True"]
    if before == "enabled":
        # What the imports made went to the oldest generation unexamined: no young collection
        # is left to walk it.
        assert int(young) < 1_000 < 50_000 < int(old)
    else:
        # A process that runs without the collector keeps its generations as they were.
        assert int(young) > 50_000
