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
from typing import Any, Callable

from tc_analyses.engine import layout
from tc_analyses.engine.run import BuiltAnalyses
from tc_analyses.engine.state_system import StateSystem
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
            values = [str(v) for v in ss.columns(path)[2] if v is not None]
            names[path[1]] = values[-1] if values else path[1]
    return names


def _spans(ss: StateSystem, path: tuple[str, ...], holds: Callable[[Any], bool]) -> list[tuple[int, int]]:
    """Half-open spans of the (closed) intervals of `path` whose value passes `holds`, read from
    the state system's columns: no interval objects are made."""
    starts, ends, values = ss.columns(path)
    return [(s, e + 1) for s, e, v in zip(starts, ends, values) if v is not None and holds(v.value)]


def _union(spans: list[tuple[int, int]]) -> int:
    return union_ns([s for s, _ in spans], [e for _, e in spans])


def summarize(built: BuiltAnalyses, top: int = 10) -> Summary:
    span = built.span_ns
    busy: list[Busy] = []
    gpu = built.systems.get(layout.GPU_ID)
    if gpu is not None:
        names = _names(gpu, layout.GPU)
        lanes: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # a queue and its sub-lanes
        for path in gpu.paths():
            if len(path) == 3 and path[0] == layout.GPU and path[2] == layout.BUSY:
                busy.append(Busy(names.get(path[1], path[1]), "", _union(_spans(gpu, path, lambda v: v == 1)), span))
            if len(path) in (4, 5) and path[0] == layout.GPU and path[2] == layout.QUEUES:
                lanes[(path[1], path[3])] += _spans(gpu, path, lambda v: v != layout.IDLE)
        for (device, queue), spans in lanes.items():
            busy.append(Busy(names.get(device, device), queue, _union(spans), span))
    dataflow = built.systems.get(layout.DATAFLOW_ID)
    if dataflow is not None:
        names = _names(dataflow, layout.DEVICES)
        depth_by_device: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for path in dataflow.paths():  # Devices/<d>/Threads/<t>/Node holds the stack depth
            if len(path) == 5 and (path[0], path[2], path[4]) == (layout.DEVICES, layout.THREADS, layout.NODE):
                depth_by_device[path[1]] += _spans(dataflow, path, lambda v: int(v) > 0)
        # A GPU's busy time is its queues', not its host threads': the GPU analysis describes
        # exactly the devices whose recorded kind is not cpu.
        gpus = set(_names(gpu, layout.GPU)) if gpu is not None else set()
        for device, spans in sorted(depth_by_device.items()):
            if device in gpus:
                continue
            busy.append(Busy(names.get(device, device), "", _union(spans), span))
    per_op: dict[str, list[int]] = defaultdict(list)
    for segment in built.segments.get(layout.NODE_LATENCY_ID, []):
        per_op[segment.name].append(segment.duration)
    top_nodes = sorted((NodeTime(op, len(d), sum(d), max(d)) for op, d in per_op.items()),
                       key=lambda n: (-n.total_ns, n.op))[:top]
    peaks: dict[str, int] = {}
    memory = built.systems.get(layout.MEMORY_ID)
    if memory is not None:
        names = _names(memory, layout.MEMORY)
        for path in memory.paths():
            if len(path) == 3 and path[0] == layout.MEMORY and path[2] == layout.BYTES_IN_USE:
                values = [int(v.value) for v in memory.columns(path)[2] if v is not None]
                if values:
                    peaks[names.get(path[1], path[1])] = max(values)
    return Summary(built.path, span, built.events, built.lost, sorted(busy, key=lambda b: (b.device, b.queue)),
                   top_nodes, dict(sorted(peaks.items())), sorted(built.systems))
