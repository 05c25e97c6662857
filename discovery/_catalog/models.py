"""The tool record of contract §2 as a pydantic model, with the checks every stored value passes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from discovery._params import MAX_KEY_BYTES, UNSTORABLE, too_long, utf8_size
from discovery._rules import MCP_PREFIX, SEARCH_TOOL_NAME
from discovery._text.collation import utf16_sort_key
from discovery._text.tokenizer import tokenize

SUMMARY_UTF16_UNITS = 200
"""The reference indexes the first 200 UTF-16 code units of a description [fixed]."""

Source = Literal["builtin", "mcp", "extension", "custom"]
LoadMode = Literal["essential", "discoverable", "none"]
# NUL and lone surrogates (``UNSTORABLE``) tokenize as separators, as U+FFFD does, so replacing
# them keeps every UTF-16 length and every ranking unchanged.


MCP_META_KEYS = ("title", "annotations", "outputSchema", "icons")
"""What an MCP server may say of a tool beyond the record, kept as it said it."""

MAX_SCHEMA_DEPTH = 128
"""Deeper input schemas are refused: JSON encoders recurse, and no real tool nests this deep."""


_CONTAINERS = (dict, list)


def nesting_depth(value: Any) -> int:
    """How many objects and lists nest inside ``value``: level by level, without recursion (safe
    on hostile input), and stopping once past ``MAX_SCHEMA_DEPTH``."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = -1
    while level and depth <= MAX_SCHEMA_DEPTH:
        depth += 1
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, _CONTAINERS)
        ]
    return max(depth, 0)


def storable_text(text: str) -> str:
    if text.isascii() and "\x00" not in text:  # the common case, without the regex
        return text
    return UNSTORABLE.sub("\ufffd", text)


def utf16_prefix(text: str, units: int) -> str:
    """The first ``units`` UTF-16 code units of ``text``, as JavaScript's ``slice`` cuts them.

    A cut through a surrogate pair leaves a lone high surrogate, which the tokenizer treats as a
    separator, as the reference does.
    """
    encoded = text.encode("utf-16-le", "surrogatepass")
    if len(encoded) <= units * 2:
        return text
    return encoded[: units * 2].decode("utf-16-le", "surrogatepass")


def indexable(text: str, *, whole: bool) -> None:
    """Refuse text the store could not index: longer than ``MAX_KEY_BYTES`` (``whole``: a name
    indexed as it is), or holding a word that is. A usual field costs one length check."""
    if not too_long(text):
        return
    if whole:
        raise ValueError(f"must be at most {MAX_KEY_BYTES} bytes in UTF-8, not {utf8_size(text)}")
    for token in tokenize(text):  # a word can grow as it is normalized
        if too_long(token):
            raise ValueError(
                f"holds a word of {utf8_size(token)} bytes in UTF-8 ({token[:16]!r}...); "
                f"the store indexes words of at most {MAX_KEY_BYTES}"
            )


def schema_keys_of(schema: Any) -> list[str]:
    """Top-level ``properties`` keys of a JSON schema, sorted; ``[]`` for anything else."""
    if not isinstance(schema, dict):
        return []
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    return sorted(properties, key=utf16_sort_key)


class ToolRecord(BaseModel):
    """One tool of the catalog (contract §2), with every default resolved."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)

    name: str = Field(min_length=1)
    label: str = ""
    description: str = ""
    summary: str = ""
    source: Source = "builtin"
    server_name: str | None = None
    mcp_tool_name: str | None = None
    schema_keys: tuple[str, ...] = ()
    input_schema: dict[str, Any] | None = None
    load_mode: LoadMode = "discoverable"
    mcp_meta: dict[str, Any] | None = None
    """What the tool's MCP server said of it beyond the record (``MCP_META_KEYS``); never indexed.
    An empty object is none."""

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        name = data.get("name")
        if isinstance(name, str):
            if data.get("label") in (None, ""):
                data["label"] = name
            if data.get("source") is None:
                data["source"] = "mcp" if name.startswith(MCP_PREFIX) else "builtin"
        if data.get("description") is None:
            data["description"] = ""
        if data.get("summary") is None and isinstance(data["description"], str):
            data["summary"] = utf16_prefix(data["description"], SUMMARY_UTF16_UNITS)
        if data.get("schema_keys") is None:
            data["schema_keys"] = schema_keys_of(data.get("input_schema"))
        if data.get("load_mode") is None:
            data["load_mode"] = "discoverable"
        return data

    @field_validator("name")
    @classmethod
    def _usable_name(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("must not be blank")
        if UNSTORABLE.search(name):
            raise ValueError("must not contain NUL or unpaired surrogate characters")
        indexable(name, whole=True)
        if name == SEARCH_TOOL_NAME:
            # The host is handed the search tool itself under this name; a record of that name
            # would replace its description and schema.
            raise ValueError(f"{SEARCH_TOOL_NAME!r} is the name of the search tool itself; rename the tool")
        return name

    @field_validator("label", "description", "summary", "server_name", "mcp_tool_name")
    @classmethod
    def _storable(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None:
            return None
        # The description is indexed through the summary only; a label left out is the name,
        # so when the name is refused the label is not refused again.
        if info.field_name != "description" and (info.field_name != "label" or "name" in info.data):
            indexable(text, whole=info.field_name == "server_name")
        return storable_text(text)

    @field_validator("input_schema")
    @classmethod
    def _shallow_enough(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None and nesting_depth(schema) > MAX_SCHEMA_DEPTH:
            raise ValueError(f"nests deeper than {MAX_SCHEMA_DEPTH} levels")
        return schema

    @field_validator("mcp_meta")
    @classmethod
    def _known_meta(cls, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        if not meta:
            return None
        unknown = sorted(key for key in meta if key not in MCP_META_KEYS)
        if unknown:
            raise ValueError(
                f"holds {', '.join(map(repr, unknown))}: only {', '.join(MCP_META_KEYS)} are kept"
            )
        if nesting_depth(meta) > MAX_SCHEMA_DEPTH:
            raise ValueError(f"nests deeper than {MAX_SCHEMA_DEPTH} levels")
        return meta

    @field_validator("schema_keys")
    @classmethod
    def _sorted_keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            indexable(key, whole=False)
        return tuple(sorted((storable_text(key) for key in keys), key=utf16_sort_key))

    @property
    def is_mcp(self) -> bool:
        return self.name.startswith(MCP_PREFIX)
