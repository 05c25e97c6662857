"""``tool-index client``: the entry that runs the gateway in an MCP client's config, printed or
merged into the client's file."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from discovery.cli._sanitize import escaped

if TYPE_CHECKING:
    from discovery.cli._app import App

ENTRY_NAME = "tool-index"
CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode")


def default_path(client: str) -> Path:
    """Where each client reads its servers: project files in the current directory for Claude
    Code and VS Code, the user's own file for Claude Desktop and Cursor."""
    if client == "claude-code":
        return Path.cwd() / ".mcp.json"
    if client == "vscode":
        return Path.cwd() / ".vscode" / "mcp.json"
    if client == "cursor":
        return Path.home() / ".cursor" / "mcp.json"
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "Claude" / "claude_desktop_config.json"


def command_line() -> list[str]:
    """This environment's ``tool-index``, by absolute path: a client starts servers with its own
    environment and PATH, where another one, or none, may be found."""
    executable = Path(sys.executable).absolute()
    script = executable.parent / ("tool-index.exe" if sys.platform == "win32" else "tool-index")
    if script.is_file():
        return [str(script)]
    return [str(executable), "-m", "discovery.cli"]


def absolute_db(db: str) -> str:
    """``db`` with a relative SQLite path made absolute (the client's working directory is not ours)."""
    if "://" not in db:
        return str(Path(db).absolute())
    prefix, _, rest = db.partition(":///")
    if prefix.startswith("sqlite") and rest and not rest.startswith("/") and rest != ":memory:":
        return f"{prefix}:///{Path(rest).absolute()}"
    return db


def entry(client: str, config: str, db: str, session: str | None) -> dict[str, Any]:
    command, *args = command_line()
    args += ["--db", absolute_db(db), "serve", "--config", str(Path(config).absolute())]
    if session is not None:
        args += ["--session", session]
    server: dict[str, Any] = {"command": command, "args": args}
    if client == "vscode":
        server = {"type": "stdio", **server}
    return {servers_key(client): {ENTRY_NAME: server}}


def servers_key(client: str) -> str:
    return "servers" if client == "vscode" else "mcpServers"


def merged(path: Path, key: str, addition: dict[str, Any]) -> dict[str, Any]:
    """The config at ``path`` (none yet: empty) with ``addition`` set under ``key``."""
    from discovery._mcp.jsonc import to_json
    from discovery.errors import ToolIndexError

    if not path.exists():
        return {key: addition}
    try:
        document = json.loads(to_json(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError, ToolIndexError) as exc:
        raise click.ClickException(f"cannot read {escaped(str(path))}: {escaped(str(exc))}") from exc
    if not isinstance(document, dict) or not isinstance(document.get(key, {}), dict):
        raise click.ClickException(
            f"cannot read {escaped(str(path))}: expected an object with an object {key!r}"
        )
    document.setdefault(key, {}).update(addition)
    return document


@click.command(
    epilog="\b\nExamples:\n  tool-index client claude-code --config servers.json --session my-project\n"
    "  tool-index client cursor --config ~/.config/mcp/servers.json --write"
)
@click.argument("client", type=click.Choice(CLIENTS))
@click.option(
    "--config", "config_path", required=True, metavar="FILE", help="The MCP config the gateway fronts."
)
@click.option("--session", "session_id", metavar="ID", help="The persisted session the gateway serves.")
@click.option("--db", "db", metavar="URL", help="The gateway's database [default: this command's --db].")
@click.option(
    "--write",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[PATH]",
    help="Merge the entry into the client's config file (or PATH), keeping a backup FILE.bak.",
)
@click.pass_obj
def client(
    app: App, client: str, config_path: str, session_id: str | None, db: str | None, write: str | None
) -> None:
    """Print a client's config entry for the gateway.

    The entry runs tool-index serve; --write merges it into CLIENT's config file. Paths are
    absolute, the tool-index command included, so the entry works whatever the
    client's PATH and working directory. --write keeps every other entry of the file.
    """
    document = entry(client, config_path, db or app.db, session_id)
    if write is None:
        click.echo(json.dumps(document, indent=2))
        return
    path = Path(write or default_path(client)).absolute()
    key = servers_key(client)
    updated = merged(path, key, document[key])
    backup = path.with_name(path.name + ".bak")
    if path.exists():
        shutil.copy2(path, backup)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(updated, indent=2) + "\n", encoding="utf-8")
    kept = f" (the previous file is {escaped(str(backup))})" if backup.exists() else ""
    click.echo(f"wrote {key}.{ENTRY_NAME} to {escaped(str(path))}{kept}")
