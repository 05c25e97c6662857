"""The MCP server configs hosts already keep, read into typed, expanded server entries.

Claude Desktop's ``claude_desktop_config.json``, Claude Code's ``.mcp.json`` and Cursor's
``mcp.json`` hold ``{"mcpServers": {name: entry}}``; VS Code's ``mcp.json`` holds ``{"servers":
{name: entry}}``. An entry is a stdio server (``command``, ``args``, ``env``, ``cwd``, optional
``"type": "stdio"``; a relative ``cwd`` is relative to the config file's directory) or a
streamable HTTP one (``"type": "http"`` or just ``url``, ``headers``).
``${VAR}`` and ``${VAR:-default}`` are expanded in every string of an entry, as Claude Code does,
and so are the variables VS Code and Cursor define: ``${env:NAME}`` (empty when unset, as there),
``${userHome}``, ``${workspaceFolder}`` and ``${workspaceFolderBasename}`` (the folder holding
``.vscode/`` or ``.cursor/``, else the config's own), ``${pathSeparator}`` and ``${/}``.
Comments and trailing commas are allowed, as VS Code and Cursor allow them. VS Code's
``${input:ID}`` asks the user for a value when the server starts, ``${command:ID}`` runs an editor
command; nothing here can do either, so an entry that uses one is skipped. So is an entry that is
wrong in itself: ``McpConfig.skipped`` says why, and the others still work.

Values of ``env`` and ``headers`` are secrets more often than not: no message of this module
quotes them, and ``repr`` of an entry hides them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, TypeAdapter, ValidationError

from discovery._files import load_json, read_regular
from discovery._mcp.scope import ToolFilter
from discovery.errors import ToolIndexError

OPTIONS_KEY = "toolIndex"
"""A top-level object of tool-index's own settings (``allow`` and ``deny`` patterns)."""
SERVER_KEYS = ("mcpServers", "servers")
"""Where the servers are: the key of Claude Desktop, Claude Code and Cursor, then VS Code's."""
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""Server names become part of tool names (``mcp__<server>__<tool>``): no spaces, no control
characters, nothing a shell or a provider's tool-name rule would choke on."""
_VARIABLE = re.compile(r"\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*|/)(?::-([^}]*))?\}")
_INPUT = re.compile(r"\$\{input:([^}]*)\}")
_COMMAND = re.compile(r"\$\{command:([^}]*)\}")
WORKSPACE_DIRECTORIES = (".vscode", ".cursor")
"""Directories a workspace keeps its editor's config in: the workspace is the folder above."""


class ConfigError(ToolIndexError):
    """An MCP config file cannot be used; the message is ``<file>: <where>: <what>``."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    always_load: StrictBool = Field(default=False, alias="alwaysLoad")
    """Claude Code's key: the server's tools are never deferred (``McpConfig.always_load``)."""


class _StdioEntry(_Entry):
    type: Literal["stdio"] = "stdio"
    command: StrictStr = Field(min_length=1)
    args: list[StrictStr] = []
    env: dict[StrictStr, StrictStr] = {}
    cwd: StrictStr | None = None


class _HttpEntry(_Entry):
    type: Literal["http"] = "http"
    url: StrictStr = Field(min_length=1)
    headers: dict[StrictStr, StrictStr] = {}


_STDIO = TypeAdapter(_StdioEntry)
_HTTP = TypeAdapter(_HttpEntry)


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server run as a subprocess, spoken to over its stdin and stdout."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None

    @property
    def transport(self) -> str:
        return "stdio"


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server reached over streamable HTTP."""

    name: str
    url: str = field(repr=False)  # a URL may carry a key in its query
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> str:
        return "http"


ServerConfig = StdioServer | HttpServer


@dataclass(frozen=True, slots=True)
class McpConfig:
    """The servers of one config file, in file order."""

    path: str
    servers: dict[str, ServerConfig]
    skipped: dict[str, str] = field(default_factory=dict)
    """Entries that cannot be started, by name: why (VS Code inputs)."""
    tool_filter: ToolFilter = field(default_factory=ToolFilter)
    """The ``allow`` and ``deny`` patterns of ``toolIndex`` (``scope``)."""
    always_load: frozenset[str] = frozenset()
    """The servers whose entry says ``"alwaysLoad": true``: their tools are active in every
    session and listed under their own names, never behind the search."""

    def warnings(self) -> list[str]:
        return [f"{self.path}: server {name!r} is skipped: {why}" for name, why in self.skipped.items()]

    def select(self, names: tuple[str, ...] | list[str]) -> list[ServerConfig]:
        """The servers named (all when none are), or a ``ConfigError`` naming the unknown ones."""
        if not names:
            return list(self.servers.values())
        for name in names:
            if name in self.skipped:
                raise ConfigError(f"{self.path}: server {name!r} cannot be started: {self.skipped[name]}")
        unknown = [name for name in names if name not in self.servers]
        if unknown:
            known = ", ".join(self.servers) or "none"
            raise ConfigError(
                f"{self.path}: no server named {', '.join(map(repr, unknown))} (configured: {known})"
            )
        return [self.servers[name] for name in dict.fromkeys(names)]


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> McpConfig:
    """Read the config file at ``path``, with variables expanded from ``environ`` (the process's)."""
    where, text = read_regular(path, ConfigError, what="config file")
    from discovery._mcp.jsonc import UnterminatedComment, to_json

    try:
        plain = to_json(text)
    except UnterminatedComment as exc:
        raise ConfigError(f"{where}:{exc.line}: invalid JSON: {exc}") from None
    document = load_json(plain, where, ConfigError)
    environ = os.environ if environ is None else environ
    return parse_config(document, where=where, environ=environ, base=Path(path).absolute().parent)


def editor_variables(base: Path | None) -> dict[str, str]:
    """VS Code's and Cursor's predefined variables for a config in the directory ``base``."""
    variables = {"userHome": str(Path.home()), "pathSeparator": os.sep, "/": os.sep}
    if base is not None:
        workspace = base.parent if base.name in WORKSPACE_DIRECTORIES else base
        variables.update(workspaceFolder=str(workspace), workspaceFolderBasename=workspace.name)
    return variables


def parse_config(
    document: Any, *, where: str, environ: Mapping[str, str], base: Path | None = None
) -> McpConfig:
    """The servers of a parsed config ``document``; ``where`` names it in messages, and a relative
    ``cwd`` is taken relative to ``base``, the directory of the file (when there is one)."""
    if not isinstance(document, dict):
        raise ConfigError(f'{where}: expected a JSON object with "mcpServers" (or VS Code\'s "servers")')
    key = next((key for key in SERVER_KEYS if key in document), None)
    if key is None:
        raise ConfigError(f'{where}: no "mcpServers" object (nor VS Code\'s "servers")')
    entries = document[key]
    if not isinstance(entries, dict):
        raise ConfigError(f"{where}: {key}: expected an object of servers by name")
    servers: dict[str, ServerConfig] = {}
    skipped: dict[str, str] = {}
    always_load: set[str] = set()
    variables = _Variables(environ, editor_variables(base))
    for name, entry in entries.items():
        prefix = f"{where}: {key}.{name}"
        try:
            servers[name] = _entry(name, entry, prefix, variables, base)
            if entry.get("alwaysLoad") is True:  # checked to be a boolean by ``_entry``
                always_load.add(name)
        except ConfigError as exc:  # this entry only: the others are still served
            skipped[name] = str(exc).removeprefix(f"{prefix}: ")
    tool_filter = _tool_filter(document.get(OPTIONS_KEY, {}), where)
    return McpConfig(
        path=where,
        servers=servers,
        skipped=skipped,
        tool_filter=tool_filter,
        always_load=frozenset(always_load),
    )


def _tool_filter(options: Any, where: str) -> ToolFilter:
    if not isinstance(options, dict):
        raise ConfigError(f'{where}: {OPTIONS_KEY}: expected an object like {{"deny": ["github/delete_*"]}}')
    unknown = [key for key in options if key not in ("allow", "deny")]
    if unknown:
        raise ConfigError(f"{where}: {OPTIONS_KEY}.{unknown[0]}: unknown field (use allow and deny)")
    patterns: dict[str, tuple[str, ...]] = {}
    for key in ("allow", "deny"):
        value = options.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ConfigError(f"{where}: {OPTIONS_KEY}.{key}: expected a list of server/tool patterns")
        patterns[key] = tuple(value)
    return ToolFilter(patterns["allow"], patterns["deny"])


@dataclass(frozen=True, slots=True)
class _Variables:
    """What ``${...}`` can name: the environment, and the editors' predefined variables."""

    environ: Mapping[str, str]
    predefined: Mapping[str, str]


def _entry(name: str, entry: Any, prefix: str, variables: _Variables, base: Path | None) -> ServerConfig:
    """One server of the config, or a ``ConfigError`` saying why it cannot be used."""
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(
            f"{prefix}: a server name is letters, digits, '_', '-' and '.', starting with a letter or digit"
        )
    text = json.dumps(entry, ensure_ascii=False)
    for pattern, kind, why in _EDITOR_ONLY:
        if found := sorted(set(pattern.findall(text))):
            shown = ", ".join(f"${{{kind}:{value}}}" for value in found)
            raise ConfigError(
                f"{prefix}: it uses VS Code's {shown}, {why}; "
                "put the value in an environment variable and write ${VAR} instead"
            )
    return _server(name, entry, prefix, variables, base)


_EDITOR_ONLY = (
    (_INPUT, "input", "which tool-index cannot prompt for"),
    (_COMMAND, "command", "an editor command tool-index cannot run"),
)
"""VS Code's variables that only the editor can give a value: what ``${KIND:...}`` asks of it."""


def _server(name: str, entry: Any, prefix: str, variables: _Variables, base: Path | None) -> ServerConfig:
    if not isinstance(entry, dict):
        raise ConfigError(f"{prefix}: expected an object")
    kind = entry.get("type", "http" if "url" in entry and "command" not in entry else "stdio")
    if kind in ("sse",):
        raise ConfigError(
            f"{prefix}: type 'sse' is not supported: use a streamable HTTP endpoint (type 'http')"
        )
    if kind not in ("stdio", "http"):
        raise ConfigError(f"{prefix}: unknown type {_shown(kind)}: use 'stdio' or 'http'")
    if kind == "stdio" and "command" not in entry:
        raise ConfigError(f"{prefix}: a stdio server needs a command")
    if kind == "http" and "url" not in entry:
        raise ConfigError(f"{prefix}: an HTTP server needs a url")
    try:
        if kind == "stdio":
            stdio = _STDIO.validate_python(entry)
            return StdioServer(
                name=name,
                command=_expanded(stdio.command, prefix, "command", variables),
                args=tuple(
                    _expanded(arg, prefix, f"args[{i}]", variables) for i, arg in enumerate(stdio.args)
                ),
                env={
                    key: _expanded(value, prefix, f"env.{key}", variables) for key, value in stdio.env.items()
                },
                cwd=None
                if stdio.cwd is None
                else _directory(_expanded(stdio.cwd, prefix, "cwd", variables), base),
            )
        http = _HTTP.validate_python(entry)
    except ValidationError as exc:
        raise ConfigError(f"{prefix}: {_described(exc)}") from None
    url = _expanded(http.url, prefix, "url", variables)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{prefix}: url must start with http:// or https://")
    headers = {
        key: _expanded(value, prefix, f"headers.{key}", variables) for key, value in http.headers.items()
    }
    return HttpServer(name=name, url=url, headers=headers)


def _expanded(value: str, prefix: str, where: str, variables: _Variables) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced, and the editors' variables; an unset variable
    without default is an error (naming the variable, never a value), except ``${env:NAME}``, which
    the editors make empty."""

    def replace(match: re.Match[str]) -> str:
        from_env, variable, default = match.group(1), match.group(2), match.group(3)
        if not from_env and variable in variables.predefined:
            return variables.predefined[variable]
        found = variables.environ.get(variable, "" if from_env else None)
        if found is not None and (found or default is None):
            return found
        if default is not None:
            return default
        raise ConfigError(
            f"{prefix}: {where}: environment variable {variable} is not set "
            f"(write ${{{variable}:-default}} for a default)"
        )

    return _VARIABLE.sub(replace, value)


def _directory(cwd: str, base: Path | None) -> str:
    """A server's working directory: a relative one is taken relative to the config file's, so the
    entry means the same whichever directory the gateway is started from."""
    if base is None or Path(cwd).is_absolute():
        return cwd
    return str(base / cwd)


def _described(exc: ValidationError) -> str:
    """Each failing field and what is wrong, never the value given (it may be a secret)."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(part) for part in error["loc"])
        what = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{where}: {what}" if where else what)
    return "; ".join(parts)


def _shown(value: Any) -> str:
    """A short, printable rendering of a config value that is not a secret (a type name)."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:39] + "…"
