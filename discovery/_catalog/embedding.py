"""Storing tool vectors: ``embed`` over the whole catalog, and the vectors of a catalog write.

``embed`` works in steps of ``EMBED_STEP`` tools, each its own transaction, in name order and
only over tools without a current vector: a run killed part-way keeps what it wrote, and the
next run goes on from there. A catalog write embeds the tools it adds or changes in its own
transaction when the index's model is at hand; otherwise those tools keep no current vector
(stale) until ``embed`` runs, and the write says how many.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from discovery._semantic.model import EmbeddingModel, load, stored_spec
from discovery._semantic.vectors import packed, tool_text
from discovery.errors import EmbeddingUnavailable
from store import EmbeddingState, Store, StoredTool, VectorRow, Writer

EMBED_STEP = 256
"""Tools embedded per transaction: what a killed ``embed`` can lose, and how often it shows
progress."""

DEFAULT_WEIGHT = 0.5
"""The semantic part's weight in a fused score, chosen on our own labelled requests over the
real MCP catalog (``bench/semantic.py``; docs/semantic.md has the figures)."""


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """What ``embed`` did: the model as recorded, vectors written now, and current in total."""

    model: str
    embedded: int
    current: int
    tools: int


def embed_catalog(
    store: Store,
    spec: str,
    *,
    weight: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> EmbedReport:
    """Give every catalog tool a current vector made by the model ``spec`` names (downloaded
    first when it is a hub name not yet cached). Another model than the index's replaces every
    vector; ``weight`` sets the semantic part's weight. ``progress(done, total)`` is called
    after each step."""
    model = load(spec, download=True)
    recorded = stored_spec(spec)
    digest = model.files.digest()
    with store.writing() as writer:
        setting = writer.vectors.state()
        chosen = setting.weight if weight is None else weight
        if setting.model_digest != digest or setting.dimensions != model.dimensions:
            writer.vectors.clear()
        if (setting.model, setting.model_digest, setting.dimensions, setting.weight) != (
            recorded,
            digest,
            model.dimensions,
            chosen,
        ):
            writer.vectors.set_state(EmbeddingState(recorded, digest, model.dimensions, chosen))
        writer.vectors.drop_orphans()
    with store.reading() as reader:
        total = reader.vectors.counts().stale
    done, after = 0, ""
    if progress is not None:
        progress(0, total)
    while True:
        with store.reading() as reader:
            pending = reader.vectors.missing(after, EMBED_STEP)
            if not pending:
                break
            tools = reader.catalog.tools_by_names([name for name, _ in pending])
        after = pending[-1][0]
        rows = _vector_rows(model, [(name, digest) for name, digest in pending if name in tools], tools)
        with store.writing() as writer:
            # Written only where the tool is still the record that was embedded.
            now = dict(writer.vectors.missing_of([row.tool_name for row in rows]))
            writer.vectors.write([row for row in rows if now.get(row.tool_name) == row.content_hash])
        done += len(pending)
        if progress is not None:
            progress(min(done, total), total)
    with store.reading() as reader:
        counts = reader.vectors.counts()
    return EmbedReport(recorded, done, counts.current, counts.tools)


def embedding_off(store: Store) -> int:
    """Remove every vector and the model setting; how many vectors there were."""
    with store.writing() as writer:
        return writer.vectors.clear()


def embed_written(writer: Writer, names: Sequence[str]) -> int:
    """Embed the tools ``names`` a catalog write just added or changed, in its transaction, when
    the index has a model and this process can load it; how many were left stale (0 when the
    index has no semantic signal)."""
    setting = writer.vectors.state()
    if setting.model is None or not names:
        return 0
    try:
        model = load(setting.model)
    except EmbeddingUnavailable:
        return len(names)
    if model.dimensions != setting.dimensions:
        return len(names)
    pending = writer.vectors.missing_of(names)
    tools = writer.catalog.tools_by_names([name for name, _ in pending])
    writer.vectors.write(_vector_rows(model, pending, tools))
    return 0


def _vector_rows(
    model: EmbeddingModel, pending: Sequence[tuple[str, str]], tools: dict[str, StoredTool]
) -> list[VectorRow]:
    texts = [tool_text(tools[name].label, tools[name].description) for name, _ in pending]
    rows, scales = packed(model.embed(texts))
    return [
        VectorRow(name, digest, float(scale), row.tobytes())
        for (name, digest), row, scale in zip(pending, rows, scales, strict=True)
    ]
