"""Runtime overhead: does the GPU work of each framework op last long enough to hide its host cost?

After Delestrac et al. (DSD 2022, "Demystifying the TensorFlow eager execution"), with the
definitions of ``docs/analyses-seed/overhead.md`` (ours, consistent with HTA). For every
outermost node (framework op) that owns at least one *launching* API call (a call whose
correlation id joins a GPU op):

* host dispatch ``H = first launching call's enter - op start``,
* launch ``L = sum of the op's launching calls' durations``,
* queue delay ``Q`` per GPU op ``= max(0, GPU op start - its launch call's exit)``; per op the
  mean over its GPU ops (and the first one's),
* device time ``K = sum of the durations of the op's GPU ops`` (kernels, memcpy, memset).

Per step (``dfc:step_begin``/``end``; a trace without steps is one window from its first to its
last activity): hiding ratio ``sum K / sum (H + L)`` (< 1: host-bound), GPU busy time = union of
all GPU ops of every device and queue clipped to the step, exposed host time = step - busy.
Per op type: the means, ``median(H + L)`` (the shortest kernel time that hides the host cost)
and the share of *short* ops (``K < H + L``). :func:`overhead_trajectory` lines up the results
of several traces (e.g. batch sizes) and finds where the ratio crosses 1.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import numpy as np

from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.labels import label_number, order_runs
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable, ConfigurationError
from tc_analyses.model.activity import Activity, ApiCall, GpuOp, NodeRun
from tc_analyses.model.intervals import clipped_union_ns


MAX_FINDINGS = 5
WHOLE_TRACE = -1  # the step number of the single window of a trace without steps
OUTSIDE_STEPS = -2  # the step number of an op that starts outside every step
NO_GPU = ("no GPU activity joined to API calls: runtime overhead needs kernels with correlation ids "
          "(record on a GPU or import a Kineto trace)")
NO_OWNER = ("GPU activity is joined to API calls, but no framework op (dfc:node_begin) owns a launching call: "
            "runtime overhead needs the ops that launched the kernels")



@dataclass(frozen=True)
class OpOverhead:
    """One execution of a framework op that launched GPU work. Times in ns."""

    node_id: int
    op: str
    name: str
    tid: int
    step: int  # the step window it falls in; WHOLE_TRACE without steps, OUTSIDE_STEPS outside all of them
    start: int
    host_ns: int  # H
    launch_ns: int  # L
    overhead_ns: int  # H + L
    queue_ns: float  # mean Q over its GPU ops
    first_queue_ns: int  # Q of its first GPU op (by start)
    device_ns: int  # K
    launches: int  # launching API calls
    gpu_ops: int
    short: bool  # K < H + L: the GPU work does not hide the host cost



@dataclass(frozen=True)
class StepOverhead:
    step: int  # WHOLE_TRACE for a trace without steps
    start: int
    end: int
    duration_ns: int
    ops: int  # ops with GPU work in the step
    host_ns: int  # sum H
    launch_ns: int  # sum L
    device_ns: int  # sum K
    hiding_ratio: float | None  # sum K / sum (H + L); None when the step has no op with GPU work
    host_bound: bool  # hiding ratio < 1
    gpu_busy_ns: int  # union of all GPU ops clipped to the step
    gpu_busy_share: float
    exposed_host_ns: int  # duration - busy
    exposed_host_share: float
    short_op_fraction: float


@dataclass(frozen=True)
class OpTypeOverhead:
    op: str
    count: int  # executions with GPU work
    gpu_ops: int
    mean_host_ns: float
    mean_launch_ns: float
    mean_queue_ns: float  # mean of the executions' mean Q
    mean_device_ns: float
    min_hiding_kernel_ns: float  # median(H + L): the device time an execution needs to hide its host cost
    short_share: float  # executions with K < H + L
    exposed_overhead_ns: int  # sum of max(0, H + L - K)
    hiding_ratio: float | None  # sum K / sum (H + L)


@dataclass(frozen=True)
class OverheadResult:
    trace: str
    whole_trace: bool  # True: no steps in the trace, one window over all its activity
    steps: tuple[StepOverhead, ...]  # by start
    op_types: tuple[OpTypeOverhead, ...]  # most exposed overhead first
    ops: tuple[OpOverhead, ...]  # by start
    hiding_ratio: float | None  # over the ops in steps
    mean_step_ns: float
    gpu_busy_share: float  # over all steps
    exposed_host_share: float  # over all steps
    short_op_fraction: float  # over all ops with GPU work
    short_kernel_share: float | None  # owned kernels shorter than their op type's min hiding length
    mean_kernel_ns: float  # over every kernel of the trace
    mean_queue_ns: float  # over every GPU op with an owned launch
    gpu_ops: int  # every GPU op of the trace
    gpu_ops_unowned: int  # launch recorded, but no framework op open on its thread
    gpu_ops_unlaunched: int  # no launch recorded for its correlation id
    ops_outside_steps: int
    notes: tuple[str, ...]
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class TrajectoryPoint:
    label: str
    trace: str
    steps: int
    mean_step_ns: float
    hiding_ratio: float | None
    exposed_host_share: float
    gpu_busy_share: float
    short_op_fraction: float
    mean_kernel_ns: float


@dataclass(frozen=True)
class Trajectory:
    points: tuple[TrajectoryPoint, ...]  # numeric labels sorted by value, others as given
    numeric: bool
    crossing: str | None  # the label from which the hiding ratio stays >= 1 (after being < 1)
    findings: tuple[Finding, ...]


# ---------------------------------------------------------------------------------------- analysis
def analyze_overhead(activity: Activity, trace: str, framework: str = PYTORCH) -> OverheadResult:
    """The runtime overhead of every op that launched GPU work in `activity` (read from `trace`); the
    advice in `framework`'s words (:mod:`~tc_analyses.analyses.frameworks`)."""
    if not len(activity.gpu):  # decided from the counts, before any work
        raise AnalysisUnavailable(f"{trace}: {NO_GPU}")
    launched = _Launched(activity)
    if not (launched.call >= 0).any():
        raise AnalysisUnavailable(f"{trace}: {NO_GPU}")
    if not launched.owned.any():
        raise AnalysisUnavailable(f"{trace}: {NO_OWNER}")
    windows, whole = step_windows(activity)
    step_of = stepper(windows)
    ops = tuple(sorted(launched.ops(step_of), key=lambda o: (o.start, o.tid, o.node_id)))
    op_types = _op_types(ops)
    min_hiding = {t.op: t.min_hiding_kernel_ns for t in op_types}
    by_step: dict[int, list[OpOverhead]] = defaultdict(list)
    for o in ops:
        by_step[o.step].append(o)
    gpu = activity.gpu
    gpu_starts, gpu_ends = gpu.column("start"), gpu.column("end")
    steps = tuple(_step(number, lo, hi, by_step.get(number, []), gpu_starts, gpu_ends)
                  for number, (lo, hi) in windows)
    is_kernel = gpu.codes_where("kind", lambda kind: kind == "kernel")
    durations = gpu_ends - gpu_starts
    owned_kernels = launched.owned & is_kernel
    owner_ops = activity.nodes.text("op")[launched.owner[owned_kernels]].tolist() if owned_kernels.any() else []
    hiding = np.fromiter((min_hiding[op] for op in owner_ops), dtype=np.float64, count=len(owner_ops))
    span = sum(s.duration_ns for s in steps)
    in_steps = [o for o in ops if o.step != OUTSIDE_STEPS]
    notes: list[str] = []
    if whole:
        notes.append("the trace has no steps (dfc:step_begin/end): its whole span, from the first to the last "
                     "node, API call or GPU op, is treated as one step")
    outside = len(ops) - len(in_steps)
    if outside:
        notes.append(f"{outside} ops with GPU work start outside every step: they count in the op types, "
                     "not in the step figures")
    result = OverheadResult(
        trace=trace, whole_trace=whole, steps=steps, op_types=op_types, ops=ops,
        hiding_ratio=_ratio(sum(o.device_ns for o in in_steps), sum(o.overhead_ns for o in in_steps)),
        mean_step_ns=span / len(steps) if steps else 0.0,
        gpu_busy_share=sum(s.gpu_busy_ns for s in steps) / span if span else 0.0,
        exposed_host_share=sum(s.exposed_host_ns for s in steps) / span if span else 0.0,
        short_op_fraction=sum(o.short for o in ops) / len(ops),
        short_kernel_share=(float((durations[owned_kernels] < hiding).mean()) if len(hiding) else None),
        mean_kernel_ns=_mean(durations[is_kernel]),
        mean_queue_ns=_mean(launched.delay[launched.owned]),
        gpu_ops=len(gpu), gpu_ops_unowned=int(launched.unowned.sum()), gpu_ops_unlaunched=int((launched.call < 0).sum()),
        ops_outside_steps=outside, notes=tuple(notes), findings=())
    unattributed = ~launched.owned
    return _with_findings(result, int(unattributed.sum()), int(durations[unattributed].sum()), framework)


def _mean(values: np.ndarray[Any, Any]) -> float:
    """The mean of integers as Python divides their exact sum (numpy's float sum may differ in the last bit)."""
    return int(values.sum()) / len(values) if len(values) else 0.0


class _Launched:
    """Each GPU operation's launch call (index in ``activity.api``, -1 if not recorded), the node
    that owns that call (-1 if none), and its queue delay (start - the call's end, at least 0)."""

    def __init__(self, activity: Activity) -> None:
        self.activity = activity
        api, gpu = activity.api, activity.gpu
        self.call = activity.launch_indexes()
        at = np.maximum(self.call, 0)
        launched = self.call >= 0
        self.owner = np.where(launched, api.column("owner")[at], -1) if len(api) else np.full(len(gpu), -1)
        self.owned = self.owner >= 0
        self.unowned = launched & ~self.owned
        call_end = api.column("end")[at] if len(api) else np.zeros(len(gpu), dtype=np.int64)
        self.delay = np.maximum(gpu.column("start") - call_end, 0)

    def ops(self, step_of: Callable[[NodeRun], int]) -> list[OpOverhead]:
        """One :class:`OpOverhead` per node that owns a launch, its figures summed with numpy."""
        activity, api, gpu = self.activity, self.activity.api, self.activity.gpu
        rows = np.flatnonzero(self.owned)
        node, call = self.owner[rows], self.call[rows]
        start, queue = gpu.column("start")[rows], gpu.column("queue")[rows]
        # by node; within a node as the op's GPU work ran: by (start, queue), then call, then table order
        order = np.lexsort((rows, call, queue, start, node))
        node, call, rows = node[order], call[order], rows[order]
        first = np.flatnonzero(np.append(True, node[1:] != node[:-1]))
        bounds = np.append(first, len(node))
        device = np.add.reduceat((gpu.column("end") - gpu.column("start"))[rows], first)
        delay = self.delay[rows]
        mean_delay = np.add.reduceat(delay, first) / np.diff(bounds)
        # each launching call once per node: its duration, and the node's first call
        pairs = np.unique(np.stack([node, call], axis=1), axis=0)
        pair_first = np.flatnonzero(np.append(True, pairs[1:, 0] != pairs[:-1, 0]))
        call_ns = (api.column("end") - api.column("start"))[pairs[:, 1]]
        launch = np.add.reduceat(call_ns, pair_first)
        first_call_start = api.column("start")[pairs[pair_first, 1]]
        calls = np.diff(np.append(pair_first, len(pairs)))
        out = []
        for k, (n, d, lns, first_start, ncalls) in enumerate(zip(
                node[first].tolist(), device.tolist(), launch.tolist(), first_call_start.tolist(), calls.tolist())):
            run = activity.nodes[n]
            host = first_start - run.start
            out.append(OpOverhead(run.node_id, run.op, run.name, run.tid, step_of(run), run.start, host, lns,
                                  host + lns, float(mean_delay[k]), int(delay[first[k]]), d, ncalls,
                                  int(bounds[k + 1] - bounds[k]), d < host + lns))
        return out


def step_windows(activity: Activity) -> tuple[list[tuple[int, tuple[int, int]]], bool]:
    """(step number, (start, end)) by start; steps of the same number on several threads are merged."""
    if activity.steps:
        merged: dict[int, tuple[int, int]] = {}
        for s in activity.steps:
            lo, hi = merged.get(s.step, (s.start, s.end))
            merged[s.step] = (min(lo, s.start), max(hi, s.end))
        return sorted(merged.items(), key=lambda kv: (kv[1], kv[0])), False
    tables = [t for t in (activity.nodes, activity.api, activity.gpu) if len(t)]
    return [(WHOLE_TRACE, (min(int(t.column("start").min()) for t in tables),
                           max(int(t.column("end").max()) for t in tables)))], True


def stepper(windows: list[tuple[int, tuple[int, int]]]) -> Callable[[NodeRun], int]:
    """node -> the step window it belongs to: its own step field when that step exists, else by time."""
    numbers = {n for n, _ in windows}

    def step_of(node: NodeRun) -> int:
        if node.step in numbers:
            return node.step
        for number, (lo, hi) in windows:
            if lo <= node.start < hi:
                return number
        return OUTSIDE_STEPS

    return step_of


def _ratio(device: int, overhead: int) -> float | None:
    return device / overhead if overhead else None


def _op_types(ops: Iterable[OpOverhead]) -> tuple[OpTypeOverhead, ...]:
    groups: dict[str, list[OpOverhead]] = defaultdict(list)
    for o in ops:
        groups[o.op].append(o)
    types = []
    for op, group in groups.items():
        n = len(group)
        types.append(OpTypeOverhead(
            op, n, sum(o.gpu_ops for o in group),
            sum(o.host_ns for o in group) / n, sum(o.launch_ns for o in group) / n,
            sum(o.queue_ns for o in group) / n, sum(o.device_ns for o in group) / n,
            float(statistics.median(o.overhead_ns for o in group)), sum(o.short for o in group) / n,
            sum(max(0, o.overhead_ns - o.device_ns) for o in group),
            _ratio(sum(o.device_ns for o in group), sum(o.overhead_ns for o in group))))
    return tuple(sorted(types, key=lambda t: (-t.exposed_overhead_ns, -t.count, t.op)))


def _step(number: int, lo: int, hi: int, ops: list[OpOverhead], starts: np.ndarray[Any, Any],
          ends: np.ndarray[Any, Any]) -> StepOverhead:
    duration = hi - lo
    inside = (starts < hi) & (ends > lo)  # GPU operations overlapping the step
    busy = clipped_union_ns(starts[inside], ends[inside], lo, hi)
    device, host, launch = (sum(o.device_ns for o in ops), sum(o.host_ns for o in ops),
                            sum(o.launch_ns for o in ops))
    ratio = _ratio(device, host + launch)
    return StepOverhead(number, lo, hi, duration, len(ops), host, launch, device, ratio,
                        ratio is not None and ratio < 1, busy, busy / duration if duration else 0.0,
                        duration - busy, (duration - busy) / duration if duration else 0.0,
                        sum(o.short for o in ops) / len(ops) if ops else 0.0)


# ---------------------------------------------------------------------------------------- findings
def _step_name(s: StepOverhead) -> str:
    return "the whole trace" if s.step == WHOLE_TRACE else f"step {s.step}"


def _x(ratio: float | None) -> str:
    """A ratio with three significant digits: 0.00158, 0.5, 11.4."""
    return "-" if ratio is None else f"{ratio:.3g}"


def _with_findings(r: OverheadResult, unattributed: int, unattributed_ns: int, framework: str) -> OverheadResult:
    """`r` with what it says; `unattributed` GPU ops (`unattributed_ns` of GPU time) have no owner."""
    findings = [_step_finding(r, framework)]
    exposed = [t for t in r.op_types if t.exposed_overhead_ns > 0][:3]
    if exposed:
        top = exposed[0]
        listed = "; ".join(f"{t.op} {fmt_ns(t.exposed_overhead_ns)} over {t.count} runs (H {fmt_ns(t.mean_host_ns)} "
                           f"+ L {fmt_ns(t.mean_launch_ns)} vs K {fmt_ns(t.mean_device_ns)} per run)" for t in exposed)
        if top.mean_host_ns > 10 * top.mean_launch_ns and top.mean_host_ns > 100_000:
            action = (f"{top.op} spends {fmt_ns(top.mean_host_ns)} on the CPU before its first launch: look at what "
                      "it does there (allocation, synchronisation, first-call initialisation, Python work) "
                      "before fusing")
        else:
            action = (f"Fuse {top.op} with its neighbours ({advice('fuse', framework)}) or capture the sequence in "
                      f"{advice('graph_capture', framework)} so it is dispatched once")
        findings.append(Finding("exposed_overhead", sum(t.exposed_overhead_ns for t in exposed),
                                f"Most exposed host overhead (sum of H+L-K where positive): {listed}. {action}"))
    if r.short_op_fraction > 0:
        worst = max(r.op_types, key=lambda t: (t.short_share * t.count, t.op))
        kernels = (f"; {r.short_kernel_share:.0%} of kernels are shorter than the median H+L of their op type"
                   if r.short_kernel_share is not None else "")
        findings.append(Finding("short_ops", 0,
            f"{r.short_op_fraction:.0%} of the ops with GPU work are short (K < H+L){kernels}. To hide its host "
            f"cost an op's GPU work must last at least its type's median H+L (e.g. {worst.op}: "
            f"{fmt_ns(worst.min_hiding_kernel_ns)}, and {worst.short_share:.0%} of its {worst.count} runs fall "
            "short); larger batches lengthen kernels, fusion removes dispatches"))
    overhead = sum(o.overhead_ns for o in r.ops) / len(r.ops)
    if r.mean_queue_ns > overhead:
        findings.append(Finding("queue_delay", 0,
            f"GPU ops wait {fmt_ns(r.mean_queue_ns)} on average between their launch and their start, more than "
            f"the {fmt_ns(overhead)} of host cost per op: the host runs ahead of the GPU there, so cutting launch "
            "overhead will not shorten those stretches; make the kernels faster or fewer"))
    if unattributed:
        busy = unattributed_ns
        findings.append(Finding("unattributed_gpu", busy,
            f"{unattributed} GPU ops ({fmt_ns(busy)}) have no recorded launch or were launched outside any "
            "framework op; they count in GPU busy time but in no op's figures"))
    return replace(r, findings=tuple(findings[:MAX_FINDINGS]))


def _step_finding(r: OverheadResult, framework: str) -> Finding:
    bound = [s for s in r.steps if s.host_bound]
    kind = "host_bound" if bound else "gpu_bound" if any(s.hiding_ratio is not None for s in r.steps) else "no_gpu_steps"
    return Finding(kind, sum(s.exposed_host_ns for s in bound), _step_text(r, framework))


def _step_text(r: OverheadResult, framework: str) -> str:
    measured = [s for s in r.steps if s.hiding_ratio is not None]
    bound = [s for s in measured if s.host_bound]
    if bound:
        worst = min(bound, key=lambda s: (s.hiding_ratio or 0.0, s.start))
        if r.whole_trace:
            where = ": the whole trace (no steps) has a hiding ratio of "
        else:
            some = f"all {len(bound)} steps" if len(bound) == len(r.steps) else f"{len(bound)} of {len(r.steps)} steps"
            where = f" in {some}: hiding ratio below 1 ({_step_name(worst)}: "
        sep = " (" if r.whole_trace else ", "
        return (f"Host-bound{where}{_x(worst.hiding_ratio)}{sep}K {fmt_ns(worst.device_ns)} vs H+L "
                f"{fmt_ns(worst.host_ns + worst.launch_ns)}); the GPU is idle {worst.exposed_host_share:.0%} of "
                f"{'it' if r.whole_trace else 'that step'} ({fmt_ns(worst.exposed_host_ns)}). The kernels are too "
                "short to hide the per-op CPU cost: batch larger, or cut dispatches with "
                f"{advice('capture_or_fuse', framework)}")
    if not measured:
        return "No step holds an op with GPU work: the step figures cannot judge the host overhead"
    ratios = [s.hiding_ratio or 0.0 for s in measured]
    text = (f"GPU-bound: every step hides its host overhead (hiding ratio {_x(min(ratios))}"
            + (f" to {_x(max(ratios))})" if len(ratios) > 1 else ")"))
    if r.exposed_host_share > 0.3:
        text += (f", yet the GPU is idle {r.exposed_host_share:.0%} of the step time: that idle time is not "
                 "launch overhead; look at data loading, synchronisation and communication")
    else:
        text += f"; the GPU is busy {r.gpu_busy_share:.0%} of the step time, so launch overhead is not the limit"
    return text


# ------------------------------------------------------------------------------ registry entry
def run(inputs: Inputs, options: Options) -> Result:
    """The runtime overhead of the trace's ops with GPU work (no options)."""
    data = analyze_overhead(inputs.activity, str(inputs.path), framework_of(inputs.trace))
    return Result("overhead", data.trace, data, data.findings)


def trajectory(runs: list[tuple[str, Result]], axis: str, options: Options) -> Result:
    """The overhead figures of labelled runs side by side (`axis` names what changes between them)."""
    data = overhead_trajectory([(label, r.data) for label, r in runs])
    return Result("overhead", ", ".join(p.trace for p in data.points), data, data.findings)


# -------------------------------------------------------------------------------------- trajectory
def overhead_trajectory(results: list[tuple[str, OverheadResult]]) -> Trajectory:
    """The overhead figures of several traces side by side, labelled by the user (e.g. batch sizes)."""
    if not results:
        raise ConfigurationError("overhead trajectory: no traces to compare")
    labels = [label for label, _ in results]
    if len(set(labels)) != len(labels):
        dup = next(label for label in labels if labels.count(label) > 1)
        raise ConfigurationError(f"{dict(results)[dup].trace}: overhead trajectory: label {dup!r} is given twice")
    numeric = all(label_number(label) is not None for label in labels)
    ordered = order_runs(results)
    points = tuple(TrajectoryPoint(label, r.trace, len(r.steps), r.mean_step_ns, r.hiding_ratio,
                                   r.exposed_host_share, r.gpu_busy_share, r.short_op_fraction, r.mean_kernel_ns)
                   for label, r in ordered)
    crossing, texts = _crossing(points)
    findings = [Finding("trajectory", 0, text) for text in texts]
    if len(points) > 1:
        a, b = points[0], points[-1]
        findings.append(Finding("trajectory", 0, f"from {a.label} to {b.label}: mean step time {fmt_ns(a.mean_step_ns)} -> "
                        f"{fmt_ns(b.mean_step_ns)}, mean kernel {fmt_ns(a.mean_kernel_ns)} -> "
                        f"{fmt_ns(b.mean_kernel_ns)}, exposed host share {a.exposed_host_share:.0%} -> "
                        f"{b.exposed_host_share:.0%}, short ops {a.short_op_fraction:.0%} -> "
                        f"{b.short_op_fraction:.0%}"))
        na, nb = label_number(a.label), label_number(b.label)
        if numeric and na and nb and na > 0 and nb > 0:
            findings.append(Finding("trajectory", 0, f"step time per label unit (per sample if the labels are "
                                    f"batch sizes): {fmt_ns(a.mean_step_ns / na)} at {a.label}, "
                                    f"{fmt_ns(b.mean_step_ns / nb)} at {b.label}"))
    return Trajectory(points, numeric, crossing, tuple(findings[:MAX_FINDINGS]))


def _crossing(points: tuple[TrajectoryPoint, ...]) -> tuple[str | None, list[str]]:
    measured = [p for p in points if p.hiding_ratio is not None]
    if not measured:
        return None, ["no trace has a hiding ratio (no op with GPU work in its steps)"]
    above = [(p.hiding_ratio or 0.0) >= 1 for p in measured]
    if all(above):
        return None, [f"kernels hide the host overhead at every label (hiding ratio {_x(measured[0].hiding_ratio)} "
                      f"at {measured[0].label} to {_x(measured[-1].hiding_ratio)} at {measured[-1].label})"]
    if not any(above):
        best = max(measured, key=lambda p: p.hiding_ratio or 0.0)
        # PyTorch's words: a trajectory gets only the runs' results, which do not say their framework.
        return None, [f"host-bound at every label: the hiding ratio never reaches 1 (best {_x(best.hiding_ratio)} "
                      f"at {best.label}); larger labels alone do not hide the host, so cut dispatches "
                      "(CUDA graphs, torch.compile, fused ops)"]
    # The first label from which every later ratio stays >= 1.
    at = len(above)
    while at > 0 and above[at - 1]:
        at -= 1
    if at == len(above):  # the last label is below 1 again
        last_up = max(i for i, up in enumerate(above) if up)
        p, q = measured[last_up], measured[last_up + 1]
        return None, [f"the hiding ratio reaches 1 at {p.label} ({_x(p.hiding_ratio)}) but falls back to "
                      f"{_x(q.hiding_ratio)} at {q.label}: the kernels do not keep up with the host there"]
    lo, hi = measured[at - 1], measured[at]
    return hi.label, [f"the hiding ratio crosses 1 between {lo.label} ({_x(lo.hiding_ratio)}) and {hi.label} "
                      f"({_x(hi.hiding_ratio)}): from {hi.label} on, kernels hide the host's dispatch and launch "
                      f"cost; below it the run is host-bound"]
