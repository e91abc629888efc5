"""The `dfcompass analyze` summary, read off the generated analyses' state systems and segments.

* busy % per device (GPU: any queue running; CPU devices: any thread running a node) and per
  GPU queue, over the trace's time span;
* top nodes by total time (from the node-duration pattern's segments), with counts;
* memory peak per device (``Memory/<device>/bytes_in_use``);
* lost events (``events_discarded`` of the trace).

Analysis ids and attribute paths come from :mod:`tc_analyses.engine.layout`, the module the
generated analyses are written with.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from tc_analyses.engine import layout
from tc_analyses.engine.run import BuiltAnalyses
from tc_analyses.engine.state_system import Interval, StateSystem
from tc_analyses.model.intervals import union_ns


@dataclass(frozen=True)
class Busy:
    device: str
    queue: str  # "" for the whole device
    busy_ns: int
    span_ns: int
    percent: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "percent", round(100.0 * self.busy_ns / self.span_ns, 3) if self.span_ns else 0.0)


@dataclass(frozen=True)
class NodeTime:
    op: str
    count: int
    total_ns: int
    max_ns: int


@dataclass(frozen=True)
class Summary:
    trace: str
    span_ns: int
    events: int
    lost_events: int
    busy: list[Busy] = field(default_factory=list)
    top_nodes: list[NodeTime] = field(default_factory=list)
    memory_peak: dict[str, int] = field(default_factory=dict)
    analyses: list[str] = field(default_factory=list)


def _names(ss: StateSystem, root: str) -> dict[str, str]:
    names = {}
    for path, intervals in ss.items():
        if len(path) == 3 and path[0] == root and path[2] == layout.NAME:
            values = [str(i.value) for i in intervals if i.value is not None]
            names[path[1]] = values[-1] if values else path[1]
    return names


def _time(intervals: list[Interval], busy: Callable[[object], bool]) -> int:
    return sum(i.end - i.start + 1 for i in intervals if i.value is not None and busy(i.value.value))


def _union_time(interval_lists: list[list[Interval]]) -> int:
    """Time covered by the intervals holding a positive value (state intervals are closed: [start, end])."""
    spans = [(i.start, i.end + 1) for intervals in interval_lists for i in intervals
             if i.value is not None and int(i.value.value) > 0]
    return union_ns([s for s, _ in spans], [e for _, e in spans])


def summarize(built: BuiltAnalyses, top: int = 10) -> Summary:
    span = built.span_ns
    busy: list[Busy] = []
    gpu = built.systems.get(layout.GPU_ID)
    if gpu is not None:
        names = _names(gpu, layout.GPU)
        lanes: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # a queue and its sub-lanes
        for path, intervals in gpu.items():
            if len(path) == 3 and path[0] == layout.GPU and path[2] == layout.BUSY:
                busy.append(Busy(names.get(path[1], path[1]), "", _time(intervals, lambda v: v == 1), span))
            if len(path) in (4, 5) and path[0] == layout.GPU and path[2] == layout.QUEUES:
                lanes[(path[1], path[3])] += [(i.start, i.end + 1) for i in intervals
                                              if i.value is not None and i.value.value != layout.IDLE]
        for (device, queue), spans in lanes.items():
            running = union_ns([a for a, _ in spans], [b for _, b in spans])
            busy.append(Busy(names.get(device, device), queue, running, span))
    dataflow = built.systems.get(layout.DATAFLOW_ID)
    if dataflow is not None:
        names = _names(dataflow, layout.DEVICES)
        depth_by_device: dict[str, list[list[Interval]]] = defaultdict(list)
        for path, intervals in dataflow.items():  # Devices/<d>/Threads/<t>/Node holds the stack depth
            if len(path) == 5 and (path[0], path[2], path[4]) == (layout.DEVICES, layout.THREADS, layout.NODE):
                depth_by_device[path[1]].append(intervals)
        # A GPU's busy time is its queues', not its host threads': the GPU analysis describes
        # exactly the devices whose recorded kind is not cpu.
        gpus = set(_names(gpu, layout.GPU)) if gpu is not None else set()
        for device, lists in sorted(depth_by_device.items()):
            if device in gpus:
                continue
            busy.append(Busy(names.get(device, device), "", _union_time(lists), span))
    per_op: dict[str, list[int]] = defaultdict(list)
    for segment in built.segments.get(layout.NODE_LATENCY_ID, []):
        per_op[segment.name].append(segment.duration)
    top_nodes = sorted((NodeTime(op, len(d), sum(d), max(d)) for op, d in per_op.items()),
                       key=lambda n: (-n.total_ns, n.op))[:top]
    peaks: dict[str, int] = {}
    memory = built.systems.get(layout.MEMORY_ID)
    if memory is not None:
        names = _names(memory, layout.MEMORY)
        for path, intervals in memory.items():
            if len(path) == 3 and path[0] == layout.MEMORY and path[2] == layout.BYTES_IN_USE:
                values = [int(i.value.value) for i in intervals if i.value is not None]
                if values:
                    peaks[names.get(path[1], path[1])] = max(values)
    return Summary(built.path, span, built.events, built.lost, sorted(busy, key=lambda b: (b.device, b.queue)),
                   top_nodes, dict(sorted(peaks.items())), sorted(built.systems))
