"""When what one identity taught ranks for the others: the rule's numbers, without arithmetic
over arrays (the command line reads them without loading numpy).

A (term, tool) pair is shared once at least K distinct identities taught it (``min_identities``, a
property of the index), 2K for a tool whose MCP annotations say ``destructiveHint: true``: words
that lead to a tool that may destroy need more agreement before they steer anyone else to it.
"""

from __future__ import annotations

MIN_IDENTITIES = 2
"""K of a new index: the distinct identities a (term, tool) needs before it ranks for others."""
DESTRUCTIVE_FACTOR = 2
"""A tool whose MCP annotations say ``destructiveHint: true`` needs this many times K."""


def sharing_threshold(min_identities: int, destructive: bool) -> int:
    """The distinct identities a (term, tool) needs to rank for others: K, or 2K for a
    destructive tool."""
    return min_identities * DESTRUCTIVE_FACTOR if destructive else min_identities


def shared_tf(identities: int, min_identities: int, destructive: bool) -> int:
    """A pair's shared count: the identities that taught it, once they reach the threshold, else 0."""
    return identities if identities >= sharing_threshold(min_identities, destructive) else 0
