"""The ``tool-index`` command line: each command parses its arguments, calls the library, prints.

Errors the user can act on (``ToolIndexError``, ``StoreError``) become ``Error: <message>`` on
stderr and exit status 1 in one place, :class:`ToolIndexGroup`; bad arguments are click usage
errors (exit status 2).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeGuard

import click
from rich.console import Console

from discovery.errors import EmptyQuery, ToolIndexError
from discovery.index import DEFAULT_LIMIT, ToolIndex
from discovery.render import indented, one_line, printable, render_result, table
from discovery.scoring import round6
from discovery.tool import json_text
from store import StoreError, make_engine, migrate, parse_url, sqlite_file
from store.engine import ENV_VAR, default_url, read_transaction, translated_errors

# What only some commands need (reading catalog files, explain, verify, progress bars) is imported
# by those commands: a read-only search never loads pydantic (some 45 ms of its start-up).
if TYPE_CHECKING:
    from pydantic import ValidationError
    from sqlalchemy import Engine
    from sqlalchemy.engine import URL

PROGRESS_MIN_RECORDS = 500
"""Imports of more records than this draw a progress bar on a terminal."""
PIPED_WIDTH = 120
"""Columns of rich output that goes to a file or a pipe (no terminal to measure)."""
SOURCES = ("builtin", "mcp", "extension", "custom")
EXAMPLE_CATALOG = Path(__file__).parent / "examples" / "demo-catalog.jsonl"
"""A small catalog written for tool-index: built-ins and five made-up MCP servers."""


def example(*lines: str) -> str:
    """An epilog that click prints as written: ``Example:`` and the indented command lines."""
    title = "Examples:" if len(lines) > 1 else "Example:"
    return "\b\n" + title + "\n" + "\n".join(f"  {line}" for line in lines)


class ToolIndexGroup(click.Group):
    """A group that turns the errors a user can act on into ``Error: <message>`` and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ToolIndexError, StoreError) as exc:
            raise click.ClickException(str(exc) or (type(exc).__doc__ or type(exc).__name__)) from exc
        except RecursionError as exc:
            raise click.ClickException("the input is nested too deeply to process") from exc
        except Exception as exc:
            if not _is_validation_error(exc):
                raise
            from discovery.preparation import describe_validation_error

            raise click.ClickException(describe_validation_error(exc)) from exc


def _is_validation_error(exc: Exception) -> TypeGuard[ValidationError]:
    """Whether ``exc`` is pydantic's ``ValidationError``; none can be raised before pydantic loads."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)


@dataclass(frozen=True, slots=True)
class App:
    """What every command shares: the database URL of ``--db``."""

    db: str

    def index(self) -> ToolIndex:
        """The index, created when the database is new; an older schema is an error, not upgraded."""
        return ToolIndex.open(self.db, upgrade=False)

    @contextmanager
    def engine(self, *, must_exist: bool) -> Iterator[Engine]:
        """A bare engine for the ``db`` commands: no schema is created or checked."""
        url = parse_url(self.db)
        missing = _missing_sqlite_file(url)
        if must_exist and missing:
            raise click.ClickException(f"no database at {missing}: run `tool-index db upgrade` to create it")
        engine = make_engine(url)
        try:
            with translated_errors(engine):
                yield engine
        finally:
            engine.dispose()


pass_app = click.make_pass_decorator(App)


@click.group(
    cls=ToolIndexGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=example(
        "tool-index import catalog.jsonl",
        "tool-index search 'create a pull request' --limit 5",
        "tool-index --db postgresql://user@host/tools stats",
    ),
)
@click.option(
    "--db",
    metavar="URL",
    envvar=ENV_VAR,
    show_envvar=True,
    help="Database: a SQLAlchemy URL or a SQLite file path "
    "[default: tool-index.db in the user data directory].",
)
@click.version_option(package_name="tool-index", prog_name="tool-index")
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    """A persistent BM25+ index for tool discovery in LLM agents."""
    ctx.obj = App(db or default_url())


@main.command(
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
@click.option("--example", is_flag=True, help="Also import the example catalog that ships with tool-index.")
@pass_app
def import_(
    app: App, paths: tuple[str, ...], server: str | None, replace: bool, skip_invalid: bool, example: bool
) -> None:
    """Add or update tools from catalog files.

    A catalog is a JSON array or JSON lines of tool records, or an MCP tools/list result; the
    format is detected from the content; PATH '-' reads standard input. Tools are matched by
    name: unchanged ones are not rewritten. A bad record stops the import before anything is
    written, unless --skip-invalid.
    """
    if example:
        paths = (*paths, str(EXAMPLE_CATALOG))
    if not paths:
        raise click.UsageError("give at least one PATH, or --example")
    from discovery.ingest import read_catalog

    ingested = read_catalog(paths, server=server, skip_invalid=skip_invalid)
    for message in ingested.skipped:
        click.echo(f"Warning: skipped {message}", err=True)
    if replace and ingested.skipped:
        raise click.ClickException(
            f"{len(ingested.skipped)} invalid records: --replace would remove their tools; "
            "fix them or import without --replace"
        )
    with app.index() as index, _progress(len(ingested.records)) as progress:
        report = index.upsert_tools(ingested.records, replace=replace, server=server, progress=progress)
    counts = report.counts()
    if skip_invalid:
        counts["skipped"] = len(ingested.skipped)
    click.echo(", ".join(f"{key} {value}" for key, value in counts.items()))


@main.command(
    epilog=example(
        "tool-index search 'create issue' --limit 5",
        "tool-index search 'post a message' --mode mcp-only --json",
        "tool-index search 'open a pull request' --session chat-42 --mode all",
    )
)
@click.argument("query")
@click.option(
    "--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, show_default=True, help="Most matches."
)
@click.option(
    "--mode",
    type=click.Choice(["all", "mcp-only"]),
    default=None,
    help="Search every discoverable tool, or the MCP tools only [default: all; with --session, the "
    "mode of a new session, default auto].",
)
@click.option("--session", "session_id", metavar="ID", help="Run search_tool_bm25 in this session.")
@click.option(
    "--default-server",
    "default_servers",
    multiple=True,
    metavar="NAME",
    help=("New session: an MCP server whose tools stay active (repeatable)."),
)
@click.option(
    "--request",
    "requested",
    multiple=True,
    metavar="NAME",
    help=("New session: a tool to start active (repeatable)."),
)
@click.option(
    "--essential",
    "essential_override",
    multiple=True,
    metavar="NAME",
    help=("New session: replace the essential tool names (repeatable)."),
)
@click.option("--json", "as_json", is_flag=True, help="Print the details object as one JSON document.")
@click.option("--expanded", is_flag=True, help="Show every match, not only the first five.")
@pass_app
def search(
    app: App,
    query: str,
    limit: int,
    mode: str | None,
    session_id: str | None,
    default_servers: tuple[str, ...],
    requested: tuple[str, ...],
    essential_override: tuple[str, ...],
    as_json: bool,
    expanded: bool,
) -> None:
    """Rank the catalog's tools for QUERY.

    Without --session: read-only, the whole catalog in MODE with nothing active. With --session:
    the search_tool_bm25 call of that session (created when new), which activates the matches
    and persists them.
    """
    if session_id is None:
        details = _read_only_search(app, query, limit, mode or "all")
    else:
        settings = {
            "discovery_mode": mode,
            "default_servers": list(default_servers) or None,
            "requested": list(requested) or None,
            "essential_override": list(essential_override) or None,
        }
        details = _session_search(app, session_id, query, limit, settings)
    if as_json:
        _echo_json(details)
    else:
        _stdout_console().print(render_result(details, expanded=expanded))


def _read_only_search(app: App, query: str, limit: int, mode: str) -> dict[str, Any]:
    with app.index() as index:
        return index.search_details(query, limit, mode=mode)


def _session_search(
    app: App, session_id: str, query: str, limit: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """One search_tool_bm25 call; the session is created with ``settings`` when it is new."""
    given = {key: value for key, value in settings.items() if value is not None}
    with app.index() as index:
        # Settings given for an existing session must match its own (else a clear error).
        session = index.session(session_id, **given)
        call_id = f"cli-{uuid.uuid4().hex[:12]}"
        return session.search_tool.execute(call_id, {"query": query, "limit": limit}).details


@main.command(epilog=example("tool-index sessions", "tool-index sessions --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@pass_app
def sessions(app: App, as_json: bool) -> None:
    """List the stored sessions with their sizes and search calls."""
    with app.index() as index:
        summaries = index.sessions()
    if as_json:
        _echo_json([dataclasses.asdict(summary) for summary in summaries])
        return
    if not summaries:
        click.echo("No sessions.")
        return
    rows: list[tuple[str, ...]] = [("id", "mode", "active", "selected", "calls", "updated")]
    rows += [
        (
            s.id,
            str(s.settings.get("discovery_mode", "auto")),
            str(s.active),
            str(s.selected),
            str(s.calls),
            s.updated_at,
        )
        for s in summaries
    ]
    click.echo(table(rows, _stdout_width()))


@main.group(
    cls=ToolIndexGroup, epilog=example("tool-index session show chat-42", "tool-index session reset chat-42")
)
def session() -> None:
    """Show, reset, delete or import one session."""


@session.command("show", epilog=example("tool-index session show chat-42 --json"))
@click.argument("session_id", metavar="ID")
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"id", "settings", "active", "selected", "calls"}.'
)
@pass_app
def session_show(app: App, session_id: str, as_json: bool) -> None:
    """Show a session's settings, tools and logged calls."""
    with app.index() as index:
        record = index.session_record(session_id)
    if as_json:
        _echo_json(record)
        return
    click.echo(f"Session {one_line(record['id'])}")
    click.echo(f"  settings: {one_line(json.dumps(record['settings'], ensure_ascii=False))}")
    click.echo(f"  active ({len(record['active'])}): {one_line(', '.join(record['active']))}")
    click.echo(f"  selected ({len(record['selected'])}): {one_line(', '.join(record['selected']))}")
    click.echo(f"  log ({len(record['calls'])} events):")
    for call in record["calls"]:
        # Outside ``one_line``, which would fold the sequence number's padding.
        click.echo(f"    {call['seq']:>4} {one_line(_event_line(call))}")


def _event_line(call: dict[str, Any]) -> str:
    head = f"{call['time']} {call['kind']}"
    if call["kind"] != "search":
        return head
    query = (call.get("params") or {}).get("query")
    outcome = call["error"] or f"activated {', '.join(call['activated']) or 'nothing'}"
    return f"{head} {call['tool']} {json.dumps(query, ensure_ascii=False)}: {outcome}"


@session.command("reset", epilog=example("tool-index session reset chat-42"))
@click.argument("session_id", metavar="ID")
@pass_app
def session_reset(app: App, session_id: str) -> None:
    """Reset a session to its opening tools, nothing selected."""
    with app.index() as index:
        active = index.session(session_id).reset()
    click.echo(f"reset {session_id}: {len(active)} active, 0 selected")


@session.command("delete", epilog=example("tool-index session delete chat-42"))
@click.argument("session_id", metavar="ID")
@pass_app
def session_delete(app: App, session_id: str) -> None:
    """Delete a session and its log."""
    with app.index() as index:
        index.delete_session(session_id)
    click.echo(f"deleted {session_id}")


@session.command(
    "import-jsonl", epilog=example("tool-index session import-jsonl ~/.agent/sessions/42.jsonl --id chat-42")
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "session_id", required=True, metavar="ID", help="The session to restore into.")
@click.option(
    "--mode", type=click.Choice(["auto", "off", "mcp-only", "all"]), help="New session: discovery mode."
)
@pass_app
def session_import_jsonl(app: App, path: Path, session_id: str, mode: str | None) -> None:
    """Restore the selection of a host's JSONL session file.

    The selection is the last mcp_tool_selection entry on the path from the file's last entry
    back to its root; names missing from the catalog are reported and skipped.
    """
    settings = {"discovery_mode": mode} if mode else {}
    with app.index() as index:
        restored = index.import_session_file(path, session_id, **settings)
    if not restored.found:
        click.echo(f"{path}: no tool selection in force; {session_id} has nothing selected", err=True)
    for name in restored.missing:
        click.echo(f"warning: {one_line(name)} is not in the catalog; skipped", err=True)
    click.echo(f"restored {len(restored.restored)} selected tools into {session_id}")


@main.command(epilog=example("tool-index tools --server github", "tool-index tools --json > catalog.json"))
@click.option("--server", metavar="NAME", help="Only the tools of this MCP server.")
@click.option("--source", type=click.Choice(SOURCES), help="Only the tools of this source.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole records as a JSON array (importable).")
@pass_app
def tools(app: App, server: str | None, source: str | None, as_json: bool) -> None:
    """List the catalog's tools in catalog order."""
    with app.index() as index:
        found = index.tools(server=server, source=source)
    if as_json:
        _echo_json([tool.as_record() for tool in found])
    elif not found:
        click.echo("No tools match." if server or source else "No tools in the catalog.")
    else:
        # Names are never cut (people copy them into other commands); summaries fill the rest.
        rows = [(t.name, t.source, t.server_name or "", t.summary) for t in found]
        click.echo(table([("name", "source", "server", "summary"), *rows], _stdout_width()))


@main.command(epilog=example("tool-index show mcp__github__create_issue", "tool-index show read --json"))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@pass_app
def show(app: App, name: str, as_json: bool) -> None:
    """Show one tool's whole record, input schema included."""
    with app.index() as index:
        record = index.tool(name).as_record()
    if as_json:
        _echo_json(record)
        return
    for key in ("name", "label", "source", "server_name", "mcp_tool_name", "load_mode"):
        if record[key] is not None:
            click.echo(f"{key + ':':<15}{one_line(record[key])}")
    click.echo(f"{'schema_keys:':<15}{one_line(', '.join(record['schema_keys']))}")
    click.echo(f"{'summary:':<15}{one_line(record['summary'])}")
    click.echo("description:")
    click.echo(indented(printable(record["description"], keep="\n\t")))
    click.echo("input_schema:")
    click.echo(indented(json.dumps(record["input_schema"], indent=2, ensure_ascii=False)))


@main.command(epilog=example("tool-index remove mcp__github__create_issue mcp__github__list_issues"))
@click.argument("names", nargs=-1, required=True)
@pass_app
def remove(app: App, names: tuple[str, ...]) -> None:
    """Remove tools by name.

    All or nothing: when any NAME is not in the catalog, nothing is removed and the command fails.
    """
    with app.index() as index:
        found = index.tools_by_names(names)
        unknown = [name for name in dict.fromkeys(names) if name not in found]
        if unknown:
            listed = ", ".join(repr(name) for name in unknown)
            raise click.ClickException(f"not in the catalog: {listed}; nothing removed")
        removed = index.remove_tools(names)
    click.echo(f"removed {len(removed)}")


@main.command(epilog=example("tool-index stats", "tool-index stats --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@pass_app
def stats(app: App, as_json: bool) -> None:
    """Show catalog sizes and counts per source and server."""
    with app.index() as index:
        summary = index.stats()
        where = index.url
    if as_json:
        _echo_json(summary)
        return
    click.echo(f"{'database:':<12}{where}")
    for key in ("tools", "terms", "postings", "generation"):
        click.echo(f"{key + ':':<12}{summary[key]}")
    click.echo(f"{'avgdl:':<12}{summary['avgdl']:.3f}")
    for key in ("sources", "servers"):
        counts: Mapping[str, int] = summary[key]
        click.echo(f"{key}:" + ("" if counts else " none"))
        width = max((len(name) for name in counts), default=0)
        for name, count in counts.items():
            click.echo(f"  {one_line(name):<{width}}  {count}")


@main.command(epilog=example("tool-index explain 'create a pull request' mcp__github__create_pull_request"))
@click.argument("query")
@click.argument("name")
@click.option(
    "--mode",
    type=click.Choice(["all", "mcp-only"]),
    default="all",
    show_default=True,
    help="The read-only corpus the score is computed in, as for search.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the breakdown as JSON.")
@pass_app
def explain(app: App, query: str, name: str, mode: str, as_json: bool) -> None:
    """Break down NAME's score for QUERY by term and by field.

    The score is the one a read-only search in MODE gives NAME, with the corpus statistics behind it.
    """
    if not query.strip():
        raise EmptyQuery()
    with app.index() as index:
        from discovery.explain import explain as explain_score

        explanation = explain_score(index, query.strip(), name, mode=mode)
    if as_json:
        _echo_json(explanation.as_dict())
        return
    click.echo(f"{one_line(name)}  score {round6(explanation.score)}  (mode {mode})")
    click.echo(
        f"corpus: {explanation.n_docs} tools, avgdl {explanation.avgdl:.3f}; "
        f"tool length {explanation.doc_len}, norm {explanation.norm:.6f}"
    )
    rows: list[tuple[str, ...]] = [("term / field", "qtf", "df", "idf", "tf", "score")]
    for term in explanation.terms:
        idf = f"{term.idf:.6f}"
        rows.append((term.term, str(term.qtf), str(term.df), idf, str(term.tf), _six(term.contribution)))
        for part in term.fields:
            rows.append((f"  {part.field} ×{part.weight}", "", "", "", str(part.tf), _six(part.contribution)))
    click.echo(table(rows, _stdout_width()))


def _six(score: float) -> str:
    return f"{round6(score):.6f}"


@main.command(epilog=example("tool-index verify && echo index ok"))
@pass_app
def verify(app: App) -> None:
    """Check every posting and aggregate against the tool records.

    Recomputes them from the stored records; exits 0 only when everything agrees.
    """
    with app.index() as index:
        from discovery.verify import verify as verify_index

        report = verify_index(index)
    checked = ", ".join(f"{count} {what}" for what, count in report.checked.items())
    if report.ok:
        click.echo(f"ok: checked {checked}")
        return
    for problem in report.problems:
        click.echo(one_line(problem))
    found = len(report.problems) + report.omitted - (1 if report.omitted else 0)  # less the "… more" line
    raise click.ClickException(
        f"the index disagrees with its tool records: {found} problems (checked {checked})"
    )


@main.group(cls=ToolIndexGroup, epilog=example("tool-index db current", "tool-index db upgrade"))
def db() -> None:
    """Show, check and upgrade the database schema (migrations)."""


@db.command(epilog=example("tool-index db upgrade"))
@pass_app
def upgrade(app: App) -> None:
    """Create the schema, or upgrade it to the newest revision."""
    with app.engine(must_exist=False) as engine:
        before = _revision(engine)
        migrate.ensure_schema(engine, upgrade_if_old=True)
        after = _revision(engine)
    if before == after:
        click.echo(f"already at head {after}")
    else:
        click.echo(f"upgraded {before or 'an empty database'} to {after} (head)")


@db.command(epilog=example("tool-index db current"))
@pass_app
def current(app: App) -> None:
    """Print the schema revision and whether it is the newest."""
    with app.engine(must_exist=True) as engine:
        revision = _revision(engine)
    head = migrate.head_revision()
    if revision is None:
        click.echo(f"none (no tool-index schema; head is {head}: run `tool-index db upgrade`)")
    elif revision == head:
        click.echo(f"{revision} (head)")
    elif revision in migrate.known_revisions():
        click.echo(f"{revision} (behind head {head}: run `tool-index db upgrade`)")
    else:
        click.echo(f"{revision} (unknown: newer than this tool-index, whose head is {head})")


@db.command(epilog=example("tool-index db check && echo schema ok"))
@pass_app
def check(app: App) -> None:
    """Fail unless the schema is at head and matches the models."""
    with app.engine(must_exist=True) as engine:
        revision = _revision(engine)
        head = migrate.head_revision()
        if revision != head:
            fix = "upgrade tool-index" if _is_newer(revision) else "run `tool-index db upgrade`"
            raise click.ClickException(f"the schema is at {revision or 'no revision'}, head is {head}: {fix}")
        changes = migrate.pending_model_changes(engine)
    if changes:
        raise click.ClickException(f"the schema at {head} differs from the models: {'; '.join(changes)}")
    click.echo(f"ok: {head} (head), the schema matches the models")


def _missing_sqlite_file(url: URL) -> str | None:
    """The path of a SQLite database file that does not exist yet, else ``None``."""
    database = sqlite_file(url)
    return None if database is None or Path(database).expanduser().exists() else database


def _revision(engine: Engine) -> str | None:
    with read_transaction(engine) as connection:
        return migrate.current_revision(connection)


def _is_newer(revision: str | None) -> bool:
    return revision is not None and revision not in migrate.known_revisions()


@contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None] | None]:
    """A progress callback drawing a bar on a terminal's stderr; ``None`` when piped or small."""
    if total <= PROGRESS_MIN_RECORDS or not _is_terminal(sys.stderr):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("Indexing tools", total=total)
        prepared = 0

        def advance(count: int) -> None:
            nonlocal prepared
            prepared += count
            # Once every record is prepared, the one write transaction is what is left.
            bar.update(
                task, advance=count, description="Writing to the database" if prepared >= total else None
            )

        yield advance


def _is_terminal(stream: TextIO) -> bool:
    return stream.isatty()


def _stdout_width() -> int:
    return shutil.get_terminal_size().columns if _is_terminal(sys.stdout) else PIPED_WIDTH


def _stdout_console() -> Console:
    return Console(
        file=sys.stdout,
        width=_stdout_width(),
        highlight=False,
        emoji=False,
        force_jupyter=False,
        legacy_windows=False,
    )


def _echo_json(value: Any) -> None:
    click.echo(json_text(value, indent=2))


import discovery.cli_quality  # noqa: E402, F401  (registers the eval and audit commands on main)

if __name__ == "__main__":
    main(prog_name="tool-index")
