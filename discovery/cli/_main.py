"""The ``tool-index`` command line: each command parses its arguments, calls the library, prints.

Errors the user can act on (``ToolIndexError`` and every error under it) become ``Error: <message>``
on stderr and exit status 1 in one place, ``ToolIndexGroup``; bad arguments are click usage errors
(exit status 2). A command's module is imported only when that command runs, and what only some
commands need (reading catalog files, explain, verify, progress bars) is imported by those
commands, so a read-only search never loads pydantic and ``serve`` never loads the tables.
"""

from __future__ import annotations

import click

from discovery.cli._app import App, ToolIndexGroup, example
from store import ENV_VAR, default_url

COMMANDS = {
    "import": "discovery.cli._catalog:import_",
    "search": "discovery.cli._search:search",
    "sessions": "discovery.cli._sessions:sessions",
    "session": "discovery.cli._sessions:session",
    "tools": "discovery.cli._catalog:tools",
    "show": "discovery.cli._catalog:show",
    "remove": "discovery.cli._catalog:remove",
    "stats": "discovery.cli._catalog:stats",
    "reindex": "discovery.cli._catalog:reindex",
    "explain": "discovery.cli._search:explain",
    "verify": "discovery.cli._database:verify",
    "db": "discovery.cli._database:db",
    "sync": "discovery.cli._mcp:sync",
    "serve": "discovery.cli._mcp:serve",
    "client": "discovery.cli._client:client",
    "eval": "discovery.cli._quality:eval_",
    "audit": "discovery.cli._quality:audit",
    "learning": "discovery.cli._learning:learning",
    "learned": "discovery.cli._learning:learned",
    "embed": "discovery.cli._semantic:embed",
}
"""Each command and where it lives; a run imports only the module of the command it runs."""


@click.group(
    cls=ToolIndexGroup,
    lazy_commands=COMMANDS,
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
    ctx.obj = App(default_url() if db is None else db, ctx.invoked_subcommand)


if __name__ == "__main__":
    main(prog_name="tool-index")
