"""Database commands: verify, and db upgrade|current|check (migrations)."""

from __future__ import annotations

import click
from rich.text import Text

from discovery.cli._app import App, ToolIndexGroup, echo, example, pass_app, stdout_console
from discovery.cli._output import on_terminal
from discovery.cli._render import one_line
from store import Store


@click.command(epilog=example("tool-index verify && echo index ok"))
@pass_app
def verify(app: App) -> None:
    """Check every posting and aggregate against the tool records.

    Recomputes them from the stored records; exits 0 only when everything agrees.
    """
    with app.index() as index:
        from discovery._diagnostics.verify import verify as verify_index

        report = verify_index(index)
    checked = ", ".join(f"{count} {what}" for what, count in report.checked.items())
    lines = [f"ok: checked {checked}"] if report.ok else [one_line(problem) for problem in report.problems]
    if report.omitted:
        lines.append(f"… and {report.omitted} more problems")
    if on_terminal():
        style = "green" if report.ok else "red"
        stdout_console().print(Text("\n".join(lines), style=style), overflow="fold")
    else:
        echo("\n".join(lines))
    if report.ok:
        return
    raise click.ClickException(
        f"the index disagrees with its tool records: {report.found} problems (checked {checked})"
    )


@click.group(cls=ToolIndexGroup, epilog=example("tool-index db current", "tool-index db upgrade"))
def db() -> None:
    """Show, check and upgrade the database schema (migrations)."""


@db.command(epilog=example("tool-index db upgrade"))
@pass_app
def upgrade(app: App) -> None:
    """Create the schema, or upgrade it to the newest revision."""
    with app.store(must_exist=False) as store:
        before = store.schema_revision()
        store.ensure_schema(upgrade_if_old=True)
        after = store.schema_revision()
    if before == after:
        echo(f"already at head {after}")
    else:
        echo(f"upgraded {before or 'an empty database'} to {after} (head)")


@db.command(epilog=example("tool-index db current"))
@pass_app
def current(app: App) -> None:
    """Print the schema revision and whether it is the newest."""
    with app.store(must_exist=True) as store:
        revision = store.schema_revision()
    head = Store.head_revision()
    if revision is None:
        echo(f"none (no tool-index schema; head is {head}: run `tool-index db upgrade`)")
    elif revision == head:
        echo(f"{revision} (head)")
    elif revision in Store.known_revisions():
        echo(f"{revision} (behind head {head}: run `tool-index db upgrade`)")
    else:
        echo(f"{revision} (unknown: newer than this tool-index, whose head is {head})")


@db.command(epilog=example("tool-index db check && echo schema ok"))
@pass_app
def check(app: App) -> None:
    """Fail unless the schema is at head and matches the models."""
    with app.store(must_exist=True) as store:
        revision = store.schema_revision()
        head = Store.head_revision()
        if revision != head:
            fix = "upgrade tool-index" if _is_newer(revision) else "run `tool-index db upgrade`"
            raise click.ClickException(f"the schema is at {revision or 'no revision'}, head is {head}: {fix}")
        changes = store.pending_model_changes()
    if changes:
        raise click.ClickException(f"the schema at {head} differs from the models: {'; '.join(changes)}")
    echo(f"ok: {head} (head), the schema matches the models")


def _is_newer(revision: str | None) -> bool:
    return revision is not None and revision not in Store.known_revisions()
