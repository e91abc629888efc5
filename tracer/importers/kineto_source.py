"""Reading a Kineto (PyTorch profiler) Chrome-trace file: bytes to checked values.

Kineto writes ``ts``/``dur`` in microseconds with up to three decimals (ns). A double cannot
hold 16-19 significant digits, so numbers are parsed as :class:`~decimal.Decimal` and turned
into integer nanoseconds exactly. Every problem raises :class:`KinetoImportError` with the
file and a one-line message.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any, Iterable

from tracer.copy_kinds import copy_kind_of

U32_MAX = 0xFFFFFFFF
U64_MAX = 0xFFFFFFFFFFFFFFFF
_GZIP_MAGIC = b"\x1f\x8b"
_THOUSAND = Decimal(1000)


class KinetoImportError(ValueError):
    """A Kineto file that cannot be imported: names the file and says what is wrong, on one line."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())
        super().__init__(f"{self.path}: {self.problem}")


def load_document(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The top-level object and its ``traceEvents`` list (a bare JSON array is accepted too)."""
    raw = path.read_bytes()  # OSError (missing file...) goes to the caller as it is
    if raw[:2] == _GZIP_MAGIC:  # by content, not by name: a renamed file still imports
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise KinetoImportError(path, f"bad gzip data: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KinetoImportError(path, f"not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise KinetoImportError(path, f"not JSON: {exc}") from None
    except RecursionError:
        raise KinetoImportError(path, "not JSON: nested too deeply") from None
    except (ValueError, ArithmeticError) as exc:  # past Python's digit limit, or Decimal's exponent range
        raise KinetoImportError(path, f"a number the importer cannot hold: {type(exc).__name__} {exc}") from None
    if isinstance(doc, list):  # Chrome's "JSON array format"
        return {}, doc
    if not isinstance(doc, dict):
        raise KinetoImportError(path, f"the top level is a JSON {type(doc).__name__}, not an object")
    events = doc.get("traceEvents")
    if events is None:
        raise KinetoImportError(path, "no 'traceEvents' list: not a Chrome/Kineto trace")
    if not isinstance(events, list):
        raise KinetoImportError(path, f"'traceEvents' is a JSON {type(events).__name__}, not a list")
    return doc, events


def describe(index: int, event: dict[str, Any]) -> str:
    """How error messages name an event: its index, category and (shortened) name."""
    name = str(event.get("name", ""))
    if len(name) > 60:
        name = name[:57] + "..."
    return f"traceEvents[{index}] ({event.get('cat', event.get('ph', '?'))} {name!r})"


# Numbers past this magnitude are no time, id or size of a real trace. Checked before converting:
# a Decimal such as 1e999999999 is a few bytes of JSON but a billion-digit int.
MAX_MAGNITUDE = 10**24
_MAX_EXPONENT = 24


def _bounded(value: Decimal) -> bool:
    return value.is_finite() and (value.is_zero() or value.adjusted() <= _MAX_EXPONENT)


def us_to_ns(value: Any) -> int | None:
    """Microseconds (int or Decimal) as integer ns, rounded half-even past the ns; None if not a
    number or past :data:`MAX_MAGNITUDE`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000 if abs(value) <= MAX_MAGNITUDE else None
    if isinstance(value, Decimal) and _bounded(value):
        return int((value * _THOUSAND).to_integral_value(rounding=ROUND_HALF_EVEN))
    return None


def as_int(value: Any) -> int | None:
    """An integral JSON number as int (5 and 5.0 alike); None for anything else, and past
    :data:`MAX_MAGNITUDE`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_MAGNITUDE else None
    if isinstance(value, Decimal) and _bounded(value) and value == value.to_integral_value():
        return int(value)
    return None


def unsigned(value: Any, limit: int, default: int = 0) -> int:
    """`value` as an int in [0, limit], else `default` (optional numeric fields)."""
    number = as_int(value)
    return number if number is not None and 0 <= number <= limit else default


def copy_kind(name: str) -> str:
    """The ``copy_kind`` of a Kineto memcpy name: 'Memcpy HtoD (Pageable -> Device)' -> 'HtoD pageable'.

    The direction, then the host memory (pageable or pinned) when the name gives it; CUDA arrays
    count as device memory (HtoA -> HtoD); an unparsable name gives 'Unknown'. See
    :mod:`tracer.copy_kinds`.
    """
    return copy_kind_of(name)


class IdMap:
    """Maps raw ids (tids, pids, streams) to u32: valid ones stay, others get stable small ints.

    Kineto tids can be strings, negative (a truncated pthread id) or wider than 32 bits. Those
    get the smallest ints from 1 up that no valid id uses, in sorted order of their text, so
    the same file always maps the same way.
    """

    def __init__(self, raw_ids: Iterable[Any]) -> None:
        self._map: dict[Any, int] = {}
        self.remapped: dict[str, int] = {}
        invalid = set()
        for raw in raw_ids:
            number = as_int(raw)
            if number is not None and 0 <= number <= U32_MAX:
                self._map[raw] = number
            else:
                invalid.add(raw)
        used = set(self._map.values())
        candidate = 1
        for raw in sorted(invalid, key=lambda r: (type(r).__name__, str(r))):
            while candidate in used:
                candidate += 1
            self._map[raw] = candidate
            self.remapped[str(raw)] = candidate
            used.add(candidate)

    def __getitem__(self, raw: Any) -> int:
        return self._map[raw]
