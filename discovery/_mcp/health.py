"""The catalog database as the gateway finds it. An outage (the server unreachable, the file
unreadable, the database locked past the busy timeout) is said on stderr once when the first
request fails and once when one succeeds again, however many fail meanwhile; the client of each
failed request is told what failed and to retry, never where the database is. Recovery needs
nothing: the next request that reaches the database ends the outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from discovery.errors import ConcurrentUpdate, DatabaseUnavailable, StoreError

OUTAGES = (DatabaseUnavailable, ConcurrentUpdate)
"""The store errors that mean the database cannot be used now, and may be again soon."""


def is_outage(error: BaseException) -> bool:
    return isinstance(error, OUTAGES)


def told_to_client(error: StoreError) -> str:
    """What a client whose request failed on the database is told: what failed and what to do,
    without the database's URL or path (the gateway's stderr has them)."""
    if isinstance(error, ConcurrentUpdate):
        return (
            "The gateway's catalog database is busy (another writer holds it), so nothing was done: "
            "try again in a moment."
        )
    if isinstance(error, DatabaseUnavailable):
        return (
            "The gateway's catalog database is unreachable right now, so nothing was done: try again "
            "in a moment."
        )
    what = (type(error).__doc__ or type(error).__name__).strip().splitlines()[0]
    return f"The gateway's catalog database refused this request, so nothing was done: {what}"


class DatabaseHealth:
    """Whether the database answered the last request, and the lines that say when that changes."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self.down_since: float | None = None
        """When the outage in progress began (``time.monotonic()``); ``None``: none is."""
        self._last_refusal = ""

    def failed(self, error: StoreError) -> None:
        """A request failed on the database: an outage starts, unless one is in progress; any
        other refusal (read-only, full) is said unless it was the last one said."""
        if not is_outage(error):
            if str(error) != self._last_refusal:
                self._last_refusal = str(error)
                self._say(f"the catalog database refused a request: {error}")
            return
        if self.down_since is None:
            self.down_since = time.monotonic()
            self._say(
                f"the catalog database cannot be used ({error}); requests get an error saying so "
                "until it answers again"
            )

    def answered(self) -> None:
        """A request reached the database: an outage in progress has ended."""
        if self.down_since is not None:
            lasted = time.monotonic() - self.down_since
            self.down_since = None
            self._say(f"the catalog database answers again, after {lasted:.1f} s")
