"""A dfcompass trace as one time-ordered event stream, the way Trace Compass feeds XML analyses.

:class:`EventOrder` computes the order once, with numpy: every event's global position. The
event-by-event engine iterates it (all events, or only the classes an analysis handles); the
columnar engine reads the same positions as arrays, so both see one order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from tc_analyses.engine.grouping import lexsort_pairs
from tc_analyses.errors import DfcompassError
from tc_analyses.reader.fast import DfcTrace, stream_files

LOST_EVENT = "Lost event"  # the event Trace Compass synthesizes where a packet reports discarded events
_CHUNK = 65_536  # events made into Python tuples at a time


@dataclass
class EventClassRows:
    """The rows of one event class in Trace Compass's time base, with their global positions."""

    name: str
    ts: np.ndarray[Any, Any]  # int64, ns from the clock's origin
    positions: np.ndarray[Any, Any]  # int64: the place of each row in the whole trace's order
    columns: dict[str, np.ndarray[Any, Any]]  # payload field name -> raw values, as a CTF reader gives them

    def __len__(self) -> int:
        return len(self.ts)


class EventOrder:
    """Every event of a dfcompass trace in Trace Compass's order and time base.

    Times are the CTF clock's with its offset applied (ns from the clock's origin, as Trace Compass
    and babeltrace2 show them). Events of equal timestamps come in stream-file-name order, as
    Trace Compass reads them (babeltrace2 agrees); a packet's "Lost event" comes before the
    packet's own events. Fields are as a CTF reader gives them: sid fields are integers and
    dfc:string_def values are the escaped ASCII text stored in the trace.
    """

    def __init__(self, trace: DfcTrace) -> None:
        offset = trace.metadata.clock_offset_ns
        self.classes: list[EventClassRows] = []
        self._records: list[np.ndarray[Any, Any]] = []
        keys_ts, keys_tie = [], []
        for name, table in trace.tables.items():
            ts = table.records["timestamp"].astype(np.int64) + offset
            ranks = (table.streams.astype(np.int64) if table.streams is not None
                     else np.full(len(table), table.cls.id, dtype=np.int64))
            columns = {f: table.records[f] for f in table.cls.field_names}
            self.classes.append(EventClassRows(name, ts, np.empty(0, np.int64), columns))
            self._records.append(table.records)
            keys_ts.append(ts)
            keys_tie.append(2 * ranks + 1)  # after its stream's lost event
        lost = _lost_rows(trace, offset)
        self.classes.append(lost)
        self._records.append(np.empty(0))
        keys_ts.append(lost.ts)
        keys_tie.append(lost.columns.pop("_order"))
        all_ts = np.concatenate(keys_ts) if keys_ts else np.empty(0, np.int64)
        # a stable sort: ties keep class order, then row order (each class is sorted already)
        order = lexsort_pairs(np.concatenate(keys_tie), all_ts) if len(all_ts) else np.empty(0, np.int64)
        positions = np.empty(len(order), dtype=np.int64)
        positions[order] = np.arange(len(order), dtype=np.int64)
        self._class_of = np.empty(len(order), dtype=np.int32)  # by position
        self._row_of = np.empty(len(order), dtype=np.int64)
        start = 0
        for index, rows in enumerate(self.classes):
            stop = start + len(rows)
            rows.positions = positions[start:stop]
            self._class_of[rows.positions] = index
            self._row_of[rows.positions] = np.arange(len(rows), dtype=np.int64)
            start = stop
        self.ts = all_ts[order] if len(order) else all_ts  # by position

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def first_ts(self) -> int | None:
        return int(self.ts[0]) if len(self.ts) else None

    @property
    def last_ts(self) -> int | None:
        return int(self.ts[-1]) if len(self.ts) else None

    def iter_events(self, names: set[str] | None = None, follow: bool = False
                    ) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """(name, timestamp, payload fields) in order; with `names`, only events of those classes,
        and with `follow` also the first event and the one right after each of them (where a
        pattern makes its first and its next pending scenarios)."""
        if names is None:
            selected = np.arange(len(self.ts), dtype=np.int64)
        else:
            wanted = np.array([rows.name in names for rows in self.classes], dtype=bool)
            mask = wanted[self._class_of] if len(self.ts) else np.zeros(0, dtype=bool)
            if follow and len(mask):
                mask[1:] |= mask[:-1].copy()
                mask[0] = True
            selected = np.flatnonzero(mask)
        for begin in range(0, len(selected), _CHUNK):
            yield from self._events(selected[begin:begin + _CHUNK])

    def _events(self, positions: np.ndarray[Any, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
        classes, rows = self._class_of[positions], self._row_of[positions]
        made: list[Any] = [None] * len(positions)
        for index in np.unique(classes).tolist():
            where = np.flatnonzero(classes == index)
            made_rows = self._payloads(index, rows[where])
            for at, payload in zip(where.tolist(), made_rows):
                made[at] = payload
        names = [rows.name for rows in self.classes]
        for class_index, ts, payload in zip(classes.tolist(), self.ts[positions].tolist(), made):
            yield names[class_index], ts, payload

    def _payloads(self, index: int, rows: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
        cls = self.classes[index]
        if cls.name == LOST_EVENT:
            count, duration = cls.columns["Lost events"][rows].tolist(), cls.columns["duration"][rows].tolist()
            return [{"Lost events": c, "duration": d} for c, d in zip(count, duration)]
        fields = tuple(cls.columns)
        return [dict(zip(fields, row[2:])) for row in self._records[index][rows].tolist()]


def _lost_rows(trace: DfcTrace, offset: int) -> EventClassRows:
    """Trace Compass's "Lost event" for each packet whose events_discarded grew, before the packet's
    own events: at the packet's begin time, with fields "Lost events" (how many) and "duration"
    (to the packet's end)."""
    rank = {path.name: i for i, path in enumerate(stream_files(trace.path))}
    found = sorted((begin + offset, 2 * rank.get(info.path.name, 0), count, duration)
                   for info in trace.streams for begin, count, duration in info.lost)
    columns = [_integers(c) for c in zip(*found)] if found else [np.empty(0, np.int64)] * 4
    if columns[0].dtype == object:
        raise DfcompassError(f"{trace.path}: a packet that lost events begins past 2^63 ns: a damaged packet header")
    return EventClassRows(LOST_EVENT, columns[0], np.empty(0, np.int64),
                          {"Lost events": columns[2], "duration": columns[3], "_order": columns[1]})


def _integers(numbers: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """int64, or Python integers where a damaged packet reports a count past it (a counter that
    went backwards reads as nearly 2^64): the analyses see the number the packet holds."""
    if all(-2**63 <= n < 2**63 for n in numbers):
        return np.array(numbers, dtype=np.int64)
    column = np.empty(len(numbers), dtype=object)
    column[:] = list(numbers)
    return column


def rows_of(events: Sequence[tuple[str, int, Mapping[str, Any]]]) -> list[EventClassRows]:
    """An event list (babeltrace2's events, a test's) as columns: one object column per field."""
    by_name: dict[str, list[int]] = {}
    for position, (name, _, _) in enumerate(events):
        by_name.setdefault(name, []).append(position)
    out = []
    for name, positions in by_name.items():
        fields = list(dict.fromkeys(key for p in positions for key in events[p][2]))
        columns = {}
        for key in fields:
            column = np.empty(len(positions), dtype=object)
            column[:] = [events[p][2].get(key) for p in positions]
            columns[key] = column
        out.append(EventClassRows(name, np.array([events[p][1] for p in positions], dtype=np.int64),
                                  np.array(positions, dtype=np.int64), columns))
    return out


def iter_events(trace: DfcTrace) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(name, timestamp, raw payload fields) of every event, in Trace Compass's order and time base
    (see :class:`EventOrder`)."""
    return EventOrder(trace).iter_events()


def iter_ctf_events(path: str | Path, from_origin: bool = False) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Any CTF trace's events (our CTF 1.8 reader, else babeltrace2), as Trace Compass's XML analyses see them.

    Times are clock values, or with `from_origin` ns from the clock's origin (its offset applied):
    what the traces of a job, each with its own offset, need to share one time line.

    Payload fields by name; context fields as ``context._<name>`` (Trace Compass keeps the
    TSDL underscore that babeltrace2 strips, and LTTng context fields all have one); ``cpu``
    from the packet context when the payload has no such field. Lost events become events
    named ``Lost event``, as Trace Compass synthesizes them.
    """
    from tc_analyses.reader.any_ctf import iter_any_ctf
    from tc_analyses.reader.records import Discarded

    last = 0
    for item in iter_any_ctf(path):
        if isinstance(item, Discarded):  # as Trace Compass: at the start of the lost range, with its duration
            start = item.ns_from_origin if item.ns_from_origin is not None else last
            end = item.end_ns_from_origin if item.end_ns_from_origin is not None else start
            yield LOST_EVENT, start, {"Lost events": item.count or 0, "duration": max(0, end - start)}
            continue
        fields = dict(item.fields)
        for key, value in item.context.items():
            fields[f"context._{key}"] = value
        if item.cpu is not None:
            fields.setdefault("cpu", item.cpu)
        last = item.ns_from_origin if from_origin else item.timestamp
        yield item.name, last, fields
