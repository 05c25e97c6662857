"""The digests of a tool record: the one ``tools.content_hash`` stores (equal digests mean an
upsert has nothing to rewrite), and the one a gateway pins an activated tool by.

Stored digests must stay comparable with the ones computed now, so both encodings here are
fixed: changing ``record_digest`` means a migration that recomputes every stored digest, as
revision 0005 did when it replaced ``json_digest`` in ``tools.content_hash``; ``json_digest`` is
in the session logs' pins as well, which no migration rewrites.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

_SORTED = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""Sorted keys, and only JSON's own types: anything else goes to the standard encoder."""
_FAST = b"o"
_STANDARD = b"j"


def record_digest(fields: Mapping[str, Any], input_schema: Any) -> str:
    """SHA-256 of a record: its ``input_schema`` and its other ``fields`` (text, ``None`` or
    lists of text), each encoded with sorted keys and marked with the encoder used.

    ``orjson`` encodes most records in a fraction of the standard encoder's time. Where it would
    lose a distinction or refuses a value, that part is encoded by the standard encoder. It
    writes NaN and infinities as ``null``, so a schema holding any ``null`` qualifies (the other
    fields hold no numbers: their ``null`` is ``None``); it refuses lone surrogates, integers
    past 64 bits and keys that are not text. The mark keeps a part's two encodings apart, and a
    newline (never raw in either's output) keeps the two parts apart.
    """
    head = _encoded(fields, allow_null=True)
    schema = _encoded(input_schema, allow_null=False)
    return hashlib.sha256(head + b"\n" + schema).hexdigest()


def _encoded(value: Any, *, allow_null: bool) -> bytes:
    try:
        text = orjson.dumps(value, option=_SORTED)
    except TypeError:  # orjson.JSONEncodeError
        pass
    else:
        if allow_null or b"null" not in text:
            return _FAST + text
    return _STANDARD + json.dumps(value, sort_keys=True, ensure_ascii=True).encode("ascii")


def json_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of the whole record's standard JSON, keys sorted: the digest a gateway pins an
    activated tool by (``discovery._mcp.sessions``), and ``tools.content_hash`` before revision
    0005 (which a downgrade computes again)."""
    canonical = json.dumps(dict(record), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
