"""What ``ToolIndex.stats`` reports: the catalog's sizes, with what learning, the semantic signal
and the synced servers hold, read in one transaction."""

from __future__ import annotations

from typing import Any

from store import Reader


def index_summary(reader: Reader, semantic_problem: str | None) -> dict[str, Any]:
    """Catalog size, terms, postings, average length, counts per source and server, learning,
    the semantic signal (``semantic_problem``: why this process searches without it) and the
    servers' origins."""
    summary = reader.catalog.summary()
    tools, terms, sessions, identities = reader.learning.summary()
    state = reader.learning.state()
    embedding = reader.vectors.state()
    vectors = reader.vectors.counts()
    origins = reader.servers.all()
    summary["learning"] = {
        "enabled": state.enabled,
        "min_identities": state.min_identities,
        "tools": tools,
        "terms": terms,
        "sessions": sessions,
        "identities": identities,
    }
    summary["semantic"] = {
        "model": embedding.model,
        "dimensions": embedding.dimensions,
        "weight": embedding.weight if embedding.model is not None else None,
        "current": vectors.current if embedding.model is not None else 0,
        "stale": vectors.stale if embedding.model is not None else 0,
        "problem": semantic_problem,
    }
    summary["server_origins"] = {name: stored.as_json() for name, stored in origins.items()}
    return summary
