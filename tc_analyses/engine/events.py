"""A dfcompass trace as one time-ordered event stream, the way Trace Compass feeds XML analyses."""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any, Iterator

from tc_analyses.reader.fast import DfcTrace, EventTable, stream_files


def iter_events(trace: DfcTrace) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(name, timestamp, raw payload fields) of every event, in Trace Compass's order and time base.

    Times are the CTF clock's with its offset applied (ns from the clock's origin, as Trace Compass
    and babeltrace2 show them). Events of equal timestamps come in stream-file-name order, as
    Trace Compass reads them (babeltrace2 agrees). Fields are as a CTF reader gives them: sid
    fields are integers and dfc:string_def values are the escaped ASCII text stored in the trace.
    """
    offset = trace.metadata.clock_offset_ns
    streams = [_rows(name, table, offset) for name, table in trace.tables.items()]
    streams.append(_lost(trace, offset))
    for ts, _, name, payload in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
        yield name, ts, payload


LOST_EVENT = "Lost event"  # the event Trace Compass synthesizes where a packet reports discarded events


def _lost(trace: DfcTrace, offset: int) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
    """Trace Compass's "Lost event" for each packet whose events_discarded grew, before the packet's
    own events: at the packet's begin time, with fields "Lost events" (how many) and "duration"
    (to the packet's end)."""
    files = stream_files(trace.path)
    rank = {path.name: i for i, path in enumerate(files)}
    found = sorted((begin + offset, 2 * rank.get(info.path.name, 0), count, duration)
                   for info in trace.streams for begin, count, duration in info.lost)
    for ts, order, count, duration in found:
        yield ts, order, LOST_EVENT, {"Lost events": count, "duration": duration}


def _rows(name: str, table: EventTable, offset: int) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
    fields = table.cls.field_names
    ranks = table.streams.tolist() if table.streams is not None else [table.cls.id] * len(table)
    for row, rank in zip(table.records.tolist(), ranks):
        yield row[1] + offset, 2 * rank + 1, name, dict(zip(fields, row[2:]))  # after its stream's lost event


def iter_ctf_events(path: str | Path, from_origin: bool = False) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Any CTF trace's events through babeltrace2, as Trace Compass's XML analyses see them.

    Times are clock values, or with `from_origin` ns from the clock's origin (its offset applied):
    what the traces of a job, each with its own offset, need to share one time line.

    Payload fields by name; context fields as ``context._<name>`` (Trace Compass keeps the
    TSDL underscore that babeltrace2 strips, and LTTng context fields all have one); ``cpu``
    from the packet context when the payload has no such field. Lost events become events
    named ``Lost event``, as Trace Compass synthesizes them.
    """
    from tc_analyses.reader.bt2_source import Discarded, iter_trace

    last = 0
    for item in iter_trace(path):
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
