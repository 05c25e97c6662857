"""Catalog commands: import, tools, show, remove, stats, reindex."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import click

from discovery._params import analyzer_named
from discovery.cli._app import App, echo, echo_json, example, pass_app, progress_bar
from discovery.cli._names import did_you_mean, resolved_name, resolved_names
from discovery.cli._output import on_terminal, print_block, print_fields, print_table
from discovery.cli._render import one_line
from discovery.cli._semantic import semantic_line, warn_stale_vectors
from discovery.errors import ToolNotFound

SOURCES = ("builtin", "mcp", "extension", "custom")
EXAMPLE_CATALOG = Path(__file__).parent.parent / "examples" / "demo-catalog.jsonl"
"""A small catalog written for tool-index: built-ins and five made-up MCP servers."""
EXAMPLE_DB = "example.db"
"""Where ``import --example`` writes when no database is named: a file of its own beside the default
database, which ``sync`` and ``serve`` use, so made-up tools never mix with a user's servers."""
EMPTY_CATALOG = (
    "The catalog is empty: add tools with tool-index import PATH (or tool-index import --example)."
)


@click.command(
    "import",
    epilog=example(
        "tool-index import catalog.jsonl",
        "tool-index import servers/github.json --server github --replace",
        "cat tools-list.json | tool-index import - --server github",
        "tool-index import --example",
    ),
)
@click.argument(
    "paths",
    nargs=-1,
    metavar="PATH...",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
)
@click.option(
    "--server",
    metavar="NAME",
    help="MCP server of tools/list input (default: the file name without extension; required on "
    "stdin). With tool records, every record must belong to it.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Also remove the tools the input no longer has: those of --server, else the whole catalog.",
)
@click.option("--skip-invalid", is_flag=True, help="Skip bad records with a warning instead of failing.")
@click.option(
    "--example",
    is_flag=True,
    help=f"Also import the example catalog that ships with tool-index; without --db, into a database "
    f"of its own ({EXAMPLE_DB} in the user data directory), never the default one.",
)
@click.option(
    "--analyzer",
    metavar="NAME",
    help="The analyzer of a new catalog: reference (the default) or enhanced. A catalog that "
    "already holds tools keeps its own (tool-index reindex changes it).",
)
@pass_app
def import_(
    app: App,
    paths: tuple[str, ...],
    server: str | None,
    replace: bool,
    skip_invalid: bool,
    example: bool,
    analyzer: str | None,
) -> None:
    """Add or update tools from catalog files.

    A catalog is a JSON array or JSON lines of tool records, or an MCP tools/list result; the
    format is detected from the content; PATH '-' reads standard input. Tools are matched by
    name: unchanged ones are not rewritten. A bad record stops the import before anything is
    written, unless --skip-invalid.
    """
    if example:
        paths = (*paths, str(EXAMPLE_CATALOG))
        app = _example_app(app)
    if not paths:
        raise click.UsageError("give at least one PATH, or --example")
    if analyzer is not None:
        analyzer_named(analyzer)  # before reading the input, which may be large
    from discovery._catalog.formats import read_catalog

    ingested = read_catalog(paths, server=server, skip_invalid=skip_invalid)
    for message in ingested.skipped:
        echo(f"Warning: skipped {message}", err=True)
    if replace and ingested.skipped:
        raise click.ClickException(
            f"{len(ingested.skipped)} invalid records: --replace would remove their tools; "
            "fix them or import without --replace"
        )
    with app.index(create=True, analyzer=analyzer) as index, progress_bar(len(ingested.records)) as progress:
        report = index.upsert_tools(ingested.records, replace=replace, server=server, progress=progress)
    counts = report.counts()
    if skip_invalid:
        counts["skipped"] = len(ingested.skipped)
    echo(", ".join(f"{key} {value}" for key, value in counts.items()))
    warn_stale_vectors(report.stale_vectors)
    if example and _database_by_default():
        echo(f"The example is in a database of its own: tool-index --db {app.db} search QUERY", err=True)


def _database_by_default() -> bool:
    """Whether neither ``--db`` nor ``TOOL_INDEX_DB`` named the database."""
    root = click.get_current_context().find_root()
    return root.get_parameter_source("db") in (None, click.core.ParameterSource.DEFAULT)


def _example_app(app: App) -> App:
    """The app on the example's own database when no database was named, else ``app``."""
    if not _database_by_default():
        return app
    from platformdirs import user_data_dir

    return App(f"sqlite:///{Path(user_data_dir('tool-index', appauthor=False)) / EXAMPLE_DB}")


@click.command(epilog=example("tool-index tools --server github", "tool-index tools --json > catalog.json"))
@click.option("--server", metavar="NAME", help="Only the tools of this MCP server.")
@click.option("--source", type=click.Choice(SOURCES), help="Only the tools of this source.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole records as a JSON array (importable).")
@pass_app
def tools(app: App, server: str | None, source: str | None, as_json: bool) -> None:
    """List the catalog's tools in catalog order.

    With --server, a line first says what that server is and which host's config synced it, when.
    """
    with app.index() as index:
        found = index.tools(server=server, source=source)
        origin = index.server_origins().get(server) if server is not None else None
    if as_json:
        echo_json([tool.as_record() for tool in found])
        return
    if origin is not None:
        echo(f"server {one_line(origin.origin.name)}: {origin_line(origin.as_json())}")
    if not found:
        echo("No tools match." if server or source else EMPTY_CATALOG)
    else:
        # Names are never cut (people copy them into other commands); summaries fill the rest.
        rows = [(t.name, t.source, t.server_name or "", t.summary) for t in found]
        print_table([("name", "source", "server", "summary"), *rows])


@click.command(epilog=example("tool-index show mcp__github__create_issue", "tool-index show read --json"))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@pass_app
def show(app: App, name: str, as_json: bool) -> None:
    """Show one tool's whole record, input schema included.

    NAME is a tool's name or a label that names one tool (as search shows it).
    """
    with app.index() as index:
        record = index.tool(resolved_name(index, name)).as_record()
    if as_json:
        echo_json(record)
        return
    keys = ("name", "label", "source", "server_name", "mcp_tool_name", "load_mode")
    fields = [(key, record[key]) for key in keys if record[key] is not None]
    fields += [("schema_keys", ", ".join(record["schema_keys"])), ("summary", record["summary"])]
    print_fields(fields, key_width=15)
    print_block("description", record["description"])
    print_block("input_schema", json.dumps(record["input_schema"], indent=2, ensure_ascii=False))


@click.command(epilog=example("tool-index remove mcp__github__create_issue mcp__github__list_issues"))
@click.argument("names", nargs=-1, required=True)
@pass_app
def remove(app: App, names: tuple[str, ...]) -> None:
    """Remove tools by name.

    NAME may also be a label that names one tool. All or nothing: when any NAME is not in the
    catalog, nothing is removed and the command fails.
    """
    with app.index() as index:
        wanted = resolved_names(index, names)
        try:
            removed = index.remove_tools(wanted, missing_ok=False)
        except ToolNotFound as exc:
            missing = [name for name in wanted if name not in index.tools_by_names(wanted)]
            raise ToolNotFound(f"{exc}{did_you_mean(index.tools(), missing)}") from exc
    echo(f"removed {len(removed)}")


@click.command(epilog=example("tool-index stats", "tool-index stats --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@pass_app
def stats(app: App, as_json: bool) -> None:
    """Show catalog sizes and counts per source and server."""
    with app.index() as index:
        summary = index.stats()
        where = index.url
    if as_json:
        echo_json(summary)
        return
    fields = [("database", where), *((key, str(summary[key])) for key in ("tools", "terms", "postings"))]
    fields += [("generation", str(summary["generation"])), ("avgdl", f"{summary['avgdl']:.3f}")]
    fields.append(("analyzer", summary["analyzer"]))
    learning = summary["learning"]
    shown = "on" if learning["enabled"] else "off"
    if learning["enabled"]:
        taught = f"{learning['tools']} tools learned {learning['terms']} terms"
        teachers = f"{learning['sessions']} sessions of {learning['identities']} identities"
        shown += f" ({taught} from {teachers}; shared at {learning['min_identities']} identities)"
    fields.append(("learning", shown))
    fields.append(("semantic", semantic_line(summary["semantic"])))
    print_fields(fields, key_width=12)
    origins: Mapping[str, dict[str, str]] = summary["server_origins"]
    for key in ("sources", "servers"):
        counts: Mapping[str, int] = summary[key]
        synced = {name: origin_line(origins[name]) for name in counts if key == "servers" and name in origins}
        if on_terminal() and counts:
            header = (key[:-1], "tools", "synced") if synced else (key[:-1], "tools")
            rows = [(name, str(count), synced.get(name, ""))[: len(header)] for name, count in counts.items()]
            print_table([header, *rows])
            continue
        echo(f"{key}:" + ("" if counts else " none"))
        width = max((len(one_line(name)) for name in counts), default=0)
        for name, count in counts.items():
            line = f"  {one_line(name):<{width}}  {count}"
            echo(f"{line}  {synced[name]}" if name in synced else line)


def origin_line(origin: Mapping[str, str]) -> str:
    """What a synced server is and where its tools came from, in one line: its transport and
    command (or URL), a prefix of its fingerprint, the config file and host, the latest sync."""
    when = datetime.fromisoformat(origin["synced_at"]).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return one_line(
        f"{origin['transport']} {origin['target']!r} ({origin['fingerprint'][:12]}) of {origin['config']} "
        f"on {origin['host']}, synced {when}"
    )


@click.command(
    epilog=example("tool-index reindex --analyzer enhanced", "tool-index reindex --analyzer reference")
)
@click.option(
    "--analyzer", metavar="NAME", required=True, help="The analyzer to rebuild with: reference or enhanced."
)
@pass_app
def reindex(app: App, analyzer: str) -> None:
    """Rebuild every posting and statistic with another analyzer.

    One transaction: searches see the old index until it commits, and an interrupted reindex
    leaves the catalog as it was. Tools, sessions and their logs are unchanged.
    """
    analyzer_named(analyzer)
    with app.index() as index:
        before = index.stats()["analyzer"]  # as stored: an outdated version is what this fixes
        with progress_bar(index.stats()["tools"]) as progress:
            count = index.reindex(analyzer, progress=progress)
    echo(f"reindexed {count} tools with the {analyzer} analyzer (was {before})")
