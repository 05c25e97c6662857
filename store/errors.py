"""Errors raised by the store; each names the problem and, where there is one, the fix.

The root of every error tool-index raises, ``ToolIndexError``, is defined here, at the bottom of
the layers, so that the store's errors derive from it without the store importing ``discovery``;
``discovery.errors`` exports it too, and users import it from ``discovery``.
"""

from __future__ import annotations


class ToolIndexError(Exception):
    """Base class of every error tool-index raises on purpose; ``except ToolIndexError`` catches
    them all. Each names the problem and, where there is one, the fix::

        ToolIndexError
        ├── StoreError                      store.errors: the database and what it holds
        │   ├── DatabaseUnavailable
        │   ├── SchemaOutdated
        │   ├── SchemaTooNew
        │   ├── ReadOnlyDatabase
        │   ├── StorageFull
        │   ├── ToolNotFound
        │   ├── SessionNotFound
        │   ├── ConcurrentUpdate
        │   └── CorruptIndex
        ├── DatabaseMissing                 discovery.errors
        ├── UnknownAnalyzer                 discovery.errors
        ├── AnalyzerMismatch                discovery.errors
        ├── AnalyzerOutdated                discovery.errors
        ├── InvalidRecord                   discovery.errors
        ├── ServerNameCollision             discovery.errors: two servers' tools, one catalog name
        ├── ServerClaimed                   discovery.errors: one server name, two configs' servers
        ├── EmbeddingUnavailable            discovery.errors: no model for the semantic signal
        ├── ToolCallError                   discovery.errors: the search tool refused a call
        │   ├── DiscoveryUnavailable
        │   ├── DiscoveryDisabled
        │   ├── EmptyQuery
        │   ├── QueryNotText
        │   ├── InvalidLimit
        │   ├── QueryWithoutTerms
        │   └── InvalidParams
        ├── UnreadableCatalog               discovery._catalog.formats
        ├── UnreadableSessionFile           discovery._sessions.host_files
        ├── NotInCorpus                     discovery._diagnostics.explain
        ├── QueryFileError                  discovery._quality.evaluate
        ├── ConfigError                     discovery._mcp.config
        ├── UnterminatedComment             discovery._mcp.jsonc
        ├── UpstreamError                   discovery._mcp.failures
        ├── UnknownServer                   discovery._mcp.names
        ├── UnsafeBind                      discovery._mcp.serve
        ├── CannotListen                    discovery._mcp.serve
        ├── TokensError                     discovery._mcp.serve
        └── AdapterError                    discovery.adapters.errors
            ├── TooManyTools
            └── WireNameCollision

    ``discovery.errors.UnknownToolNames`` and ``discovery.errors.SemanticSignalOff`` are warnings
    (``UserWarning``), not errors: the call that issues one goes on. ``tests/test_errors.py``
    checks this drawing against the classes."""


class StoreError(ToolIndexError):
    """Base class of every error the store raises on purpose."""


class DatabaseUnavailable(StoreError):
    """The database cannot be opened: not a database, unreadable, or the server is unreachable."""


class SchemaOutdated(StoreError):
    """The database schema is older than this version of tool-index: run ``tool-index db upgrade``."""


class SchemaTooNew(StoreError):
    """The database was written by a newer tool-index: upgrade tool-index to use it."""


class ReadOnlyDatabase(StoreError):
    """A write was refused because the database file or server is read-only."""


class StorageFull(StoreError):
    """A write did not fit: the disk (or the database's size limit) is full. Nothing was written."""


class ToolNotFound(StoreError):
    """No tool with that name is in the catalog."""


class SessionNotFound(StoreError):
    """No session with that id is in the store."""


class ConcurrentUpdate(StoreError):
    """Another writer kept the database busy for longer than the retry budget."""


class CorruptIndex(StoreError):
    """Stored index data cannot be read back (``tool-index verify`` shows what is wrong).

    ``what`` names the damage alone, for ``verify``'s own report; the message adds the pointer
    to ``verify`` that every other command prints."""

    def __init__(self, message: str, what: str | None = None) -> None:
        super().__init__(message)
        self.what = what or message

    @classmethod
    def found(cls, what: str) -> CorruptIndex:
        """The error of a read that found ``what`` damaged: it says so and points to ``verify``."""
        return cls(DAMAGED.format(what=what), what)


DAMAGED = "the database is damaged ({what}); run `tool-index verify` to see every problem"
"""What a read that finds stored data it cannot use says."""
