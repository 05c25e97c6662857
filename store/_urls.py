"""Database URLs as the user meant them, checked before anything is opened, and shown safely.

A bare string is a SQLite path (``~`` expanded) or, starting with ``file:``, a SQLite URI
filename; a string with a scheme but no ``//`` is a mistyped URL, never a path. SQLite options
are checked here, PostgreSQL ones by libpq's own parser, so a bad option is one clear error
before any connection. Credentials are hidden wherever a URL can carry one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from store.errors import DatabaseUnavailable

SECRET_OPTIONS = frozenset({"password", "sslpassword"})
"""Query options libpq reads a credential from (besides the URL's own ``user:password@``)."""
SQLITE_OPTIONS = frozenset({"timeout", "uri", "mode", "cache", "immutable", "nolock", "vfs", "psow"})
"""What a SQLite URL may set: ``timeout`` (seconds a writer waits for a lock) and, with
``uri=true`` or a ``file:`` path, SQLite's URI parameters."""
_TRUE = frozenset({"true", "1", "yes", "on"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(?!//)")
"""``name:`` without ``//``: one letter is a Windows drive, not a scheme."""
HELP = "use sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DATABASE"


def parse_url(url: str | URL) -> URL:
    """A SQLAlchemy URL for ``url``; ``DatabaseUnavailable`` for one that cannot mean a database."""
    if isinstance(url, URL):
        return _normalized(url)
    if not url.strip():
        raise DatabaseUnavailable(f"the database URL is empty; {HELP}")
    if "://" not in url:
        scheme = _SCHEME.match(url)
        if scheme and scheme.group(1).lower() != "file":
            raise DatabaseUnavailable(
                f"not a database URL: {hide_secrets(url)!r} has a scheme ({scheme.group(1)}:) but no "
                f"'//' after it; {HELP}"
            )
        url = _bare(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise DatabaseUnavailable(f"not a database URL: {hide_secrets(url)!r}; {HELP}") from exc
    return _normalized(parsed)


def _bare(path: str) -> str:
    """A bare path or SQLite URI filename as a SQLAlchemy URL."""
    if path.startswith("file:"):  # file:x.db?mode=ro: its query is SQLite's URI parameters
        return f"sqlite:///{path}{'&' if '?' in path else '?'}uri=true"
    return f"sqlite:///{os.path.expanduser(path)}"


def _normalized(parsed: URL) -> URL:
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() != "sqlite":
        return parsed
    unknown = sorted(set(parsed.query) - SQLITE_OPTIONS)
    if unknown:
        raise DatabaseUnavailable(
            f"{_shown(parsed)}: unknown SQLite option {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(SQLITE_OPTIONS))}"
        )
    database = parsed.database or ""
    if uri_mode(parsed) and not database.startswith("file:"):
        # SQLite reads a URI only from a name starting with file:; anything else is a file name.
        parsed = parsed.set(database=f"file:{os.path.expanduser(database)}")
    elif database.startswith("~"):
        parsed = parsed.set(database=os.path.expanduser(database))
    sqlite_timeout(parsed)
    return parsed


def uri_mode(url: URL) -> bool:
    """Whether a SQLite URL's path is read as a URI filename (``uri=true`` or a ``file:`` path)."""
    flag = url.query.get("uri", "false")
    value = flag[-1] if isinstance(flag, tuple) else flag
    return value.lower() in _TRUE or (url.database or "").startswith("file:")


def sqlite_timeout(url: URL) -> float | None:
    """The ``timeout`` option of a SQLite URL in seconds (``None`` when not given)."""
    raw = url.query.get("timeout")
    if raw is None:
        return None
    value = raw[-1] if isinstance(raw, tuple) else raw
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < 10**6:  # also NaN
        raise DatabaseUnavailable(
            f"{_shown(url)}: timeout={value!r} is not a number of seconds (e.g. timeout=30)"
        )
    return seconds


def check_postgres_options(url: URL, connect_args: Mapping[str, Any]) -> None:
    """Parse a PostgreSQL URL's options as libpq will, before any connection is tried."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo, timeout_from_conninfo

    options = {key: str(value) for key, value in connect_args.items() if key != "context"}
    try:
        timeout_from_conninfo(conninfo_to_dict(make_conninfo("", **options)))
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip().splitlines()[0]
        raise DatabaseUnavailable(f"{_shown(url)}: bad URL option ({reason}); fix the URL") from exc


def hide_secrets(text: str) -> str:
    """A URL that did not parse, for a message: everything from ``user:`` to the last ``@`` and
    the value of every secret option is hidden."""
    text = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*:/*[^:/@]*):.*@", r"\1:***@", text)
    names = "|".join(sorted(SECRET_OPTIONS))
    return re.sub(rf"(?i)([?&](?:{names})=)[^&#]*", r"\1***", text)


def display_url(url: str | URL) -> str:
    """The URL as people may see it: no password, in the user part or in an option."""
    return _shown(parse_url(url))


def _shown(parsed: URL) -> str:
    hidden = {key: "***" for key in parsed.query if key.lower() in SECRET_OPTIONS}
    return parsed.update_query_dict(hidden).render_as_string(hide_password=True)
