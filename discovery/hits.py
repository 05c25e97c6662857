"""What a search returns: names and scores, without pulling in the record models."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A ranked tool: ``score`` is the unrounded double of SPEC §4."""

    name: str
    score: float
