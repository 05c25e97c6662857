"""The ``tool-index`` command line: each command parses its arguments, calls the library, prints.

Errors the user can act on (``ToolIndexError`` and every error under it) become ``Error: <message>``
on stderr and exit status 1 in one place, ``ToolIndexGroup``; bad arguments are click usage errors
(exit status 2). What only some commands need (reading catalog files, explain, verify, progress
bars) is imported by those commands, so a read-only search never loads pydantic.
"""

from __future__ import annotations

import click

from discovery.cli._app import App, ToolIndexGroup, example
from discovery.cli._catalog import import_, reindex, remove, show, stats, tools
from discovery.cli._database import db, verify
from discovery.cli._learning import learned, learning
from discovery.cli._mcp import MCP_COMMANDS
from discovery.cli._quality import audit, eval_
from discovery.cli._search import explain, search
from discovery.cli._semantic import embed
from discovery.cli._sessions import session, sessions
from store import Store


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
    envvar=Store.ENV_VAR,
    show_envvar=True,
    help="Database: a SQLAlchemy URL or a SQLite file path "
    "[default: tool-index.db in the user data directory].",
)
@click.version_option(package_name="tool-index", prog_name="tool-index")
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    """A persistent BM25+ index for tool discovery in LLM agents."""
    ctx.obj = App(Store.default_url() if db is None else db)


for command in (
    import_,
    search,
    sessions,
    session,
    tools,
    show,
    remove,
    stats,
    reindex,
    explain,
    verify,
    db,
    *MCP_COMMANDS,
    eval_,
    audit,
    learning,
    learned,
    embed,
):
    main.add_command(command)


if __name__ == "__main__":
    main(prog_name="tool-index")
