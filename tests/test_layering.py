"""The layering of STYLE.md, read from the source with ``ast`` (imports inside functions and
under ``TYPE_CHECKING`` count too):

- ``store`` never imports ``discovery``; ``migrations`` imports only ``store._schema``;
- inside ``discovery`` the layers go bottom to top ``errors``, ``files`` ← ``text`` ← ``params`` ←
  ``ranking`` ← ``results`` ← ``catalog`` | ``sessions`` ← ``index`` ← ``diagnostics``, ``mcp``,
  ``adapters`` ← ``cli``, and nothing imports upward; ``catalog`` and ``sessions`` never import
  each other; there is no import cycle between modules, not even one typed away under
  ``TYPE_CHECKING``;
- the sub-packages' ``__init__`` files import nothing (a search loads only what it uses);
- ``discovery/cli/`` is the only place that imports ``click`` or ``rich``;
- ``discovery`` reaches the database only through the ``Store`` and its units: of ``store`` it
  imports the names the package exports (never a module), and the store's errors come in
  through ``discovery.errors`` alone; of ``sqlalchemy`` only the ``URL`` type, for annotations.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import store

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("store", "discovery", "migrations")
OURS = {"store", "discovery", "migrations", "bench", "tests"}
SQLALCHEMY_TYPES = {("sqlalchemy.engine", "URL")}


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


LAYERS = {
    "discovery.errors": 1,
    "discovery._files": 1,
    "discovery._text": 2,
    "discovery._semantic": 2,
    "discovery._params": 3,
    "discovery._rules": 3,
    "discovery._ranking": 4,
    "discovery._results": 5,
    "discovery._catalog": 6,
    "discovery._sessions": 6,
    "discovery._index": 7,
    "discovery._diagnostics": 8,
    "discovery._mcp": 8,
    "discovery.adapters": 8,
    "discovery._quality": 8,
    "discovery.aio": 8,
    "discovery.cli": 9,
    "discovery": 10,
}
"""Each part of ``discovery`` and its height; a module may import its own part and lower ones."""


def part_of(module: str) -> str:
    """The ``LAYERS`` entry a module of ours belongs to (``store`` is below all of them)."""
    if module.split(".")[0] != "discovery":
        return module.split(".")[0]
    candidates = [part for part in LAYERS if module == part or module.startswith(part + ".")]
    return max(candidates, key=len)


def height(module: str) -> int:
    return 0 if part_of(module) in {"store"} else LAYERS[part_of(module)]


def test_the_walker_sees_imports() -> None:
    ranker = imports_of(REPO / "discovery" / "_ranking" / "ranker.py")
    assert Import("numpy") in ranker
    assert any(imported.module == "store" and "StoredTool" in imported.names for imported in ranker)
    assert Import("discovery._text.tokenizer", ("tokens",)) in imports_of(REPO / "discovery" / "_params.py")


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
    assert [i.module for i in imports_of(path) if i.top in {"discovery", "click", "rich"}] == []


@pytest.mark.parametrize("path", sources("discovery"), ids=relative)
def test_nothing_imports_upward(path: Path) -> None:
    here = module_name(path)
    upward = [
        i.module
        for i in imports_of(path)
        if i.top in {"discovery", "store"} and height(i.module) > height(here)
    ]
    assert upward == []


@pytest.mark.parametrize("path", sources("discovery"), ids=relative)
def test_catalog_and_sessions_stay_apart(path: Path) -> None:
    here = part_of(module_name(path))
    other = {"discovery._catalog": "discovery._sessions", "discovery._sessions": "discovery._catalog"}.get(
        here
    )
    assert [i.module for i in imports_of(path) if other and part_of(i.module) == other] == []


def test_no_import_cycles() -> None:
    modules = {module_name(path): path for path in ALL_SOURCES}
    graph = {name: _imports_of_ours(path, set(modules)) for name, path in modules.items()}
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert cycles == []


def _imports_of_ours(path: Path, known: set[str]) -> set[str]:
    """Our modules that ``path`` imports, anywhere in it (under ``TYPE_CHECKING`` too)."""
    name = module_name(path)
    found = set()
    for imported in imports_of(path):
        for target in (imported.module, *(f"{imported.module}.{n}" for n in imported.names)):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return components


@pytest.mark.parametrize(
    "path",
    [p for p in sources("discovery") if p.name == "__init__.py" and p.parent.name != "discovery"],
    ids=relative,
)
def test_sub_package_inits_import_nothing(path: Path) -> None:
    assert imports_of(path) == []


@pytest.mark.parametrize(("module", "allowed"), [("_text", {"discovery._text"}), ("_ranking/bm25.py", set())])
def test_text_and_the_formula_are_pure(module: str, allowed: set[str]) -> None:
    where = REPO / "discovery" / module
    paths = sorted(where.rglob("*.py")) if where.is_dir() else [where]
    assert paths and all(path.is_file() for path in paths)
    ours = {part_of(i.module) for path in paths for i in imports_of(path) if i.top in OURS}
    assert ours <= allowed


@pytest.mark.parametrize("path", ALL_SOURCES, ids=relative)
def test_only_the_cli_imports_click_and_rich(path: Path) -> None:
    uses = any(i.top in {"click", "rich"} for i in imports_of(path))
    assert not uses or relative(path).startswith("discovery/cli/")


@pytest.mark.parametrize("path", sources("discovery"), ids=relative)
def test_discovery_reaches_sql_only_through_store(path: Path) -> None:
    here = module_name(path)
    wrong: list[str] = []
    for imported in imports_of(path):
        if imported.top in {"sqlalchemy", "alembic"}:
            names = {(imported.module, name) for name in imported.names} or {(imported.module, "*")}
            wrong.extend(f"{module}.{name}" for module, name in sorted(names - SQLALCHEMY_TYPES))
        elif imported.module == "store":
            wrong.extend(f"store.{n}" for n in imported.names if n not in store.__all__)
        elif imported.top == "store" and (imported.module, here) != ("store.errors", "discovery.errors"):
            wrong.append(imported.module)
    assert wrong == []


def test_store_exports_functions_and_types_not_modules() -> None:
    import types

    assert [name for name in store.__all__ if isinstance(getattr(store, name), types.ModuleType)] == []


def test_migrations_use_only_the_store_schema() -> None:
    """Migrations run against databases of any age, so they use only what is fixed: the schema,
    and the digest encodings a revision converts between (``store._digests``)."""
    ours = {
        i.module for path in sources("migrations") for i in imports_of(path) if i.top in OURS - {"migrations"}
    }
    assert ours <= {"store._schema", "store._digests"}


def worked_example_db(directory: Path) -> str:
    """A SQLite file holding contract §6's worked example, for a new process to open."""
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


def run_cli_then(report: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tool-index ARGS`` in a new interpreter, then the ``report`` lines (Python, indented by
    four), which print what the run imported to stderr."""
    script = (
        "import sys\n"
        "from discovery.cli._main import main\n"
        "try:\n"
        "    main(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n" + report
    )
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True, check=True
    )


@pytest.mark.parametrize("output", [[], ["--json"]])
def test_a_read_only_search_on_the_command_line_does_not_load_pydantic(
    tmp_path: Path, output: list[str]
) -> None:
    """The commands that read catalog files, explain or verify import what they need themselves,
    so ``tool-index search`` starts without pydantic; a session search does load it."""
    url = worked_example_db(tmp_path)
    report = "    print('pydantic' in sys.modules, file=sys.stderr)\n"
    for extra, loaded in (([], "False"), (["--session", "s", "--mode", "mcp-only"], "True")):
        done = run_cli_then(report, "--db", url, "search", "github issue", *output, *extra)
        assert "create_issue" in done.stdout
        assert done.stderr.split() == [loaded]


def test_a_command_imports_only_its_own_module(tmp_path: Path) -> None:
    """Commands are found by name and imported when they run: ``serve`` never loads the
    modules of the commands that print tables, nor rich, which only they use."""
    report = (
        "    cli = sorted(name for name in sys.modules if name.startswith('discovery.cli._'))\n"
        "    print(*cli, 'rich' in sys.modules, file=sys.stderr)\n"
    )
    done = run_cli_then(report, "--db", worked_example_db(tmp_path), "serve", "--help")
    assert "search_tool_bm25" in done.stdout
    modules = ["discovery.cli._app", "discovery.cli._collector", "discovery.cli._main"]
    assert done.stderr.split() == [*modules, "discovery.cli._mcp", "discovery.cli._sanitize", "False"]


COLLECTOR_CHECK = """
import gc, json, sys
mine = [[]]
{before}
gc.set_threshold(1234, 56, 7)
state = [gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()]
import discovery
from discovery import *
assert {{"sqlalchemy", "pydantic"}} <= set(sys.modules)
generations = [n for n in range(3) if any(o is mine for o in gc.get_objects(generation=n))]
print(json.dumps([state, [gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()], generations]))
"""


@pytest.mark.parametrize("before", ["", "gc.disable()", "gc.freeze()"], ids=["enabled", "disabled", "frozen"])
def test_importing_the_package_leaves_the_collector_as_it_found_it(before: str) -> None:
    """A library does not change how its host collects garbage: importing the package and every
    public name (SQLAlchemy and pydantic with them; numpy waits for a search) leaves the
    collector on or off, its thresholds and its frozen objects as they were, and moves none of
    the host's objects between generations while the collector is off (nor out of the frozen
    ones). The command line pauses the collector for its own process only, in
    ``discovery.cli.__main__``."""
    import json

    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR_CHECK.format(before=before)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    (enabled, threshold, frozen), after, generations = json.loads(done.stdout)
    assert after[:2] == [enabled, threshold] == [before != "gc.disable()", [1234, 56, 7]]
    if before == "gc.freeze()":
        # Still frozen: in no generation. (Frozen objects the imports free leave the count.)
        assert (frozen > 0, generations) == (True, [])
    else:
        assert after[2] == frozen == 0
    if before == "gc.disable()":
        assert generations == [0]


PUBLIC_MODULES = {
    "store",
    "store.errors",
    "discovery",
    "discovery.errors",
    "discovery.aio",
    "discovery.adapters",
    "discovery.adapters.anthropic",
    "discovery.adapters.openai",
    "discovery.adapters.pydantic_ai",
    "discovery.adapters.errors",
    "discovery.cli",
    "discovery.cli.__main__",
}
"""What a program imports, and the command line's entry (``python -m discovery.cli``)."""


@pytest.mark.parametrize("path", [*sources("store"), *sources("discovery")], ids=relative)
def test_every_other_module_is_marked_private(path: Path) -> None:
    name = module_name(path)
    private = any(part.startswith("_") and not part.startswith("__") for part in name.split("."))
    assert private != (name in PUBLIC_MODULES)


def test_the_readme_imports_only_public_modules() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    imported = {i.module for block in blocks for i in imports_in(block, "") if i.top in OURS}
    assert imported and imported <= PUBLIC_MODULES


ROOM_LINES = 450
"""Most lines a module of ``discovery`` or ``store`` may have."""
CLASS_LINES = 300
"""Most lines one of their classes may have: past either, a room holds more than one concern."""


@pytest.mark.parametrize("path", sources("discovery") + sources("store"), ids=relative)
def test_modules_and_classes_stay_small(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    classes = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    }
    assert len(source.splitlines()) <= ROOM_LINES
    assert {name: lines for name, lines in classes.items() if lines > CLASS_LINES} == {}
