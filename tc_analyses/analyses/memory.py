"""Memory analysis: peak memory, allocation churn, redundant transfers and pageable copies.

After Zins & Dagenais (2019), who traced the TensorFlow allocator and copies to improve memory
management. From the trace's allocations (``dfc:mem_alloc``/``dfc:mem_free``), copies
(``dfc:memcpy_begin``/``end`` with their launching API calls) and cross-device tensor edges
(``dfc:tensor_edge``), per device:

* **peak**: the largest ``bytes_in_use``, when it happened, the step and the node running then,
  and the largest allocations still live at that moment;
* **churn**: how many allocations and bytes the program asks for per step and per ms, the share
  of short-lived ones (freed within :data:`SHORT_LIVED_NS`) and the *turnover*, bytes allocated
  per step / peak; a turnover far above 1 means the same memory is recycled many times a step;
* **redundant transfers**: the same tensor moved to the same device more than once, and
  host-to-device copies of the same size issued by the same op in every step (a constant
  uploaded again each step);
* **host memory of copies**: HtoD/DtoH copies from/to pageable or pinned host memory, with
  their achieved bandwidth.

Every finding is a piece of advice with its numbers, the largest time at stake first. See
docs/analyses-seed/memory.md for the exact definitions.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_bytes, fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, GpuTable, NodeRun, NodeTable, read_activity
from tc_analyses.reader import read_trace
from tc_analyses.analyses.frameworks import advice, framework_of
from tc_analyses.reader.fast import DfcTrace
from tracer import copy_kinds
from tracer.copy_kinds import direction_of


SHORT_LIVED_NS = 1_000_000  # freed less than 1 ms after it was allocated: a temporary
CHURN_TURNOVER = 4.0  # bytes allocated per step / peak at or above this is a finding
TOP_BLOCKS = 5  # largest live allocations listed at a peak
MAX_SERIES_POINTS = 2000  # per device, for the plot (the envelope keeps every local maximum's bin)
UNKNOWN = "unknown"
HOST_KINDS = ("pageable", "pinned")



@dataclass(frozen=True)
class LiveBlock:
    """An allocation still live at a device's peak."""

    addr: int
    bytes: int
    allocated_ns: int  # trace clock
    node: str  # the node that allocated it, "unknown" when not exactly one node was running


@dataclass(frozen=True)
class DevicePeak:
    device: str
    peak_bytes: int  # the largest bytes_in_use
    time_ns: int  # trace clock, first time the peak was reached
    step: int  # step running then, -1 if none
    node: str  # node running then ("unknown" unless exactly one outermost node was open)
    in_use_recorded: bool  # False: bytes_in_use was 0 everywhere, so it is the traced sum
    live_blocks: int  # traced allocations live at the peak
    live_bytes: int  # their bytes (less than peak_bytes when memory was allocated before tracing)
    largest: tuple[LiveBlock, ...]  # the TOP_BLOCKS largest of them
    series: tuple[tuple[int, int], ...]  # (time_ns, bytes_in_use), at most MAX_SERIES_POINTS


@dataclass(frozen=True)
class DeviceChurn:
    device: str
    allocations: int
    frees: int
    bytes_allocated: int
    allocations_per_step: float | None  # allocations inside steps / steps; None without steps
    bytes_per_step: float | None
    allocations_per_ms: float  # over the trace's time span
    short_lived: int  # freed less than SHORT_LIVED_NS after allocation
    short_lived_share: float  # short_lived / allocations
    turnover: float  # bytes_per_step (bytes_allocated without steps) / peak bytes; 0 if no peak


@dataclass(frozen=True)
class RepeatedTensor:
    """A tensor moved to the same device more than once (cross-device dfc:tensor_edge)."""

    tensor_id: int
    src_device: str
    dst_device: str
    moves: int
    bytes: int  # per move
    wasted_bytes: int  # (moves - 1) * bytes


@dataclass(frozen=True)
class RepeatedUpload:
    """Host-to-device copies of one size issued by one op in every step."""

    device: str
    op: str  # op of the node owning the launching API call, "unknown" if none
    node: str  # that node's name
    bytes: int  # per copy
    copies: int  # inside steps
    copies_per_step: float
    bytes_per_step: float
    ns_per_step: float  # copy time per step


@dataclass(frozen=True)
class CopyKindStats:
    """HtoD or DtoH copies by the kind of host memory."""

    direction: str  # "HtoD" or "DtoH"
    host_memory: str  # "pageable", "pinned" or "unknown" (not recorded)
    copies: int
    bytes: int
    ns: int  # summed durations
    gbps: float  # bytes / ns = GB/s; 0 when ns is 0


@dataclass(frozen=True)
class MemoryResult:
    trace: str
    start_ns: int  # first event of the trace, the origin of the text report's times
    steps: int  # distinct step numbers
    peaks: tuple[DevicePeak, ...]  # by device name
    churn: tuple[DeviceChurn, ...]  # by device name
    repeated_tensors: tuple[RepeatedTensor, ...]  # most wasted bytes first
    tensor_wasted_bytes_per_step: float  # the whole trace when it has no steps
    tensor_wasted_ns_per_step: float | None  # estimated at the trace's measured bandwidth; None if none
    repeated_uploads: tuple[RepeatedUpload, ...]  # most time per step first
    upload_wasted_bytes_per_step: float
    upload_wasted_ns_per_step: float
    copy_kinds: tuple[CopyKindStats, ...]
    findings: tuple[Finding, ...]  # most important first

    def json_data(self) -> dict[str, Any]:
        return as_dict(self)


def run(inputs: Inputs, options: Options) -> Result:
    """The memory analysis of the trace (no options)."""
    data = analyze_memory(inputs.trace, inputs.activity)
    return Result("memory", data.trace, data, data.findings)


def analyze_memory(trace: str | Path | DfcTrace, activity: Activity | None = None) -> MemoryResult:
    """The memory analysis of a dfcompass trace (a path or a trace already read)."""
    dfc = trace if isinstance(trace, DfcTrace) else read_trace(trace)
    activity = activity if activity is not None else read_activity(dfc)
    path = str(dfc.path)
    events = _memory_events(dfc, activity)
    copies = activity.gpu.take(activity.gpu.codes_where("kind", lambda kind: kind == "memcpy"))
    edges = _cross_device_edges(dfc, activity)
    if not events and not copies and not edges:
        raise AnalysisUnavailable(f"{path}: no memory events (dfc:mem_alloc/dfc:mem_free), copies "
                                  "(dfc:memcpy_begin) or cross-device tensor edges to analyse")
    steps = _StepIndex(activity)
    nodes = _NodeIndex(activity.nodes)
    peaks = tuple(_peak(device, rows, steps, nodes) for device, rows in sorted(events.items()))
    peak_of = {p.device: p.peak_bytes for p in peaks}
    churn = tuple(_churn(device, rows, steps, activity.span, peak_of[device])
                  for device, rows in sorted(events.items()))
    kinds = _copy_kinds(copies)
    tensors = _repeated_tensors(edges)
    per = max(steps.count, 1)
    tensor_bytes = sum(t.wasted_bytes for t in tensors) / per
    is_host = _host_test(activity)
    tensor_ns = _estimated_ns(tensors, copies, is_host)
    uploads = _repeated_uploads(activity, copies, steps)
    result = MemoryResult(
        trace=path, start_ns=activity.span[0], steps=steps.count, peaks=peaks, churn=churn,
        repeated_tensors=tensors, tensor_wasted_bytes_per_step=tensor_bytes,
        tensor_wasted_ns_per_step=None if tensor_ns is None else tensor_ns / per,
        repeated_uploads=uploads, upload_wasted_bytes_per_step=sum(u.bytes_per_step for u in uploads),
        upload_wasted_ns_per_step=sum(u.ns_per_step for u in uploads), copy_kinds=kinds, findings=())
    return replace(result, findings=_findings(result, is_host, framework_of(dfc)))


# --- reading ---------------------------------------------------------------------------------

# One memory event: (timestamp, 0 free / 1 alloc, addr, bytes, bytes_in_use).
_Row = tuple[int, int, int, int, int]


def _memory_events(trace: DfcTrace, activity: Activity) -> dict[str, list[_Row]]:
    per_device: dict[str, list[_Row]] = defaultdict(list)
    first, last = activity.span  # the analysis window (the whole trace by default)
    for is_alloc, name in ((1, "mem_alloc"), (0, "mem_free")):
        table = trace.table(name)
        for ts, dev, addr, nbytes, in_use in zip(table["timestamp"].tolist(), table["device"].tolist(),
                                                 table["addr"].tolist(), table["bytes"].tolist(),
                                                 table["bytes_in_use"].tolist()):
            if first <= ts <= last:
                per_device[activity.device(dev).name].append((ts, is_alloc, addr, nbytes, in_use))
    for rows in per_device.values():
        rows.sort()  # by time; at the same time frees first, so an address can be reused at once
    return dict(per_device)


def _cross_device_edges(trace: DfcTrace, activity: Activity) -> list[tuple[int, int, str, str, int]]:
    """(timestamp, tensor_id, src device, dst device, bytes) of edges between two devices."""
    table = trace.table("tensor_edge")
    first, last = activity.span
    ts, src, dst = table["timestamp"], table["src_device"], table["dst_device"]
    rows = np.flatnonzero((src != dst) & (ts >= first) & (ts <= last))  # most edges stay on one device
    return [(t, tensor, activity.device(s).name, activity.device(d).name, nbytes)
            for t, tensor, s, d, nbytes in zip(ts[rows].tolist(), table["tensor_id"][rows].tolist(),
                                               src[rows].tolist(), dst[rows].tolist(), table["bytes"][rows].tolist())]


def host_memory_of(copy_kind: str) -> str:
    """"pageable", "pinned", or "unknown" when the trace did not record it."""
    return copy_kinds.host_memory_of(copy_kind) or UNKNOWN


class _StepIndex:
    """The step running at a time (any thread), by bisecting step starts."""

    def __init__(self, activity: Activity) -> None:
        runs = sorted((s.start, s.end, s.step) for s in activity.steps)
        self._starts = [r[0] for r in runs]
        self._runs = runs
        self._reach = list(itertools.accumulate((r[1] for r in runs), max))  # latest end so far
        self.count = len({s.step for s in activity.steps})

    def at(self, ts: int) -> int:
        """The step number whose run contains `ts`, -1 if none (the earliest-starting one on ties)."""
        found = -1
        i = bisect.bisect_right(self._starts, ts) - 1
        while i >= 0 and self._reach[i] >= ts:  # no earlier run reaches ts once the reach is below it
            if self._runs[i][1] >= ts:
                found = i
            i -= 1
        return self._runs[found][2] if found >= 0 else -1


class _NodeIndex:
    """The outermost node open at a time, when exactly one is open on all threads together."""

    def __init__(self, nodes: NodeTable) -> None:
        self._nodes = nodes
        outer = np.flatnonzero(nodes.column("outermost")) if len(nodes) else np.zeros(0, dtype=np.int64)
        tids = nodes.column("tid")[outer] if len(nodes) else outer
        # outermost nodes of one thread do not overlap: (starts, ends, node indexes) per thread
        self._runs = [(nodes.column("start")[index], nodes.column("end")[index], index)
                      for index in (outer[tids == tid] for tid in np.unique(tids).tolist())]

    def at(self, ts: int) -> str:
        open_nodes = []
        for starts, ends, index in self._runs:
            i = int(np.searchsorted(starts, ts, side="right")) - 1
            if i >= 0 and ends[i] >= ts:
                open_nodes.append(int(index[i]))
        return _label(self._nodes[open_nodes[0]]) if len(open_nodes) == 1 else UNKNOWN


def _label(node: NodeRun) -> str:
    return node.op if not node.name or node.name == node.op else f"{node.name} ({node.op})"


# --- peak and churn --------------------------------------------------------------------------

def _in_use(rows: list[_Row]) -> tuple[list[int], bool]:
    """bytes_in_use after each event: recorded, or the running sum when never recorded."""
    if any(r[4] for r in rows):
        return [r[4] for r in rows], True
    total, values = 0, []
    for _, is_alloc, _, nbytes, _ in rows:
        total = total + nbytes if is_alloc else max(total - nbytes, 0)
        values.append(total)
    return values, False


def _peak(device: str, rows: list[_Row], steps: _StepIndex, nodes: _NodeIndex) -> DevicePeak:
    in_use, recorded = _in_use(rows)
    peak = max(in_use)
    at = in_use.index(peak)  # the first time it is reached
    ts = rows[at][0]
    live: dict[int, tuple[int, int]] = {}  # addr -> (bytes, allocated at)
    for row_ts, is_alloc, addr, nbytes, _ in rows[: at + 1]:
        if is_alloc:
            live[addr] = (nbytes, row_ts)
        else:
            live.pop(addr, None)  # a free of a block allocated before tracing started is ignored
    biggest = sorted(live.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))[:TOP_BLOCKS]
    largest = tuple(LiveBlock(addr, nbytes, when, nodes.at(when)) for addr, (nbytes, when) in biggest)
    series = _envelope([(r[0], v) for r, v in zip(rows, in_use)])
    return DevicePeak(device, peak, ts, steps.at(ts), nodes.at(ts), recorded, len(live),
                      sum(b for b, _ in live.values()), largest, series)


def _envelope(points: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """At most MAX_SERIES_POINTS points: the largest of each equal-count bin, so peaks survive."""
    if len(points) <= MAX_SERIES_POINTS:
        return tuple(points)
    size = -(-len(points) // MAX_SERIES_POINTS)
    kept = [max(points[i:i + size], key=lambda p: (p[1], -p[0])) for i in range(0, len(points), size)]
    return tuple(kept)


def _churn(device: str, rows: list[_Row], steps: _StepIndex, span: tuple[int, int], peak: int) -> DeviceChurn:
    allocs = [r for r in rows if r[1]]
    allocated = sum(r[3] for r in allocs)
    live: dict[int, int] = {}  # addr -> allocated at
    short = 0
    for ts, is_alloc, addr, _, _ in rows:
        if is_alloc:
            live[addr] = ts
        elif addr in live and ts - live.pop(addr) < SHORT_LIVED_NS:
            short += 1
    per_step = bytes_per_step = None
    if steps.count:
        in_steps = [r for r in allocs if steps.at(r[0]) >= 0]
        per_step = len(in_steps) / steps.count
        bytes_per_step = sum(r[3] for r in in_steps) / steps.count
    span_ms = (span[1] - span[0]) / 1e6
    moved = bytes_per_step if bytes_per_step is not None else allocated
    return DeviceChurn(device, len(allocs), len(rows) - len(allocs), allocated, per_step, bytes_per_step,
                       len(allocs) / span_ms if span_ms > 0 else 0.0, short,
                       short / len(allocs) if allocs else 0.0, moved / peak if peak else 0.0)


# --- copies ----------------------------------------------------------------------------------

def _per_copy_kind(copies: GpuTable) -> dict[str, tuple[int, int, int]]:
    """Copy kind (``HtoD pageable``...) -> (copies, bytes, ns), summed with numpy over the table."""
    codes = copies.column("name")
    labels = copies.labels("name") if len(copies) else np.zeros(0, dtype=object)
    count = np.bincount(codes, minlength=len(labels))
    nbytes = np.bincount(codes, weights=copies.column("bytes"), minlength=len(labels))
    ns = np.bincount(codes, weights=copies.column("end") - copies.column("start"), minlength=len(labels))
    # float64 sums are exact up to 2**53 (9 PB, 104 days): far beyond one trace
    return {str(label): (int(count[i]), int(nbytes[i]), int(ns[i])) for i, label in enumerate(labels) if count[i]}


def _copy_kinds(copies: GpuTable) -> tuple[CopyKindStats, ...]:
    sums: dict[tuple[str, str], list[int]] = {}
    for name, (n, b, ns) in _per_copy_kind(copies).items():
        direction = direction_of(name)
        if direction in ("HtoD", "DtoH"):
            entry = sums.setdefault((direction, host_memory_of(name)), [0, 0, 0])
            entry[0] += n
            entry[1] += b
            entry[2] += ns
    order = {"HtoD": 0, "DtoH": 1, "pageable": 0, "pinned": 1, UNKNOWN: 2}
    return tuple(CopyKindStats(d, h, n, b, ns, b / ns if ns else 0.0)
                 for (d, h), (n, b, ns) in sorted(sums.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])))


def _repeated_tensors(edges: list[tuple[int, int, str, str, int]]) -> tuple[RepeatedTensor, ...]:
    moves: dict[tuple[int, str], list[tuple[int, int, str, str, int]]] = defaultdict(list)
    for edge in edges:
        moves[(edge[1], edge[3])].append(edge)
    found = []
    for (tensor, dst), rows in moves.items():
        if len(rows) > 1:
            nbytes = max(r[4] for r in rows)
            found.append(RepeatedTensor(tensor, rows[0][2], dst, len(rows), nbytes, (len(rows) - 1) * nbytes))
    return tuple(sorted(found, key=lambda t: (-t.wasted_bytes, t.tensor_id, t.dst_device)))


def _host_test(activity: Activity) -> Callable[[str], bool]:
    """device name -> whether it is a CPU (host memory), by the device's recorded kind."""
    return lambda name: not activity.device_named(name).is_gpu


def _estimated_ns(tensors: tuple[RepeatedTensor, ...], copies: GpuTable, is_host: Callable[[str], bool]
                  ) -> float | None:
    """Time of the extra moves at the trace's own bandwidth per direction; None if it has no copies."""
    if not tensors:
        return 0.0
    rate: dict[str, tuple[int, int]] = {}
    for name, (_, nbytes, duration) in _per_copy_kind(copies).items():
        b, ns = rate.get(direction_of(name), (0, 0))
        rate[direction_of(name)] = (b + nbytes, ns + duration)
    total = 0.0
    for t in tensors:
        kind = "HtoD" if is_host(t.src_device) else "DtoH" if is_host(t.dst_device) else "DtoD"
        b, ns = rate.get(kind, (0, 0))
        if not b or not ns:
            return None
        total += t.wasted_bytes * ns / b
    return total


def _repeated_uploads(activity: Activity, copies: GpuTable, steps: _StepIndex) -> tuple[RepeatedUpload, ...]:
    if steps.count < 2:
        return ()  # "every step" needs steps to compare
    groups: dict[tuple[str, str, str, int], list[tuple[int, int]]] = defaultdict(list)  # -> (step, ns)
    for c in copies:
        if direction_of(c.name) != "HtoD":
            continue
        launch = activity.launch_of(c)
        owner = activity.nodes[launch.owner] if launch is not None and launch.owner >= 0 else None
        step = steps.at(launch.start if launch is not None else c.start)
        if step >= 0:
            op, node = (owner.op, owner.name) if owner else (UNKNOWN, UNKNOWN)
            groups[(c.device, op, node, c.bytes)].append((step, c.duration))
    found = []
    for (device, op, node, nbytes), rows in groups.items():
        if len({s for s, _ in rows}) == steps.count:  # uploaded again in every step
            per = len(rows) / steps.count
            found.append(RepeatedUpload(device, op, node, nbytes, len(rows), per, per * nbytes,
                                        sum(ns for _, ns in rows) / steps.count))
    return tuple(sorted(found, key=lambda u: (-u.ns_per_step, -u.bytes_per_step, u.device, u.op, u.node, u.bytes)))


# --- findings --------------------------------------------------------------------------------

def _findings(r: MemoryResult, is_host: Callable[[str], bool], framework: str) -> tuple[Finding, ...]:
    found: list[Finding] = []
    per = "per step" if r.steps else "in the trace"
    steps = max(r.steps, 1)
    if r.repeated_tensors:
        t = r.repeated_tensors[0]
        at = (f", about {fmt_ns(r.tensor_wasted_ns_per_step)} of copy time"
              if r.tensor_wasted_ns_per_step is not None else "")
        found.append(Finding("redundant_tensor", round((r.tensor_wasted_ns_per_step or 0) * steps), (
            f"{len(r.repeated_tensors)} tensor(s) moved to the same device more than once: "
            f"{fmt_bytes(r.tensor_wasted_bytes_per_step)} moved again {per}{at} (worst: tensor {t.tensor_id}, "
            f"{fmt_bytes(t.bytes)} {t.src_device} -> {t.dst_device} {t.moves} times). Move it once and keep "
            f"the device copy: {advice('move_once', framework)}.")))
    if r.repeated_uploads:
        u = r.repeated_uploads[0]
        where = u.op if u.node in (u.op, UNKNOWN) else f"{u.op} in {u.node}"
        found.append(Finding("repeated_upload", round(r.upload_wasted_ns_per_step * steps), (
            f"{len(r.repeated_uploads)} host-to-device upload(s) repeated in every step: "
            f"{fmt_bytes(r.upload_wasted_bytes_per_step)} and {fmt_ns(r.upload_wasted_ns_per_step)} of copies "
            f"per step (worst: {where}, {u.copies_per_step:g} x {fmt_bytes(u.bytes)} to {u.device} per step). "
            f"If the data does not change between steps (weights, masks, constants, lookup tables; not the "
            f"input batch), create it on the device once, outside the step loop "
            f"{advice('create_on_device', framework)}".rstrip() + ".")))
    pageable = [k for k in r.copy_kinds if k.host_memory == "pageable"]
    if pageable:
        pinned = [k for k in r.copy_kinds if k.host_memory == "pinned"]
        n, b, ns = (sum(k.copies for k in pageable), sum(k.bytes for k in pageable), sum(k.ns for k in pageable))
        rate = f" at {b / ns:.2f} GB/s" if ns else ""
        pb, pns = sum(k.bytes for k in pinned), sum(k.ns for k in pinned)
        versus = f" (pinned copies here: {pb / pns:.2f} GB/s)" if pinned and pns else ""
        dirs = ", ".join(f"{k.copies} {k.direction}" for k in pageable)
        found.append(Finding("pageable", ns, (
            f"{n} copies ({dirs}) use pageable host memory: {fmt_bytes(b)} in {fmt_ns(ns)}{rate}{versus}. "
            f"Pageable copies are staged through a driver buffer and block the host. {advice('pin', framework)}")))
    for c in r.churn:
        if c.turnover >= CHURN_TURNOVER:
            found.append(Finding("churn", 0, _churn_advice(c, r.steps, is_host(c.device), framework)))
    for p in r.peaks:
        if p.peak_bytes and p.largest:
            blocks = ", ".join(f"{fmt_bytes(b.bytes)} from {b.node}" for b in p.largest[:3])
            step = f" in step {p.step}" if p.step >= 0 else ""
            during = f"while {p.node} runs" if p.node != UNKNOWN else "(no single node running)"
            found.append(Finding("peak", 0, (
                f"{p.device} peaks at {fmt_bytes(p.peak_bytes)} at {fmt_ns(p.time_ns - r.start_ns)}{step} "
                f"{during}; largest live allocations: {blocks}. To lower the peak, release what holds "
                f"them before this point (del, or no reference kept across steps), "
                f"{advice('recompute', framework)}, or use a smaller batch or lower precision.")))
    order = {"redundant_tensor": 0, "repeated_upload": 1, "pageable": 2, "churn": 3, "peak": 4}
    return tuple(sorted(found, key=lambda f: (-f.impact_ns, order[f.kind])))


def _churn_advice(c: DeviceChurn, steps: int, on_host: bool, framework: str) -> str:
    if c.allocations_per_step is not None and c.bytes_per_step is not None:
        rate = f"{c.allocations_per_step:g} allocations and {fmt_bytes(c.bytes_per_step)} per step"
    else:
        rate = f"{c.allocations} allocations and {fmt_bytes(c.bytes_allocated)} in the trace"
    head = (f"{c.device}: {rate}, {c.turnover:.1f}x its peak, {c.short_lived_share:.0%} freed within "
            f"{fmt_ns(SHORT_LIVED_NS)}: the allocator recycles the same memory many times")
    if on_host:
        return (head + ". Reuse buffers across steps (preallocate, out= arguments, in-place ops); every CPU "
                "allocation goes to malloc, so a caching allocator (LD_PRELOAD jemalloc or tcmalloc) helps.")
    return (head + ". Reuse buffers across steps (preallocate, out= arguments, in-place ops); "
            + advice("device_allocator", framework))


def as_dict(result: MemoryResult) -> dict[str, Any]:
    """The result as plain data (for JSON), without the plot series."""
    data = asdict(result)
    for peak in data["peaks"]:
        peak.pop("series", None)
    return data
