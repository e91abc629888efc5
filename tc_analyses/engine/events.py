"""A dfcompass trace as one time-ordered event stream, the way Trace Compass feeds XML analyses."""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any, Iterator

from tc_analyses.reader.fast import DfcTrace


def iter_events(trace: DfcTrace) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(name, timestamp, raw payload fields) of every event, by timestamp then catalogue order.

    Fields are as a CTF reader gives them: sid fields are integers and dfc:string_def values are
    the escaped ASCII text stored in the trace, exactly what Trace Compass sees.
    """
    streams = [_rows(name, table.cls.id, table.cls.field_names, table.records.tolist())
               for name, table in trace.tables.items()]
    for ts, _, name, payload in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
        yield name, ts, payload


def _rows(name: str, class_id: int, fields: tuple[str, ...], rows: list[Any]) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
    for row in rows:
        yield row[1], class_id, name, dict(zip(fields, row[2:]))


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
        if isinstance(item, Discarded):
            yield "Lost event", last, {"count": item.count}
            continue
        fields = dict(item.fields)
        for key, value in item.context.items():
            fields[f"context._{key}"] = value
        if item.cpu is not None:
            fields.setdefault("cpu", item.cpu)
        last = item.ns_from_origin if from_origin else item.timestamp
        yield item.name, last, fields
