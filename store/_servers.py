"""What each MCP server in the catalog is and where its tools came from (``mcp_servers``).

A sync of a config's server records the server's fingerprint (a digest of what it is: its
transport and command and arguments, or its URL), a form of it that is safe to show, and the
host and config file that made the catalog hold this server, with the time of its latest sync.
``discovery`` decides what a sync may do with a name another config holds; this module only
reads and writes the rows, in the caller's transaction (a catalog write's, under its lock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, DateTime

from store import _driver as driver


@dataclass(frozen=True, slots=True)
class ServerOrigin:
    """One server as a config defines it, and which host's config that is."""

    name: str
    fingerprint: str
    """A SHA-256 of what the server is; equal for one server in any config on any host."""
    transport: str
    target: str
    """What the server is in words a person can compare, without secrets: the command it runs,
    or its URL without credentials, query or fragment."""
    host: str
    config: str
    """The config file's resolved path on ``host``."""

    def same_config(self, other: ServerOrigin) -> bool:
        return (self.host, self.config) == (other.host, other.config)


@dataclass(frozen=True, slots=True)
class StoredServer:
    """A server's row: the origin that made the catalog hold it, and its latest sync by any
    config holding the same server."""

    origin: ServerOrigin
    synced_at: datetime

    def as_json(self) -> dict[str, str]:
        origin = self.origin
        return {
            "transport": origin.transport,
            "target": origin.target,
            "fingerprint": origin.fingerprint,
            "host": origin.host,
            "config": origin.config,
            "synced_at": self.synced_at.isoformat(),
        }


_COLUMNS = "name, fingerprint, transport, target, host, config, synced_at"


def _stamps(connection: Connection) -> tuple[Callable[[datetime], Any], Callable[[Any], datetime]]:
    """How a time is bound and read back on this driver: as the column's type does it, in UTC
    (SQLite gives back text without an offset, PostgreSQL the connection's time zone)."""
    dialect = connection.dialect
    stamp = DateTime(timezone=True).dialect_impl(dialect)
    bind = stamp.bind_processor(dialect) or _unchanged
    load = stamp.result_processor(dialect, None) or _unchanged

    def load_in_utc(value: Any) -> datetime:
        loaded = load(value)
        assert isinstance(loaded, datetime)
        return loaded.replace(tzinfo=UTC) if loaded.tzinfo is None else loaded.astimezone(UTC)

    return bind, load_in_utc


def _unchanged(value: Any) -> Any:
    return value


class ServerReads:
    """The servers' rows."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._bind_stamp, self._load_stamp = _stamps(connection)

    def get(self, name: str) -> StoredServer | None:
        statement = f"SELECT {_COLUMNS} FROM mcp_servers WHERE name = :name"
        rows = driver.fetch(self._connection, statement, {"name": name})
        return self._stored(rows[0]) if rows else None

    def all(self) -> dict[str, StoredServer]:
        """Every server's row, by name, in name order."""
        rows = driver.fetch(self._connection, f"SELECT {_COLUMNS} FROM mcp_servers ORDER BY name")
        return {str(row[0]): self._stored(row) for row in rows}

    def _stored(self, row: Sequence[Any]) -> StoredServer:
        name, fingerprint, transport, target, host, config, synced_at = row
        origin = ServerOrigin(name, fingerprint, transport, target, host, config)
        return StoredServer(origin, self._load_stamp(synced_at))


class ServerWrites(ServerReads):
    """Writes of the servers' rows, in the caller's write transaction."""

    def record(self, origin: ServerOrigin, synced_at: datetime, *, claimed: bool) -> None:
        """``origin``'s server was synced at ``synced_at``. With ``claimed``, ``origin`` is from now
        on what the catalog's server of that name is (a first sync, a config's own change of its
        server, a take-over); otherwise only the time of its latest sync changes."""
        stamp = self._bind_stamp(synced_at)
        params = {
            "name": origin.name,
            "fingerprint": origin.fingerprint,
            "transport": origin.transport,
            "target": origin.target,
            "host": origin.host,
            "config": origin.config,
            "synced_at": stamp,
        }
        if not claimed:
            statement = "UPDATE mcp_servers SET synced_at = :synced_at WHERE name = :name"
            driver.execute(
                self._connection, statement, {"name": origin.name, "synced_at": params["synced_at"]}
            )
            return
        driver.execute(self._connection, "DELETE FROM mcp_servers WHERE name = :name", {"name": origin.name})
        driver.execute(
            self._connection,
            f"INSERT INTO mcp_servers ({_COLUMNS}) VALUES "
            "(:name, :fingerprint, :transport, :target, :host, :config, :synced_at)",
            params,
        )
