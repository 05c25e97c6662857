"""What a configured server is, as the catalog records it beside its tools: a fingerprint of its
transport and command and arguments (or its URL), a form of that safe to show, and which host's
config file syncs it.

A catalog shared by many hosts holds one server per name. Two configs that give one name to two
different servers would overwrite each other's tools at every sync, so a sync of a server the
catalog holds as another config's different server is refused (``ServerClaimed``); the config
that put a server there may change it (a new version), and ``sync --take-over`` replaces another
config's server deliberately. Secrets never go into what is shown: a stdio server is shown by its
command alone (arguments may carry a password, as a database URL does), an HTTP one by its URL
without credentials, query or fragment; the fingerprint is a digest.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from discovery._mcp.config import HttpServer, ServerConfig
from store import ServerOrigin


def fingerprint(server: ServerConfig) -> str:
    """A SHA-256 of what ``server`` is: its transport and command and arguments, or its URL. Its
    name, working directory, environment and headers are not part of it: one server keeps its
    fingerprint in any config, under any credentials."""
    if isinstance(server, HttpServer):
        what: dict[str, object] = {"transport": "http", "url": server.url}
    else:
        what = {"transport": "stdio", "command": server.command, "args": list(server.args)}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def shown_target(server: ServerConfig) -> str:
    """What ``server`` is, without secrets: its command, or its URL without credentials, query or
    fragment."""
    if not isinstance(server, HttpServer):
        return server.command
    parts = urlsplit(server.url)
    netloc = parts.hostname or ""
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def this_host() -> str:
    return socket.gethostname()


def config_path(path: str) -> str:
    """The config file as the catalog names it: its resolved path on this host."""
    return str(Path(path).resolve())


def server_origin(server: ServerConfig, config: str, *, host: str | None = None) -> ServerOrigin:
    """``server`` of the config file at ``config`` on ``host`` (this one when not given)."""
    return ServerOrigin(
        name=server.name,
        fingerprint=fingerprint(server),
        transport=server.transport,
        target=shown_target(server),
        host=this_host() if host is None else host,
        config=config_path(config),
    )
