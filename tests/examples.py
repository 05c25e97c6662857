"""How many examples a hypothesis property tries: the full count in the whole suite, as
``.ci/test`` runs it (``TOOL_INDEX_TEST_FULL=1``), and a share of it in an everyday
``pytest -m "not slow"`` run, where every property still runs on examples of its own."""

from __future__ import annotations

import os

FULL = os.environ.get("TOOL_INDEX_TEST_FULL") == "1"
EVERYDAY_SHARE = 4
EVERYDAY_LEAST = 10


def examples(full: int) -> int:
    """``full`` in the whole suite; a quarter of it (at least 10) every day."""
    return full if FULL else min(full, max(EVERYDAY_LEAST, full // EVERYDAY_SHARE))
