"""Kineto files decoded in chunks by msgspec: typed events, times as exact integer ns in arrays.

The fast path of the importer (:mod:`tracer.importers.kineto_columns`). It reads the file once,
in blocks, and decodes the ``traceEvents`` array a chunk of whole events at a time into typed
structs that keep only the fields the conversion reads (other keys are skipped in C, never made
into Python objects). Times stay as the bytes the file has and become ns with array arithmetic.

It accepts only what it can decode without doubt. Anything else (a syntax error, a value of an
odd type, a number with an exponent or more than three decimals, an event bigger than the
buffer) raises :class:`NotFast`, and the importer reads the file with the checked per-event path
(:mod:`tracer.importers.kineto_convert`), which gives the exact error or result. A chunk boundary
is proven, not guessed: ``[`` + bytes + ``]`` decodes as a list of objects only when the bytes
end at the end of an event of the top-level array (a cut inside a string or a nested value
leaves the text unbalanced).
"""

from __future__ import annotations

import codecs
import gzip
import re
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

import msgspec
import numpy as np

_GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 4 << 20  # bytes decoded at a time: the decoded structs of one block are all that is held
_MAX_HEAD = 64 << 20  # the members before traceEvents are small in every Kineto file
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SPACE = b" \t\n\r"
UNSET = msgspec.UNSET


class NotFast(Exception):
    """The fast path declines this file; the checked path reads it (and names any problem)."""


def _arg(name: str) -> Any:
    return msgspec.field(default=UNSET, name=name)


class Args(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` members the conversion reads; UNSET where the event lacks one."""

    correlation: Any = UNSET
    stream: Any = UNSET
    device: Any = UNSET
    name: Any = UNSET  # a metadata event's name
    scope: Any = _arg("Module Hierarchy")
    dims: Any = _arg("Input Dims")
    types: Any = _arg("Input type")
    group: Any = _arg("Process Group Name")
    group_size: Any = _arg("Group size")
    elements: Any = _arg("In msg nelems")
    dtype: Any = UNSET
    sync_kind: Any = _arg("cuda_sync_kind")
    wait_on_stream: Any = UNSET
    wait_record: Any = _arg("wait_on_cuda_event_record_corr_id")
    grid: Any = UNSET
    block: Any = UNSET
    registers: Any = _arg("registers per thread")
    shared_memory: Any = _arg("shared memory")
    blocks_per_sm: Any = _arg("blocks per SM")
    warps_per_sm: Any = _arg("warps per SM")
    occupancy: Any = _arg("est. achieved occupancy %")
    bytes: Any = UNSET  # a copy's or set's size
    gbps: Any = _arg("memory bandwidth (GB/s)")  # a copy's or set's rate, on its exact duration
    from_device: Any = _arg("fromDevice")
    to_device: Any = _arg("toDevice")
    delta: Any = _arg("Bytes")  # a [memory] event's
    device_type: Any = _arg("Device Type")
    device_id: Any = _arg("Device Id")
    addr: Any = _arg("Addr")
    total: Any = _arg("Total Allocated")


_NO_ARGS = Args()
_MISSING = msgspec.Raw(b"")


class Event(msgspec.Struct, frozen=True, gc=False):
    """One trace event: its members as the file has them; ``ts``/``dur`` as their JSON text."""

    ph: Any = UNSET
    cat: Any = UNSET
    name: Any = UNSET
    pid: Any = UNSET
    tid: Any = UNSET
    id: Any = UNSET
    ts: msgspec.Raw = _MISSING
    dur: msgspec.Raw = _MISSING
    args: Args = _NO_ARGS


# An event whose "args" is not an object must go the checked way: it reads such args as {}.
_EVENTS = msgspec.json.Decoder(list[Event], float_hook=Decimal)
_ANY = msgspec.json.Decoder(float_hook=Decimal)


class Blocks:
    """The file's bytes (gunzipped when gzip, recognised by content), a block at a time."""

    def __init__(self, path: Path, advance: Callable[[int], None] | None) -> None:
        self._raw = open(path, "rb")
        gzipped = self._raw.read(2) == _GZIP_MAGIC
        self._raw.seek(0)
        self._file: Any = gzip.GzipFile(fileobj=self._raw, mode="rb") if gzipped else self._raw
        self._advance, self._stored = advance, 0
        self.eof = False
        # msgspec checks UTF-8 only in the strings it decodes, not in those it skips
        self._utf8 = codecs.getincrementaldecoder("utf-8")()

    def read(self) -> bytes:
        if self.eof:
            return b""
        try:
            data = self._file.read(_BLOCK)
        except (EOFError, OSError, zlib.error):
            raise NotFast("bad gzip data") from None
        if self._advance is not None:
            stored = self._raw.tell()
            self._advance(stored - self._stored)
            self._stored = stored
        self.eof = not data
        try:
            if not data.isascii() or self._utf8.getstate()[0]:  # ASCII needs no decoding to be valid
                self._utf8.decode(data, final=self.eof)
            elif self.eof:
                self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise NotFast("not UTF-8 text") from None
        return data

    def close(self) -> None:
        self._file.close()
        self._raw.close()


def _skip_space(buf: bytes, pos: int) -> int:
    while pos < len(buf) and buf[pos] in _SPACE:
        pos += 1
    return pos


def read_events(path: Path, doc: dict[str, Any], advance: Callable[[int], None] | None = None
                ) -> Iterator[list[Event]]:
    """The events of ``traceEvents`` in chunks, in file order; the top level's other members go
    into `doc` (complete once the iterator is exhausted). Raises :class:`NotFast`, or OSError."""
    blocks = Blocks(path, advance)
    try:
        buf, bare = _head(blocks, doc)
        after_comma = False
        while True:
            pos = _skip_space(buf, 0)
            while pos == len(buf) and not blocks.eof:
                buf = buf[pos:] + blocks.read()
                pos = _skip_space(buf, 0)
            if buf[pos:pos + 1] == b"]":
                if after_comma:
                    raise NotFast("a comma before the ']'")
                _tail(blocks, buf[pos + 1:], doc, bare)
                return
            chunk, buf, after_comma = _chunk(blocks, buf[pos:])
            yield chunk
    finally:
        blocks.close()


def _head(blocks: Blocks, doc: dict[str, Any]) -> tuple[bytes, bool]:
    """The bytes after the ``[`` that opens the events; True for a bare array (Chrome's form)."""
    buf = blocks.read()
    while True:
        pos = _skip_space(buf, 0)
        if pos < len(buf) or blocks.eof:
            break
        buf += blocks.read()
    if buf[pos:pos + 1] == b"[":
        return buf[pos + 1:], True
    if buf[pos:pos + 1] != b"{":
        raise NotFast("the top level is not an object")
    while True:
        found = _EVENTS_KEY.search(buf)
        if found is not None:
            break
        if blocks.eof or len(buf) > _MAX_HEAD:
            raise NotFast("no traceEvents key near the start")
        buf += blocks.read()
    if b'"traceEvents"' in buf[:found.start()] or b"\\" in buf[:found.start()]:
        raise NotFast("traceEvents may be given twice (or an escaped key may spell it)")
    # Proven a member of the top-level object: the text before it closes into a valid object.
    head = _decode_any(buf[:found.end()] + b"]}")
    if not isinstance(head, dict):
        raise NotFast("the top level is not an object")
    head.pop("traceEvents", None)
    doc.update(head)
    return buf[found.end():], False


def _tail(blocks: Blocks, rest: bytes, doc: dict[str, Any], bare: bool) -> None:
    """The members after the events' ``]``, into `doc`."""
    while not blocks.eof:
        rest += blocks.read()
    if bare:
        if rest.strip(_SPACE):
            raise NotFast("extra data after the array")
        return
    if b'"traceEvents"' in rest or b"\\" in rest:
        raise NotFast("traceEvents may be given twice (or an escaped key may spell it)")
    tail = _decode_any(b'{"traceEvents":[]' + rest)
    if not isinstance(tail, dict):
        raise NotFast("the top level is not an object")
    tail.pop("traceEvents", None)
    doc.update(tail)


def _decode_any(text: bytes) -> Any:
    try:
        return _ANY.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError, RecursionError, ArithmeticError):
        raise NotFast("JSON the fast decoder cannot read") from None


_TRIES = 4  # boundary candidates tried in one buffer before reading more


_ARRAY_END = re.compile(rb"\}[ \t\n\r]*\]")


def _decoded(text: bytes) -> list[Event] | None:
    try:
        return _EVENTS.decode(b"[" + text + b"]")
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError, RecursionError, ArithmeticError):
        return None


def _chunk(blocks: Blocks, buf: bytes) -> tuple[list[Event], bytes, bool]:
    """The whole events at the start of `buf` (which starts at an event), the bytes after them
    (after the ``,`` that follows, or from the ``]``), and whether a ``,`` was taken."""
    while True:
        if blocks.eof:  # the rest of the file: members after the events may hold braces of their own
            for found in list(_ARRAY_END.finditer(buf))[::-1][:_TRIES * 4]:
                chunk = _decoded(buf[:found.start() + 1])
                if chunk is not None:
                    return chunk, buf[found.end() - 1:], False
        end, tries = len(buf), 0
        while tries < _TRIES:  # the last few "}" followed by "," or "]"
            cut = buf.rfind(b"}", 0, end)
            if cut < 0:
                break
            end = cut
            after = _skip_space(buf, cut + 1)
            if after < len(buf) and buf[after] in b",]":
                tries += 1
                chunk = _decoded(buf[:cut + 1])
                if chunk is not None:
                    comma = buf[after:after + 1] == b","
                    return chunk, buf[after + 1:] if comma else buf[after:], comma
        if blocks.eof:
            raise NotFast("no event boundary the fast decoder can prove")
        buf += blocks.read()


# ---------------------------------------------------------------------------------- times
_WIDTH = 24
_DIGITS = 15  # integer digits of a time in us that always fit int64 as ns; 16 when the first is <= 8


def us_to_ns(raws: list[msgspec.Raw]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(ns, ok): JSON numbers in microseconds as exact int64 nanoseconds, where ``ok``. A number
    is taken when it is ``-?digits(.digits)?`` with at most three decimals and fits int64 in ns;
    others (exponents, more decimals, missing, not numbers) are not ok.

    The digits are read a column at a time (Horner's rule over the i-th character of every
    number): a few passes over n-long vectors, never an n x width matrix of int64."""
    n = len(raws)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    flat = np.frombuffer(b"\0".join(raws) + b"\0", dtype=np.uint8)  # Raw values are buffers: no copy each
    ends = np.flatnonzero(flat == 0)
    starts = np.concatenate([[0], ends[:-1] + 1])
    length = ends - starts
    width = int(length.max())
    if width > _WIDTH:
        return np.zeros(n, np.int64), np.zeros(n, bool)  # one by one, exactly
    negative = flat[starts] == ord("-")
    value = np.zeros(n, np.int64)
    dots = np.zeros(n, np.int64)
    dot_at = np.zeros(n, np.int64)
    bad = np.zeros(n, bool)
    at = np.empty(n, np.int64)
    for j in range(width):
        np.minimum(starts + j, ends, out=at)  # past its end a number reads its NUL, never the next one
        c = flat[at]
        digit = c - np.uint8(48)
        is_digit = digit <= 9
        np.multiply(value, 10, out=value, where=is_digit)  # rows past 19 digits wrap: not ok below
        np.add(value, digit, out=value, where=is_digit)
        is_dot = c == 46
        dot_at[is_dot] = j
        dots += is_dot
        other = ~is_digit & ~is_dot & (c != 0)
        bad |= other & ~negative if j == 0 else other
    has_dot = dots == 1
    decimals = np.where(has_dot, length - dot_at - 1, 0)
    whole = np.where(has_dot, dot_at, length) - negative
    first = flat[np.minimum(starts + negative, ends)].astype(np.int64) - 48
    fits = (whole <= _DIGITS) | ((whole == _DIGITS + 1) & (first <= 8))  # 8.99e15 us is 8.99e18 ns < 2**63
    ok = ~bad & (dots <= 1) & (whole >= 1) & fits & (decimals <= 3) & ~(has_dot & (decimals == 0))
    ns = np.where(ok, value, 0) * (10 ** (3 - np.clip(decimals, 0, 3)))
    return np.where(negative, -ns, ns), ok
