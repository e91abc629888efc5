"""Fast reader for dfcompass traces: columnar event tables decoded with numpy.

A dfcompass stream file holds one fixed-size event class, so each packet body is an array of
records: the reader checks the packet preamble, views the body with the class's numpy dtype
and concatenates. Only ``dfc:string_def`` records (variable size, few) are parsed one by one.

Every structural problem raises :class:`~tc_analyses.errors.TraceError` naming the stream file
and the byte offset of the bad packet.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from tc_analyses.errors import TraceError
from tc_analyses.reader.metadata import Metadata, read_dfcompass_metadata
from tracer import schema
# The stream-level reader, and the names importers of this module know it by.
from tc_analyses.reader.streams import (DTYPES, MAX_TIMESTAMP, Packet, StreamInfo, read_stream, stream_files,
                                        walk_packets)

__all__ = ["DTYPES", "DfcTrace", "EventTable", "Packet", "StreamInfo", "read_stream", "read_trace", "stream_files",
           "walk_packets"]
from tracer.strings import unescape

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
        return self.decode(self.records[column])

    def decode(self, sids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Sids as strings (None where the string table lacks the id)."""
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


# String ids are dense from 0; a damaged one must not size the table (2^32 ids would be 32 GiB).
MAX_SID_SLACK = 1 << 16


def _string_table(rows: list[tuple[int, int, int, str]], trace_dir: Path) -> np.ndarray[Any, Any]:
    size = max((r[2] for r in rows), default=-1) + 1
    if size > len(rows) + MAX_SID_SLACK:
        raise TraceError(trace_dir, f"corrupt string definitions: string id {size - 1} with only {len(rows)} "
                                    "strings defined (run `dfcompass repair`, or re-record)")
    table = np.full(size, None, dtype=object)
    for _, _, sid, value in rows:
        try:
            table[sid] = unescape(value)
        except UnicodeDecodeError as exc:  # a damaged escape (\u with fewer than 4 digits)
            raise TraceError(trace_dir, f"corrupt string definition {sid}: {exc.reason} (run `dfcompass repair`, "
                                        "or re-record)") from None
    return table


def _string_def_table(rows: list[tuple[int, int, int, str]], ranks: list[int], strings: np.ndarray[Any, Any]
                      ) -> EventTable:
    """string_def as a table: sid column plus the raw (escaped) value as an object column."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][1], ranks[i]))
    dtype = np.dtype([("id", "<u2"), ("timestamp", "<u8"), ("sid", "<u4"), ("value", object)])
    records = np.array([tuple(rows[i]) for i in order], dtype=dtype)
    return EventTable(schema.STRING_DEF, records, strings, np.array([ranks[i] for i in order], dtype=np.uint32))
