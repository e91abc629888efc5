"""The records every general CTF reader yields (babeltrace2's in a child process, our own CTF 1.8
reader): events and discarded-events ranges, as plain frozen values that pickle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class Event:
    """One event as any CTF reader sees it."""

    name: str
    timestamp: int  # clock value (cycles; ns for 1 GHz clocks), without the clock offset
    ns_from_origin: int  # wall time in ns, offset included
    stream: str  # stream name (the stream file path for CTF traces)
    fields: Mapping[str, Any]  # payload fields as plain Python values
    context: Mapping[str, Any]  # common and specific context fields, merged
    cpu: int | None = None  # the packet context's cpu_id (Trace Compass's CPU aspect)


@dataclass(frozen=True, slots=True)
class Discarded:
    """Events a tracer reported as lost (CTF events_discarded)."""

    stream: str
    count: int | None
    ns_from_origin: int | None  # the start of the lost range, when the stream has clock snapshots
    end_ns_from_origin: int | None = None  # its end
