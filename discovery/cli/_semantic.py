"""The semantic signal on the command line: store tool vectors, or remove them."""

from __future__ import annotations

from typing import Any

import click

from discovery.cli._app import App, echo, example, pass_app, progress_bar
from discovery.cli._render import one_line


@click.command(
    epilog=example(
        "tool-index embed --model ./all-MiniLM-L6-v2",
        "tool-index embed --model all-MiniLM-L6-v2",
        "tool-index embed",
        "tool-index embed --off",
    )
)
@click.option(
    "--model",
    metavar="MODEL",
    help="A directory with an ONNX sentence-embedding model and its tokenizer.json, or a Hugging "
    "Face model name (downloaded once). Default: the index's model.",
)
@click.option(
    "--weight",
    type=click.FloatRange(0, 1),
    help="The semantic part's share of a fused score, 0 to 1 (default 0.5; 0 ranks lexically).",
)
@click.option(
    "--off", "off", is_flag=True, help="Remove every vector and the model: searches are lexical again."
)
@pass_app
def embed(app: App, model: str | None, weight: float | None, off: bool) -> None:
    """Store tool vectors, so that searches also rank by meaning.

    Embeds only the tools without a current vector (new, changed, or never embedded), in steps
    that are each committed: an interrupted run keeps its work and the next one goes on. Another
    model than the index's replaces every vector. From then on every search (library, sessions,
    the MCP gateway, adapters, eval) fuses its BM25+ score with the query's similarity to each
    tool. Needs the semantic extra: pip install -e '.[semantic]'.
    """
    if weight is not None and weight != weight:  # FloatRange lets NaN through
        raise click.BadParameter("nan is not a number from 0 to 1", param_hint="--weight")
    if off and (model is not None or weight is not None):
        raise click.UsageError("--off takes no --model and no --weight")
    with app.index() as index:
        if off:
            removed = index.embedding_off()
            echo(f"removed {removed} vectors; searches are lexical")
            return
        summary = index.stats()["semantic"]
        chosen = model if model is not None else summary["model"]
        if chosen is None:
            raise click.UsageError("the index has no model yet: give --model")
        with progress_bar(
            summary["stale"] if model is None else index.stats()["tools"], "Embedding tools"
        ) as bar:
            seen = 0

            def advance(done: int, _: int) -> None:
                nonlocal seen
                if bar is not None and done > seen:
                    bar(done - seen)
                    seen = done

            report = index.embed(chosen, weight=weight, progress=advance)
    echo(
        f"embedded {report.embedded} tools with {one_line(report.model)}; "
        f"{report.current} of {report.tools} tools have a current vector"
    )


def semantic_line(summary: dict[str, Any]) -> str:
    """``stats``'s line for the semantic signal."""
    if summary["model"] is None:
        return "off"
    shown = (
        f"{one_line(summary['model'])} ({summary['dimensions']} dimensions, weight {summary['weight']:g}): "
        f"{summary['current']} current, {summary['stale']} stale"
    )
    if summary["problem"] is not None:
        shown += f"; not used here: {one_line(summary['problem'])}"
    return shown


def warn_stale_vectors(count: int) -> None:
    if count:
        echo(
            f"Warning: {count} added or changed tools have no current vector (the index's embedding "
            "model is not at hand here); searches rank them lexically until tool-index embed runs",
            err=True,
        )
