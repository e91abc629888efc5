"""Field classes compiled into decoders of a packet's bytes, giving the values babeltrace2 gives.

A decoder is a closure ``decode(cursor) -> value`` that advances ``cursor.bit`` (a bit offset in
the stream file; alignment counts from the packet's start). Values are plain Python: integers
(enumerations too), floats, strings (UTF-8; an array or sequence of 8-bit text integers is a
string up to its first NUL, as babeltrace2 reads ``ctf_array_text``), lists, dicts (a structure's
fields in order, one leading underscore of each name dropped, as babeltrace2 and Trace Compass's
XML analyses name them) and a variant's selected option's value. A variant's tag and a sequence's
length are read from the structures being decoded, found by name from the innermost outwards.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from tc_analyses.reader.ctf.classes import (Array, Blob, Enum, FieldClass, Float, Int, Location, Optional, Sequence,
                                            String, Struct, Unsupported, VarInt, Variant, plain_name)

Decoder = Callable[["Cursor"], Any]
_ALIGNED = {(8, False): "B", (8, True): "b", (16, False): "H", (16, True): "h", (32, False): "I", (32, True): "i",
            (64, False): "Q", (64, True): "q"}


class Damaged(Exception):
    """A field that does not fit in its packet, a NUL-less string, a length past any size."""


class Cursor:
    """Where the decoders are in a stream file: its bytes, the bit offset, the packet's start and end
    (bits), and the structures being decoded (innermost last), for tags and lengths."""

    __slots__ = ("data", "bit", "base", "end", "scopes", "roots", "cycles", "clocked", "roles", "scope")

    def __init__(self, data: Any) -> None:
        self.data = data
        self.bit = self.base = 0
        self.end = len(data) * 8
        self.cycles = 0  # the stream's clock value
        self.clocked = False  # whether a clock-mapped integer decoded now sets the clock (event headers)
        self.roles: dict[str, Any] = {}  # the last value of each role decoded (the reader clears it)
        self.scope = ""  # the scope being decoded ("stream.event.header"...), for CTF 2 locations
        self.scopes: list[dict[str, Any]] = []
        self.roots: dict[str, dict[str, Any]] = {}  # absolute scopes: "stream.event.header" -> its values

    def align(self, bits: int) -> None:
        if bits > 1:
            self.bit = self.base + -(-(self.bit - self.base) // bits) * bits

    def find(self, path: str) -> Any:
        """The value a variant's tag or a sequence's length names: a relative name, looked up in the
        structures being decoded from the innermost outwards, or an absolute ``scope.field`` path."""
        parts = path.split(".")
        for prefix in ("trace.packet.header", "stream.packet.context", "stream.event.header", "stream.event.context",
                       "event.context", "event.fields"):
            if path.startswith(prefix + "."):  # the scope being decoded is the outermost structure now
                found: Any = self.scopes[0] if prefix == self.scope and self.scopes else self.roots.get(prefix, {})
                parts = path[len(prefix) + 1:].split(".")
                break
        else:
            found = next((scope for scope in reversed(self.scopes) if _plain(parts[0]) in scope), None)
        for part in parts:
            if not isinstance(found, dict) or _plain(part) not in found:
                raise Damaged(f"no field {path!r} before the field that names it")
            found = found[_plain(part)]
        return found


    def locate(self, location: Location) -> Any:
        """The value at a CTF 2 field location: from its scope's root (the structure being decoded
        when the scope is the current one), or without an origin, as :meth:`find` looks."""
        if location.origin is None:  # from the structure holding the field; None: its parent
            depth = len(self.scopes) - 1
            found: Any = None
            for part in location.path:
                if part is None:
                    depth -= 1
                    continue
                holder = found if found is not None else (self.scopes[depth] if depth >= 0 else None)
                if not isinstance(holder, dict) or part not in holder:
                    raise Damaged(f"no field {part!r} where the field location names it")
                found = holder[part]
            return found
        key = _ORIGINS.get(location.origin)
        if key is None:
            raise Damaged(f"field location origin {location.origin!r}")
        found = self.scopes[0] if key == self.scope and self.scopes else self.roots.get(key, {})
        for part in location.path:
            if not isinstance(found, dict) or part not in found:
                raise Damaged(f"no field {_shown(location)} in {location.origin} before the field that names it")
            found = found[part]
        return found


def _shown(location: Location) -> str:
    return "/".join(".." if part is None else part for part in location.path)


_ORIGINS = {"packet-header": "trace.packet.header", "packet-context": "stream.packet.context",
            "event-record-header": "stream.event.header", "event-record-common-context": "stream.event.context",
            "event-record-specific-context": "event.context", "event-record-payload": "event.fields"}


_plain = plain_name  # TSDL paths name fields as TSDL does; the classes hold the plain names


def compile_class(cls: FieldClass, enums: dict[str, Enum] | None = None) -> Decoder:
    """The decoder of `cls`. `enums`: the enumeration fields a variant may name as its tag, by name
    (the caller's enclosing scopes; a structure adds its own). A class met again with the same
    enumerations in reach is compiled once: metadata whose aliases nest shared classes N deep
    would otherwise cost 2^N."""
    enums = dict(enums or {})
    key = (id(cls), tuple(sorted((name, id(e)) for name, e in enums.items())))
    found = _COMPILED.get(key)
    if found is not None and found[0] is cls:
        return found[1]
    decoder = _compile(cls, enums)
    _COMPILED[key] = (cls, decoder)
    if len(_COMPILED) > 100_000:  # one trace's classes at a time, not every trace's forever
        _COMPILED.clear()
    return decoder


_COMPILED: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[FieldClass, Decoder]] = {}


def _compile(cls: FieldClass, enums: dict[str, Enum]) -> Decoder:
    if isinstance(cls, Int):
        return _integer(cls)
    if isinstance(cls, VarInt):
        return _variable_integer(cls)
    if isinstance(cls, Enum):
        return compile_class(cls.container)
    if isinstance(cls, Float):
        return _float(cls)
    if isinstance(cls, String):
        return _string if cls.length is None and cls.encoding == "utf-8" else _sized_string(cls)
    if isinstance(cls, Blob):
        return _blob(cls)
    if isinstance(cls, Optional):
        return _optional(cls, enums)
    if isinstance(cls, Struct):
        return _structure(cls, enums)
    if isinstance(cls, Variant):
        return _variant(cls, enums)
    if isinstance(cls, (Array, Sequence)):
        return _array(cls, enums)
    raise Unsupported(f"field class {type(cls).__name__}")


def _integer(cls: Int) -> Decoder:
    read = _raw_integer(cls)
    if cls.boolean:
        raw = read
        read = lambda cur: bool(raw(cur))  # noqa: E731
    return _with_role(read, cls.role, cls.clock, cls.size)


def _with_role(read: Decoder, role: str | None, clock: str | None, size: int) -> Decoder:
    """`read`, noting its value under its role, and setting the clock where it is mapped to one."""
    if not clock and not role:
        return read
    mask = (1 << size) - 1

    def noted(cur: Cursor) -> Any:
        value = read(cur)
        if role:
            cur.roles[role] = value
        if clock and cur.clocked:  # N < 64 bits are the clock's low bits, wrapping forward (CTF 1.8, 8.1)
            if size >= 64:
                cur.cycles = value
            else:
                wrapped = value < cur.cycles & mask
                cur.cycles = (cur.cycles & ~mask | value) + ((1 << size) if wrapped else 0)
        return value

    return noted


def _variable_integer(cls: VarInt) -> Decoder:
    signed, clock = cls.signed, cls.clock

    def decode(cur: Cursor) -> int:
        cur.align(8)
        at, stop, value, shift = cur.bit >> 3, cur.end >> 3, 0, 0
        while True:
            if at >= stop or shift > 63:
                raise Damaged("a variable-length integer past the end of its packet or 64 bits")
            byte = cur.data[at]
            value |= (byte & 0x7F) << shift
            shift += 7
            at += 1
            if not byte & 0x80:
                break
        cur.bit = at << 3
        if signed and value >> (shift - 1) & 1:
            value -= 1 << shift
        if clock and cur.clocked:  # its low 7 x bytes bits are the clock's (CTF 2, 6.3)
            mask = (1 << shift) - 1
            wrapped = value < cur.cycles & mask
            cur.cycles = (cur.cycles & ~mask | value) + ((1 << shift) if wrapped else 0)
        return value

    return _with_role(decode, cls.role, None, 64)


def _raw_integer(cls: Int) -> Decoder:
    size, align, signed, big = cls.size, cls.align, cls.signed, cls.big_endian
    code = _ALIGNED.get((size, signed))
    unpack = struct.Struct((">" if big else "<") + code).unpack_from if code else None
    nbytes_max = (size + 7) // 8 + 1

    def decode(cur: Cursor) -> int:
        if align > 1:
            cur.align(align)
        bit = cur.bit
        if bit + size > cur.end:
            raise Damaged(f"a {size}-bit integer past the end of its packet")
        cur.bit = bit + size
        if unpack is not None and not bit & 7:
            return int(unpack(cur.data, bit >> 3)[0])
        start, shift = bit >> 3, bit & 7
        raw = bytes(cur.data[start:start + nbytes_max])
        count = (shift + size + 7) // 8
        if big:
            value = int.from_bytes(raw[:count], "big") >> (count * 8 - shift - size)
        else:
            value = int.from_bytes(raw[:count], "little") >> shift
        value &= (1 << size) - 1
        if signed and value >> (size - 1):
            value -= 1 << size
        return value

    return decode


def _float(cls: Float) -> Decoder:
    size, align = cls.size, cls.align
    unpack = struct.Struct((">" if cls.big_endian else "<") + ("f" if size == 32 else "d")).unpack_from

    def decode(cur: Cursor) -> float:
        cur.align(align)
        if cur.bit & 7:
            raise Unsupported("a floating point number that does not start on a byte")
        if cur.bit + size > cur.end:
            raise Damaged(f"a {size}-bit number past the end of its packet")
        value = float(unpack(cur.data, cur.bit >> 3)[0])
        cur.bit += size
        return value

    return decode


def _string(cur: Cursor) -> str:
    cur.align(8)
    start, stop = cur.bit >> 3, cur.end >> 3
    data = cur.data
    at = data.find(b"\0", start, stop)  # bytes and mmap both search in place
    if at < 0:
        raise Damaged("a string without its terminating NUL in its packet")
    cur.bit = (at + 1) << 3
    return bytes(data[start:at]).decode("utf-8", "replace")


_CODECS = {"utf-8": ("utf-8", 1), "utf-16be": ("utf-16-be", 2), "utf-16le": ("utf-16-le", 2),
           "utf-32be": ("utf-32-be", 4), "utf-32le": ("utf-32-le", 4)}


def _length(cur: Cursor, length: int | Location, what: str) -> int:
    count = length if isinstance(length, int) else cur.locate(length)
    if not isinstance(count, int) or count < 0 or count * 8 > cur.end - cur.bit:
        raise Damaged(f"length {count!r} of {what} does not fit in its packet")
    return count


def _sized_string(cls: String) -> Decoder:
    codec, unit = _CODECS.get(cls.encoding, (None, 1))
    if codec is None:
        raise Unsupported(f"a string encoded in {cls.encoding}")
    nul = b"\0" * unit

    def decode(cur: Cursor) -> str:
        cur.align(8)
        start = cur.bit >> 3
        if cls.length is None:  # null-terminated, in code units of `unit` bytes
            at = start
            while True:
                if at + unit > cur.end >> 3:
                    raise Damaged("a string without its terminating NUL in its packet")
                if bytes(cur.data[at:at + unit]) == nul:
                    break
                at += unit
            cur.bit = (at + unit) << 3
            return bytes(cur.data[start:at]).decode(codec, "replace")
        count = _length(cur, cls.length, "a string")
        cur.bit += count * 8
        raw = bytes(cur.data[start:start + count])
        cut = next((i for i in range(0, len(raw) - unit + 1, unit) if raw[i:i + unit] == nul), len(raw))
        return raw[:cut].decode(codec, "replace")

    return decode


def _blob(cls: Blob) -> Decoder:
    def decode(cur: Cursor) -> bytes:
        cur.align(8)
        count = _length(cur, cls.length, "a BLOB")
        start = cur.bit >> 3
        cur.bit += count * 8
        return bytes(cur.data[start:start + count])

    return _with_role(decode, cls.role, None, 0)


def _selected(value: Any, ranges: tuple[tuple[int, int], ...]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and any(low <= value <= high for low, high in ranges)


def _optional(cls: Optional, enums: dict[str, Enum]) -> Decoder:
    inner = compile_class(cls.cls, enums)

    def decode(cur: Cursor) -> Any:
        selector = cur.locate(cls.selector)
        there = _selected(selector, cls.ranges) if cls.ranges is not None and not isinstance(selector, bool) \
            else bool(selector)
        return inner(cur) if there else None

    return decode


def _structure(cls: Struct, enums: dict[str, Enum]) -> Decoder:
    align = cls.align
    inner = dict(enums)
    parts: list[tuple[str, Decoder]] = []
    for name, member in cls.fields:
        parts.append((name, compile_class(member, inner)))
        if isinstance(member, Enum):
            inner[name] = member  # a later variant of this structure (or below it) may select on it
        else:
            inner.pop(name, None)

    def decode(cur: Cursor) -> dict[str, Any]:
        cur.align(align)
        values: dict[str, Any] = {}
        cur.scopes.append(values)
        try:
            for name, part in parts:
                values[name] = part(cur)
        finally:
            cur.scopes.pop()
        return values

    return decode


def _variant(cls: Variant, enums: dict[str, Enum]) -> Decoder:
    if cls.ranges is not None:
        return _ranged_variant(cls, enums)
    assert isinstance(cls.tag, str)
    tag = enums.get(_plain(cls.tag.rsplit(".", 1)[-1]))
    if tag is None:
        raise Unsupported(f"a variant whose tag {cls.tag!r} is not an enumeration before it in its structure")
    options = {name: compile_class(option, enums) for name, option in cls.options}
    by_value: dict[int, Decoder | None] = {}
    tag_path = cls.tag

    def decode(cur: Cursor) -> Any:
        value = cur.find(tag_path)
        chosen = by_value.get(value, ...)
        if chosen is ...:
            label = tag.label_of(value) if isinstance(value, int) else None
            chosen = by_value[value] = options.get(label) if label is not None else None
        if chosen is None:
            raise Damaged(f"variant tag {cls.tag} = {value!r} selects no option")
        return chosen(cur)

    return decode


def _ranged_variant(cls: Variant, enums: dict[str, Enum]) -> Decoder:
    """A CTF 2 variant: the first option whose selector ranges hold the selector's value."""
    assert isinstance(cls.tag, Location) and cls.ranges is not None
    location, ranges = cls.tag, cls.ranges
    options = [compile_class(option, enums) for _, option in cls.options]

    def decode(cur: Cursor) -> Any:
        value = cur.locate(location)
        for option, held in zip(options, ranges):
            if _selected(value, held):
                return option(cur)
        raise Damaged(f"variant selector {_shown(location)} = {value!r} selects no option")

    return decode


_MOST_EMPTY = 65_536  # elements of an array whose elements may take no bits


def min_bits(cls: FieldClass) -> int:
    """The fewest bits a field of `cls` takes (0: it may take none: an empty structure, an optional)."""
    found = _MIN_BITS.get(id(cls))
    if found is None or found[0] is not cls:
        if len(_MIN_BITS) > 100_000:
            _MIN_BITS.clear()
        found = _MIN_BITS[id(cls)] = (cls, _min_bits(cls))
    return found[1]


_MIN_BITS: dict[int, tuple[FieldClass, int]] = {}


def _min_bits(cls: FieldClass) -> int:
    if isinstance(cls, (Int, Float)):
        return cls.size
    if isinstance(cls, Enum):
        return min_bits(cls.container)
    if isinstance(cls, (VarInt, String)):
        return 8 if not isinstance(cls, String) or cls.length is None else 0
    if isinstance(cls, Struct):
        return sum(min_bits(f) for _, f in cls.fields)
    if isinstance(cls, Array):
        return cls.length * min_bits(cls.element) if cls.length else 0
    if isinstance(cls, Variant):
        return min((min_bits(f) for _, f in cls.options), default=0)
    return 0  # Blob, Sequence, Optional: possibly empty


def _array(cls: Array | Sequence, enums: dict[str, Enum]) -> Decoder:
    element = cls.element
    text = isinstance(element, Int) and element.text and element.size == 8
    decode_element = compile_class(element, enums)
    fixed = cls.length if isinstance(cls, Array) else None
    name = cls.length if isinstance(cls, Sequence) else ""
    align = cls.align
    most = None if min_bits(element) else _MOST_EMPTY  # elements of no bits: the packet bounds nothing

    def decode(cur: Cursor) -> Any:
        cur.align(align)  # even an empty array is aligned (writers align before its length is known)
        count = fixed if fixed is not None else cur.find(name) if isinstance(name, str) else cur.locate(name)
        if not isinstance(count, int) or count < 0 or count > (cur.end - cur.bit if most is None else most):
            raise Damaged(f"length {count!r} of {name if isinstance(name, str) and name else 'an array'} "
                          "does not fit in its packet")
        if text:  # babeltrace2 reads a text array as a string, up to its first NUL
            if cur.bit & 7:
                raise Unsupported("a text array that does not start on a byte")
            start = cur.bit >> 3
            cur.bit += count * 8
            if cur.bit > cur.end:
                raise Damaged("a text array past the end of its packet")
            raw = bytes(cur.data[start:start + count])
            return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        return [decode_element(cur) for _ in range(count)]

    return decode
