"""Session and call ids: text the store can keep and match exactly."""

from __future__ import annotations

from discovery.errors import ToolIndexError
from store import sessions


def checked_id(value: object, what: str, *, blank: bool = False) -> str:
    """A session or call id the store can keep and match exactly: text, with no NUL and no lone
    surrogate (no backend stores those as given), and not blank unless ``blank``."""
    if not isinstance(value, str):
        raise ToolIndexError(f"a {what} must be text, not {type(value).__name__}")
    if not blank and not value.strip():
        raise ToolIndexError(f"a {what} must not be blank")
    if sessions.storable(value) != value:
        raise ToolIndexError(f"a {what} must not contain NUL characters or lone surrogates: {value!r}")
    return value
