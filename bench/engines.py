"""The engines a benchmark can run, by name: the peers and our own in-memory ranking."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bench.memory import MemoryPeer
from bench.peers import (
    PG_SERVER_VARIABLE,
    Bm25sPeer,
    Fts5Peer,
    Peer,
    RankBm25Peer,
    TantivyPeer,
    ToolIndexPeer,
    ToolIndexPgPeer,
)


def make_peer(engine: str, directory: Path, catalog: Path) -> Peer:
    """The peer called ``engine``, working in ``directory``."""
    factories: dict[str, Callable[[], Peer]] = {
        "tool-index": lambda: ToolIndexPeer(directory, catalog),
        "tool-index-pg": lambda: ToolIndexPgPeer(directory, catalog),
        "fts5": lambda: Fts5Peer(directory, catalog),
        "fts5-ourtok": lambda: Fts5Peer(directory, catalog, our_tokens=True),
        "rank_bm25": lambda: RankBm25Peer(directory, catalog),
        "bm25s": lambda: Bm25sPeer(directory, catalog),
        "tantivy": lambda: TantivyPeer(directory, catalog),
        "memory": lambda: MemoryPeer(directory, catalog),
    }
    return factories[engine]()


ENGINES = ("tool-index", "fts5", "fts5-ourtok", "bm25s", "tantivy", "rank_bm25", "memory")

SERVER_ENGINES = ("tool-index-pg",)
"""Engines that need a server, run only when asked for (or, by ``bench.run``, when it is named)."""


def default_engines() -> tuple[str, ...]:
    """Every engine this machine can run as the bench stands: the server ones when their server
    is named."""
    return ENGINES + (SERVER_ENGINES if os.environ.get(PG_SERVER_VARIABLE) else ())
