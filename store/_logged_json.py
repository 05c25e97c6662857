"""Values as the store's JSON columns hold them, encoded fast: every value ``store`` keeps as JSON
is encoded here.

The session log stores JSON every backend accepts (what JSON cannot spell is replaced), and
compares values in the form they read back in (what a retry is checked against): ``json_text``,
``plain_json_text``, ``same_logged``. The catalog keeps a record's values exactly instead, since
the record's digest covers them and ``verify`` recomputes it from what is stored:
``column_json``."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from store._sql import UNSTORABLE


def storable(value: Any) -> Any:
    """A JSON value every backend accepts: NUL and lone surrogates become U+FFFD, non-finite
    numbers and other non-JSON values their ``repr``."""
    if isinstance(value, str):
        return UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {storable(_key_text(key)): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return storable(repr(value))


def _key_text(key: Any) -> str:
    """A mapping key as JSON spells it (``true``, ``1.5``, ``NaN``), else its ``str``."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return str(key)


def json_text(value: Any) -> str:
    """``value`` made ``storable`` and encoded as compact JSON, the way the JSON columns take it.

    Most values need no change: they are encoded first and walked only when the text shows a
    NUL, a lone surrogate or a value JSON refuses."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        if "\\u0000" not in text:
            text.encode("utf-8")  # raises on a lone surrogate
            return text
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        pass
    return json.dumps(storable(value), ensure_ascii=False, separators=(",", ":"))


def logged_value(value: Any) -> Any:
    """``value`` as the log gives it back once stored: NUL and lone surrogates as U+FFFD, NaN
    and infinities as text, tuples as lists, keys as text."""
    return json.loads(plain_json_text(value))


def same_logged(stored: Any, value: Any) -> bool:
    """Whether ``value``, logged now, would read back as ``stored`` (what the log gave back).

    Both sides are compared in their logged form, so what the store had to change (a NUL, a
    lone surrogate, NaN) does not make a retry differ from its first call. Unlike Python's
    ``==`` this tells ``true`` from ``1`` (JSON does); ``1`` and ``1.0`` are one JSON number."""
    return _canonical(logged_value(stored)) == _canonical(logged_value(value))


def _canonical(value: Any) -> str:
    return json.dumps(_numbers_as_json(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _numbers_as_json(value: Any) -> Any:
    """Integral floats as integers, so that ``5.0`` and ``5`` spell alike (their value is one)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _numbers_as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numbers_as_json(item) for item in value]
    return value


_PLAIN = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def plain_json_text(value: Any) -> str:
    """A text that reads back as the value ``json_text`` stores, for what every search call
    logs: its params, its details and the session's lists.

    These go to ``orjson`` (a tenth of the standard encoder's time); it may spell a float
    differently (``1e16`` for ``1e+16``), never another value. Whatever it would store
    otherwise goes to ``json_text``: a type it refuses (non-text keys, subclasses, integers past
    64 bits), NUL, a lone surrogate, and any ``null`` (how it writes NaN)."""
    try:
        text = orjson.dumps(value, option=_PLAIN).decode()
    except TypeError:  # orjson.JSONEncodeError: another type, a lone surrogate, a huge integer
        return json_text(value)
    if "\\u0000" in text or "null" in text:
        return json_text(value)
    return text


def column_json(value: Any) -> str:
    """The text a catalog JSON column (``schema_keys``, ``input_schema``) stores for ``value``:
    it reads back as the value the standard encoder's text for it does, NaN, NUL and lone
    surrogates included.

    ``orjson`` takes a fifth of the time on an import's schemas; it may spell a number
    differently (``1e16`` for ``1e+16``) and keeps non-ASCII text as it is, never another value.
    What it would change or refuses goes the standard way: non-finite numbers (which it writes
    as ``null``, so any ``null`` does), lone surrogates, non-text keys, integers past 64 bits."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value)
    return json.dumps(value) if "null" in text else text
