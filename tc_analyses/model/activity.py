"""A trace's activity as paired intervals: node runs, steps, runtime API calls and GPU operations.

The seed analyses (runtime overhead, idle-time breakdown, memory, inter-operator parallelism)
all need the same joins, so they are made once here:

* begin/end events paired into intervals (GPU operations per device, queue and correlation id;
  API calls per thread, name and correlation id, innermost first; nodes by execution id);
* each API call's **owner**: the outermost node running on its thread when it started, which is
  the framework op that issued it;
* each GPU operation's **launch**: the API call with the same correlation id.

Intervals whose begin or end was not recorded (a truncated trace) are left out and counted in
``unpaired``. All times are nanoseconds on the trace clock.

It is also the one place that names devices: :class:`Device` holds what ``dfc:device_info``
recorded (name, kind, model), a device used but never described is named ``device<index>``,
and :attr:`Device.is_gpu` tells CPUs from GPUs by the recorded kind. Interval unions are in
:mod:`tc_analyses.model.intervals`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tc_analyses.reader.fast import DfcTrace


@dataclass(frozen=True, slots=True)
class Device:
    """A device of the trace, as its ``dfc:device_info`` event describes it.

    Parameters
    ----------
    index : int
        The trace-local device index that events carry in their ``device`` fields.
    name : str
        The recorded name (``cpu``, ``cuda:0``), or ``device<index>`` when none was recorded.
    kind : str
        The recorded kind (``cpu``, ``cuda``...), empty when not recorded.
    model : str
        The recorded hardware model, empty when not known.

    Examples
    --------
    >>> Device(1, "cuda:0", "cuda", "H100").is_gpu, Device(0, "cpu", "cpu", "").is_gpu
    (True, False)
    >>> Device.undescribed(3)
    Device(index=3, name='device3', kind='', model='')
    """

    index: int
    name: str
    kind: str = ""
    model: str = ""

    @classmethod
    def undescribed(cls, index: int, name: str = "") -> Device:
        """The device `index` when the trace did not describe it (or gave it no name)."""
        return cls(index, name or f"device{index}")

    @classmethod
    def named(cls, name: str) -> Device:
        """A device known only by its name (a graph node's ``device`` attribute, say); kind unknown."""
        return cls(-1, name)

    @property
    def is_gpu(self) -> bool:
        """Not a CPU: the recorded kind is not ``cpu``.

        Without a recorded kind the name decides: ``cpu``, ``cpu:N``, ``cpu0``... are CPUs,
        anything else is not.
        """
        return self.kind != "cpu" if self.kind else not self.name.startswith("cpu")


def read_devices(trace: DfcTrace) -> dict[int, Device]:
    """Index -> :class:`Device` of every device the trace describes (the last description wins)."""
    table = trace.table("device_info")
    return {index: Device(index, name or Device.undescribed(index).name, kind or "", model or "")
            for index, name, kind, model in zip(table["device"].tolist(), table.text("name").tolist(),
                                                 table.text("kind").tolist(), table.text("model").tolist())}


@dataclass(frozen=True, slots=True)
class GpuOp:
    kind: str  # "kernel", "memcpy" or "memset"
    device: str
    queue: int
    correlation_id: int
    start: int
    end: int
    name: str  # kernel name; copy kind for memcpy ("HtoD", "HtoD pageable"...); "memset"
    bytes: int = 0
    src_device: str = ""
    dst_device: str = ""

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class ApiCall:
    tid: int
    name: str
    correlation_id: int
    start: int
    end: int
    owner: int = -1  # index in Activity.nodes of the outermost node open on this thread, -1 if none

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class NodeRun:
    node_id: int
    op: str
    name: str
    device: str
    tid: int
    step: int
    start: int
    end: int
    outermost: bool  # no other node of its thread encloses it

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class StepRun:
    step: int
    tid: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class AnnotationRun:
    """A user annotation (record_function, NVTX range): on a CPU thread (`track` = tid) or a GPU queue."""

    name: str
    device: str
    track: int
    start: int
    end: int
    on_gpu: bool


@dataclass(frozen=True, slots=True)
class SyncRun:
    """A GPU synchronisation (CUPTI's cuda_sync): `queue` -1 is the whole device (a context sync);
    `wait_queue` the queue waited on (Stream Wait Event), -1 when none."""

    device: str
    queue: int
    correlation_id: int
    kind: str
    wait_queue: int
    start: int
    end: int


@dataclass
class Activity:
    path: str
    nodes: list[NodeRun]  # by start time
    steps: list[StepRun]  # by start time
    api: list[ApiCall]  # by start time
    gpu: list[GpuOp]  # by start time
    devices: dict[int, Device]  # the devices the trace describes, by index
    unpaired: int = 0
    span: tuple[int, int] = (0, 0)  # first and last event time of the trace
    annotations: list[AnnotationRun] = field(default_factory=list)  # by start time
    syncs: list[SyncRun] = field(default_factory=list)  # by start time
    windowed: bool = False  # already restricted to an analysis window (tc_analyses.model.window)
    _launch: dict[int, int] = field(default_factory=dict, repr=False)

    def device(self, index: int) -> Device:
        """The device of index `index`: as described, or :meth:`Device.undescribed`."""
        found = self.devices.get(index)
        return found if found is not None else Device.undescribed(index)

    def device_named(self, name: str) -> Device:
        """The described device called `name`, else :meth:`Device.named` (kind unknown)."""
        for device in self.devices.values():
            if device.name == name:
                return device
        return Device.named(name)

    def _call_index(self, correlation_id: int) -> int:
        if not correlation_id:
            return -1
        if not self._launch:
            self._launch = {c.correlation_id: i for i, c in enumerate(self.api) if c.correlation_id}
        return self._launch.get(correlation_id, -1)

    def launch_index(self, op: GpuOp) -> int:
        """Index in :attr:`api` of the call that launched `op` (same correlation id), -1 if not recorded."""
        return self._call_index(op.correlation_id)

    def launch_of(self, op: GpuOp) -> ApiCall | None:
        """The API call that launched `op` (same correlation id), if it was recorded."""
        at = self.launch_index(op)
        return None if at < 0 else self.api[at]

    def call_with_correlation(self, correlation_id: int) -> ApiCall | None:
        """The API call with this correlation id (a launch, or the call a GPU sync answers), if recorded."""
        at = self._call_index(correlation_id)
        return None if at < 0 else self.api[at]


def read_activity(trace: DfcTrace) -> Activity:
    """Pair the begin/end events of `trace` into an :class:`Activity`."""
    devices = read_devices(trace)
    unpaired = 0
    nodes, lost = _nodes(trace, devices)
    unpaired += lost
    steps, lost = _steps(trace)
    unpaired += lost
    api, lost = _api(trace, nodes)
    unpaired += lost
    gpu, lost = _gpu(trace, devices)
    unpaired += lost
    firsts = [int(t["timestamp"][0]) for t in trace.tables.values() if len(t)]
    lasts = [int(t["timestamp"][-1]) for t in trace.tables.values() if len(t)]
    span = (min(firsts), max(lasts)) if firsts else (0, 0)
    annotations, lost = _annotations(trace, devices)
    unpaired += lost
    syncs, lost = _syncs(trace, devices)
    unpaired += lost
    return Activity(str(trace.path), nodes, steps, api, gpu, devices, unpaired, span, annotations, syncs)


_NONE_U32 = 4294967295  # "none" in a u32 field of the catalogue


def _annotations(trace: DfcTrace, devices: dict[int, Device]) -> tuple[list[AnnotationRun], int]:
    names = _names(devices)
    begins, ends = trace.table("annotation_begin"), trace.table("annotation_end")
    end_of = {(d, t, a): ts for d, t, a, ts in zip(ends["device"].tolist(), ends["track"].tolist(),
                                                     ends["annotation_id"].tolist(), ends["timestamp"].tolist())}
    runs = []
    for dev, track, aid, ts, name in zip(begins["device"].tolist(), begins["track"].tolist(),
                                         begins["annotation_id"].tolist(), begins["timestamp"].tolist(),
                                         begins.text("name").tolist()):
        end = end_of.pop((dev, track, aid), None)
        if end is not None:
            device = devices.get(dev, Device.undescribed(dev))
            runs.append(AnnotationRun(name or "", _name(names, dev), track, ts, end, device.is_gpu))
    runs.sort(key=lambda a: (a.start, -a.end))
    return runs, len(begins) - len(runs) + len(end_of)


def _syncs(trace: DfcTrace, devices: dict[int, Device]) -> tuple[list[SyncRun], int]:
    names = _names(devices)
    begins, ends = trace.table("sync_begin"), trace.table("sync_end")
    end_times: dict[tuple[int, int, int], deque[int]] = defaultdict(deque)
    for ts, dev, queue, corr in zip(ends["timestamp"].tolist(), ends["device"].tolist(), ends["queue"].tolist(),
                                    ends["correlation_id"].tolist()):
        end_times[(dev, queue, corr)].append(ts)
    runs, unpaired = [], 0
    for ts, dev, queue, corr, kind, wait in zip(begins["timestamp"].tolist(), begins["device"].tolist(),
                                                begins["queue"].tolist(), begins["correlation_id"].tolist(),
                                                begins.text("kind").tolist(), begins["wait_queue"].tolist()):
        pending = end_times.get((dev, queue, corr))
        if not pending:
            unpaired += 1
            continue
        runs.append(SyncRun(_name(names, dev), -1 if queue == _NONE_U32 else queue, corr, kind or "",
                            -1 if wait == _NONE_U32 else wait, ts, pending.popleft()))
    runs.sort(key=lambda r: (r.start, r.device, r.queue))
    return runs, unpaired + sum(len(q) for q in end_times.values())


def _names(devices: dict[int, Device]) -> dict[int, str]:
    """Index -> name of the described devices; others are named by :meth:`Device.undescribed`."""
    return {i: d.name for i, d in devices.items()}


def _name(names: dict[int, str], index: int) -> str:
    found = names.get(index)
    return found if found is not None else Device.undescribed(index).name


def _nodes(trace: DfcTrace, devices: dict[int, Device]) -> tuple[list[NodeRun], int]:
    names = _names(devices)
    begins, ends = trace.table("node_begin"), trace.table("node_end")
    end_of = dict(zip(ends["node_id"].tolist(), ends["timestamp"].tolist()))
    raw = []
    for nid, ts, op, name, dev, tid, step in zip(
            begins["node_id"].tolist(), begins["timestamp"].tolist(), begins.text("op").tolist(),
            begins.text("name").tolist(), begins["device"].tolist(), begins["tid"].tolist(),
            begins["step"].tolist()):
        end = end_of.pop(nid, None)
        if end is not None:
            raw.append((ts, -end, nid, op or "", name or "", _name(names, dev), tid, step))
    unpaired = len(begins) - len(raw) + len(end_of)
    raw.sort()  # by start, enclosing nodes first
    open_until: dict[int, int] = {}  # tid -> end of the outermost open node
    nodes = []
    for ts, neg_end, nid, op, name, device, tid, step in raw:
        outermost = ts >= open_until.get(tid, -1)
        if outermost:
            open_until[tid] = -neg_end
        nodes.append(NodeRun(nid, op, name, device, tid, step, ts, -neg_end, outermost))
    return nodes, unpaired


def _steps(trace: DfcTrace) -> tuple[list[StepRun], int]:
    begins, ends = trace.table("step_begin"), trace.table("step_end")
    pending: dict[tuple[int, int], deque[int]] = defaultdict(deque)
    for ts, step, tid in zip(begins["timestamp"].tolist(), begins["step"].tolist(), begins["tid"].tolist()):
        pending[(step, tid)].append(ts)
    steps, unpaired = [], 0
    for ts, step, tid in zip(ends["timestamp"].tolist(), ends["step"].tolist(), ends["tid"].tolist()):
        queue = pending.get((step, tid))
        if queue:
            steps.append(StepRun(step, tid, queue.popleft(), ts))
        else:
            unpaired += 1
    unpaired += sum(len(q) for q in pending.values())
    steps.sort(key=lambda s: (s.start, s.tid))
    return steps, unpaired


def _outermost_index(nodes: list[NodeRun]) -> dict[int, tuple[list[int], list[int]]]:
    """tid -> (starts, node indexes) of its outermost nodes, for bisecting."""
    per_tid: dict[int, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, n in enumerate(nodes):
        if n.outermost:
            starts, indexes = per_tid[n.tid]
            starts.append(n.start)
            indexes.append(i)
    return per_tid


def _pair_in_order(begin_keys: list[np.ndarray[Any, Any]], begin_ts: np.ndarray[Any, Any],
                   end_keys: list[np.ndarray[Any, Any]], end_ts: np.ndarray[Any, Any]
                   ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """Indexes pairing the i-th begin of each key with its i-th end, when that is the whole story.

    Sorted by key then time, begins and ends pair position by position exactly when every key
    has as many ends as begins and no end comes before its begin: then first-in first-out
    pairing per key gives the same pairs. Otherwise (a truncated trace) None: the caller pairs
    event by event and counts what is left over.
    """
    if len(begin_ts) != len(end_ts):
        return None
    by_begin = np.lexsort((begin_ts, *reversed(begin_keys)))
    by_end = np.lexsort((end_ts, *reversed(end_keys)))
    if any(not np.array_equal(b[by_begin], e[by_end]) for b, e in zip(begin_keys, end_keys)):
        return None
    if np.any(end_ts[by_end] < begin_ts[by_begin]):
        return None
    return by_begin, by_end


def _api(trace: DfcTrace, nodes: list[NodeRun]) -> tuple[list[ApiCall], int]:
    enters, exits = trace.table("api_enter"), trace.table("api_exit")
    # Calls pair first in, first out per (thread, name, correlation id): correlation ids tell
    # calls apart, and a call of zero duration has its exit at its enter's timestamp.
    keys = ("tid", "name", "correlation_id")
    paired = _pair_in_order([enters[k] for k in keys], enters["timestamp"], [exits[k] for k in keys],
                            exits["timestamp"])
    if paired is None:
        return _api_slow(trace, nodes)
    by_enter, by_exit = paired
    starts, ends = enters["timestamp"][by_enter], exits["timestamp"][by_exit]
    tids = enters["tid"][by_enter]
    order = np.lexsort((tids, starts))
    starts, ends, tids = starts[order], ends[order], tids[order]
    names = enters.text("name")[by_enter][order]
    corrs = enters["correlation_id"][by_enter][order]
    owners = _owners(nodes, tids, starts)
    calls = [ApiCall(tid, name or "", corr, start, end, owner) for tid, name, corr, start, end, owner in zip(
        tids.tolist(), names.tolist(), corrs.tolist(), starts.tolist(), ends.tolist(), owners.tolist())]
    return calls, 0


def _owners(nodes: list[NodeRun], tids: np.ndarray[Any, Any], starts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Index of the outermost node open on each call's thread at its start, -1 when none."""
    owners = np.full(len(starts), -1, dtype=np.int64)
    for tid, (node_starts, indexes) in _outermost_index(nodes).items():
        mine = np.flatnonzero(tids == tid)
        if not len(mine):
            continue
        index = np.asarray(indexes, dtype=np.int64)
        node_ends = np.fromiter((nodes[i].end for i in indexes), np.int64, len(indexes))
        at = np.searchsorted(np.asarray(node_starts, dtype=np.int64), starts[mine], side="right") - 1
        inside = (at >= 0) & (starts[mine] <= node_ends[np.maximum(at, 0)])
        owners[mine[inside]] = index[at[inside]]
    return owners


def _api_slow(trace: DfcTrace, nodes: list[NodeRun]) -> tuple[list[ApiCall], int]:
    enters, exits = trace.table("api_enter"), trace.table("api_exit")
    exit_times: dict[tuple[int, str, int], deque[int]] = defaultdict(deque)
    for ts, tid, name, corr in zip(exits["timestamp"].tolist(), exits["tid"].tolist(),
                                   exits.text("name").tolist(), exits["correlation_id"].tolist()):
        exit_times[(tid, name or "", corr)].append(ts)
    owners = _outermost_index(nodes)
    calls, unpaired = [], 0
    for ts, tid, name, corr in zip(enters["timestamp"].tolist(), enters["tid"].tolist(),
                                   enters.text("name").tolist(), enters["correlation_id"].tolist()):
        pending = exit_times.get((tid, name or "", corr))
        while pending and pending[0] < ts:
            pending.popleft()  # an exit whose enter was not recorded
            unpaired += 1
        if not pending:
            unpaired += 1
            continue
        calls.append(ApiCall(tid, name or "", corr, ts, pending.popleft(), _owner(owners, nodes, tid, ts)))
    unpaired += sum(len(q) for q in exit_times.values())
    calls.sort(key=lambda c: (c.start, c.tid))
    return calls, unpaired


def _owner(owners: dict[int, tuple[list[int], list[int]]], nodes: list[NodeRun], tid: int, ts: int) -> int:
    found = owners.get(tid)
    if not found:
        return -1
    starts, indexes = found
    at = bisect.bisect_right(starts, ts) - 1
    if at < 0:
        return -1
    node = nodes[indexes[at]]
    return indexes[at] if node.start <= ts <= node.end else -1


_GPU_CLASSES = (("kernel", "kernel_begin", "kernel_end"), ("memcpy", "memcpy_begin", "memcpy_end"),
                ("memset", "memset_begin", "memset_end"))


def _gpu(trace: DfcTrace, devices: dict[int, Device]) -> tuple[list[GpuOp], int]:
    names = _names(devices)
    ops: list[GpuOp] = []
    unpaired = 0
    for kind, begin_name, end_name in _GPU_CLASSES:
        begins, ends = trace.table(begin_name), trace.table(end_name)
        if not len(begins) and not len(ends):
            continue
        keys = ("device", "queue", "correlation_id")
        paired = _pair_in_order([begins[k] for k in keys], begins["timestamp"], [ends[k] for k in keys],
                                ends["timestamp"])
        if paired is not None:
            by_begin, by_end = paired
            details = _details(kind, begins, names)
            ops += [GpuOp(kind, _name(names, dev), queue, corr, start, end, *details[i])
                    for i, dev, queue, corr, start, end in zip(
                        by_begin.tolist(), begins["device"][by_begin].tolist(), begins["queue"][by_begin].tolist(),
                        begins["correlation_id"][by_begin].tolist(), begins["timestamp"][by_begin].tolist(),
                        ends["timestamp"][by_end].tolist())]
            continue
        end_times: dict[tuple[int, int, int], deque[int]] = defaultdict(deque)
        for ts, dev, queue, corr in zip(ends["timestamp"].tolist(), ends["device"].tolist(),
                                        ends["queue"].tolist(), ends["correlation_id"].tolist()):
            end_times[(dev, queue, corr)].append(ts)
        details = _details(kind, begins, names)
        for i, (ts, dev, queue, corr) in enumerate(zip(begins["timestamp"].tolist(), begins["device"].tolist(),
                                                       begins["queue"].tolist(),
                                                       begins["correlation_id"].tolist())):
            pending = end_times.get((dev, queue, corr))
            while pending and pending[0] < ts:
                pending.popleft()  # an end whose begin was not recorded
                unpaired += 1
            if not pending:
                unpaired += 1
                continue
            name, nbytes, src, dst = details[i]
            ops.append(GpuOp(kind, _name(names, dev), queue, corr, ts, pending.popleft(),
                             name, nbytes, src, dst))
        unpaired += sum(len(q) for q in end_times.values())
    ops.sort(key=lambda o: (o.start, o.device, o.queue))
    return ops, unpaired


def _details(kind: str, begins: Any, names: dict[int, str]) -> list[tuple[str, int, str, str]]:
    """(name, bytes, source device, destination device) of each begin event, in table order."""
    if kind == "kernel":
        return [(name or "", 0, "", "") for name in begins.text("name").tolist()]
    if kind == "memset":
        return [("memset", b, "", "") for b in begins["bytes"].tolist()]
    return [(k or "", b, _name(names, s), _name(names, d))
            for k, b, s, d in zip(begins.text("copy_kind").tolist(), begins["bytes"].tolist(),
                                  begins["src_device"].tolist(), begins["dst_device"].tolist())]

