"""The retrieval-quality commands of ``tool-index``: ``eval`` and ``audit``.

What they compute lives in ``discovery._quality`` and is imported by each command, so other
commands start without it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from discovery.cli._app import App, echo_json, example, pass_app
from discovery.cli._render import one_line

if TYPE_CHECKING:
    from discovery._quality.audit import AuditReport
    from discovery._quality.evaluate import Evaluation, Miss
    from discovery._quality.learning_alarm import LearningAlarm

MODES = click.Choice(["all", "mcp-only"])


def _cutoffs(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r}: give positive integers separated by commas") from None
    if not ks or min(ks) < 1:
        raise click.BadParameter(f"{value!r}: give positive integers separated by commas")
    return tuple(sorted(set(ks)))


@click.command(
    "eval",
    epilog=example(
        "tool-index eval bench/queries/mcp-catalog.jsonl",
        "tool-index eval queries.jsonl --k 1,3,5 --mode mcp-only --json",
    ),
)
@click.argument("queries", metavar="QUERIES.jsonl", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--k", "ks", default="1,5,10", show_default=True, callback=_cutoffs, help="Cut-offs, comma-separated."
)
@click.option("--mode", type=MODES, default="all", show_default=True, help="The read-only corpus searched.")
@click.option("--json", "as_json", is_flag=True, help="Print the metrics and misses as one JSON object.")
@click.option(
    "--analyzer",
    "analyzers",
    metavar="NAMES",
    help="Analyzers to compare, comma-separated (default: the index's own). Another one than the "
    "index's is measured on a temporary copy of the catalog built with it.",
)
@click.option(
    "--learn-from",
    "training",
    metavar="TRAIN.jsonl",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Measure with learning from use: requests ({"query": ..., "tools": [names]} a line) are '
    "played as sessions into a temporary copy of the catalog, which learns from them first.",
)
@pass_app
def eval_(
    app: App,
    queries: Path,
    ks: tuple[int, ...],
    mode: str,
    as_json: bool,
    analyzers: str | None,
    training: Path | None,
) -> None:
    """Score the search on labelled queries (Recall@k, MRR, nDCG@k).

    Each line of QUERIES.jsonl is {"query": ..., "relevant": [names]} (each name to be found) or
    {"query": ..., "relevant_groups": [[names], ...]} (any name of a group will do). Every query
    runs as a read-only search, so the database does not change.

    With --learn-from, each line of TRAIN.jsonl is a request and the tools then called
    ({"query": ..., "tools": [names]}, and "session": ID to make lines one session, "identity":
    NAME to make it that identity's); the requests are learned by a throwaway copy of the catalog
    before the queries run, as the local identity. Keep the queries out of the training file, or
    the gain measured is not one a new request would see.
    """
    from discovery._params import analyzer_named
    from discovery._quality.evaluate import evaluate_with, read_queries, read_training

    names = None if analyzers is None else list(dict.fromkeys(analyzers.split(",")))
    for name in names or []:
        analyzer_named(name)
    labelled = read_queries(queries)
    learn = read_training(training) if training is not None else []
    with app.index() as index:
        names = names or [index.analyzer]
        results = {name: evaluate_with(index, name, labelled, ks, mode=mode, learn=learn) for name in names}
    if as_json:
        objects = {name: result.as_dict() for name, result in results.items()}
        echo_json(objects[names[0]] if len(names) == 1 else {"analyzers": objects})
    else:
        lines: list[str] = []
        for name, result in results.items():
            lines += [*([""] if lines else []), *_evaluation_lines(result, mode, name, len(learn))]
        click.echo("\n".join(lines))


def _evaluation_lines(result: Evaluation, mode: str, analyzer: str, learned_from: int = 0) -> list[str]:
    from discovery._quality.evaluate import RANK_DEPTH

    width = max(5, *(len(f"@{k}") for k in result.ks)) + 2
    learned = f", learning from {learned_from} requests" if learned_from else ""
    lines = [f"{result.queries} queries, mode {mode}, analyzer {analyzer}{learned}", ""]
    lines.append(" " * 8 + "".join(f"@{k}".rjust(width) for k in result.ks))
    lines.append("Recall".ljust(8) + "".join(f"{result.recall[k]:.3f}".rjust(width) for k in result.ks))
    lines.append("nDCG".ljust(8) + "".join(f"{result.ndcg[k]:.3f}".rjust(width) for k in result.ks))
    lines.append(f"MRR@{result.ks[-1]} {result.mrr:.3f}")
    lines.append("")
    lines.append(f"Misses at {result.ks[-1]}: {len(result.misses)}")
    for miss in result.misses:
        lines.append(f"  {one_line(miss.where)}  {one_line(miss.query)}")
        ranks = ", ".join(f"{one_line(name)} {_where_ranked(miss, name, RANK_DEPTH)}" for name in miss.ranks)
        lines.append(f"    {ranks}")
    return lines


def _where_ranked(miss: Miss, name: str, depth: int) -> str:
    rank = miss.ranks[name]
    if rank is not None:
        return f"#{rank}"
    return "not matched" if miss.matched < depth else f"not in the first {depth}"


@click.command(epilog=example("tool-index audit", "tool-index audit --k 3 --mode mcp-only --json"))
@click.option("--k", type=click.IntRange(min=1), default=5, show_default=True, help="The cut-off of a probe.")
@click.option("--mode", type=MODES, default="all", show_default=True, help="The read-only corpus searched.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@pass_app
def audit(app: App, k: int, mode: str, as_json: bool) -> None:
    """Find unfindable tools and hubs that crowd out others.

    Each tool is searched for by its name parts, its summary and its parameter names; a tool
    outside the first K for all of them is unfindable, one inside the first K for the probes of
    many other tools is a hub. Both are listed with the terms responsible.

    Then the learning alarm: tools whose learned field comes from few identities but many
    sessions (at least 10 sessions, 5 or more per identity, where more than one identity taught),
    or whose learned terms far outnumber their text's (more than 16 and at least 4 times as many),
    marked when their MCP annotations say destructiveHint. See who taught what with learned NAME.
    """
    from discovery._quality.audit import audit as run_audit

    with app.index() as index:
        report = run_audit(index, k=k, mode=mode)
    if as_json:
        echo_json(report.as_dict())
    elif sys.stdout.isatty():
        _print_audit_tables(report)
    else:
        click.echo("\n".join(_audit_lines(report)))


def _terms(pairs: list[tuple[str, int]]) -> str:
    return ", ".join(f"{one_line(term)} ×{count}" for term, count in pairs)


def _summary_line(report: AuditReport) -> str:
    return (
        f"{report.tools} tools, {report.probes} probes, top {report.k}, mode {report.mode}: "
        f"{len(report.unfindable)} unfindable, {len(report.hubs)} hubs, "
        f"{len(report.learning)} learning alarms"
    )


def _alarm_line(alarm: LearningAlarm) -> str:
    marked = ", destructive" if alarm.destructive else ""
    return (
        f"{one_line(alarm.name)}  {alarm.identities} identities, {alarm.sessions} sessions, "
        f"{alarm.learned_terms} learned terms against {alarm.text_terms} of its text{marked}: "
        + "; ".join(alarm.reasons)
    )


def _audit_lines(report: AuditReport) -> list[str]:
    lines = [_summary_line(report)]
    if report.unfindable:
        lines += ["", "Unfindable (their own words do not bring them into the first k):"]
        for tool in report.unfindable:
            lines.append(f"  {one_line(tool.name)}")
            lines.append(f"    shared terms: {_terms(tool.common_terms)}")
            lines.append(f"    crowded by: {_terms(tool.crowded_by)}")
    if report.hubs:
        lines += ["", "Hubs (in the first k for the probes of many other tools):"]
        for hub in report.hubs:
            lines.append(f"  {one_line(hub.name)}  {hub.tools_reached} tools  terms: {_terms(hub.terms)}")
    if report.learning:
        lines += ["", "Learning alarms (learned from few identities, or far beyond their own words):"]
        lines += [f"  {_alarm_line(alarm)}" for alarm in report.learning]
    return lines


def _print_audit_tables(report: AuditReport) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, emoji=False, markup=False)
    console.print(_summary_line(report))
    if report.unfindable:
        table = Table(title="Unfindable", title_justify="left")
        for column in ("tool", "shared terms (other tools)", "crowded by (probes)"):
            table.add_column(column)
        for tool in report.unfindable:
            table.add_row(one_line(tool.name), _terms(tool.common_terms), _terms(tool.crowded_by))
        console.print(table)
    if report.hubs:
        table = Table(title="Hubs", title_justify="left")
        table.add_column("tool")
        table.add_column("tools reached", justify="right")
        table.add_column("terms (probes)")
        for hub in report.hubs:
            table.add_row(one_line(hub.name), str(hub.tools_reached), _terms(hub.terms))
        console.print(table)
    if report.learning:
        console.print("Learning alarms")
        for alarm in report.learning:
            console.print(f"  {_alarm_line(alarm)}")
