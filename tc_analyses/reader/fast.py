"""Fast reader for dfcompass traces: columnar event tables decoded with numpy.

A dfcompass stream file holds one fixed-size event class, so each packet body is an array of
records: the reader checks the packet preamble, views the body with the class's numpy dtype
and concatenates. Only ``dfc:string_def`` records (variable size, few) are parsed one by one.

Every structural problem raises :class:`~tc_analyses.errors.TraceError` naming the stream file
and the byte offset of the bad packet.
"""

from __future__ import annotations

import mmap
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from tc_analyses.errors import TraceError
from tc_analyses.reader.metadata import Metadata, read_dfcompass_metadata
from tracer import schema
from tracer.strings import unescape
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


@dataclass
class EventTable:
    """All events of one class, sorted by timestamp; columns are numpy arrays.

    `streams`, when known, is each record's stream file rank (its place among the trace's stream
    files by name): Trace Compass and babeltrace2 deliver events of equal timestamps in that order.
    """

    cls: schema.EventClass
    records: np.ndarray[Any, Any]
    strings: np.ndarray[Any, Any]  # sid -> str (object array), shared by all tables of a trace
    streams: np.ndarray[Any, Any] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, column: str) -> np.ndarray[Any, Any]:
        return self.records[column]

    @property
    def columns(self) -> tuple[str, ...]:
        return ("timestamp",) + self.cls.field_names

    def text(self, column: str) -> np.ndarray[Any, Any]:
        """A sid column decoded to strings (None where the string table lacks the id)."""
        sids = self.records[column]
        if len(sids) and int(sids.max()) >= len(self.strings):
            known = sids < len(self.strings)  # a damaged id must not size anything
            out = np.full(len(sids), None, dtype=object)
            out[known] = self.strings[sids[known]]
            return out
        return self.strings[sids]


@dataclass
class DfcTrace:
    """A dfcompass trace read into columnar tables."""

    path: Path
    metadata: Metadata
    tables: dict[str, EventTable]
    strings: np.ndarray[Any, Any]
    streams: list[StreamInfo] = field(default_factory=list)

    @property
    def discarded(self) -> int:
        return sum(s.discarded for s in self.streams)

    def table(self, name: str) -> EventTable:
        """The table of event class `name` ("dfc:node_begin" or "node_begin"); empty if absent."""
        cls = schema.BY_NAME.get(name) or schema.BY_SHORT[name]
        found = self.tables.get(cls.name)
        if found is None:
            dtype = DTYPES.get(cls.id, np.dtype([("id", "<u2"), ("timestamp", "<u8")]))
            found = EventTable(cls, np.empty(0, dtype=dtype), self.strings)
        return found

    def events(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """Every event as (timestamp, name, raw fields), in timestamp order. For tests and small traces."""
        rows: list[tuple[int, str, dict[str, Any]]] = []
        for name, table in self.tables.items():
            fields = table.cls.field_names
            for record in table.records.tolist():
                rows.append((record[1], name, dict(zip(fields, record[2:]))))
        rows.sort(key=lambda r: (r[0], r[1], sorted(r[2].items())))
        return iter(rows)


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
    data = _map(path)
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


def _map(path: Path) -> memoryview:
    """The file's bytes, memory-mapped: the page cache is read in place, not copied first."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ))


def stream_files(trace_dir: Path) -> list[Path]:
    """The stream files of a trace directory, as CTF readers see them."""
    return sorted(p for p in trace_dir.iterdir() if p.is_file() and p.name != "metadata" and not p.name.startswith("."))


def read_trace(path: str | os.PathLike[str], progress: Callable[[int], None] | None = None) -> DfcTrace:
    """Read a whole dfcompass trace directory (or a job folder of one process) into columnar tables.

    `progress`, when given, is called with the number of bytes read after each stream file.
    """
    from tc_analyses.reader.job import single_trace

    trace_dir = single_trace(Path(path))
    meta, uuid_bytes = read_dfcompass_metadata(trace_dir)
    per_class: dict[int, list[Any]] = {}
    per_class_ranks: dict[int, list[Any]] = {}  # the stream file rank of each chunk's records
    streams: list[StreamInfo] = []
    string_rows: list[tuple[int, int, int, str]] = []
    string_ranks: list[int] = []
    for rank, file in enumerate(stream_files(trace_dir)):
        if file.stat().st_size == 0:
            continue
        info, cls, chunks = read_stream(file, uuid_bytes)
        streams.append(info)
        if cls is None:
            continue
        if cls.is_variable:
            string_rows.extend(chunks)
            string_ranks.extend([rank] * len(chunks))
        else:
            per_class.setdefault(cls.id, []).extend(chunks)
            per_class_ranks.setdefault(cls.id, []).extend(np.full(len(c), rank, dtype=np.uint32) for c in chunks)
        if progress is not None:
            progress(file.stat().st_size)
    last = max((info.last_ts for info in streams if info.last_ts is not None), default=0)
    if last + meta.clock_offset_ns > MAX_TIMESTAMP:  # Trace Compass's time base would not fit in 64 bits
        raise TraceError(trace_dir, f"a timestamp ({last}) plus the clock offset ({meta.clock_offset_ns} ns) passes "
                                    "2^63 ns: damaged data (run `dfcompass repair`, or re-record)")
    strings = _string_table(string_rows, trace_dir)
    tables: dict[str, EventTable] = {}
    if string_rows:
        tables[schema.STRING_DEF.name] = _string_def_table(string_rows, string_ranks, strings)
    # Classes merge independently, and numpy releases the GIL while it copies and sorts.
    class_ids = sorted(per_class)
    with ThreadPoolExecutor(max_workers=min(len(class_ids), os.cpu_count() or 1) or 1) as pool:
        merged = list(pool.map(lambda cid: _merge_sorted(per_class[cid], DTYPES[cid], per_class_ranks[cid]), class_ids))
    for class_id, (records, ranks) in zip(class_ids, merged):
        cls = schema.BY_ID[class_id]
        tables[cls.name] = EventTable(cls, records, strings, ranks)
    return DfcTrace(trace_dir, meta, tables, strings, streams)


def _merge_sorted(chunks: list[np.ndarray[Any, Any]], dtype: np.dtype[Any], ranks: list[np.ndarray[Any, Any]]
                  ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Concatenate record chunks and order them by timestamp, then stream file rank (the chunks
    come in file order, so a stable sort keeps equal timestamps in it); the records and their ranks.

    numpy copies packed structured records field by field; as opaque void records of the same
    size it copies them as plain bytes, several times faster (see bench/read_speed.py).
    """
    opaque = np.dtype((np.void, dtype.itemsize))
    records = np.concatenate([c.view(opaque) for c in chunks]).view(dtype)
    stream_ranks = np.concatenate(ranks) if ranks else np.empty(0, dtype=np.uint32)
    ts = np.ascontiguousarray(records["timestamp"])  # sorting a strided column is ~1.5x slower
    if len(ts) > 1 and (ts[1:] < ts[:-1]).any():  # several streams: merge their sorted runs
        order = np.argsort(ts, kind="stable")
        records = records.view(opaque).take(order).view(dtype)
        stream_ranks = stream_ranks[order]
    return records, stream_ranks


MAX_TIMESTAMP = 2**63 - 1  # clock values past this are no time: damaged data

# String ids are dense from 0; a damaged one must not size the table (2^32 ids would be 32 GiB).
MAX_SID_SLACK = 1 << 16


def _string_table(rows: list[tuple[int, int, int, str]], trace_dir: Path) -> np.ndarray[Any, Any]:
    size = max((r[2] for r in rows), default=-1) + 1
    if size > len(rows) + MAX_SID_SLACK:
        raise TraceError(trace_dir, f"corrupt string definitions: string id {size - 1} with only {len(rows)} "
                                    "strings defined (run `dfcompass repair`, or re-record)")
    table = np.full(size, None, dtype=object)
    for _, _, sid, value in rows:
        table[sid] = unescape(value)
    return table


def _string_def_table(rows: list[tuple[int, int, int, str]], ranks: list[int], strings: np.ndarray[Any, Any]
                      ) -> EventTable:
    """string_def as a table: sid column plus the raw (escaped) value as an object column."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][1], ranks[i]))
    dtype = np.dtype([("id", "<u2"), ("timestamp", "<u8"), ("sid", "<u4"), ("value", object)])
    records = np.array([tuple(rows[i]) for i in order], dtype=dtype)
    return EventTable(schema.STRING_DEF, records, strings, np.array([ranks[i] for i in order], dtype=np.uint32))
