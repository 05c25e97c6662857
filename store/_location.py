"""Where the database is when none is named: read with the standard library alone, so that a
program can name its database before SQLAlchemy loads."""

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
