"""Session commands: sessions, session show|call|reset|delete|prune|import-jsonl."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from discovery.cli._app import App, ToolIndexGroup, echo, echo_json, example, pass_app, stdout_console
from discovery.cli._names import resolved_names
from discovery.cli._output import on_terminal, print_fields, print_table
from discovery.cli._render import one_line

identity_option = click.option(
    "--identity",
    metavar="NAME",
    default="local",
    show_default=True,
    help="Whose session ID is: ids are per identity (a gateway's token alice is alice@REALM).",
)


@click.command(epilog=example("tool-index sessions", "tool-index sessions --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@pass_app
def sessions(app: App, as_json: bool) -> None:
    """List every identity's sessions: searches, calls, who opened them."""
    with app.index() as index:
        summaries = index.sessions()
    if as_json:
        echo_json([dataclasses.asdict(summary) for summary in summaries])
        return
    if not summaries:
        echo("No sessions.")
        return
    header = ("id", "identity", "mode", "active", "selected", "searches", "calls", "updated", "opened by")
    rows: list[tuple[str, ...]] = [header]
    rows += [
        (
            s.id,
            s.identity,
            str(s.settings.get("discovery_mode", "auto")),
            str(s.active),
            str(s.selected),
            str(s.searches),
            str(s.calls),
            s.updated_at,
            s.opened_by or "",
        )
        for s in summaries
    ]
    print_table(rows)


@click.group(
    cls=ToolIndexGroup, epilog=example("tool-index session show chat-42", "tool-index session reset chat-42")
)
def session() -> None:
    """Show, record a call in, reset, delete, import or prune sessions."""


@session.command("show", epilog=example("tool-index session show chat-42 --json"))
@click.argument("session_id", metavar="ID")
@identity_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"id", "identity", "opened_by", "settings", "active", "selected", "calls"}.',
)
@pass_app
def session_show(app: App, session_id: str, identity: str, as_json: bool) -> None:
    """Show a session's settings, tools and logged calls."""
    with app.index() as index:
        record = index.session_record(session_id, identity=identity)
    if as_json:
        echo_json(record)
        return
    gone = set(record["not_in_catalog"])
    fields = [("identity", record["identity"]), ("opened by", record["opened_by"] or "not recorded")]
    fields += [("settings", json.dumps(record["settings"], ensure_ascii=False))]
    fields += [(key, _listed(record[key], gone)) for key in ("active", "selected")]
    if not on_terminal():
        echo(f"Session {record['id']}")
        for key, value in fields:
            echo(
                f"  {key} {one_line(value)}"
                if key in ("active", "selected")
                else f"  {key}: {one_line(value)}"
            )
        echo(f"  log ({len(record['calls'])} events):")
        for call in record["calls"]:
            # Outside ``one_line``, which would fold the sequence number's padding.
            echo(f"    {call['seq']:>4} {one_line(_event_line(call))}")
        return
    stdout_console().print(Text(f"Session {one_line(record['id'])}", style="bold"))
    print_fields(fields, key_width=0)
    print_table(
        [("seq", "time", "event"), *((str(c["seq"]), c["time"], _event_line(c)) for c in record["calls"])]
    )


def _listed(names: list[str], gone: set[str]) -> str:
    """``(3): a, b, c`` counting the live names; names gone from the catalog marked, not counted."""
    live = sum(name not in gone for name in names)
    missing = len(names) - live
    count = f"({live} + {missing} not in the catalog)" if missing else f"({live})"
    marked = [f"{name} [not in the catalog]" if name in gone else name for name in names]
    return f"{count}: {', '.join(marked)}"


def _event_line(call: dict[str, Any]) -> str:
    head = f"{call['time']} {call['kind']}"
    params = call.get("params") or {}
    if call["kind"] == "tool_call":  # never arguments nor results
        forgotten = " (forgotten)" if params.get("forgotten") is True else ""
        if "outcome" not in params:  # recorded by the host
            return f"{head} {params.get('tool')}: {'failed' if params.get('is_error') else 'ok'}{forgotten}"
        outcome = f"{params.get('outcome')}{', isError' if params.get('is_error') else ''}"
        server = f"server {params['server']}" if params.get("server") else "no configured server"
        return f"{head} {params.get('tool')} ({server}) {params.get('duration_ms')} ms: {outcome}{forgotten}"
    if call["kind"] == "tool_call_start":  # a gateway's, before it forwarded the call
        ended = "started" if call.get("outcome_logged") else "started, no outcome logged"
        return f"{head} {params.get('tool')} (server {params.get('server')}): {ended}"
    if call["kind"] == "pin":
        return f"{head} {', '.join(params.get('tools') or {})}"
    if call["kind"] == "owner":  # the identity of serve --tokens that made it, before revision 0013
        return f"{head} {params.get('identity')}"
    if call["kind"] != "search":
        return head
    query = params.get("query")
    outcome = call["error"] or f"activated {', '.join(call['activated']) or 'nothing'}"
    return f"{head} {call['tool']} {json.dumps(query, ensure_ascii=False)}: {outcome}"


@session.command("call", epilog=example("tool-index session call chat-42 mcp__slack__post_message"))
@click.argument("session_id", metavar="ID")
@click.argument("name")
@identity_option
@click.option("--failed", is_flag=True, help="The call failed: it is logged and teaches nothing.")
@pass_app
def session_call(app: App, session_id: str, name: str, identity: str, failed: bool) -> None:
    """Record that the host called catalog tool NAME in a session.

    The call is logged in the session and teaches nothing: a call teaches only the searches of the
    process that records it, and this command is a process of its own. Hosts record calls that
    teach through the library, the adapters or the gateway (see `tool-index learning`).
    """
    with app.index() as index:
        index.session_record(session_id, identity=identity)  # an unknown id is an error, not a new session
        (resolved,) = resolved_names(index, [name])
        index.session(session_id, identity=identity).record_call(resolved, ok=not failed)
    echo(f"recorded {one_line(resolved)} in {session_id}{' (failed)' if failed else ''}")


@session.command("reset", epilog=example("tool-index session reset chat-42"))
@click.argument("session_id", metavar="ID")
@identity_option
@pass_app
def session_reset(app: App, session_id: str, identity: str) -> None:
    """Reset a session to its opening tools, nothing selected."""
    with app.index() as index:
        index.session_record(session_id, identity=identity)  # an unknown id is an error, not a new session
        active = index.session(session_id, identity=identity).reset()
    echo(f"reset {session_id}: {len(active)} active, 0 selected")


@session.command("delete", epilog=example("tool-index session delete chat-42"))
@click.argument("session_id", metavar="ID")
@identity_option
@pass_app
def session_delete(app: App, session_id: str, identity: str) -> None:
    """Delete a session and its log."""
    with app.index() as index:
        index.delete_session(session_id, identity=identity)
    echo(f"deleted {session_id}")


IDLE = re.compile(r"([1-9][0-9]{0,5})([dhm])")
IDLE_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def idle_for(value: str) -> timedelta:
    """``30d``, ``12h`` or ``90m`` as a duration."""
    found = IDLE.fullmatch(value.strip())
    if found is None:
        raise click.ClickException(
            f"--idle {one_line(value)!r}: give a whole number of days, hours or minutes, as 30d, 12h or 90m"
        )
    return timedelta(**{IDLE_UNITS[found[2]]: int(found[1])})


@session.command(
    "prune",
    epilog=example("tool-index session prune --idle 30d --dry-run", "tool-index session prune --idle 30d"),
)
@click.option(
    "--idle",
    "idle",
    required=True,
    metavar="AGE",
    help="Delete sessions unchanged for this long: 30d, 12h, 90m.",
)
@click.option("--dry-run", is_flag=True, help="Say which sessions would be deleted, and delete none.")
@pass_app
def session_prune(app: App, idle: str, dry_run: bool) -> None:
    """Delete the sessions unchanged for --idle, with their logs.

    Every identity's, and what they taught with them. A gateway whose clients name no session
    makes one per connection or start; this keeps them from piling up. One transaction:
    interrupted, it deletes nothing."""
    from discovery._sessions.listing import prune_sessions

    since = datetime.now(UTC) - idle_for(idle)
    with app.index() as index:
        pruned = prune_sessions(index.store, since, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    echo(f"{verb} {len(pruned)} session{'' if len(pruned) == 1 else 's'} unchanged for {idle.strip()}")
    for key in pruned:
        echo(f"  {one_line(key.id)} ({one_line(key.identity)})")


@session.command(
    "import-jsonl", epilog=example("tool-index session import-jsonl ~/.agent/sessions/42.jsonl --id chat-42")
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "session_id", required=True, metavar="ID", help="The session to restore into.")
@identity_option
@click.option(
    "--mode", type=click.Choice(["auto", "off", "mcp-only", "all"]), help="New session: discovery mode."
)
@pass_app
def session_import_jsonl(app: App, path: Path, session_id: str, identity: str, mode: str | None) -> None:
    """Restore the selection of a host's JSONL session file.

    The selection is the last mcp_tool_selection entry on the path from the file's last entry
    back to its root; names missing from the catalog are reported and skipped.
    """
    settings = {"discovery_mode": mode} if mode else {}
    with app.index(create=True) as index:
        restored = index.import_session_file(path, session_id, identity=identity, **settings)
    if not restored.found:
        echo(f"{path}: no tool selection in force; {session_id} has nothing selected", err=True)
    for name in restored.missing:
        echo(f"warning: {one_line(name)} is not in the catalog; skipped", err=True)
    echo(f"restored {_count(len(restored.restored), 'selected tool')} into {session_id}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
