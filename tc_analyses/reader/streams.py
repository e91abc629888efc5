"""One dfcompass stream file decoded: its packets checked and its records viewed as numpy arrays.

The stream-level half of the fast reader (:mod:`tc_analyses.reader.fast` builds a whole trace's
tables from these); :mod:`tc_analyses.reader.job` reads one small stream (a process's rank) with it.
Every structural problem raises :class:`~tc_analyses.errors.TraceError` naming the stream file
and the byte offset of the bad packet.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from tc_analyses.errors import TraceError
from tracer import schema
from tracer.tsdl import CTF_MAGIC, PACKET_CONTEXT, PACKET_HEADER, PACKET_PREAMBLE_SIZE, STREAM_ID

_PREAMBLE = struct.Struct("<I16sI" + "QQQQQ")
assert _PREAMBLE.size == PACKET_HEADER.size + PACKET_CONTEXT.size == PACKET_PREAMBLE_SIZE
_STRING_HEAD = struct.Struct("<HQI")
DTYPES: dict[int, np.dtype[Any]] = {
    c.id: np.dtype(c.numpy_fields()) for c in schema.CATALOGUE if not c.is_variable
}


@dataclass
class StreamInfo:
    """One stream file as read."""

    path: Path
    event_class: str
    packets: int = 0
    events: int = 0
    discarded: int = 0  # cumulative events_discarded of the last packet
    first_ts: int | None = None
    last_ts: int | None = None
    # (packet begin, events lost before it, packet end - begin) for each packet whose
    # events_discarded grew: where Trace Compass puts its synthetic "Lost event"
    lost: list[tuple[int, int, int]] = field(default_factory=list)


MAX_TIMESTAMP = 2**63 - 1  # clock values past this are no time: damaged data


def _string_records(body: memoryview, path: Path, base: int) -> list[tuple[int, int, int, str]]:
    """Parse dfc:string_def records: (id, timestamp, sid, raw escaped value)."""
    out = []
    data = body.tobytes()
    pos, end = 0, len(data)
    while pos < end:
        if pos + _STRING_HEAD.size > end:
            raise TraceError(path, "string_def record cut short", base + pos)
        event_id, ts, sid = _STRING_HEAD.unpack_from(data, pos)
        nul = data.find(b"\0", pos + _STRING_HEAD.size)
        if nul < 0:
            raise TraceError(path, "string_def value has no terminating NUL", base + pos)
        if event_id != schema.STRING_DEF.id:
            raise TraceError(path, f"event id {event_id} in a string_def stream", base + pos)
        out.append((event_id, ts, sid, data[pos + _STRING_HEAD.size : nul].decode("ascii", "replace")))
        pos = nul + 1
    return out


def _class_of_file(path: Path) -> schema.EventClass | None:
    return schema.BY_SHORT.get(path.name.rpartition("-")[0])


class Packet(NamedTuple):
    offset: int  # byte offset of the packet in its stream file
    ts_begin: int
    ts_end: int
    body_start: int
    body_len: int
    packet_size: int
    discarded: int  # cumulative events_discarded


def walk_packets(path: Path, data: memoryview, uuid_bytes: bytes | None) -> Iterator[Packet]:
    """Check and yield each packet preamble of a stream file; TraceError at the first bad one."""
    size = len(data)
    offset = 0
    while offset < size:
        if size - offset < PACKET_PREAMBLE_SIZE:
            raise TraceError(path, f"truncated packet: {size - offset} bytes left, a packet header needs "
                             f"{PACKET_PREAMBLE_SIZE} (run 'dfcompass repair' to cut it off)", offset)
        magic, uuid, stream_id, ts_begin, ts_end, content_bits, packet_bits, discarded = _PREAMBLE.unpack_from(data, offset)
        if magic != CTF_MAGIC:
            raise TraceError(path, f"bad packet magic 0x{magic:08X} (expected 0x{CTF_MAGIC:08X})", offset)
        if uuid_bytes is not None and uuid != uuid_bytes:
            raise TraceError(path, "packet uuid differs from the trace uuid in metadata", offset + 4)
        if stream_id != STREAM_ID:
            raise TraceError(path, f"unknown stream_id {stream_id}", offset + 20)
        if packet_bits % 8 or content_bits % 8 or content_bits > packet_bits or content_bits < PACKET_PREAMBLE_SIZE * 8:
            raise TraceError(path, f"bad packet sizes: content_size={content_bits} bits, packet_size={packet_bits} bits", offset)
        packet_size = packet_bits // 8
        if offset + packet_size > size:
            raise TraceError(path, f"truncated packet: packet_size is {packet_size} bytes but only {size - offset} "
                             "remain in the file (run 'dfcompass repair' to cut it off)", offset)
        yield Packet(offset, ts_begin, ts_end, offset + PACKET_PREAMBLE_SIZE,
                     content_bits // 8 - PACKET_PREAMBLE_SIZE, packet_size, discarded)
        offset += packet_size


def read_stream(path: Path, uuid_bytes: bytes | None) -> tuple[StreamInfo, schema.EventClass | None, list[Any]]:
    """Read one stream file: its info, its class, and a list of record arrays (or string rows)."""
    data = map_file(path)
    cls = _class_of_file(path)
    info = StreamInfo(path, cls.name if cls else "?")
    chunks: list[Any] = []
    for packet in walk_packets(path, data, uuid_bytes):
        body_start, body_len = packet.body_start, packet.body_len
        if body_len:
            if cls is None:
                first_id = int.from_bytes(data[body_start : body_start + 2], "little")
                cls = schema.BY_ID.get(first_id)
                if cls is None:
                    raise TraceError(path, f"unknown event id {first_id}", body_start)
                info.event_class = cls.name
            if cls.is_variable:
                rows = _string_records(data[body_start : body_start + body_len], path, body_start)
                chunks.extend(rows)
                count = len(rows)
                first, last = rows[0][1], rows[-1][1]
            else:
                if body_len % cls.record_size:
                    raise TraceError(path, f"packet content of {body_len} bytes is not a whole number of "
                                     f"{cls.name} records ({cls.record_size} bytes)", packet.offset)
                count = body_len // cls.record_size
                records = np.frombuffer(data, DTYPES[cls.id], count, body_start)
                ids = records["id"]
                if (ids != cls.id).any():
                    bad = int(ids[np.nonzero(ids != cls.id)[0][0]])
                    raise TraceError(path, f"event id {bad} in a stream of {cls.name} events", body_start)
                chunks.append(records)
                stamps = records["timestamp"]
                # Every event, not only the first and last, within the packet's range: a damaged
                # timestamp in the middle would otherwise pass into the model as 2^64 - 1.
                first, last = int(stamps.min()), int(stamps.max())
            if packet.ts_end > MAX_TIMESTAMP:
                raise TraceError(path, f"packet end time {packet.ts_end} is past any clock", packet.offset)
            if first < packet.ts_begin or last > packet.ts_end:
                raise TraceError(path, f"events [{first}, {last}] lie outside the packet's time range "
                                 f"[{packet.ts_begin}, {packet.ts_end}]", packet.offset)
            info.events += count
            info.first_ts = first if info.first_ts is None else info.first_ts
            info.last_ts = last
        info.packets += 1
        if packet.discarded > info.discarded:
            info.lost.append((packet.ts_begin, packet.discarded - info.discarded, packet.ts_end - packet.ts_begin))
        info.discarded = packet.discarded
    return info, cls, chunks


def map_file(path: Path) -> memoryview:
    """The file's bytes, memory-mapped: the page cache is read in place, not copied first."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ))


def stream_files(trace_dir: Path) -> list[Path]:
    """The stream files of a trace directory, as CTF readers see them."""
    return sorted(p for p in trace_dir.iterdir() if p.is_file() and p.name != "metadata" and not p.name.startswith("."))
