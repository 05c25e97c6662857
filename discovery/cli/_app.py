"""What every command shares: the database of ``--db``, errors as ``Error: …``, output helpers."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, TypeGuard

import click

from discovery.cli._collector import collector_paused
from discovery.cli._sanitize import escaped
from discovery.errors import DatabaseMissing, ToolIndexError

if TYPE_CHECKING:
    from pydantic import ValidationError
    from rich.console import Console

    from discovery._index import ToolIndex
    from store import Store

PROGRESS_MIN_RECORDS = 500
"""Imports of more records than this draw a progress bar on a terminal."""
PIPED_WIDTH = 120
"""Columns of rich output that goes to a file or a pipe (no terminal to measure)."""


def example(*lines: str) -> str:
    """An epilog that click prints as written: ``Example:`` and the indented command lines."""
    title = "Examples:" if len(lines) > 1 else "Example:"
    return "\b\n" + title + "\n" + "\n".join(f"  {line}" for line in lines)


class ToolIndexGroup(click.Group):
    """A group that turns the errors a user can act on into ``Error: <message>`` and exit 1.

    Every message is sanitized: error lines quote field names, record text and paths.

    Its commands may be named lazily, ``{"name": "module:attribute"}``: a command's module is
    imported when that command runs (or help lists it), so a command pays only for its own
    imports. ``tool-index serve`` answers its client sooner for not loading the tables and
    renderers of the commands that print them.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = self.lazy_commands.get(cmd_name)
        if where is not None and cmd_name not in self.commands:
            module, attribute = where.split(":")
            with collector_paused():  # as the program's own imports (``discovery.cli.__main__``)
                imported = importlib.import_module(module)
            self.add_command(getattr(imported, attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return self._translated(ctx)
        except click.ClickException as exc:
            # In place, so a usage error keeps its context and its parameter hint.
            setattr(exc, "message", escaped(exc.message))  # noqa: B010 (click types it Final)
            raise

    def _translated(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ToolIndexError as exc:
            raise click.ClickException(str(exc) or (type(exc).__doc__ or type(exc).__name__)) from exc
        except Exception as exc:
            if not _is_validation_error(exc):
                raise
            from discovery.errors import describe_validation_error

            raise click.ClickException(describe_validation_error(exc)) from exc


def _is_validation_error(exc: Exception) -> TypeGuard[ValidationError]:
    """Whether ``exc`` is pydantic's ``ValidationError``; none can be raised before pydantic loads."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)


@dataclass(frozen=True, slots=True)
class App:
    """What every command shares: the database URL of ``--db``, and the command that runs."""

    db: str
    command: str | None = None
    """The subcommand (``serve``, ``search``, ...): PostgreSQL shows its connections as
    ``tool-index COMMAND@HOST``."""

    @property
    def application(self) -> str:
        return "tool-index" if self.command is None else f"tool-index {self.command}"

    def index(self, *, create: bool = False, analyzer: str | None = None) -> ToolIndex:
        """The index; an older schema is an error, not upgraded.

        Only the commands that write a catalog or a new session pass ``create``: reading a
        database that does not exist (a typo'd path) is an error, and creates nothing.
        """
        from discovery._index import ToolIndex

        try:
            return ToolIndex.open(
                self.db, upgrade=False, create=create, analyzer=analyzer, application=self.application
            )
        except DatabaseMissing as exc:
            raise click.ClickException(no_database(exc.where)) from exc

    @contextmanager
    def store(self, *, must_exist: bool) -> Iterator[Store]:
        """The bare store for the ``db`` commands: no schema is created or checked."""
        from store import Store

        missing = Store.missing_file(self.db)
        if must_exist and missing:
            raise click.ClickException(no_database(missing))
        store = Store.at(self.db, application=self.application)
        try:
            with store.translated_errors():
                yield store
        finally:
            store.close()


pass_app = click.make_pass_decorator(App)


class PositiveInt(click.ParamType[int, Any]):
    """A whole number of at least 1; anything else is one usage line saying so."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip()
        if text.isdigit() and int(text) >= 1:
            return int(text)
        self.fail(f"{value!r} is not a positive whole number (1, 2, 3, …).", param, ctx)


def no_database(where: str) -> str:
    return (
        f"no tool-index database at {where}; create one with tool-index import PATH "
        "(tool-index import --example imports a small demo catalog)"
    )


@contextmanager
def progress_bar(total: int, description: str = "Indexing tools") -> Iterator[Callable[[int], None] | None]:
    """A progress callback drawing a bar on a terminal's stderr; ``None`` when piped or small."""
    if total <= PROGRESS_MIN_RECORDS or not is_terminal(sys.stderr):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        prepared = 0

        def advance(count: int) -> None:
            nonlocal prepared
            prepared += count
            # Once every record is prepared, the one write transaction is what is left.
            bar.update(
                task, advance=count, description="Writing to the database" if prepared >= total else None
            )

        yield advance


def is_terminal(stream: TextIO) -> bool:
    return stream.isatty()


def stdout_width() -> int:
    """The terminal's width; when piped, ``COLUMNS`` if it is a positive number, else 120."""
    if is_terminal(sys.stdout):
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH


def stdout_console() -> Console:
    from rich.console import Console

    return Console(
        file=sys.stdout,
        width=stdout_width(),
        highlight=False,
        emoji=False,
        force_jupyter=False,
        legacy_windows=False,
    )


def echo(text: str = "", *, err: bool = False) -> None:
    """Print one line (or several) with third-party text sanitized; tabs and newlines kept."""
    click.echo(escaped(text, keep="\n\t"), err=err)


def echo_json(value: Any) -> None:
    """JSON, exact when piped; on a terminal, unsafe characters as JSON escapes (same value)."""
    from discovery._results import json_text

    text = json_text(value, indent=2)
    click.echo(escaped(text) if is_terminal(sys.stdout) else text)
