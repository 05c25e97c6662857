"""The semantic signal of a search: the index's embedding setting, its vectors and the model that
embeds queries (``fusion`` does the arithmetic).

The model is the process's (``Models``), loaded once and kept across catalog generations; the
setting and the vectors are one generation's (``SemanticSignal``), and go with it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from discovery._ranking.source import RankingSource
from discovery.errors import EmbeddingUnavailable, SemanticSignalOff
from store import EmbeddingState, StoredVectors

if TYPE_CHECKING:
    import numpy as np

    from discovery._semantic.model import EmbeddingModel


@dataclass(frozen=True, slots=True)
class SemanticQuery:
    """What fusing a search needs: the catalog's vectors, the query's, the semantic weight."""

    vectors: StoredVectors
    query: np.ndarray
    weight: float


class Models:
    """The embedding model this process loaded, and the model it could not load and why."""

    def __init__(self) -> None:
        self._model: EmbeddingModel | None = None
        self._failed: tuple[str, str] | None = None

    def problem(self, spec: str | None) -> str | None:
        """Why ``spec`` cannot be used in this process (it failed to load), or ``None``."""
        return self._failed[1] if self._failed is not None and self._failed[0] == spec else None

    def model(self, spec: str) -> EmbeddingModel | None:
        """The model ``spec`` names, loaded on first use; ``None`` (with a warning, once) when it
        cannot be loaded."""
        if self.problem(spec) is not None:
            return None
        if self._model is None or self._model.spec != spec:
            from discovery._semantic.model import load

            try:
                self._model = load(spec)
            except EmbeddingUnavailable as error:
                self._failed = (spec, str(error))
                warnings.warn(
                    f"searching without the semantic signal: {error}", SemanticSignalOff, stacklevel=6
                )
                return None
            self._failed = None  # another model loads: the one that did not may be tried again
        return self._model


class SemanticSignal:
    """The semantic signal as one catalog generation has it: its setting, and its vectors once a
    fused search has read them."""

    def __init__(self, setting: EmbeddingState, models: Models) -> None:
        self._setting = setting
        self._models = models
        self._vectors: StoredVectors | None = None

    @property
    def problem(self) -> str | None:
        """Why an index with vectors is searched without them in this process, or ``None``."""
        return self._models.problem(self._setting.model)

    def query(self, reader: RankingSource, text: str) -> SemanticQuery | None:
        """What fusing ``text`` needs, or ``None`` when the index has no semantic signal (no
        vectors, weight 0) or this process cannot run its model (``problem`` says why)."""
        setting = self._setting
        if setting.model is None or setting.weight <= 0:
            return None
        model = self._models.model(setting.model)
        if model is None:
            return None
        if self._vectors is None:
            self._vectors = reader.vectors.current(setting.dimensions)
        return SemanticQuery(self._vectors, model.embed_query(text), setting.weight)
