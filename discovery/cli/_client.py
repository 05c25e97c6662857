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


def default_path(client: str, *, user: bool = False) -> Path:
    """Where each client reads its servers: project files in the current directory for Claude
    Code and VS Code, the user's own file for Claude Desktop and Cursor (and Claude Code's user
    scope, ``~/.claude.json``, with ``user``)."""
    if client == "claude-code":
        return Path.home() / ".claude.json" if user else Path.cwd() / ".mcp.json"
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


def read_client_file(path: Path, key: str) -> str:
    """The text of a client's config file, checked to be an object with an object ``key`` (or
    none yet); read bounded, and only when it is a regular file."""
    from discovery._files import read_bounded
    from discovery._mcp.jsonc import to_json
    from discovery.errors import ToolIndexError

    shown = escaped(str(path))
    if not path.is_file():
        raise click.ClickException(f"cannot read {shown}: not a regular file")
    try:
        _, text = read_bounded(path, ToolIndexError, what="client config file")
        document = json.loads(to_json(text))
    except (ValueError, ToolIndexError) as exc:
        raise click.ClickException(f"cannot read {shown}: {escaped(str(exc))}") from exc
    if not isinstance(document, dict) or not isinstance(document.get(key, {}), dict):
        raise click.ClickException(f"cannot read {shown}: expected an object with an object {key!r}")
    return text


def merged(text: str | None, key: str, server: dict[str, Any]) -> str:
    """The client file's ``text`` (none yet: a new file) with the gateway's entry set under ``key``,
    its comments and layout kept."""
    from discovery._mcp.jsonc import members, with_member

    if text is None:
        return json.dumps({key: {ENTRY_NAME: server}}, indent=2) + "\n"
    servers = next((member for member in members(text)[0] if member.key == key), None)
    if servers is None:
        return with_member(text, None, key, {ENTRY_NAME: server})
    return with_member(text, servers.value_start, ENTRY_NAME, server)


def moved(text: str, key: str) -> tuple[str, str]:
    """``text`` without its servers and ``toolIndex`` filters, and a new config holding them as
    they were written (comments included), less any gateway entry."""
    from discovery._mcp.config import OPTIONS_KEY
    from discovery._mcp.jsonc import members, with_member, without_member

    found = {member.key: member for member in members(text)[0]}
    servers = found.get(key)
    if servers is None or not members(text, servers.value_start)[0]:
        raise click.ClickException(f"no servers to move: the config has no {key!r} entries")
    parts = [
        f'  "{key}": '
        + without_member(text[: servers.value_end], ENTRY_NAME, servers.value_start)[servers.value_start :]
    ]
    if OPTIONS_KEY in found:
        options = found[OPTIONS_KEY]
        parts.append(f'  "{OPTIONS_KEY}": ' + text[options.value_start : options.value_end])
    emptied = with_member(without_member(text, OPTIONS_KEY), None, key, {})
    return emptied, "{\n" + ",\n".join(parts) + "\n}\n"


def same_file(one: Path, other: Path) -> bool:
    return one.resolve() == other.resolve()


@click.command(
    epilog="\b\nWhere --write puts the entry without a PATH:\n"
    "  claude-code     ./.mcp.json (the project's; --user: ~/.claude.json, every project's)\n"
    "  claude-desktop  ~/.config/Claude/claude_desktop_config.json\n"
    "                  (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)\n"
    "  cursor          ~/.cursor/mcp.json\n"
    "  vscode          ./.vscode/mcp.json\n"
    "\b\nExamples:\n  tool-index client claude-code --config servers.json --session my-project\n"
    "  tool-index client cursor --config ~/.config/mcp/servers.json --write\n"
    "  tool-index client claude-code --config .mcp.json --write --move-to .mcp.servers.json"
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
    help="Merge the entry into the client's config file (or PATH), keeping a backup FILE.bak, and "
    "its comments.",
)
@click.option("--user", is_flag=True, help="claude-code: its user scope, ~/.claude.json, not the project's.")
@click.option(
    "--move-to",
    "move_to",
    metavar="NEW",
    type=click.Path(dir_okay=False),
    help="With --write into the --config file itself: move its servers (and toolIndex filters) into "
    "the new file NEW, which the gateway fronts, and put the gateway in their place.",
)
@click.pass_obj
def client(
    app: App,
    client: str,
    config_path: str,
    session_id: str | None,
    db: str | None,
    write: str | None,
    user: bool,
    move_to: str | None,
) -> None:
    """Print a client's config entry for the gateway.

    The entry runs tool-index serve; --write merges it into CLIENT's config file. Paths are
    absolute, the tool-index command included, so the entry works whatever the
    client's PATH and working directory. --write keeps every other entry of the file. A gateway
    is never written into the file it fronts (it would start itself): --move-to gives its servers
    a file of their own.
    """
    if user and client != "claude-code":
        raise click.UsageError("--user is for claude-code")
    if move_to is not None and write is None:
        raise click.UsageError("--move-to is for --write")
    fronted = Path(move_to if move_to is not None else config_path).absolute()
    document = entry(client, str(fronted), db or app.db, session_id)
    if write is None:
        click.echo(json.dumps(document, indent=2))
        return
    path = Path(write or default_path(client, user=user)).absolute()
    key = servers_key(client)
    text = read_client_file(path, key) if path.exists() else None
    new_config = None
    if move_to is not None:
        if not same_file(path, Path(config_path)):
            raise click.UsageError(
                "--move-to moves the servers of the file --write writes: give --config that file"
            )
        if fronted.exists():
            raise click.ClickException(f"{escaped(str(fronted))} exists: --move-to makes a new file")
        assert text is not None  # the --config file, which exists
        text, new_config = moved(text, key)
    elif same_file(path, fronted):
        suggested = path.with_name(path.name.removesuffix(".json") + ".servers.json")
        raise click.ClickException(
            f"{escaped(str(path))} is the config the gateway fronts: written there, the gateway would "
            "start itself. Move its servers into a file of their own, with the gateway in their place: "
            f"tool-index client {client} --config {escaped(config_path)} --write "
            f"{escaped(write)}{' ' if write else ''}--move-to {escaped(str(suggested))}"
        )
    updated = merged(text, key, document[key][ENTRY_NAME])
    backup = path.with_name(path.name + ".bak")
    if text is not None:
        shutil.copy2(path, backup)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if new_config is not None:
        fronted.write_text(new_config, encoding="utf-8")
        click.echo(f"moved the servers of {escaped(str(path))} to {escaped(str(fronted))}")
    path.write_text(updated, encoding="utf-8")
    kept = f" (the previous file is {escaped(str(backup))})" if text is not None else ""
    click.echo(f"wrote {key}.{ENTRY_NAME} to {escaped(str(path))}{kept}")
