"""A CTF 1.8 trace read stream file by stream file, packet by packet, into the records babeltrace2's
reader yields (:mod:`tc_analyses.reader.records`), merged in Trace Compass's order.

Per stream file: each packet's header and context (magic, uuid, stream id, sizes, begin time,
events_discarded), then its events: the stream's event header (the event id and the clock value:
the last ``id`` and the last clock-mapped ``timestamp`` decoded win, so LTTng's compact and extended
headers both work), the stream's and the event's contexts, the payload. A timestamp of N < 64 bits
is the clock's low N bits: it wraps forward from the clock's current value (CTF 1.8, 8.1).
"""

from __future__ import annotations

import heapq
import mmap
import os
import struct
from pathlib import Path
from typing import Any, Iterator

from tc_analyses.errors import TraceError
from tc_analyses.reader.ctf.classes import Clock, EventClass, Int, StreamClass, Struct, TraceClass, Unsupported
from tc_analyses.reader.ctf.decode import Cursor, Damaged, Decoder, compile_class
from tc_analyses.reader.records import Discarded, Event

_CTF_MAGIC = 0xC1FC1FC1
# what damaged bytes can make a decoder or a field's use raise (a length that is a list, a uuid
# byte past 255...): each is a one-line TraceError naming the file and the packet
_DAMAGE = (Damaged, struct.error, TypeError, ValueError, IndexError, KeyError, OverflowError, RecursionError)


class _Compiled:
    """The decoders of one trace's classes, made once."""

    def __init__(self, trace: TraceClass) -> None:
        self.trace = trace
        self.packet_header = _compiled(trace.packet_header)
        self.streams = {sid: _StreamDecoders(stream) for sid, stream in trace.streams.items()}
        clocks = {_clock_of(s.event_header) for s in trace.streams.values()} - {None}
        if len(trace.clocks) > 1 and len(clocks) > 1:
            raise Unsupported("streams on different clocks")
        name = next(iter(clocks), None) or next(iter(trace.clocks), "")
        self.clock = trace.clocks.get(name or "", Clock(name or "", offset_s=0))


class _StreamDecoders:
    def __init__(self, stream: StreamClass) -> None:
        self.packet_context = _compiled(stream.packet_context)
        self.header = _compiled(stream.event_header)
        self.context = _compiled(stream.event_context)
        self.events: dict[int, tuple[EventClass, Decoder | None, Decoder | None]] = {
            eid: (cls, _compiled(cls.context), _compiled(cls.fields)) for eid, cls in stream.events.items()}


def _compiled(cls: Struct | None) -> Decoder | None:
    return compile_class(cls) if cls is not None else None


def _clock_of(header: Struct | None) -> str | None:
    for _, member in _walk(header):
        if isinstance(member, Int) and member.clock:
            return member.clock
    return None


def _walk(cls: Any) -> Iterator[tuple[str, Any]]:
    for name, member in getattr(cls, "fields", ()) or getattr(cls, "options", ()):
        yield name, member
        yield from _walk(member)


class _StreamReader:
    """The records of one stream file, in its order (time order, as CTF requires of a stream)."""

    def __init__(self, path: Path, compiled: _Compiled, with_fields: bool) -> None:
        self.path, self.compiled, self.with_fields = path, compiled, with_fields
        self.name = str(path)

    def records(self) -> Iterator[tuple[int, Event | Discarded]]:
        size = os.path.getsize(self.path)
        if size == 0:
            return
        with open(self.path, "rb") as file:
            data = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
        try:
            yield from self._packets(data, size)
        finally:
            data.close()

    def _packets(self, data: mmap.mmap, size: int) -> Iterator[tuple[int, Event | Discarded]]:
        compiled, clock = self.compiled, self.compiled.clock
        cur = Cursor(data)
        offset, discarded = 0, 0
        previous_end: int | None = None
        while offset < size:
            cur.base = cur.bit = offset * 8
            cur.end, cur.roots = size * 8, {}
            try:
                roles = cur.roles = {}
                header = self._scope(cur, "trace.packet.header", compiled.packet_header)
                if roles.get("packet-magic-number", _CTF_MAGIC) != _CTF_MAGIC:
                    raise Damaged(f"bad packet magic 0x{roles['packet-magic-number']:08X}")
                uuid, found_uuid = compiled.trace.uuid, roles.get("metadata-stream-uuid", header.get("uuid"))
                if uuid is not None and found_uuid is not None and bytes(found_uuid) != uuid:
                    raise Damaged("packet uuid differs from the trace uuid in metadata")
                stream = compiled.streams.get(int(roles.get("data-stream-class-id", 0)))
                if stream is None:
                    raise Damaged(f"unknown stream class id {roles.get('data-stream-class-id')}")
                context = self._scope(cur, "stream.packet.context", stream.packet_context)
                packet_bits, content_bits = _sizes(roles, (size - offset) * 8)
            except _DAMAGE as exc:
                raise TraceError(self.path, f"packet header: {_said(exc)}", offset) from None
            if packet_bits % 8 or content_bits > packet_bits or packet_bits <= 0 or offset + packet_bits // 8 > size:
                raise TraceError(self.path, f"bad packet sizes: content_size={content_bits} bits, packet_size="
                                 f"{packet_bits} bits, {size - offset} bytes left", offset)
            cur.end = offset * 8 + content_bits
            if "default-clock-timestamp" in roles:
                cur.cycles = int(roles["default-clock-timestamp"])
            end = roles.get("packet-end-default-clock-timestamp")
            if "discarded-event-record-counter-snapshot" in roles:
                count = int(roles["discarded-event-record-counter-snapshot"])
                if count > discarded:  # placed (and merged) at the lost range's start, as babeltrace2 does
                    begin = previous_end if previous_end is not None else clock.ns_from_origin(cur.cycles)
                    yield (begin, Discarded(self.name, count - discarded, begin,
                                            clock.ns_from_origin(int(end)) if end is not None else None))
                discarded = count
            cpu = context.get("cpu_id")
            while cur.bit < cur.end:
                at = cur.bit
                try:
                    event = self._event(cur, stream, cpu)
                    if cur.bit == at:
                        raise Damaged("an event of no bits (it would repeat forever)")
                except _DAMAGE as exc:
                    raise TraceError(self.path, f"event at bit {at - offset * 8} of the packet: {_said(exc)}",
                                     offset) from None
                yield event.ns_from_origin, event
            if end is not None:
                previous_end = clock.ns_from_origin(int(end))
            offset += packet_bits // 8

    @staticmethod
    def _scope(cur: Cursor, name: str, decoder: Decoder | None) -> dict[str, Any]:
        """Decode one scope's structure; its values become that scope's root for later locations."""
        cur.scope, cur.scopes = name, []
        values = decoder(cur) if decoder is not None else {}
        cur.roots[name] = values
        return values

    def _event(self, cur: Cursor, stream: _StreamDecoders, cpu: Any) -> Event:
        cur.clocked = True
        cur.roles.pop("event-record-class-id", None)
        self._scope(cur, "stream.event.header", stream.header)
        cur.clocked = False
        event_id = cur.roles.get("event-record-class-id", 0)
        found = stream.events.get(int(event_id))
        if found is None:
            raise Damaged(f"unknown event id {event_id}")
        cls, context_decoder, fields_decoder = found
        context = self._scope(cur, "stream.event.context", stream.context)
        if context_decoder is not None:
            context = {**context, **self._scope(cur, "event.context", context_decoder)}
        fields = self._scope(cur, "event.fields", fields_decoder)
        if not self.with_fields:  # as babeltrace2's reader: names and times only
            fields, context, cpu = {}, {}, None
        return Event(cls.name, cur.cycles, self.compiled.clock.ns_from_origin(cur.cycles), self.name, fields, context,
                     int(cpu) if cpu is not None else None)


def _said(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, Damaged) else f"damaged ({type(exc).__name__}: {exc})"


def _sizes(roles: dict[str, Any], left_bits: int) -> tuple[int, int]:
    """(packet size, content size) in bits; a packet without them spans the rest of the file."""
    content_bits = roles.get("packet-content-length")
    packet_bits = roles.get("packet-total-length", content_bits if content_bits is not None else left_bits)
    content_bits = packet_bits if content_bits is None else content_bits
    if not isinstance(packet_bits, int) or not isinstance(content_bits, int):
        raise Damaged("packet sizes are not integers")
    return packet_bits, content_bits


def compile_trace(trace: TraceClass) -> _Compiled:
    """The decoders of `trace`'s classes; Unsupported for what they cannot decode."""
    return _Compiled(trace)


def read_trace_records(trace_dir: Path, compiled: _Compiled, with_fields: bool
                       ) -> list[Iterator[tuple[int, Event | Discarded]]]:
    """One time-ordered record stream per stream file of `trace_dir` (files by name)."""
    files = sorted(p for p in trace_dir.iterdir() if p.is_file() and p.name != "metadata" and not p.name.startswith("."))
    return [_StreamReader(p, compiled, with_fields).records() for p in files]


def merged(streams: list[Iterator[tuple[int, Event | Discarded]]]) -> Iterator[Event | Discarded]:
    """The records of every stream by time; equal times in stream order (stream file name, as
    Trace Compass reads them); a stream's own order kept (heapq.merge is stable)."""
    for _, _, record in heapq.merge(*(_ranked(rank, s) for rank, s in enumerate(streams)), key=lambda r: (r[0], r[1])):
        yield record


def _ranked(rank: int, stream: Iterator[tuple[int, Event | Discarded]]) -> Iterator[tuple[int, int, Event | Discarded]]:
    for t, record in stream:
        yield t, rank, record
