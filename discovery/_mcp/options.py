"""How a gateway runs and what it serves: ``ServeOptions`` (the ``serve`` command line),
``GatewayOptions`` (what the gateway itself reads of it) and ``Served`` (the config in force and
the scope it makes, both replaced at once when the config file changes, and the tools listed
under their own names)."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from discovery._mcp.config import McpConfig
from discovery._mcp.direct import Direct
from discovery._mcp.scope import GatewayScope
from discovery._mcp.sessions import NEW_SESSION_MODE
from discovery._mcp.upstreams import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_STARTING,
    DEFAULT_TIMEOUT,
)
from discovery._rules import LOCAL_IDENTITY

DEFAULT_SESSION_CACHE = 256
"""Sessions kept in memory, the most recently used; another is read again from the database
when it is next used. Each holds its pins and a cached view: a client naming sessions at random
must not grow the process without bound."""


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """How ``serve`` runs: the session of the process, the mode of new sessions, and the rest."""

    session_id: str | None = None
    mode: str = NEW_SESSION_MODE
    expose_active: bool = False
    refresh: float | None = None
    timeout: float = DEFAULT_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    max_starting: int = DEFAULT_MAX_STARTING
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    per_client: bool = False
    """Over HTTP: no process session; a client that names none gets its own, by its connection."""
    identities: bool = False
    """Over HTTP with ``--tokens``: each request's sessions are those of the identity whose token
    it carries (qualified by the realm)."""
    identity: str = LOCAL_IDENTITY
    """Whose sessions this gateway serves without ``--tokens`` (``serve --identity``)."""
    adopt: tuple[tuple[str, str], ...] = ()
    """With ``--tokens``: the unqualified identity of each name in the file and the qualified one
    it becomes; their sessions are adopted when the gateway starts."""
    opened_by: str | None = None
    """What the sessions this gateway makes record as having opened them."""
    session_cache: int = DEFAULT_SESSION_CACHE
    watch_interval: float = 1.0
    """Seconds between two looks at the config file (when the gateway reloads it)."""


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """``tool-index serve``'s options, by the names of its parameters."""

    config_path: str
    session_id: str | None
    transport: str
    host: str
    port: int
    token: str | None
    tokens_path: str | None
    realm: str | None
    identity: str
    mode: str
    expose_active: bool
    refresh: float | None
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    analyzer: str | None
    timeout: float
    call_timeout: float
    max_starting: int
    max_result_bytes: int
    upstream_log: str | None

    def gateway(self, tokens: Mapping[str, str] | None = None) -> GatewayOptions:
        """The gateway's options: those of the same name as given, and what the transport and
        the tokens decide (``tokens``: ``--tokens``' as loaded)."""
        shared = {name: getattr(self, name) for name in _SHARED}
        realm = self.realm_name()
        config = Path(self.config_path).resolve()
        return GatewayOptions(
            **shared,
            per_client=self.transport == "http",
            identities=self.tokens_path is not None,
            adopt=tuple((name, qualified(name, realm)) for name in tokens or {}) if realm else (),
            opened_by=f"tool-index serve --config {config} on {socket.gethostname()}",
        )

    def realm_name(self) -> str | None:
        """The realm that qualifies ``--tokens``' identities: ``--realm``, else this host's name
        and the tokens file's resolved path; ``None`` without ``--tokens``."""
        if self.tokens_path is None:
            return None
        if self.realm is not None:
            return self.realm
        return f"{socket.gethostname()}:{Path(self.tokens_path).resolve()}"


def qualified(name: str, realm: str) -> str:
    """The identity of a tokens file's ``name`` on a gateway of ``realm``: gateways of one realm
    share their identities, gateways of two never do."""
    return f"{name}@{realm}"


_SHARED = [
    option.name for option in fields(GatewayOptions) if option.name in ServeOptions.__dataclass_fields__
]
"""The options the command line gives the gateway as they are."""


class Served:
    """The config a gateway serves now, and its scope: the tools of its servers that its filters
    allow. ``apply`` replaces both at once when a new version of the config file is applied."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self.refused: frozenset[str] = frozenset()
        """Servers of the config the catalog holds as another config's different server of the
        same name (their syncs are refused): their tools there are not theirs, so out of scope."""
        self.scope = _scope(config, self.refused)
        self.direct = Direct()
        """The tools listed under their own names (``alwaysLoad``, ``--mode auto``), read from the
        catalog when the gateway starts and after each sync or new config."""

    def apply(self, config: McpConfig) -> None:
        self.config = config
        self.refused &= frozenset(config.servers)
        self.scope = _scope(config, self.refused)

    def set_refused(self, refused: frozenset[str]) -> bool:
        """Serve ``refused`` servers' tools no more (and the others again); whether that changed."""
        refused &= frozenset(self.config.servers)
        if refused == self.refused:
            return False
        self.refused, self.scope = refused, _scope(self.config, refused)
        return True


def _scope(config: McpConfig, refused: frozenset[str]) -> GatewayScope:
    return GatewayScope(frozenset(config.servers) - refused, config.tool_filter)
