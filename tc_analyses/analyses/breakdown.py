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

import os
import re
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, AnnotationRun, ApiCall, GpuOp, StepRun, SyncRun
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


def gpu_events(activity: Activity) -> list[GpuOp]:
    """Every interval on a GPU queue as HTA counts them: the operations and the synchronisations
    (CUPTI's cuda_sync, kind ``sync``, named by their kind; a context sync has queue -1)."""
    syncs = [GpuOp("sync", s.device, s.queue, s.correlation_id, s.start, s.end, s.kind) for s in activity.syncs]
    return sorted(activity.gpu + syncs, key=lambda o: (o.start, o.device, o.queue))


def _path(activity: Activity, trace: DfcTrace | str | os.PathLike[str] | None) -> str:
    if isinstance(trace, DfcTrace):
        return str(trace.path)
    return str(trace) if trace is not None else activity.path


def kept_activity(activity: Activity, trace: str, exclude_last_step: bool = True) -> tuple[Activity, bool]:
    """`activity` without its last step when `exclude_last_step` (the analysis window's rule,
    :mod:`tc_analyses.model.window`), and whether that cut anything; raises without GPU operations."""
    if not activity.gpu:
        raise AnalysisUnavailable(f"{trace}: no GPU operations (dfc:kernel/memcpy/memset events) to break down")
    kept, scope = restrict(activity, Window(include_last_step=not exclude_last_step))
    if not kept.gpu:
        raise AnalysisUnavailable(f"{trace}: none of the {len(activity.gpu)} GPU operations was launched before the "
                                  "last profiler step (try --include-last-step)")
    return kept, scope.cut_last_step


def kept_ops(activity: Activity, trace: str, exclude_last_step: bool = True) -> tuple[list[GpuOp], bool]:
    """The GPU operations analysed, and whether the last-step filter applied; raises if none."""
    kept, cut = kept_activity(activity, trace, exclude_last_step)
    return list(kept.gpu), cut


def _union(ops: Sequence[GpuOp]) -> int:
    return union_ns([o.start for o in ops], [o.end for o in ops])


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def _device_time(device: str, ops: list[GpuOp]) -> DeviceTime:
    by_type: dict[str, list[GpuOp]] = {k: [] for k in KINDS}
    for op in ops:
        by_type[kernel_type(op)].append(op)
    span = max(o.end for o in ops) - min(o.start for o in ops)
    busy = _union(ops)
    compute = _union(by_type["compute"])
    # Exclusive shares of the non-compute time: what runs without anything of a higher rank.
    with_comm = _union(by_type["compute"] + by_type["communication"])
    with_memory = _union(by_type["compute"] + by_type["communication"] + by_type["memory"])
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
    ops = gpu_events(kept)  # HTA counts GPU synchronisations as GPU time (type other)
    per_device: dict[str, list[GpuOp]] = {}
    for op in ops:
        per_device.setdefault(op.device, []).append(op)
    devices = tuple(_device_time(d, per_device[d]) for d in sorted(per_device))
    return TemporalBreakdown(path, filtered, len({s.step for s in activity.steps}), len(kept.gpu),
                             len(activity.gpu) - len(kept.gpu), devices, _device_time(ALL_DEVICES, ops))


def _gap_stats(gaps: list[int]) -> GapStats:
    if not gaps:
        return GapStats(0, 0, 0, 0.0, 0)
    return GapStats(len(gaps), sum(gaps), min(gaps), float(np.median(gaps)), max(gaps))


def _queue_idle(activity: Activity, device: str, queue: int, ops: list[GpuOp], threshold: int) -> QueueIdle:
    gaps: dict[str, list[int]] = {c: [] for c in CATEGORIES}
    ops = sorted(ops, key=lambda o: o.start)
    for prev, op in zip(ops, ops[1:]):
        gap = op.start - prev.end
        launch = activity.launch_of(op)
        if launch is not None and launch.start > prev.end:
            gaps["host_wait"].append(gap)
        elif gap < threshold:  # negative gaps (overlap on one queue) land here too, as in HTA
            gaps["kernel_wait"].append(gap)
        else:
            gaps["other"].append(gap)
    sums = {c: sum(g) for c, g in gaps.items()}
    idle = sum(sums.values())
    ratio = {c: sums[c] / idle if idle else 0.0 for c in CATEGORIES}
    return QueueIdle(device, queue, len(ops), idle, sums["host_wait"], sums["kernel_wait"], sums["other"],
                     ratio["host_wait"], ratio["kernel_wait"], ratio["other"],
                     {c: _gap_stats(g) for c, g in gaps.items()})


def idle_breakdown(activity: Activity, trace: DfcTrace | str | os.PathLike[str] | None = None, *,
                   consecutive_kernel_delay_ns: int = DEFAULT_KERNEL_DELAY_NS,
                   exclude_last_step: bool = True) -> IdleBreakdown:
    """The gaps on each GPU queue split into host wait, kernel wait and other."""
    path = _path(activity, trace)
    ops, filtered = kept_ops(activity, path, exclude_last_step)
    per_queue: dict[tuple[str, int], list[GpuOp]] = {}
    for op in ops:
        per_queue.setdefault((op.device, op.queue), []).append(op)
    queues = tuple(_queue_idle(activity, d, q, per_queue[(d, q)], consecutive_kernel_delay_ns)
                   for d, q in sorted(per_queue))
    return IdleBreakdown(path, filtered, consecutive_kernel_delay_ns,
                         sum(1 for o in ops if activity.launch_of(o) is None), queues,
                         sum(q.host_wait_ns for q in queues), sum(q.kernel_wait_ns for q in queues),
                         sum(q.other_ns for q in queues))


# ---------------------------------------------------------------------------- HTA's µs reading
def _up(t: int, offset: int) -> int:
    return -((-(t + offset)) // 1000) * 1000 - offset


def _down(t: int, offset: int) -> int:
    return ((t + offset) // 1000) * 1000 - offset


def round_like_hta(activity: Activity, clock_offset_ns: int) -> Activity:
    """`activity` with the times HTA reads from a ns-resolution Kineto file, for cross-checks.

    HTA keeps whole µs: a slice's start is rounded up and its end down (so a slice shorter than
    a µs may end before it starts). The µs boundaries are those of the source clock: trace time
    + `clock_offset_ns` (the trace's clock offset; for imported Kineto files Kineto's ns plus a
    base that is a whole number of µs). For files with whole-µs stamps this changes nothing.
    """
    def span(start: int, end: int) -> tuple[int, int]:
        return _up(start, clock_offset_ns), _down(end, clock_offset_ns)

    def ops(items: Iterable[GpuOp]) -> list[GpuOp]:
        return [replace(o, start=s, end=e) for o in items for s, e in [span(o.start, o.end)]]

    def calls(items: Iterable[ApiCall]) -> list[ApiCall]:
        return [replace(c, start=s, end=e) for c in items for s, e in [span(c.start, c.end)]]

    def steps(items: Iterable[StepRun]) -> list[StepRun]:
        return [replace(r, start=s, end=e) for r in items for s, e in [span(r.start, r.end)]]

    def syncs(items: Iterable[SyncRun]) -> list[SyncRun]:
        return [replace(r, start=s, end=e) for r in items for s, e in [span(r.start, r.end)]]

    def annotations(items: Iterable[AnnotationRun]) -> list[AnnotationRun]:
        return [replace(r, start=s, end=e) for r in items for s, e in [span(r.start, r.end)]]

    return replace(activity, steps=steps(activity.steps), api=calls(activity.api), gpu=ops(activity.gpu),
                   syncs=syncs(activity.syncs), annotations=annotations(activity.annotations), _launch={})




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
