"""Errors of the discovery layer. Messages of the search tool are exactly those of contract §6.

``ToolIndexError``, the root of every error tool-index raises (its docstring draws the whole
tree), is defined in ``store.errors``, below both layers, and exported from here with the store's
errors that ``discovery`` acts on: every module of ``discovery`` takes its errors from here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.errors import ConcurrentUpdate as ConcurrentUpdate
from store.errors import CorruptIndex as CorruptIndex
from store.errors import DatabaseUnavailable as DatabaseUnavailable
from store.errors import SessionNotFound as SessionNotFound
from store.errors import StoreError as StoreError
from store.errors import ToolIndexError as ToolIndexError  # the root, exported from here
from store.errors import ToolNotFound as ToolNotFound

if TYPE_CHECKING:
    from pydantic import ValidationError

    from store import ServerOrigin, StoredServer


class DatabaseMissing(ToolIndexError):
    """``ToolIndex.open(..., create=False)`` found no tool-index database at ``where``."""

    def __init__(self, where: str) -> None:
        super().__init__(f"no tool-index database at {where}")
        self.where = where


class UnknownToolNames(UserWarning):
    """``set_active`` was given names the catalog does not have; they were left out (contract §5).

    ``names`` lists them, in the order given."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"not in the catalog, left out of the active list: {', '.join(map(repr, names))}")
        self.names = names


class SemanticSignalOff(UserWarning):
    """An index with vectors is searched by their lexical scores alone in this process: its
    embedding model cannot be loaded here (the message says why). Searches go on."""


class UnknownAnalyzer(ToolIndexError):
    """An analyzer name that is not one of ``known``."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        super().__init__(f"unknown analyzer {name!r}; the analyzers are {', '.join(known)}")
        self.name = name
        self.known = known


class AnalyzerMismatch(ToolIndexError):
    """An index was opened asking for one analyzer while its catalog is indexed with another."""

    def __init__(self, where: str, stored: str, requested: str) -> None:
        super().__init__(
            f"the catalog at {where} is indexed with the {stored!r} analyzer, not {requested!r}; "
            f"leave the analyzer out to use it as it is, or run `tool-index reindex --analyzer {requested}` "
            "to rebuild it"
        )
        self.where = where
        self.stored = stored
        self.requested = requested


class AnalyzerOutdated(ToolIndexError):
    """The catalog's terms were made by another version of its analyzer than this release's."""

    def __init__(self, stored: str, name: str, version: int | None, current: int) -> None:
        made = f"version {version}" if version is not None else f"an unknown version ({stored!r})"
        reindex = f"`tool-index reindex --analyzer {name}`"
        if version is not None and version > current:
            advice = f"from a newer tool-index (this one has version {current}); upgrade it, or run {reindex}"
        else:
            advice = f"whose terms differ from this tool-index's version {current}; run {reindex}"
        indexed = f"the catalog is indexed with {made} of the {name!r} analyzer"
        super().__init__(f"{indexed}, {advice} to rebuild it")
        self.stored = stored
        self.name = name
        self.version = version
        self.current = current


class InvalidRecord(ToolIndexError):
    """A tool record failed validation; the message names the file, line and field."""


class ServerNameCollision(ToolIndexError):
    """A server's tool would take a catalog name another server's tool has: ``mcp__a__b__c`` is
    both server ``a``'s tool ``b__c`` and server ``a__b``'s tool ``c``."""

    def __init__(self, name: str, owner: str, owner_tool: str | None, server: str) -> None:
        super().__init__(
            f"{name} is already server {owner!r}'s tool {owner_tool!r}, so server {server!r} cannot "
            f"have it (the two servers' catalog names collide); nothing of {server!r} was written: "
            "rename one of the two servers"
        )
        self.name = name
        self.owner = owner
        self.server = server


class ServerClaimed(ToolIndexError):
    """A sync would change the tools of a server name the catalog holds as another config's
    different server (another command, arguments or URL). Nothing of the server is written; the
    config that synced the catalog's server keeps its tools."""

    def __init__(self, origin: ServerOrigin, stored: StoredServer) -> None:
        held = stored.origin
        synced = stored.synced_at.strftime("%Y-%m-%d %H:%M UTC")
        super().__init__(
            f"server {origin.name!r} of {origin.config} is not the catalog's {origin.name!r}: that one is "
            f"{held.transport} {held.target!r} (fingerprint {held.fingerprint[:12]}) of {held.config} on "
            f"host {held.host!r}, last synced {synced}; this one is {origin.transport} {origin.target!r} "
            f"(fingerprint {origin.fingerprint[:12]}). Its tools were left as they are: give this server "
            f"another name in this config, or replace the other with sync --take-over {origin.name}"
        )
        self.origin = origin
        self.stored = stored


class EmbeddingUnavailable(ToolIndexError):
    """The semantic signal cannot run: its extra is not installed, or the embedding model is not
    where it was named, or is not a sentence-embedding model tool-index can run."""


class ToolCallError(ToolIndexError):
    """The search tool refused a call; the message is what the model sees."""


class DiscoveryUnavailable(ToolCallError):
    """The session cannot run discovery (it no longer exists in the store)."""

    def __init__(self) -> None:
        super().__init__("Tool discovery is unavailable in this session.")


class DiscoveryDisabled(ToolCallError):
    """The session's effective discovery mode is ``off``."""

    def __init__(self) -> None:
        super().__init__(
            "Tool discovery is disabled. Enable tools.discoveryMode or mcp.discoveryMode "
            "to use search_tool_bm25."
        )


class EmptyQuery(ToolCallError):
    """The query is missing or blank."""

    def __init__(self) -> None:
        super().__init__("Query is required and must not be empty.")


class QueryNotText(ToolCallError):
    """The query is given but is not a string (a number, a list…); the message names its type."""

    def __init__(self, json_type: str) -> None:
        super().__init__(f"Query must be a string, not {json_type}.")


class InvalidLimit(ToolCallError):
    """The limit is not a positive integer."""

    def __init__(self) -> None:
        super().__init__("Limit must be a positive integer.")


class QueryWithoutTerms(ToolCallError):
    """The query has no letter or number, so it has no tokens."""

    def __init__(self) -> None:
        super().__init__("Query must contain at least one letter or number.")


class InvalidParams(ToolCallError):
    """The call's params cannot be kept as JSON: nested too deeply, or containing themselves."""


def describe_validation_error(exc: ValidationError) -> str:
    """One line a person can act on: each failing field and what is wrong with it."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "record"
        what = error["msg"]
        if error["type"] == "value_error" and "ctx" in error:
            what = str(error["ctx"]["error"])  # our validators' words, without "Value error, "
        parts.append(f"{where}: {what}")
    return "; ".join(parts)
