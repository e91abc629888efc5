"""Kernel breakdown: GPU time per kernel type (with the time types overlap) and per kernel name.

HTA's ``get_gpu_kernel_breakdown`` and ``get_comm_comp_overlap`` (HolisticTraceAnalysis 0.6.1),
on the analysis window (:mod:`tc_analyses.model.window`):

* **per type**: the union of the compute, communication and memory kernels' intervals, cut where
  they overlap: ``compute`` alone, ``compute overlapping communication``, and so on. The rows add up
  to the time any of them runs (``other`` kernels, such as synchronisations, are not counted).
* **per name**: count, total, mean, min, max and standard deviation of each kernel name (copies are
  named ``Memcpy <copy kind>``, memsets ``Memset``), the top ``top`` of each type by total time; the
  rest of the type is one ``others`` row. HTA also folds names past the ``duration_ratio`` quantile
  of the cumulative time; so does this analysis.
* **communication/computation overlap**: the share of the communication time during which compute
  also runs (HTA's ``comp_comm_overlap_pctg``);
* **GPU user annotations** (HTA's ``get_gpu_user_annotation_breakdown`` and
  ``get_gpu_kernels_with_user_annotations``): per annotation name its GPU time, and the kernels
  attributed to it (each to the shortest annotation of its queue that overlaps it).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from statistics import stdev

import numpy as np

from tc_analyses.analyses.breakdown import KINDS, gpu_events, kernel_types, per_kind_and_name
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, GpuOp, GpuTable
from tc_analyses.model.intervals import merge_intervals

TYPES = ("compute", "communication", "memory")  # the types whose time is broken down (HTA's order)
OTHERS = "others"


@dataclass(frozen=True)
class KernelStats:
    name: str
    type: str
    count: int
    total_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    std_ns: float  # sample standard deviation, 0 for one kernel (as HTA)
    share_pct: float  # of its type's total


@dataclass(frozen=True)
class TypeTime:
    """Time during which exactly this combination of types runs (``compute overlapping memory``...)."""

    label: str
    time_ns: int
    share_pct: float


@dataclass(frozen=True)
class AnnotationStats:
    """A GPU user annotation's time on the GPU, and the kernels attributed to it (the leaf annotation
    of their queue that overlaps them)."""

    name: str
    count: int
    total_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    std_ns: float
    kernels: int
    kernel_ns: int


@dataclass(frozen=True)
class KernelBreakdown:
    trace: str
    scope: str
    types: tuple[TypeTime, ...]  # by time, longest first
    kernels: tuple[KernelStats, ...]  # by type, then total time (others last)
    comm_comp_overlap_pct: float | None  # None without communication kernels
    annotations: tuple[AnnotationStats, ...]  # GPU user annotations, by name
    findings: tuple[Finding, ...]


def display_name(op: GpuOp) -> str:
    """The name a kernel is grouped by: its own; ``Memcpy <copy kind>`` for copies; ``Memset``."""
    if op.kind == "memcpy":
        return f"Memcpy {op.name}"
    if op.kind == "memset":
        return "Memset"
    return op.name


def _merged_of(ops: GpuTable, mask: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    # an op that ends before it starts (HTA's whole-µs reading of a sub-µs slice) takes no time;
    # kept, its -bit would come before its +bit and the running sum would stop being a type mask
    starts, ends = ops.column("start"), ops.column("end")
    kept = mask & (ends > starts)
    starts, ends = merge_intervals(starts[kept], ends[kept])
    return list(zip(starts.tolist(), ends.tolist()))


def _type_masks(ops: GpuTable) -> dict[str, np.ndarray[Any, Any]]:
    """Type name -> mask of the operations of that type (:func:`kernel_type`)."""
    types = kernel_types(ops)
    return {kind: types == KINDS.index(kind) for kind in KINDS}


def type_times(ops: GpuTable) -> list[TypeTime]:
    """The time each combination of compute, communication and memory runs, longest first."""
    masks = _type_masks(ops)
    points: list[tuple[int, int]] = []  # (time, +bit / -bit)
    for index, kind in enumerate(TYPES):
        bit = 1 << index
        for start, end in _merged_of(ops, masks[kind]):
            points += [(start, bit), (end, -bit)]
    points.sort()
    spent: dict[int, int] = defaultdict(int)
    running = 0
    for (time, change), (next_time, _) in zip(points, points[1:] + [(points[-1][0], 0)] if points else []):
        running += change
        if running:
            spent[running] += next_time - time
    total = sum(spent.values())
    rows = [TypeTime(" overlapping ".join(k for i, k in enumerate(TYPES) if mask & (1 << i)), t,
                     100.0 * t / total if total else 0.0) for mask, t in spent.items() if t > 0]
    return sorted(rows, key=lambda r: (-r.time_ns, r.label))


def _stats(name: str, kind: str, durations: list[int], type_total: int) -> KernelStats:
    total = sum(durations)
    return KernelStats(name, kind, len(durations), total, total / len(durations), min(durations), max(durations),
                       stdev(durations) if len(durations) > 1 else 0.0, 100.0 * total / type_total if type_total else 0.0)


def per_name(ops: GpuTable, top: int, duration_ratio: float) -> list[KernelStats]:
    """Each type's kernels by name, the first `top` by total time and ``others`` for the rest."""
    masks = _type_masks(ops)
    names, which = per_kind_and_name(ops, display_name)
    durations = ops.column("end") - ops.column("start")
    rows: list[KernelStats] = []
    for kind in TYPES:
        mine = np.flatnonzero(masks[kind])
        if not len(mine):
            continue
        by_name: dict[str, list[int]] = defaultdict(list)
        order = mine[np.argsort(which[mine], kind="stable")]  # by name, each name's ops in table order
        groups = np.flatnonzero(np.append(True, which[order][1:] != which[order][:-1]))
        for lo, hi in zip(groups.tolist(), np.append(groups[1:], len(order)).tolist()):
            by_name[names[int(which[order[lo]])]] += durations[order[lo:hi]].tolist()
        type_total = sum(sum(d) for d in by_name.values())
        ordered = sorted(by_name, key=lambda n: (-sum(by_name[n]), n))
        folded: set[str] = set()
        if len(ordered) > top:  # HTA: past `top` names, or past the duration_ratio quantile of the cumsum
            cumsum = np.cumsum([sum(by_name[n]) for n in ordered])
            limit = float(np.quantile(cumsum, duration_ratio))
            folded = {n for i, n in enumerate(ordered) if i >= top or cumsum[i] > limit}
        rows += [_stats(n, kind, by_name[n], type_total) for n in ordered if n not in folded]
        if folded:
            rest = [d for n in ordered if n in folded for d in by_name[n]]
            rows.append(_stats(OTHERS, kind, rest, type_total))
    return rows


def comm_comp_overlap(ops: GpuTable) -> float | None:
    """Percent of the communication kernels' time during which compute kernels also run."""
    masks = _type_masks(ops)
    comm, comp = (_merged_of(ops, masks[kind]) for kind in ("communication", "compute"))
    if not comm:
        return None
    overlap, j = 0, 0
    for start, end in comm:
        while j < len(comp) and comp[j][1] <= start:
            j += 1
        k = j
        while k < len(comp) and comp[k][0] < end:
            overlap += min(end, comp[k][1]) - max(start, comp[k][0])
            k += 1
    return 100.0 * overlap / sum(e - s for s, e in comm)


def kernel_annotations(activity: Activity) -> dict[int, str]:
    """Index in ``activity.gpu`` -> the GPU user annotation the operation is attributed to: of the
    annotations on its device and queue that overlap it, the shortest (the leaf), as HTA's
    get_gpu_kernels_with_user_annotations."""
    gpu = activity.gpu
    starts, ends = gpu.column("start").tolist(), gpu.column("end").tolist()
    per_queue: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(gpu.text("device").tolist(), gpu.column("queue").tolist())):
        per_queue[key].append(i)
    for ops in per_queue.values():
        ops.sort(key=lambda i: starts[i])
    found: dict[int, str] = {}
    for annotation in sorted((a for a in activity.annotations if a.on_gpu), key=lambda a: -(a.end - a.start)):
        ops = per_queue.get((annotation.device, annotation.track), [])
        hi = bisect.bisect_left([starts[i] for i in ops], annotation.end)
        for i in ops[:hi]:
            if ends[i] > annotation.start and ends[i] > starts[i]:  # half-open: an empty interval overlaps nothing
                found[i] = annotation.name
    return found


def annotation_stats(activity: Activity) -> list[AnnotationStats]:
    """Per GPU user annotation name: its durations and the kernels attributed to it."""
    durations: dict[str, list[int]] = defaultdict(list)
    for a in activity.annotations:
        if a.on_gpu:
            durations[a.name].append(a.end - a.start)
    kernels: dict[str, list[int]] = defaultdict(list)
    op_ns = (activity.gpu.column("end") - activity.gpu.column("start")).tolist()
    for i, name in kernel_annotations(activity).items():
        kernels[name].append(op_ns[i])
    rows = []
    for name in sorted(durations):
        d = durations[name]
        rows.append(AnnotationStats(name, len(d), sum(d), sum(d) / len(d), min(d), max(d), stdev(d) if len(d) > 1 else 0.0,
                                    len(kernels[name]), sum(kernels[name])))
    return rows


def _findings(types: list[TypeTime], kernels: list[KernelStats], overlap: float | None) -> list[Finding]:
    out = []
    compute = [k for k in kernels if k.type == "compute" and k.name != OTHERS]
    if compute:
        top = compute[0]
        out.append(Finding("top_kernel", top.total_ns, f"the longest compute kernel is {top.name[:120]} "
                           f"({top.count} runs, {fmt_ns(top.total_ns)}, {top.share_pct:.1f}% of compute): "
                           "the first place to look for a faster implementation or a better shape"))
    if overlap is not None:
        comm = sum(t.time_ns for t in types if "communication" in t.label)
        exposed = round(comm * (1 - overlap / 100))
        if overlap < 50:
            out.append(Finding("exposed_communication", exposed, f"only {overlap:.1f}% of the communication time "
                               f"overlaps compute ({fmt_ns(exposed)} exposed): bucket and launch collectives earlier "
                               "(DDP bucket_cap_mb, FSDP prefetch) so they run under the backward pass"))
    return out


def run(inputs: Inputs, options: Options) -> Result:
    """The kernel breakdown of the analysis window: ``options["top"]`` names per type,
    ``options["duration_ratio"]`` of the cumulative time before folding into ``others``."""
    ops = gpu_events(inputs.activity)
    if not np.isin(kernel_types(ops), [KINDS.index(t) for t in TYPES]).any():
        raise AnalysisUnavailable(f"{inputs.path}: no GPU kernels, copies or memsets in {inputs.scope.window}")
    types = type_times(ops)
    kernels = per_name(ops, int(options["top"]), float(options["duration_ratio"]))
    overlap = comm_comp_overlap(ops)
    findings = tuple(sorted(_findings(types, kernels, overlap), key=lambda f: -f.impact_ns))
    data = KernelBreakdown(str(inputs.path), inputs.scope.text(), tuple(types), tuple(kernels), overlap,
                           tuple(annotation_stats(inputs.activity)), findings)
    return Result("kernels", data.trace, data, findings)


