"""Where the database is when none is named, and the SQLite file a plain URL names: read with the
standard library alone, so that a program can find its database before SQLAlchemy loads."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "TOOL_INDEX_DB"


def default_url() -> str:
    """``TOOL_INDEX_DB`` if set, else a SQLite file in the user's data directory."""
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return from_env
    from platformdirs import user_data_dir

    directory = Path(user_data_dir("tool-index", appauthor=False))
    return f"sqlite:///{directory / 'tool-index.db'}"


def plain_sqlite_file(url: str) -> str | None:
    """The file of ``sqlite:///PATH`` or of a bare path, as ``parse_url`` reads them; ``None`` for
    every other form (another backend or driver, a query, a ``file:`` URI, memory), which only
    the store's full parse may interpret."""
    if any(mark in url for mark in "?#%~") or url.startswith("file:"):
        return None  # a query, an escape, a home directory: only the store's parse reads them
    if "://" not in url:
        return url if url.strip() and ":" not in url.split("/", 1)[0] else None
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url[len(prefix) :] in ("", ":memory:"):
        return None
    return url[len(prefix) :]
