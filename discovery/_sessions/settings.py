"""Session settings (contract §5): the model, checked when given and when read back."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from discovery._rules import DiscoveryMode
from discovery.errors import CorruptIndex, ToolIndexError, describe_validation_error

AnswerStyle = Literal["contract", "rich"]


class SessionSettings(BaseModel):
    """How a session discovers tools (contract §5); ``requested`` names start active.

    The one place the settings are spelled: ``ToolIndex.session``, ``AsyncToolIndex.session``,
    the command line and the gateway pass them as keywords that this model checks. ``answer``
    is how a search answers: ``contract`` exactly as contract §6 says, ``rich`` the answer a
    model can act on (``discovery._sessions.answer``). A session stored before ``answer``
    existed reads back as ``contract``: the JSON it was stored as needs no migration.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    discovery_mode: DiscoveryMode = "auto"
    mcp_discovery: bool = False
    essential_override: tuple[str, ...] = ()
    default_servers: tuple[str, ...] = ()
    requested: tuple[str, ...] = ()
    answer: AnswerStyle = "contract"

    @field_validator("essential_override", "default_servers", "requested", mode="before")
    @classmethod
    def _list_of_strings(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be a list of names, not a single string")
        return value


def parsed_settings(values: dict[str, Any]) -> SessionSettings:
    """Settings given by a caller; a value of ``None`` means not given."""
    values = {key: value for key, value in values.items() if value is not None}
    try:
        return SessionSettings.model_validate(values)
    except ValidationError as exc:
        raise ToolIndexError(f"invalid session settings: {describe_validation_error(exc)}") from exc


def stored_settings(session_id: str, values: dict[str, Any]) -> SessionSettings:
    """A stored session's settings; ``CorruptIndex`` pointing to ``verify`` when they are not
    settings (the store checked them when it wrote them, so only damage gets here)."""
    try:
        return SessionSettings.model_validate(values)
    except ValidationError as exc:
        raise CorruptIndex.found(
            f"session {session_id!r}: stored settings are invalid: {describe_validation_error(exc)}"
        ) from None
