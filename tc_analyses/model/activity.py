"""A trace's activity as paired intervals: node runs, steps, runtime API calls and GPU operations.

The seed analyses (runtime overhead, idle-time breakdown, memory, inter-operator parallelism)
all need the same joins, so they are made once here:

* begin/end events paired into intervals (GPU operations per device, queue and correlation id;
  API calls per thread, name and correlation id, innermost first; nodes by execution id);
* each API call's **owner**: the outermost node running on its thread when it started, which is
  the framework op that issued it;
* each GPU operation's **launch**: the API call with the same correlation id.

Node runs, API calls, GPU operations, annotations and synchronisations are held as columns
(:class:`~tc_analyses.model.tables.RunTable`): the analyses work on the arrays, and an object
such as :class:`NodeRun` is made only when a row is read.

Intervals whose begin or end was not recorded (a truncated trace) are left out and counted in
``unpaired``. All times are nanoseconds on the trace clock.

It is also the one place that names devices: :class:`Device` holds what ``dfc:device_info``
recorded (name, kind, model), a device used but never described is named ``device<index>``,
and :attr:`Device.is_gpu` tells CPUs from GPUs by the recorded kind. Interval unions are in
:mod:`tc_analyses.model.intervals`.
"""

from __future__ import annotations

from collections import defaultdict, deque
from functools import partial
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tc_analyses.model.pairing import fifo_pair, pair_in_order
from tc_analyses.model.tables import RunTable, encode, encode_keys
from tc_analyses.reader.fast import DfcTrace, EventTable


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


class NodeTable(RunTable[NodeRun]):
    row = NodeRun
    texts = ("op", "name", "device")


class ApiTable(RunTable[ApiCall]):
    row = ApiCall
    texts = ("name",)


class GpuTable(RunTable[GpuOp]):
    row = GpuOp
    texts = ("kind", "device", "name", "src_device", "dst_device")


class AnnotationTable(RunTable[AnnotationRun]):
    row = AnnotationRun
    texts = ("name", "device")


class SyncTable(RunTable[SyncRun]):
    row = SyncRun
    texts = ("device", "kind")


@dataclass
class Activity:
    """The paired intervals of a trace. Lists of row objects given here become tables."""

    path: str
    nodes: NodeTable  # by start time, enclosing nodes first
    steps: list[StepRun]  # by start time
    api: ApiTable  # by start time
    gpu: GpuTable  # by start time
    devices: dict[int, Device]  # the devices the trace describes, by index
    unpaired: int = 0
    span: tuple[int, int] = (0, 0)  # first and last event time of the trace
    annotations: AnnotationTable = field(default_factory=AnnotationTable.empty)  # by start time
    syncs: SyncTable = field(default_factory=SyncTable.empty)  # by start time
    windowed: bool = False  # already restricted to an analysis window (tc_analyses.model.window)
    _launch: dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.nodes = NodeTable.of(self.nodes)
        self.api = ApiTable.of(self.api)
        self.gpu = GpuTable.of(self.gpu)
        self.annotations = AnnotationTable.of(self.annotations)
        self.syncs = SyncTable.of(self.syncs)
        self.steps = list(self.steps)

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

    def calls_with_correlation(self, correlation_ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Index in :attr:`api` of the call with each correlation id (the last one when several
        share it), -1 where none was recorded or the id is 0 (none)."""
        ids = np.asarray(correlation_ids, dtype=np.int64)
        corr = self.api.column("correlation_id")
        with_id = np.flatnonzero(corr != 0)
        # the last call of each id wins, as a dict built in order keeps it
        order = with_id[np.argsort(corr[with_id], kind="stable")]
        keys = corr[order]
        if not len(keys):
            return np.full(len(ids), -1, dtype=np.int64)
        last = np.append(keys[1:] != keys[:-1], True)
        keys, order = keys[last], order[last]
        at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
        return np.where((keys[at] == ids) & (ids != 0), order[at], -1)

    def launch_indexes(self) -> np.ndarray[Any, Any]:
        """Index in :attr:`api` of each GPU operation's launch call (same correlation id), -1 if none."""
        return self.calls_with_correlation(self.gpu.column("correlation_id"))

    def _call_index(self, correlation_id: int) -> int:
        if not correlation_id:
            return -1
        if not self._launch:
            corr = self.api.column("correlation_id").tolist()
            self._launch = {c: i for i, c in enumerate(corr) if c}
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
Array = np.ndarray[Any, Any]


def _device_names(devices: dict[int, Device], indexes: Array) -> list[str]:
    """The name of the device of each index (encode_keys gives distinct ones): as described, else
    ``device<index>``."""
    names = _names(devices)
    return [_name(names, i) for i in np.asarray(indexes, dtype=np.int64).tolist()]


def _text(table: EventTable, column: str) -> Array:
    """A text column (object array), its missing strings read as ""."""
    return _texts_of(table, table[column])


def _texts_of(table: EventTable, sids: Array) -> Array:
    """The strings of string ids (object array), missing ones read as ""."""
    values = table.decode(sids)
    return np.where(values == None, "", values) if len(values) else np.zeros(0, dtype=object)  # noqa: E711


def _annotations(trace: DfcTrace, devices: dict[int, Device]) -> tuple[AnnotationTable, int]:
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
    return AnnotationTable.from_rows(runs), len(begins) - len(runs) + len(end_of)


def _syncs(trace: DfcTrace, devices: dict[int, Device]) -> tuple[SyncTable, int]:
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
    return SyncTable.from_rows(runs), unpaired + sum(len(q) for q in end_times.values())


def _names(devices: dict[int, Device]) -> dict[int, str]:
    """Index -> name of the described devices; others are named by :meth:`Device.undescribed`."""
    return {i: d.name for i, d in devices.items()}


def _name(names: dict[int, str], index: int) -> str:
    found = names.get(index)
    return found if found is not None else Device.undescribed(index).name


def _nodes(trace: DfcTrace, devices: dict[int, Device]) -> tuple[NodeTable, int]:
    begins, ends = trace.table("node_begin"), trace.table("node_end")
    begin_ids, end_ids = begins["node_id"].astype(np.int64), ends["node_id"].astype(np.int64)
    # An id's last end pairs with its first begin; other begins and ends of the id stay unpaired.
    end_keys, last = np.unique(end_ids[::-1], return_index=True)
    end_times = ends["timestamp"].astype(np.int64)[::-1][last]
    begin_keys, first = np.unique(begin_ids, return_index=True)
    at = np.minimum(np.searchsorted(end_keys, begin_keys), max(len(end_keys) - 1, 0))
    found = (end_keys[at] == begin_keys) if len(end_keys) else np.zeros(len(begin_keys), dtype=bool)
    rows, end = first[found], end_times[at[found]]
    unpaired = len(begins) - len(rows) + len(end_keys) - len(rows)
    start = begins["timestamp"].astype(np.int64)[rows]
    order = np.lexsort((begin_ids[rows], -end, start))  # by start, enclosing nodes first
    rows, start, end = rows[order], start[order], end[order]
    tids = begins["tid"].astype(np.int64)[rows]
    columns = {"node_id": begin_ids[rows], "tid": tids, "step": begins["step"].astype(np.int64)[rows],
               "start": start, "end": end, "outermost": _outermost(tids, start, end)}
    labels = {}
    for name in ("op", "name"):
        columns[name], labels[name] = encode_keys(begins[name][rows], partial(_texts_of, begins))
    columns["device"], labels["device"] = encode_keys(begins["device"][rows], partial(_device_names, devices))
    return NodeTable(columns, labels), int(unpaired)


def _outermost(tids: Array, starts: Array, ends: Array) -> Array:
    """1 for each node (by start, enclosing first) that no earlier node of its thread encloses."""
    out = np.zeros(len(tids), dtype=np.int64)
    if not len(tids):
        return out
    # Per thread (a stable sort keeps start order), the outermost nodes form a chain: the first
    # node, then the first one starting at or after its end, and so on. Only the chain is walked.
    by_thread = np.argsort(tids, kind="stable")
    thread, start, end = tids[by_thread], starts[by_thread], ends[by_thread]
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(thread)) + 1, [len(thread)]]).tolist()
    chain = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        following = np.maximum(lo + np.searchsorted(start[lo:hi], end[lo:hi], side="left"),
                               np.arange(lo + 1, hi + 1)).tolist()
        at = lo
        while at < hi:
            chain.append(at)
            at = following[at - lo]
    out[by_thread[chain]] = 1
    return out


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


def _api(trace: DfcTrace, nodes: NodeTable) -> tuple[ApiTable, int]:
    enters, exits = trace.table("api_enter"), trace.table("api_exit")
    # Calls pair first in, first out per (thread, name, correlation id): correlation ids tell
    # calls apart, and a call of zero duration has its exit at its enter's timestamp.
    keys = ("tid", "name", "correlation_id")
    paired = pair_in_order([enters[k] for k in keys], enters["timestamp"], [exits[k] for k in keys],
                            exits["timestamp"])
    if paired is None:
        return _api_slow(trace, nodes)
    by_enter, by_exit = paired
    return _api_table(nodes, enters["tid"][by_enter], _text(enters, "name")[by_enter],
                      enters["correlation_id"][by_enter], enters["timestamp"][by_enter],
                      exits["timestamp"][by_exit]), 0


def _api_table(nodes: NodeTable, tids: Any, names: Any, corrs: Any, starts: Any, ends: Any) -> ApiTable:
    """The calls by (start, thread), each with its owner node."""
    tids, corrs, starts, ends = (np.asarray(c, dtype=np.int64) for c in (tids, corrs, starts, ends))
    order = np.lexsort((tids, starts))
    tids, corrs, starts, ends = tids[order], corrs[order], starts[order], ends[order]
    codes, labels = encode(np.asarray(names, dtype=object)[order])
    return ApiTable({"tid": tids, "name": codes, "correlation_id": corrs, "start": starts, "end": ends,
                     "owner": _owners(nodes, tids, starts)}, {"name": labels})


def _owners(nodes: NodeTable, tids: Array, starts: Array) -> Array:
    """Index of the outermost node open on each call's thread at its start, -1 when none."""
    owners = np.full(len(starts), -1, dtype=np.int64)
    outer = np.flatnonzero(nodes.column("outermost")) if len(nodes) else np.zeros(0, dtype=np.int64)
    node_tids = nodes.column("tid")[outer] if len(nodes) else outer
    for tid in np.unique(node_tids).tolist():
        mine = np.flatnonzero(tids == tid)
        if not len(mine):
            continue
        index = outer[node_tids == tid]  # by start
        node_starts, node_ends = nodes.column("start")[index], nodes.column("end")[index]
        at = np.searchsorted(node_starts, starts[mine], side="right") - 1
        inside = (at >= 0) & (starts[mine] <= node_ends[np.maximum(at, 0)])
        owners[mine[inside]] = index[at[inside]]
    return owners


def _api_slow(trace: DfcTrace, nodes: NodeTable) -> tuple[ApiTable, int]:
    enters, exits = trace.table("api_enter"), trace.table("api_exit")
    keys = ("tid", "correlation_id")
    rows, ends, unpaired = fifo_pair(zip(*(enters[k].tolist() for k in keys), _text(enters, "name").tolist()),
                                      enters["timestamp"].tolist(),
                                      zip(*(exits[k].tolist() for k in keys), _text(exits, "name").tolist()),
                                      exits["timestamp"].tolist())
    return _api_table(nodes, enters["tid"][rows], _text(enters, "name")[rows], enters["correlation_id"][rows],
                      enters["timestamp"][rows], ends), unpaired


_GPU_CLASSES = (("kernel", "kernel_begin", "kernel_end"), ("memcpy", "memcpy_begin", "memcpy_end"),
                ("memset", "memset_begin", "memset_end"))


def _gpu(trace: DfcTrace, devices: dict[int, Device]) -> tuple[GpuTable, int]:
    parts: list[dict[str, Array]] = []
    unpaired = 0
    for kind, begin_name, end_name in _GPU_CLASSES:
        begins, ends = trace.table(begin_name), trace.table(end_name)
        if not len(begins) and not len(ends):
            continue
        keys = ("device", "queue", "correlation_id")
        paired = pair_in_order([begins[k] for k in keys], begins["timestamp"], [ends[k] for k in keys],
                                ends["timestamp"])
        if paired is not None:
            rows, end_times = paired[0], ends["timestamp"][paired[1]]
        else:
            rows, end_times, lost = _pair_slow(begins, ends)
            unpaired += lost
        parts.append(_gpu_part(kind, begins, rows, end_times, devices))
    if not parts:
        return GpuTable.empty(), unpaired
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    device_codes, device_labels = encode_keys(joined.pop("device_index"), partial(_device_names, devices))
    order = np.lexsort((joined["queue"], device_codes, joined["start"]))  # stable: kinds keep their order
    columns: dict[str, Array] = {"device": device_codes[order]}
    labels: dict[str, Array] = {"device": device_labels}
    texts = trace.table(_GPU_CLASSES[0][1])  # the trace's string table (every table shares it)
    named: dict[str, Callable[[Array], Array | list[str]]] = {
             "kind": lambda keys: [_GPU_CLASSES[k][0] for k in keys.tolist()],
             "name": partial(_gpu_names, texts),
             "src_device": partial(_peer_names, devices), "dst_device": partial(_peer_names, devices)}
    for name, values in joined.items():
        if name in named:
            columns[name], labels[name] = encode_keys(values[order], named[name])
        else:
            columns[name] = values[order]
    return GpuTable(columns, labels), unpaired


_MEMSET = -2  # the name key of a memset (memsets have no name field)
_NO_PEER = -(2**63)  # the source and destination key of a kernel or a memset (no device index is this)


def _peer_names(devices: dict[int, Device], keys: Array) -> Array:
    """Copy sources and destinations by device index; "" for _NO_PEER."""
    out = np.full(len(keys), "", dtype=object)
    peers = keys != _NO_PEER
    out[peers] = _device_names(devices, keys[peers])
    return out


def _gpu_names(texts: EventTable, keys: Array) -> Array:
    """Names of GPU operations by key: a string id, or _MEMSET."""
    out = np.full(len(keys), "memset", dtype=object)
    sids = keys != _MEMSET
    out[sids] = _texts_of(texts, keys[sids])
    return out


def _pair_slow(begins: EventTable, ends: EventTable) -> tuple[Array, Array, int]:
    """(begin rows, their end times, unpaired) of a GPU class, per (device, queue, correlation id)."""
    keys = ("device", "queue", "correlation_id")
    return fifo_pair(zip(*(begins[k].tolist() for k in keys)), begins["timestamp"].tolist(),
                      zip(*(ends[k].tolist() for k in keys)), ends["timestamp"].tolist())


def _gpu_part(kind: str, begins: EventTable, rows: Array, end_times: Array,
              devices: dict[int, Device]) -> dict[str, Array]:
    """The columns of one class's paired operations, texts as integer keys: the kind's index in
    _GPU_CLASSES, the name's string id (_MEMSET for memsets), devices' indexes (_NO_PEER: none)."""
    n = len(rows)
    blank = np.full(n, _NO_PEER, dtype=np.int64)
    if kind == "kernel":
        name, nbytes, src, dst = begins["name"][rows].astype(np.int64), np.zeros(n, np.int64), blank, blank
    elif kind == "memset":
        name, nbytes, src, dst = np.full(n, _MEMSET, dtype=np.int64), begins["bytes"][rows], blank, blank
    else:
        name, nbytes = begins["copy_kind"][rows].astype(np.int64), begins["bytes"][rows]
        src, dst = begins["src_device"][rows].astype(np.int64), begins["dst_device"][rows].astype(np.int64)
    index = [k for k, _, _ in _GPU_CLASSES].index(kind)
    return {"kind": np.full(n, index, dtype=np.int64), "device_index": begins["device"][rows].astype(np.int64),
            "queue": begins["queue"][rows].astype(np.int64),
            "correlation_id": begins["correlation_id"][rows].astype(np.int64),
            "start": begins["timestamp"][rows].astype(np.int64), "end": np.asarray(end_times, dtype=np.int64),
            "name": name, "bytes": np.asarray(nbytes, dtype=np.int64), "src_device": src, "dst_device": dst}
