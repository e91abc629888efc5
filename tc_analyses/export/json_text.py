"""Indented JSON, the text ``json.dumps(value, indent=2, sort_keys=True, default=...)`` writes.

The standard library encodes with an indent in pure Python, a generator per container and a yield
per token (30 s of a 333k-op plan's report). Without an indent it uses its C encoder: the same
tokens, which msgspec's formatter then indents as json does. JSON proper has no NaN or Infinity,
which json writes and msgspec refuses: such a value is written by a writer with one call per value
and the C escaper for strings; what that one does not know (keys that are not strings, a circular
value) it hands to ``json.dumps``, so the text never differs.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import Any, Callable

import msgspec

_INFINITY = float("inf")


def _number(value: float) -> str:
    """A float as json writes it (allow_nan: NaN and the infinities as JavaScript names them)."""
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


# Encoders by exact type, for the leaves (subclasses, an IntEnum or a str subclass, go through _encode)
_LEAVES: dict[type, Callable[[Any], str]] = {
    str: encode_basestring_ascii, int: int.__repr__, float: _number, bool: lambda b: "true" if b else "false",
    type(None): lambda _: "null"}


def dumps_compact(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(value, sort_keys=True, default=default)``: the C encoder's tokens, in json's order."""
    return json.dumps(value, sort_keys=True, default=default)


def dumps_indented(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(value, indent=2, sort_keys=True, default=default)``, faster on large values."""
    compact = dumps_compact(value, default)
    try:
        return msgspec.json.format(compact, indent=2)
    except msgspec.DecodeError:  # NaN or an infinity in the value: not JSON to msgspec
        pass
    try:
        return _encode(value, default or _unknown, "\n", 0)
    except (TypeError, ValueError, RecursionError):  # json's own errors, raised by json
        return json.dumps(value, indent=2, sort_keys=True, default=default)


def _unknown(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")  # json's words: json raises


def _encode(value: Any, default: Callable[[Any], Any], newline: str, depth: int) -> str:
    # the order of json's encoder: a str (subclasses too), the three constants, int, float, then containers
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _number(value)
    if depth > 200:  # json would find a circle (ValueError) or recurse out: let it say which
        raise RecursionError
    inner = newline + "  "
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        leaf = _LEAVES.get
        return "[" + inner + ("," + inner).join([
            encode(v) if (encode := leaf(type(v))) else _encode(v, default, inner, depth + 1)
            for v in value]) + newline + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        if not all(isinstance(key, str) for key in value):  # json's key conversions: its own text
            text: str = json.dumps(value, indent=2, sort_keys=True, default=default)
            return text.replace("\n", newline)
        leaf = _LEAVES.get
        return "{" + inner + ("," + inner).join([
            encode_basestring_ascii(key) + ": " + (encode(v) if (encode := leaf(type(v)))
                                                   else _encode(v, default, inner, depth + 1))
            for key, v in sorted(value.items())]) + newline + "}"
    return _encode(default(value), default, newline, depth + 1)
