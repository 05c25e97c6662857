"""The engines the harness compares, each behind the same small interface.

``prepare`` turns raw contract §2 dicts into what ``build`` takes and is not timed; ``build`` (timed)
creates the index and persists it under ``directory``; ``open`` loads it in a fresh process (the
cold start); ``search`` returns ``(name, score)`` pairs, best first. Engines import their
libraries in ``__init__`` so that a cold start pays only for its own imports.

- ``tool-index``: this project, through ``discovery.ToolIndex`` on a SQLite file.
- ``tool-index-pg``: the same on PostgreSQL: a database of its own, created afresh by each build
  on the server ``TOOL_INDEX_BENCH_PG`` names (a ``postgresql+psycopg://`` URL whose role may
  create databases); its size is the server's ``pg_database_size``.
- ``fts5``: SQLite FTS5 ``bm25()`` with weights 6,4,4,2,2,1 over the raw fields (unicode61
  tokenizer: ``createIssue`` is one token there); queries are our tokens, quoted and OR-ed.
- ``fts5-ourtok``: the same, over fields pre-split by our tokenizer (same tokens as ours).
- ``rank_bm25``, ``bm25s``: BM25+ (k1 1.2, b 0.75, δ 1) over token lists where each field's
  tokens are repeated by the field weight; their idf differs from ours and both add δ·idf to
  documents that lack the term. Persisted with pickle and ``bm25s.save``.
- ``tantivy``: the Rust engine (persistent, incremental, block-max WAND) over the same fields
  pre-split by our tokenizer and indexed with its whitespace tokenizer, so it sees our tokens;
  a query is an OR of term queries per field, boosted 6,4,4,2,2,1 (its BM25, not BM25+).
- ``memory``: our own scoring in Python dicts, rebuilt from the catalog on every open (what a
  host without a persistent index does at every session start).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

Hit = tuple[str, float]
Raw = dict[str, Any]


class Peer(Protocol):
    name: str
    incremental: bool
    """Whether ``upsert``/``remove`` change the index in place (else they raise)."""
    persistent: bool
    """Whether ``build`` leaves files that ``open`` loads (else ``open`` rebuilds)."""

    def prepare(self, raw: Sequence[Raw]) -> Any: ...
    def build(self, prepared: Any) -> None: ...
    def open(self) -> None: ...
    def search(self, query: str, k: int) -> list[Hit]: ...
    def upsert(self, raw: Raw) -> None: ...
    def remove(self, name: str) -> None: ...
    def close(self) -> None: ...


def standalone_tokenizer() -> Callable[[str], list[str]]:
    """``discovery/_text/tokenizer.py`` loaded on its own.

    Importing it as ``discovery._text.tokenizer`` runs ``discovery/__init__`` and loads the whole
    library (SQLAlchemy, pydantic, ...); the peers need only the tokenizer at query time, so
    their cold start and serving RSS should not pay for the rest. The module is pure (it imports
    nothing of ours), which is what makes this safe.
    """
    path = Path(__file__).resolve().parent.parent / "discovery" / "_text" / "tokenizer.py"
    spec = importlib.util.spec_from_file_location("bench_standalone_tokenize", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokenize: Callable[[str], list[str]] = module.tokenize
    return tokenize


def tool_records(raw: Sequence[Raw]) -> list[Any]:
    from discovery._catalog.models import ToolRecord

    return [ToolRecord.model_validate(item) for item in raw]


def weighted_tokens(record: Any) -> list[str]:
    """A token list whose counts are our weighted term frequencies (each token × field weight)."""
    from discovery._catalog.indexing import record_fields
    from discovery._ranking.fields import FIELD_WEIGHTS
    from discovery._text.tokenizer import tokenize

    tokens: list[str] = []
    for field, text in record_fields(record):
        tokens.extend(tokenize(text) * FIELD_WEIGHTS[field])
    return tokens


def read_catalog(path: Path) -> list[Raw]:
    with path.open(encoding="utf-8") as src:
        return [json.loads(line) for line in src if line.strip()]


def top_k(names: Sequence[str], scores: Any, k: int) -> list[Hit]:
    """The ``k`` best of a numpy score vector, best first."""
    import numpy as np

    k = min(k, len(scores))
    if k <= 0:
        return []
    best = np.argpartition(-scores, k - 1)[:k]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(names[i], float(scores[i])) for i in best]


class ToolIndexPeer:
    """This project: ``ToolIndex`` over a SQLite file."""

    name = "tool-index"
    incremental = True
    persistent = True

    def __init__(self, directory: Path, catalog: Path) -> None:
        from discovery import ToolIndex

        self._open_index = ToolIndex.open
        self.url = f"sqlite:///{directory / 'tools.db'}"
        self.index: Any = None

    def prepare(self, raw: Sequence[Raw]) -> Any:
        return raw

    def build(self, prepared: Any) -> None:
        self.open()
        self.index.upsert_tools(prepared)

    def open(self) -> None:
        self.index = self._open_index(self.url)

    def search(self, query: str, k: int) -> list[Hit]:
        return [(hit.name, hit.score) for hit in self.index.search(query, limit=k)]

    def upsert(self, raw: Raw) -> None:
        self.index.upsert_tools([raw])

    def remove(self, name: str) -> None:
        self.index.remove_tools([name])

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None


PG_SERVER_VARIABLE = "TOOL_INDEX_BENCH_PG"


class ToolIndexPgPeer(ToolIndexPeer):
    """This project on PostgreSQL, in a database named after the bench directory, so that the
    build and the serve processes of one run find the same one."""

    name = "tool-index-pg"

    def __init__(self, directory: Path, catalog: Path) -> None:
        super().__init__(directory, catalog)
        from sqlalchemy.engine import make_url

        server = os.environ.get(PG_SERVER_VARIABLE)
        if not server:
            raise RuntimeError(f"set {PG_SERVER_VARIABLE} to a PostgreSQL URL to bench tool-index-pg")
        digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:12]
        self.server = make_url(server)
        self.database = f"tool_index_bench_{digest}"
        self.url = self.server.set(database=self.database).render_as_string(hide_password=False)

    def _admin(self, statement: str) -> Any:
        from sqlalchemy import create_engine, text

        engine = create_engine(self.server, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                result = connection.execute(text(statement))
                return result.scalar() if result.returns_rows else None
        finally:
            engine.dispose()

    def build(self, prepared: Any) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.database}"')
        self._admin(f'CREATE DATABASE "{self.database}"')
        super().build(prepared)

    def size_bytes(self) -> int:
        return int(self._admin(f"SELECT pg_database_size('{self.database}')"))


_FTS_COLUMNS = ("name", "label", "mcp_tool_name", "server_name", "summary", "schema_keys")
_FTS_WEIGHTS = "6, 4, 4, 2, 2, 1"


class Fts5Peer:
    """A ``tools`` table holding whole records plus an FTS5 index ranked by weighted ``bm25()``.

    Raw fields use an external-content FTS5 table (the text is stored once); pre-tokenized
    fields need their own copy of the split text, so that variant stores it in the FTS table.
    """

    incremental = True
    persistent = True

    def __init__(self, directory: Path, catalog: Path, *, our_tokens: bool = False) -> None:
        self.tokenize = standalone_tokenizer()
        self.our_tokens = our_tokens
        self.name = "fts5-ourtok" if our_tokens else "fts5"
        self.path = directory / "fts5.db"
        self.db: sqlite3.Connection | None = None

    def prepare(self, raw: Sequence[Raw]) -> Any:
        return tool_records(raw)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _row(self, record: Any) -> tuple[Any, ...]:
        return (
            record.name,
            record.label,
            record.description,
            record.summary,
            record.source,
            record.server_name,
            record.mcp_tool_name,
            " ".join(record.schema_keys),
            json.dumps(record.input_schema),
            record.load_mode,
        )

    def _fts_values(self, record: Any) -> tuple[str, ...]:
        keys = " ".join(record.schema_keys)
        values = (
            record.name,
            record.label,
            record.mcp_tool_name or "",
            record.server_name or "",
            record.summary,
            keys,
        )
        if self.our_tokens:
            return tuple(" ".join(self.tokenize(value)) for value in values)
        return values

    def build(self, prepared: Any) -> None:
        self.db = db = self._connect()
        content = "" if self.our_tokens else ", content='tools', content_rowid='id'"
        db.executescript(f"""
            CREATE TABLE tools (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, label TEXT,
                description TEXT, summary TEXT, source TEXT, server_name TEXT,
                mcp_tool_name TEXT, schema_keys TEXT, input_schema TEXT, load_mode TEXT);
            CREATE VIRTUAL TABLE tools_fts USING fts5({", ".join(_FTS_COLUMNS)}{content});
        """)
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO tools (name, label, description, summary, source, server_name,"
            " mcp_tool_name, schema_keys, input_schema, load_mode)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            map(self._row, prepared),
        )
        if self.our_tokens:
            db.executemany(
                f"INSERT INTO tools_fts (rowid, {', '.join(_FTS_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                ((i, *self._fts_values(r)) for i, r in enumerate(prepared, 1)),
            )
        else:
            db.execute("INSERT INTO tools_fts (tools_fts) VALUES ('rebuild')")
        db.execute("COMMIT")

    def open(self) -> None:
        self.db = self._connect()

    def match_expression(self, query: str) -> str:
        return " OR ".join(f'"{token}"' for token in dict.fromkeys(self.tokenize(query)))

    def search(self, query: str, k: int) -> list[Hit]:
        assert self.db is not None
        rows = self.db.execute(
            "SELECT t.name, r.score FROM (SELECT rowid AS id, bm25(tools_fts, "
            f"{_FTS_WEIGHTS}) AS score FROM tools_fts WHERE tools_fts MATCH ? ORDER BY score"
            " LIMIT ?) AS r JOIN tools AS t ON t.id = r.id ORDER BY r.score",
            (self.match_expression(query), k),
        )
        return [(name, -score) for name, score in rows]

    def _delete(self, db: sqlite3.Connection, name: str) -> None:
        row = db.execute(
            "SELECT id, name, label, mcp_tool_name, server_name, summary, schema_keys"
            " FROM tools WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None:
            return
        if self.our_tokens:
            db.execute("DELETE FROM tools_fts WHERE rowid = ?", (row[0],))
        else:
            db.execute(
                f"INSERT INTO tools_fts (tools_fts, rowid, {', '.join(_FTS_COLUMNS)})"
                " VALUES ('delete', ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        db.execute("DELETE FROM tools WHERE id = ?", (row[0],))

    def upsert(self, raw: Raw) -> None:
        assert self.db is not None
        record = tool_records([raw])[0]
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        self._delete(db, record.name)
        cursor = db.execute(
            "INSERT INTO tools (name, label, description, summary, source,"
            " server_name, mcp_tool_name, schema_keys, input_schema, load_mode)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self._row(record),
        )
        db.execute(
            f"INSERT INTO tools_fts (rowid, {', '.join(_FTS_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (cursor.lastrowid, *self._fts_values(record)),
        )
        db.execute("COMMIT")

    def remove(self, name: str) -> None:
        assert self.db is not None
        self.db.execute("BEGIN IMMEDIATE")
        self._delete(self.db, name)
        self.db.execute("COMMIT")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


class StaticPeer:
    """What the in-memory libraries share: built once from the whole catalog, persisted to a file
    between the build and the serve process, never updated in place."""

    name = ""
    incremental = False
    persistent = True

    def __init__(self, directory: Path, catalog: Path) -> None:
        self.tokenize = standalone_tokenizer()
        self.directory = directory
        self.model: Any = None
        self.names: list[str] = []

    def prepare(self, raw: Sequence[Raw]) -> Any:
        return tool_records(raw)

    def build(self, prepared: Any) -> None:
        self.names = [record.name for record in prepared]
        self.model = self.index([weighted_tokens(record) for record in prepared])
        self.save()

    def index(self, corpus: list[list[str]]) -> Any:
        raise NotImplementedError

    def save(self) -> None:
        raise NotImplementedError

    def upsert(self, raw: Raw) -> None:
        raise NotImplementedError

    def remove(self, name: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.model = None


class RankBm25Peer(StaticPeer):
    """``rank_bm25.BM25Plus``: scores every document in Python for every query term."""

    name = "rank_bm25"

    def __init__(self, directory: Path, catalog: Path) -> None:
        from rank_bm25 import BM25Plus

        super().__init__(directory, catalog)
        self.bm25_class = BM25Plus
        self.path = directory / "rank_bm25.pickle"

    def index(self, corpus: list[list[str]]) -> Any:
        return self.bm25_class(corpus, k1=1.2, b=0.75, delta=1.0)

    def save(self) -> None:
        with self.path.open("wb") as out:
            pickle.dump((self.names, self.model), out, protocol=pickle.HIGHEST_PROTOCOL)

    def open(self) -> None:
        with self.path.open("rb") as src:
            self.names, self.model = pickle.load(src)

    def search(self, query: str, k: int) -> list[Hit]:
        return top_k(self.names, self.model.get_scores(self.tokenize(query)), k)


class Bm25sPeer(StaticPeer):
    """``bm25s`` with ``method="bm25+"``: eager sparse scores, numpy at query time."""

    name = "bm25s"

    def __init__(self, directory: Path, catalog: Path) -> None:
        import bm25s

        super().__init__(directory, catalog)
        self.bm25s = bm25s
        self.path = directory / "bm25s"

    def index(self, corpus: list[list[str]]) -> Any:
        model = self.bm25s.BM25(method="bm25+", k1=1.2, b=0.75, delta=1.0)
        model.index(corpus, show_progress=False)
        return model

    def save(self) -> None:
        self.model.save(str(self.path))
        (self.path / "names.json").write_text(json.dumps(self.names), encoding="utf-8")

    def open(self) -> None:
        self.model = self.bm25s.BM25.load(str(self.path), show_progress=False)
        self.names = json.loads((self.path / "names.json").read_text(encoding="utf-8"))

    def search(self, query: str, k: int) -> list[Hit]:
        ids = self.model.get_tokens_ids(self.tokenize(query))
        if not ids:
            return []
        return top_k(self.names, self.model.get_scores_from_ids(ids), k)


class TantivyPeer:
    """``tantivy``: an on-disk index of our tokens, one field per weighted field."""

    name = "tantivy"
    incremental = True
    persistent = True

    def __init__(self, directory: Path, catalog: Path) -> None:
        import tantivy

        self.tantivy = tantivy
        self.tokenize = standalone_tokenizer()
        self.path = directory / "tantivy"
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        for column in _FTS_COLUMNS:
            builder.add_text_field(column, tokenizer_name="whitespace", index_option="freq")
        self.schema = builder.build()
        self.index: Any = None
        self.writer: Any = None
        self.searcher: Any = None

    def prepare(self, raw: Sequence[Raw]) -> Any:
        return tool_records(raw)

    def _document(self, record: Any) -> Any:
        values = (
            record.name,
            record.label,
            record.mcp_tool_name or "",
            record.server_name or "",
            record.summary,
            " ".join(record.schema_keys),
        )
        fields = {
            column: " ".join(self.tokenize(value)) for column, value in zip(_FTS_COLUMNS, values, strict=True)
        }
        return self.tantivy.Document(id=record.name, **fields)

    def build(self, prepared: Any) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.index = self.tantivy.Index(self.schema, path=str(self.path))
        writer = self.index.writer(heap_size=512_000_000)
        for record in prepared:
            writer.add_document(self._document(record))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()

    def open(self) -> None:
        self.index = self.tantivy.Index.open(str(self.path))
        self.searcher = self.index.searcher()

    def search(self, query: str, k: int) -> list[Hit]:
        if self.searcher is None:
            self.searcher = self.index.searcher()
        Query, Occur = self.tantivy.Query, self.tantivy.Occur
        clauses = [
            (Occur.Should, Query.boost_query(Query.term_query(self.schema, column, token), float(weight)))
            for token in dict.fromkeys(self.tokenize(query))
            for column, weight in zip(_FTS_COLUMNS, (6, 4, 4, 2, 2, 1), strict=True)
        ]
        if not clauses:
            return []
        found = self.searcher.search(Query.boolean_query(clauses), k)
        return [(self.searcher.doc(address)["id"][0], score) for score, address in found.hits]

    def _writer(self) -> Any:
        if self.writer is None:
            self.writer = self.index.writer(heap_size=50_000_000, num_threads=1)
        return self.writer

    def upsert(self, raw: Raw) -> None:
        record = tool_records([raw])[0]
        writer = self._writer()
        writer.delete_documents_by_term("id", record.name)
        writer.add_document(self._document(record))
        writer.commit()
        self.index.reload()
        self.searcher = None

    def remove(self, name: str) -> None:
        writer = self._writer()
        writer.delete_documents_by_term("id", name)
        writer.commit()
        self.index.reload()
        self.searcher = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.wait_merging_threads()
        self.writer = self.searcher = self.index = None


__all__ = [
    "PG_SERVER_VARIABLE",
    "Bm25sPeer",
    "Fts5Peer",
    "Hit",
    "Peer",
    "RankBm25Peer",
    "TantivyPeer",
    "ToolIndexPeer",
    "ToolIndexPgPeer",
    "read_catalog",
    "tool_records",
]
