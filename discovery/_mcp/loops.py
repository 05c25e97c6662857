"""A gateway never starts itself: an entry of a config that runs a tool-index gateway of that
same config, or of any config whose gateways lead back to it, would start a chain of gateways,
each starting the next. ``sync`` and ``serve`` leave such entries out, with a warning."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from discovery._mcp.config import ConfigError, McpConfig, StdioServer, load_config

PROGRAMS = ("tool-index", "tool-index.exe", "discovery.cli", "discovery.cli.__main__", "discovery.cli._main")
"""How an entry runs tool-index: its command (by file name, as ``uvx tool-index`` or a venv's
script), or Python's ``-m`` module."""
MAX_DEPTH = 8
"""Configs followed from gateway to gateway before a chain counts as not leading back."""


def without_loops(config: McpConfig) -> McpConfig:
    """``config`` with every entry that is a gateway leading back to it skipped (``skipped``)."""
    home = _file_id(Path(config.path))
    loops = {name: why for name, server in config.servers.items() if (why := _loop(server, home)) is not None}
    if not loops:
        return config
    servers = {name: server for name, server in config.servers.items() if name not in loops}
    return dataclasses.replace(config, servers=servers, skipped={**config.skipped, **loops})


def fronted(server: StdioServer) -> Path | None:
    """The config file a stdio entry's gateway fronts, when the entry runs ``tool-index ... serve
    --config FILE``; a relative FILE is found from where the entry starts."""
    argv = [server.command, *server.args]
    start = next((i for i, arg in enumerate(argv) if Path(arg).name in PROGRAMS or arg in PROGRAMS), None)
    if start is None or "serve" not in argv[start + 1 :]:
        return None
    after = argv[argv.index("serve", start + 1) + 1 :]
    for i, arg in enumerate(after):
        if arg == "--config" and i + 1 < len(after):
            value = after[i + 1]
        elif arg.startswith("--config="):
            value = arg.partition("=")[2]
        else:
            continue
        return Path(server.cwd or os.getcwd()) / Path(value).expanduser()
    return None


def _loop(server: object, home: tuple[int, int] | str) -> str | None:
    if not isinstance(server, StdioServer) or (path := fronted(server)) is None:
        return None
    if _file_id(path) == home:
        return "it runs a tool-index gateway of this same config, which would start itself"
    if _leads_back(path, home, set(), 1):
        return f"it runs a tool-index gateway of {path}, whose gateways lead back to this config"
    return None


def _leads_back(
    path: Path, home: tuple[int, int] | str, seen: set[tuple[int, int] | str], depth: int
) -> bool:
    """Whether the config at ``path`` has a gateway entry that leads, through any number of
    configs, to ``home``; a file that cannot be read as a config leads nowhere."""
    here = _file_id(path)
    if here in seen or depth > MAX_DEPTH or not path.is_file():
        return False
    seen.add(here)
    try:
        config = load_config(path)
    except ConfigError:
        return False
    for server in config.servers.values():
        if not isinstance(server, StdioServer) or (next_path := fronted(server)) is None:
            continue
        if _file_id(next_path) == home or _leads_back(next_path, home, seen, depth + 1):
            return True
    return False


def _file_id(path: Path) -> tuple[int, int] | str:
    """What makes two paths one file: device and inode (links, symlinks), else the resolved path."""
    try:
        status = path.stat()
    except OSError:
        return str(path.absolute())
    return (status.st_dev, status.st_ino)
