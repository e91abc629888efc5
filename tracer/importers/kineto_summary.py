"""What an import wrote and what it left out, and where its clock comes from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tracer.importers.kineto_source import as_int

EPOCH_THRESHOLD_NS = 10**18  # 2001-09-09: Kineto stamps past this are Unix-epoch wall time
NO_TENSOR_EDGES = ("Kineto traces carry no tensor identity, so the imported trace has no "
                   "dfc:tensor_edge events")


@dataclass(frozen=True)
class ImportSummary:
    """The result of :func:`tracer.importers.import_kineto`; JSON-ready with dataclasses.asdict."""

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("events",)  # derived, added to --format json

    source: str
    output: str
    source_events: int  # entries of traceEvents
    events_per_class: dict[str, int]  # dfcompass class name -> events written (definitions included)
    skipped: dict[str, int]  # Kineto category (or "instant", "ph=B"...) -> events not imported
    devices: dict[str, str]  # device name -> model ("" when the file does not say)
    gpu_streams: dict[str, list[int]]  # GPU device name -> its streams (queues)
    threads: int  # CPU threads with events
    steps: list[int]  # ProfilerStep numbers
    remapped_ids: dict[str, dict[str, int]]  # "tid"/"pid"/"stream" -> {id in the file: u32 written}
    correlation: dict[str, int]  # how GPU activities were joined to their runtime calls
    clock_origin: str  # "baseTimeNanoseconds", "unix epoch" or "unknown" (see docs/import-kineto.md)
    clock_offset_ns: int  # the trace clock's offset: ns_from_origin = offset + timestamp
    first_ns: int  # ns_from_origin of the first and last event
    last_ns: int
    notes: list[str] = field(default_factory=lambda: [NO_TENSOR_EDGES])

    @property
    def events(self) -> int:
        return sum(self.events_per_class.values())


def wall_clock_origin(doc: dict[str, Any], first_ns: int) -> tuple[str, int]:
    """How the file's ts map to wall time: (origin name, ns to add to each ts in ns).

    Kineto since 2024 writes ts relative to ``baseTimeNanoseconds`` (wall time rounded down to
    3-month intervals, so ts keep ns precision in a double); older versions write Unix-epoch
    microseconds. Small ts without a base are on an unknown clock and are kept as they are.
    """
    base = as_int(doc.get("baseTimeNanoseconds"))
    if base is not None and base >= 0:
        return "baseTimeNanoseconds", base
    if first_ns >= EPOCH_THRESHOLD_NS:
        return "unix epoch", 0
    return "unknown", 0
