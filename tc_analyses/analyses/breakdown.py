"""Where the GPU time goes: temporal breakdown and idle-time breakdown, as HolisticTraceAnalysis defines them.

Both follow the definitions of Meta's HolisticTraceAnalysis (HTA) 0.5.0 ``get_temporal_breakdown``
and ``get_idle_time_breakdown``, re-implemented on :class:`~tc_analyses.model.activity.Activity`
(times in ns instead of HTA's µs); ``docs/analyses-seed/breakdown.md`` has the formulas.

**Temporal breakdown**, per GPU device and for all devices together (HTA's per-rank row):

* ``kernel_time`` = last end - first start of the kept GPU operations,
* ``idle`` = ``kernel_time`` - |union of all operations|,
* ``compute`` = |union of the compute kernels|,
* ``non_compute`` = ``kernel_time`` - ``compute`` - ``idle`` (communication, memory, other),
  split here further into exclusive communication, memory and other time.

Kernel types: communication when the name matches ``^nccl.*Kernel``; memory for memcpy and
memset operations (and kernels named ``Memcpy*``, ``Memset*``, ``dma*``); other for kernels whose
name contains ``Memcpy`` or ``Sync``; compute for the rest.

**Idle breakdown**, per (device, queue): operations in start order; the gap before each one
(its start - the previous one's end) is

* *host wait* when its launch API call started after the previous operation ended (the CPU
  had not enqueued it yet),
* *kernel wait* when not host wait and the gap is below ``consecutive_kernel_delay_ns``,
* *other* otherwise (e.g. waiting for an event of another queue).

**Filtering** (``exclude_last_step``, HTA's default): with two or more profiler steps, only GPU
operations whose launch started before the last step's start are kept, so the last, often
truncated, step does not count; operations without a recorded launch are then dropped too.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, TypeVar

import numpy as np

from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, GpuOp, GpuTable
from tc_analyses.model.tables import TableT
from tc_analyses.model.intervals import union_ns
from tc_analyses.model.window import Window, restrict
from tc_analyses.reader.fast import DfcTrace


ALL_DEVICES = "all"
# HTA's default is "30": its docstring says ns but it compares it with µs gaps, so 30 µs.
DEFAULT_KERNEL_DELAY_NS = 30_000
# HolisticTraceAnalysis 0.6.1's kernel types (hta/common/types.py), matched at the start of the name.
_COMM = re.compile(r"(nccl.*)|(hip)|(hccl)|(.*ncclKernel.*)")
_MEMORY = re.compile(r"((hip)?Memcpy)|((hip)?Memset)|(dma)")
_NOT_COMPUTE = re.compile(r"(nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(.*Sync)|(Stream Wait Event)|(cuda.*LaunchKernel)"
                          r"|(runFunction)|(hip)|(job_exe)|(packet)|(pe_exe)|(cpum_exe_subgraph)|(hccl)"
                          r"|(collective_subgraph_execution)")
KINDS = ("compute", "communication", "memory", "other")
T = TypeVar("T")
CATEGORIES = ("host_wait", "kernel_wait", "other")


@dataclass(frozen=True)
class DeviceTime:
    """The temporal breakdown of one device, or of all devices together (``device == "all"``)."""

    device: str
    ops: int
    kernel_time_ns: int  # first start -> last end of the kept operations
    busy_ns: int  # |union of all operations|
    idle_ns: int
    compute_ns: int
    non_compute_ns: int  # communication_ns + memory_ns + other_ns
    communication_ns: int  # communication running, no compute
    memory_ns: int  # memory running, no compute or communication
    other_ns: int  # only "other" kernels running
    idle_pct: float  # of kernel_time
    compute_pct: float
    non_compute_pct: float


@dataclass(frozen=True)
class TemporalBreakdown:
    trace: str
    filtered: bool  # the last step's operations were left out
    steps: int  # distinct profiler steps in the trace
    kept_ops: int
    dropped_ops: int  # by the last-step filter
    devices: tuple[DeviceTime, ...]  # by device name
    total: DeviceTime  # all devices together: HTA's row for the rank


@dataclass(frozen=True)
class GapStats:
    """The gaps of one idle category on one queue."""

    count: int
    total_ns: int
    min_ns: int
    median_ns: float
    max_ns: int


@dataclass(frozen=True)
class QueueIdle:
    device: str
    queue: int
    ops: int
    idle_ns: int  # sum of the gaps between consecutive operations
    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int
    host_wait_ratio: float  # of idle_ns; 0 when the queue never idles
    kernel_wait_ratio: float
    other_ratio: float
    gaps: dict[str, GapStats]  # category -> its gaps


@dataclass(frozen=True)
class IdleBreakdown:
    trace: str
    filtered: bool
    consecutive_kernel_delay_ns: int
    ops_without_launch: int  # kept operations whose launch was not recorded: never host wait
    queues: tuple[QueueIdle, ...]  # by device, then queue
    host_wait_ns: int  # over all queues
    kernel_wait_ns: int
    other_ns: int


def kernel_type(op: GpuOp) -> str:
    """``compute``, ``communication``, ``memory`` or ``other``, by HTA 0.6.1's name rules; copies
    and memsets are memory, GPU synchronisations (:func:`gpu_events`) other."""
    if op.kind in ("memcpy", "memset"):
        return "memory"
    if op.kind == "sync":
        return "other"
    if _COMM.match(op.name):
        return "communication"
    if _MEMORY.match(op.name):
        return "memory"
    if _NOT_COMPUTE.match(op.name):
        return "other"
    return "compute"


def per_kind_and_name(ops: GpuTable, decide: Callable[[GpuOp], T]) -> tuple[list[T], np.ndarray[Any, Any]]:
    """`decide` applied once per distinct (kind, name) of `ops` (to an operation of that kind and
    name), and the index of each operation's answer."""
    if not len(ops):
        return [], np.zeros(0, dtype=np.int64)
    width = len(ops.labels("name")) + 1
    pairs, inverse = np.unique(ops.column("kind").astype(np.int64) * width + ops.column("name"), return_inverse=True)
    kinds, names = ops.labels("kind"), ops.labels("name")
    decided = [decide(GpuOp(str(kinds[p // width]), "", 0, 0, 0, 0, str(names[p % width]))) for p in pairs.tolist()]
    return decided, inverse.reshape(-1)


def kernel_types(ops: GpuTable) -> np.ndarray[Any, Any]:
    """Index into :data:`KINDS` of each operation's :func:`kernel_type`."""
    decided, inverse = per_kind_and_name(ops, lambda op: KINDS.index(kernel_type(op)))
    return np.asarray(decided, dtype=np.int64)[inverse] if len(ops) else np.zeros(0, dtype=np.int64)


def gpu_events(activity: Activity, device_wide: bool = True) -> GpuTable:
    """Every interval on a GPU queue: the operations and the synchronisations (CUPTI's cuda_sync,
    kind ``sync``, named by their kind), by (start, device, queue). Without `device_wide`, not the
    syncs of the whole device (a context or event sync, queue -1: Kineto's stream -1), which are on
    no queue: the temporal breakdown leaves them out, as HTA keeps only ``stream != -1``."""
    syncs = activity.syncs
    if len(syncs) and not device_wide:
        syncs = syncs.take(np.flatnonzero(syncs.column("queue") != -1))
    if not len(syncs):
        return activity.gpu
    n = len(syncs)
    blank = np.zeros(n, dtype=np.int32)
    as_ops = GpuTable({"kind": blank, "device": syncs.column("device"), "queue": syncs.column("queue"),
                       "correlation_id": syncs.column("correlation_id"), "start": syncs.column("start"),
                       "end": syncs.column("end"), "name": syncs.column("kind"), "bytes": np.zeros(n, np.int64),
                       "src_device": blank, "dst_device": blank},
                      {"kind": np.array(["sync"], dtype=object), "device": syncs.labels("device"),
                       "name": syncs.labels("kind"), "src_device": np.array([""], dtype=object),
                       "dst_device": np.array([""], dtype=object)})
    events = GpuTable.concat([activity.gpu, as_ops])
    return events.take(np.lexsort((events.column("queue"), events.column("device"), events.column("start"))))


def _path(activity: Activity, trace: DfcTrace | str | os.PathLike[str] | None) -> str:
    if isinstance(trace, DfcTrace):
        return str(trace.path)
    return str(trace) if trace is not None else activity.path


def kept_activity(activity: Activity, trace: str, exclude_last_step: bool = True) -> tuple[Activity, bool]:
    """`activity` without its last step when `exclude_last_step` (the analysis window's rule,
    :mod:`tc_analyses.model.window`), and whether that cut anything; raises without GPU operations."""
    if not len(activity.gpu):
        raise AnalysisUnavailable(f"{trace}: no GPU operations (dfc:kernel/memcpy/memset events) to break down")
    kept, scope = restrict(activity, Window(include_last_step=not exclude_last_step))
    if not len(kept.gpu):
        raise AnalysisUnavailable(f"{trace}: none of the {len(activity.gpu)} GPU operations was launched before the "
                                  "last profiler step (try --include-last-step)")
    return kept, scope.cut_last_step


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def _device_time(device: str, ops: GpuTable, types: np.ndarray[Any, Any]) -> DeviceTime:
    starts, ends = ops.column("start"), ops.column("end")

    def union(*kinds: str) -> int:
        mask = np.isin(types, [KINDS.index(k) for k in kinds])
        return union_ns(starts[mask], ends[mask])

    span = int(ends.max()) - int(starts.min())
    busy = union_ns(starts, ends)
    compute = union("compute")
    # Exclusive shares of the non-compute time: what runs without anything of a higher rank.
    with_comm = union("compute", "communication")
    with_memory = union("compute", "communication", "memory")
    idle = span - busy
    non_compute = span - compute - idle
    return DeviceTime(device, len(ops), span, busy, idle, compute, non_compute, with_comm - compute,
                      with_memory - with_comm, busy - with_memory, _pct(idle, span), _pct(compute, span),
                      _pct(non_compute, span))


def temporal_breakdown(activity: Activity, trace: DfcTrace | str | os.PathLike[str] | None = None, *,
                       exclude_last_step: bool = True) -> TemporalBreakdown:
    """Idle, compute and non-compute time of each GPU device and of all of them together."""
    path = _path(activity, trace)
    kept, filtered = kept_activity(activity, path, exclude_last_step)
    ops = gpu_events(kept, device_wide=False)  # HTA counts a queue's syncs as GPU time (type other)
    types = kernel_types(ops)
    device = ops.column("device")
    devices = tuple(_device_time(str(ops.labels("device")[d]), ops.take(device == d), types[device == d])
                    for d in np.unique(device).tolist())  # labels are sorted: by device name
    return TemporalBreakdown(path, filtered, len({s.step for s in activity.steps}), len(kept.gpu),
                             len(activity.gpu) - len(kept.gpu), devices, _device_time(ALL_DEVICES, ops, types))


def _gap_stats(gaps: np.ndarray[Any, Any]) -> GapStats:
    if not len(gaps):
        return GapStats(0, 0, 0, 0.0, 0)
    return GapStats(len(gaps), int(gaps.sum()), int(gaps.min()), float(np.median(gaps)), int(gaps.max()))


def _queue_idle(device: str, queue: int, starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any],
                launch_starts: np.ndarray[Any, Any], threshold: int) -> QueueIdle:
    """The gaps of one queue's operations (by start; `launch_starts` -1 where not launched)."""
    gap = starts[1:] - ends[:-1]
    host = launch_starts[1:] > ends[:-1]  # -1: no launch recorded, never host wait
    # negative gaps (overlap on one queue) are kernel wait too, as in HTA
    kernel = ~host & (gap < threshold)
    gaps = {"host_wait": gap[host], "kernel_wait": gap[kernel], "other": gap[~host & ~kernel]}
    sums = {c: int(g.sum()) for c, g in gaps.items()}
    idle = sum(sums.values())
    ratio = {c: sums[c] / idle if idle else 0.0 for c in CATEGORIES}
    return QueueIdle(device, queue, len(starts), idle, sums["host_wait"], sums["kernel_wait"], sums["other"],
                     ratio["host_wait"], ratio["kernel_wait"], ratio["other"],
                     {c: _gap_stats(g) for c, g in gaps.items()})


def idle_breakdown(activity: Activity, trace: DfcTrace | str | os.PathLike[str] | None = None, *,
                   consecutive_kernel_delay_ns: int = DEFAULT_KERNEL_DELAY_NS,
                   exclude_last_step: bool = True) -> IdleBreakdown:
    """The gaps on each GPU queue split into host wait, kernel wait and other."""
    path = _path(activity, trace)
    kept, filtered = kept_activity(activity, path, exclude_last_step)
    ops = kept.gpu
    launch = kept.launch_indexes()
    launch_starts = np.where(launch >= 0, kept.api.column("start")[np.maximum(launch, 0)] if len(kept.api) else -1, -1)
    device, queue, starts = ops.column("device"), ops.column("queue"), ops.column("start")
    order = np.lexsort((starts, queue, device))  # by device name, queue, then start (stable)
    key = device[order] * (int(queue.max()) - int(queue.min()) + 1) + (queue[order] - int(queue.min()))
    cuts = np.flatnonzero(np.append(True, key[1:] != key[:-1]))
    queues = []
    for lo, hi in zip(cuts.tolist(), np.append(cuts[1:], len(order)).tolist()):
        rows = order[lo:hi]
        queues.append(_queue_idle(str(ops.labels("device")[device[rows[0]]]), int(queue[rows[0]]), starts[rows],
                                  ops.column("end")[rows], launch_starts[rows], consecutive_kernel_delay_ns))
    return IdleBreakdown(path, filtered, consecutive_kernel_delay_ns, int((launch < 0).sum()), tuple(queues),
                         sum(q.host_wait_ns for q in queues), sum(q.kernel_wait_ns for q in queues),
                         sum(q.other_ns for q in queues))


# ---------------------------------------------------------------------------- HTA's µs reading
def hta_reading(starts: Any, ends: Any, to_source: int, whole_us: bool = False) -> tuple[Any, Any]:
    """Starts and ends (trace ns) as HTA reads them: Kineto's µs (trace ns + `to_source`, as the file
    writes them with 3 decimals) parsed to float64, the start rounded up, start + duration added
    in float64 and rounded down, back in trace ns. At today's epoch a float64 µs is 0.25 µs
    apart, so an end at .88 µs or more can round up before the floor: HTA's own arithmetic.

    `whole_us`: the file gave whole µs, so HTA added whole numbers, exactly; only an end the
    importer took from Kineto's own measure (a copy's exact duration) is finer, and HTA read the
    file's floored one: the end rounded down."""
    if whole_us:
        shifted_ends = np.asarray(ends, dtype=np.int64) + to_source
        return np.asarray(starts, dtype=np.int64), shifted_ends - shifted_ends % 1000 - to_source
    out_starts, out_ends = [], []
    for start, end in zip((np.asarray(starts) + to_source).tolist(), (np.asarray(ends) + to_source).tolist()):
        ts = float(f"{start // 1000}.{start % 1000:03d}")
        duration = end - start
        dur = float(f"{'-' if duration < 0 else ''}{abs(duration) // 1000}.{abs(duration) % 1000:03d}")
        out_starts.append(math.ceil(ts) * 1000 - to_source)
        out_ends.append(math.floor(ts + dur) * 1000 - to_source)
    return np.asarray(out_starts, dtype=np.int64), np.asarray(out_ends, dtype=np.int64)


def read_like_hta(activity: Activity, trace: DfcTrace) -> Activity:
    """:func:`round_like_hta` with the clock offset and Kineto base of the imported `trace`."""
    base = trace.metadata.env.get("kineto_base_ns", 0)
    return round_like_hta(activity, trace.metadata.clock_offset_ns, base if isinstance(base, int) else 0)


def round_like_hta(activity: Activity, clock_offset_ns: int, kineto_base_ns: int = 0) -> Activity:
    """`activity` with the times HTA reads from a ns-resolution Kineto file, for cross-checks.

    HTA keeps whole µs: a slice's start is rounded up and its end (start + duration, added in
    float64 as HTA adds them) down, so a slice shorter than a µs may end before it starts. The µs
    are the file's: trace time + `clock_offset_ns` is wall time, and wall time - `kineto_base_ns`
    is what the file wrote (the importer's `kineto_base_ns` environment entry; 0 for files with
    wall-clock stamps). For files with whole-µs stamps (every GPU operation and runtime call
    starting on a whole µs) it changes only the copies' exact ends (:func:`hta_reading`).
    """
    to_source = clock_offset_ns - kineto_base_ns
    whole_us = _whole_us(activity, to_source)

    def rounded(table: TableT) -> TableT:
        starts, ends = hta_reading(table.column("start"), table.column("end"), to_source, whole_us)
        return table.with_columns(start=starts, end=ends)

    steps = []
    for r in activity.steps:
        (start,), (end,) = hta_reading([r.start], [r.end], to_source, whole_us)
        steps.append(replace(r, start=int(start), end=int(end)))
    return replace(activity, steps=steps, api=rounded(activity.api), gpu=rounded(activity.gpu),
                   syncs=rounded(activity.syncs), annotations=rounded(activity.annotations), _launch={})


def _whole_us(activity: Activity, to_source: int) -> bool:
    """Every time the file gave is a whole µs: all but the copies' and memsets' ends, which the
    importer may take from Kineto's exact measure (tracer.importers.kineto_fields.measured_end)."""
    gpu = activity.gpu
    measured = np.isin(gpu.text("kind"), ("memcpy", "memset")) if len(gpu) else np.zeros(0, dtype=bool)
    times = [gpu.column("start"), gpu.column("end")[~measured]] + [
        table.column(edge) for table in (activity.api, activity.syncs, activity.annotations) for edge in ("start", "end")]
    stamps = np.concatenate([np.asarray(t, dtype=np.int64) for t in times])
    return bool(len(stamps)) and not ((stamps + to_source) % 1000).any()


@dataclass(frozen=True)
class Breakdown:
    """Both breakdowns of one trace and what they say."""

    temporal: TemporalBreakdown
    idle: IdleBreakdown
    findings: tuple[Finding, ...]


def run(inputs: Inputs, options: Options) -> Result:
    """The temporal and idle-time breakdowns, HTA's way, on the analysis window (which leaves the
    last step out, as HTA does); gaps under ``options["kernel_delay_us"]`` count as kernel wait."""
    temporal = temporal_breakdown(inputs.activity, inputs.trace, exclude_last_step=False)
    idle = idle_breakdown(inputs.activity, inputs.trace, exclude_last_step=False,
                          consecutive_kernel_delay_ns=int(options["kernel_delay_us"] * 1000))
    cut = inputs.scope.cut_last_step
    temporal, idle = replace(temporal, filtered=cut), replace(idle, filtered=cut)
    data = Breakdown(temporal, idle, tuple(breakdown_findings(temporal, idle)))
    return Result("breakdown", temporal.trace, data, data.findings)


def breakdown_findings(temporal: TemporalBreakdown, idle: IdleBreakdown) -> list[Finding]:
    """What the two breakdowns say, most important first, each with what to do."""
    t = temporal.total
    out = [Finding("time_split", t.idle_ns, f"the GPU is idle {t.idle_pct:.1f}% of its kernel time, computes {t.compute_pct:.1f}% and spends "
           f"{t.non_compute_pct:.1f}% in communication, copies and other non-compute work")]
    waited = idle.host_wait_ns + idle.kernel_wait_ns + idle.other_ns
    if waited:
        host, other = idle.host_wait_ns / waited, idle.other_ns / waited
        if host >= 0.5:
            out.append(Finding("host_wait", idle.host_wait_ns, f"{host:.0%} of the queues' idle time is host wait (the next op was launched only after the "
                       "previous one ended): the host was dispatching, blocked in a sync or busy elsewhere (data "
                       "loading, Python); dfcompass overhead tells whether per-op dispatch cost is the cause"))
        elif other >= 0.5:
            out.append(Finding("other_wait", idle.other_ns, f"{other:.0%} of the queues' idle time is 'other' (launched in time, yet waiting): the queues "
                       "wait on synchronisation, other streams or copies; look for blocking syncs and serial streams"))
    if t.non_compute_ns > t.compute_ns:
        out.append(Finding("non_compute", t.non_compute_ns, "non-compute work takes more GPU time than compute: "
                           "overlap communication and copies with compute (separate streams, bucketed all-reduce, "
                           "pinned non_blocking copies)"))
    return out
