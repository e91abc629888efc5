"""CTF 1.8 field classes and the trace's declarations, as the TSDL parser (:mod:`.tsdl`) makes them.

Plain data: what each field looks like in the stream (size, alignment, byte order, how a variant
or a sequence finds its tag or length). The decoder (:mod:`.decode`) compiles them once per class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


def plain_name(name: str) -> str:
    """A TSDL field name as babeltrace2 and Trace Compass's XML analyses give it: one leading
    underscore dropped (TSDL's escape for names that are keywords). CTF 2 names are kept as they are."""
    return name[1:] if name.startswith("_") else name


class Unsupported(Exception):
    """TSDL or a field class this reader does not take; the caller falls back to babeltrace2."""


@dataclass(frozen=True)
class Location:
    """Where a CTF 2 field class finds its length or selector: a path from the root of a scope
    (`origin`), or, without one, from the structures being decoded, the innermost first."""

    origin: str | None
    path: tuple[str | None, ...]  # without an origin, None is the parent structure


@dataclass(frozen=True)
class Int:
    size: int  # bits
    align: int  # bits
    signed: bool = False
    big_endian: bool = False
    text: bool = False  # encoding UTF8/ASCII: an array or sequence of these is a string
    clock: str | None = None  # map = clock.<name>.value
    role: str | None = None  # what the reader takes it for (CTF 2's roles; named so in CTF 1.8)
    boolean: bool = False  # a CTF 2 fixed-length boolean: read as an integer, given as a bool


@dataclass(frozen=True)
class VarInt:
    """A CTF 2 variable-length integer (unsigned or signed LEB128)."""

    signed: bool = False
    clock: str | None = None
    role: str | None = None

    @property
    def align(self) -> int:
        return 8


@dataclass(frozen=True)
class Float:
    exp_dig: int
    mant_dig: int
    align: int
    big_endian: bool = False

    @property
    def size(self) -> int:
        return self.exp_dig + self.mant_dig


@dataclass(frozen=True)
class String:
    """A string: null-terminated (`length` None), of a static byte length (int), or of a length
    read from another field (Location); text up to its first NUL, decoded from `encoding`."""

    length: int | Location | None = None
    encoding: str = "utf-8"
    align: int = 8


@dataclass(frozen=True)
class Blob:
    length: int | Location
    role: str | None = None
    align: int = 8


@dataclass(frozen=True)
class Enum:
    container: "Int | VarInt"
    labels: tuple[tuple[str, int, int], ...]  # (label, low, high), inclusive

    @property
    def align(self) -> int:
        return self.container.align

    def label_of(self, value: int) -> str | None:
        return next((label for label, low, high in self.labels if low <= value <= high), None)


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, "FieldClass"], ...]
    min_align: int = 1  # align(N) after the body

    @cached_property  # computed once: shared classes nest (aliases), recursion would repeat
    def align(self) -> int:
        return max([self.min_align, *(f.align for _, f in self.fields)])


@dataclass(frozen=True)
class Variant:
    tag: str | Location  # the field that selects the option (CTF 1.8: an enumeration, by its name)
    options: tuple[tuple[str, "FieldClass"], ...]
    ranges: tuple[tuple[tuple[int, int], ...], ...] | None = None  # CTF 2: each option's selector values

    @property
    def align(self) -> int:
        return 1  # the selected option aligns itself


@dataclass(frozen=True)
class Array:
    element: "FieldClass"
    length: int
    min_align: int = 1  # CTF 2's minimum-alignment

    @cached_property  # computed once: shared classes nest (aliases), recursion would repeat
    def align(self) -> int:
        return max(self.min_align, self.element.align)


@dataclass(frozen=True)
class Sequence:
    element: "FieldClass"
    length: str | Location  # the integer field holding the length (CTF 1.8: as TSDL names it)
    min_align: int = 1

    @cached_property  # computed once: shared classes nest (aliases), recursion would repeat
    def align(self) -> int:
        return max(self.min_align, self.element.align)


@dataclass(frozen=True)
class Optional:
    """A CTF 2 optional: its field is there when the selector (a boolean, or an integer within
    `ranges`) says so; else its value is None."""

    cls: "FieldClass"
    selector: Location
    ranges: tuple[tuple[int, int], ...] | None = None

    @property
    def align(self) -> int:
        return 1


FieldClass = Int | VarInt | Float | String | Blob | Enum | Struct | Variant | Array | Sequence | Optional


@dataclass(frozen=True)
class Clock:
    name: str
    freq: int = 1_000_000_000
    offset_s: int = 0
    offset: int = 0  # cycles

    def ns_from_origin(self, cycles: int) -> int:
        """`cycles` of this clock as ns from its origin, the offset applied (Trace Compass's time base)."""
        if self.freq == 1_000_000_000:
            return self.offset_s * 1_000_000_000 + self.offset + cycles
        return self.offset_s * 1_000_000_000 + (self.offset + cycles) * 1_000_000_000 // self.freq


@dataclass(frozen=True)
class EventClass:
    id: int
    name: str
    stream_id: int
    context: Struct | None
    fields: Struct | None
    attributes: dict[str, Any] = field(default_factory=dict, compare=False)  # CTF 2 user attributes, kept


@dataclass
class StreamClass:
    id: int
    packet_context: Struct | None = None
    event_header: Struct | None = None
    event_context: Struct | None = None
    events: dict[int, EventClass] = field(default_factory=dict)


@dataclass
class TraceClass:
    big_endian: bool = False
    uuid: bytes | None = None
    packet_header: Struct | None = None
    clocks: dict[str, Clock] = field(default_factory=dict)
    streams: dict[int, StreamClass] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)  # CTF 2 user attributes of the trace class
