"""Reading a Kineto (PyTorch profiler) Chrome-trace file: bytes to checked values.

Kineto writes ``ts``/``dur`` in microseconds with up to three decimals (ns). A double cannot
hold 16-19 significant digits, so numbers are parsed as :class:`~decimal.Decimal` and turned
into integer nanoseconds exactly. Every problem raises :class:`KinetoImportError` with the
file and a one-line message.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import re
import zlib
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

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


_CHUNK = 1 << 20  # bytes read at a time
_SPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_RETRY_MARGIN = 16  # a parse error this close to the end of the text read so far may be a cut value


class KinetoFile:
    """A Kineto file read as a stream, one trace event at a time.

    :meth:`events` reads the file again at every call (gzip recognised by content) and yields the
    entries of ``traceEvents`` one by one; only the event being converted is ever a Python object.
    The top-level object's other members (``deviceProperties``, ``baseTimeNanoseconds``...) land
    in :attr:`doc` as the reading passes them, so :attr:`doc` is complete once a read is done. A
    bare JSON array (Chrome's "JSON array format") is accepted too.
    """

    def __init__(self, path: Path, advance: Callable[[int], None] | None = None) -> None:
        """`advance(n)`: told the bytes of the file (as stored, compressed or not) each read takes."""
        self.path = path
        self.doc: dict[str, Any] = {}
        self._advance = advance

    def events(self) -> Iterator[Any]:
        text = _Text(self.path, self._advance)
        try:
            first = text.peek()
            if first == "[":
                text.take()
                yield from text.items()
            elif first == "{":
                yield from self._members(text)
            else:
                value = text.value()
                raise KinetoImportError(self.path, f"the top level is a JSON {type(value).__name__}, not an object")
            if text.peek():
                raise text.error("Extra data")
        finally:  # also when the caller stops early (a conversion error)
            text.close()

    def _members(self, text: "_Text") -> Iterator[Any]:
        text.take()
        found = False
        if text.peek() == "}":
            text.take()
        else:
            while True:
                if text.peek() != '"':
                    raise text.error("Expecting property name enclosed in double quotes")
                key = text.value()
                if text.peek() != ":":
                    raise text.error("Expecting ':' delimiter")
                text.take()
                if key == "traceEvents":
                    if found:
                        raise KinetoImportError(self.path, "two 'traceEvents' members")
                    found = True
                    if text.peek() != "[":
                        events = text.value()
                        raise KinetoImportError(self.path, f"'traceEvents' is a JSON {type(events).__name__}, not a list")
                    text.take()
                    yield from text.items()
                else:
                    self.doc[key] = text.value()
                if text.peek() == ",":
                    text.take()
                    continue
                if text.peek() == "}":
                    text.take()
                    break
                raise text.error("Expecting ',' delimiter")
        if not found:
            raise KinetoImportError(self.path, "no 'traceEvents' list: not a Chrome/Kineto trace")


class _Text:
    """The file's text, decoded as it is read, with the JSON values parsed one at a time."""

    def __init__(self, path: Path, advance: Callable[[int], None] | None) -> None:
        self.path = path
        self._raw = open(path, "rb")  # OSError (missing file...) goes to the caller as it is
        gzipped = self._raw.read(2) == _GZIP_MAGIC
        self._raw.seek(0)
        self._file: io.BufferedIOBase = gzip.GzipFile(fileobj=self._raw, mode="rb") if gzipped else self._raw
        self._advance, self._stored = advance, 0  # bytes of the file read so far, as stored
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._bytes_read = 0
        self._dropped = 0  # characters before `buf`
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._decode = json.JSONDecoder(parse_float=Decimal).raw_decode

    def _more(self) -> bool:
        """Read the next chunk into the buffer; False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self._file.read(_CHUNK)
        except (EOFError, OSError, zlib.error) as exc:
            raise KinetoImportError(self.path, f"bad gzip data: {exc}") from None
        try:
            text = self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise KinetoImportError(self.path, f"not UTF-8 text (byte {self._bytes_read + exc.start})") from None
        self._bytes_read += len(data)
        if self._advance is not None:
            stored = self._raw.tell()
            self._advance(stored - self._stored)
            self._stored = stored
        if not data:
            self.eof = True
            self.close()
        self._dropped += self.pos
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return True

    def close(self) -> None:
        self._file.close()
        self._raw.close()  # a GzipFile given a file object leaves it open

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), without taking it."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos:self.pos + 1]

    def take(self) -> None:
        self.pos += 1

    def value(self) -> Any:
        """The JSON value that starts at the next character."""
        if self.pos >= len(self.buf) or self.buf[self.pos] in " \t\n\r":
            self.peek()
        while True:
            try:
                value, end = self._decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - _RETRY_MARGIN or exc.msg.startswith("Unterminated string")
                if cut and self._more():
                    continue
                raise KinetoImportError(self.path, f"not JSON: {exc.msg} at character {self._dropped + exc.pos}") from None
            except RecursionError:
                raise KinetoImportError(self.path, "not JSON: nested too deeply") from None
            except (ValueError, ArithmeticError) as exc:  # past Python's digit limit, or Decimal's exponent range
                raise KinetoImportError(self.path, f"a number the importer cannot hold: {type(exc).__name__} {exc}") from None
            if end >= len(self.buf) - _RETRY_MARGIN and self._more():
                continue  # a number may go on in the next chunk ("1." then "5")
            self.pos = end
            return value

    def items(self) -> Iterator[Any]:
        """The values of an array whose "[" was just taken, through its "]"."""
        if self.peek() == "]":
            self.take()
            return
        while True:
            yield self.value()
            found = _SEPARATOR.match(self.buf, self.pos)  # the usual case, without a call per character
            if found is not None and found.end() < len(self.buf):
                self.pos = found.end()
                continue
            following = self.peek()
            self.take()
            if following == "]":
                return
            if following != ",":
                self.pos -= 1
                raise self.error("Expecting ',' delimiter")

    def error(self, problem: str) -> KinetoImportError:
        where = "at the end of the file" if self.pos >= len(self.buf) else f"at character {self._dropped + self.pos}"
        return KinetoImportError(self.path, f"not JSON: {problem} {where}")


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
    if isinstance(value, Decimal) and value.is_finite() and (value.adjusted() <= _MAX_EXPONENT or value.is_zero()):
        ns = value.scaleb(3)  # exact: only the exponent moves
        whole = int(ns)
        if ns == whole:  # the usual case: no digits past the ns
            return whole
        return int(ns.to_integral_value(rounding=ROUND_HALF_EVEN))
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

    def inverse(self) -> dict[int, Any]:
        """Mapped id -> the raw id it stands for (the map is one to one)."""
        return {mapped: raw for raw, mapped in self._map.items()}
