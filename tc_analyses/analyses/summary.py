"""The `dfcompass analyze` summary, read off the generated analyses' state systems and segments.

* busy % per device (GPU: any queue running; CPU devices: any thread running a node) and per
  GPU queue, over the trace's time span;
* top nodes by total time (from the node-duration pattern's segments), with counts;
* memory peak per device (``Memory/<device>/bytes_in_use``);

It reads the state systems' interval arrays and the segments' columns: conditions are decided
once per distinct value, and no object is made per interval.
* lost events (``events_discarded`` of the trace).

Analysis ids and attribute paths come from :mod:`tc_analyses.engine.layout`, the module the
generated analyses are written with.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tc_analyses.engine import layout
from tc_analyses.engine.run import BuiltAnalyses
from tc_analyses.engine.state_system import StateSystem
from tc_analyses.engine.xml_pattern import Segment, SegmentColumns
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
    for path in ss.paths():
        if len(path) == 3 and path[0] == root and path[2] == layout.NAME:
            last = _last_held(ss, path)
            names[path[1]] = str(last) if last is not None else path[1]
    return names


def _last_held(ss: StateSystem, path: tuple[str, ...]) -> Any:
    """The last non-null value of `path` (a name attribute: a handful of intervals)."""
    _, _, ids, item = ss.arrays(path)
    for i in ids[::-1].tolist():
        value = item(i)
        if value is not None:
            return value
    return None


Ranges = list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]


def _union(ranges: Ranges) -> int:
    """|union| of half-open ranges given as (starts, ends) arrays."""
    if not ranges:
        return 0
    return union_ns(np.concatenate([s for s, _ in ranges]), np.concatenate([e for _, e in ranges]))


def _node_times(segments: Sequence[Segment]) -> list[NodeTime]:
    """Count, total and longest duration per segment name, summed with numpy over the columns."""
    if isinstance(segments, SegmentColumns):
        names = segments.names
        name_ids = np.frombuffer(segments.name_ids, dtype=np.int32) if len(segments) else np.zeros(0, np.int32)
        starts, ends = (np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64)
                        for c in (segments.starts, segments.ends))
    else:  # built event by event: a list of Segment objects
        names = sorted({s.name for s in segments})
        index = {n: i for i, n in enumerate(names)}
        name_ids = np.array([index[s.name] for s in segments], dtype=np.int64)
        starts = np.array([s.start for s in segments], dtype=np.int64)
        ends = np.array([s.end for s in segments], dtype=np.int64)
    durations = ends - starts
    count = np.bincount(name_ids, minlength=len(names))
    total = np.zeros(len(names), dtype=np.int64)
    np.add.at(total, name_ids, durations)
    longest = np.full(len(names), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(longest, name_ids, durations)
    return [NodeTime(names[i], int(count[i]), int(total[i]), int(longest[i])) for i in np.flatnonzero(count).tolist()]


def summarize(built: BuiltAnalyses, top: int = 10) -> Summary:
    span = built.span_ns
    busy: list[Busy] = []
    gpu = built.systems.get(layout.GPU_ID)
    if gpu is not None:
        names = _names(gpu, layout.GPU)
        lanes: dict[tuple[str, str], Ranges] = defaultdict(list)  # a queue and its sub-lanes
        for path in gpu.paths():
            if len(path) == 3 and path[0] == layout.GPU and path[2] == layout.BUSY:
                busy.append(Busy(names.get(path[1], path[1]), "", _union([gpu.ranges_where(path, lambda v: v == 1)]),
                                 span))
            if len(path) in (4, 5) and path[0] == layout.GPU and path[2] == layout.QUEUES:
                lanes[(path[1], path[3])].append(gpu.ranges_where(path, lambda v: v != layout.IDLE))
        for (device, queue), ranges in lanes.items():
            busy.append(Busy(names.get(device, device), queue, _union(ranges), span))
    dataflow = built.systems.get(layout.DATAFLOW_ID)
    if dataflow is not None:
        names = _names(dataflow, layout.DEVICES)
        depth_by_device: dict[str, Ranges] = defaultdict(list)
        for path in dataflow.paths():  # Devices/<d>/Threads/<t>/Node holds the stack depth
            if len(path) == 5 and (path[0], path[2], path[4]) == (layout.DEVICES, layout.THREADS, layout.NODE):
                depth_by_device[path[1]].append(dataflow.ranges_where(path, lambda v: int(v) > 0))
        # A GPU's busy time is its queues', not its host threads': the GPU analysis describes
        # exactly the devices whose recorded kind is not cpu.
        gpus = set(_names(gpu, layout.GPU)) if gpu is not None else set()
        for device, ranges in sorted(depth_by_device.items()):
            if device in gpus:
                continue
            busy.append(Busy(names.get(device, device), "", _union(ranges), span))
    top_nodes = sorted(_node_times(built.segments.get(layout.NODE_LATENCY_ID, [])),
                       key=lambda n: (-n.total_ns, n.op))[:top]
    peaks: dict[str, int] = {}
    memory = built.systems.get(layout.MEMORY_ID)
    if memory is not None:
        names = _names(memory, layout.MEMORY)
        for path in memory.paths():
            if len(path) == 3 and path[0] == layout.MEMORY and path[2] == layout.BYTES_IN_USE:
                values = [int(v.value) for v in memory.distinct_values(path)]
                if values:
                    peaks[names.get(path[1], path[1])] = max(values)
    return Summary(built.path, span, built.events, built.lost, sorted(busy, key=lambda b: (b.device, b.queue)),
                   top_nodes, dict(sorted(peaks.items())), sorted(built.systems))
