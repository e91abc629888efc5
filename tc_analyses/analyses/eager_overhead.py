"""Eager runtime overhead: how much of each eager op is the framework, not the kernel (after Delestrac et al., DSD 2022, on the CPU).

Delestrac et al. (DSD 2022) measure TensorFlow's eager path from Python to the kernel. The
``overhead`` analysis does it where kernels run on a GPU (launch calls and correlation ids). On
the host, the TensorFlow source records each eager op twice (tracer/tf_xspace.py): an annotation
``tf.eager <op>`` over the whole dispatch (``EagerExecute``) and a node over the kernel run inside
it (``KernelAndDeviceFunc::Run``), on the same thread. With them, per eager op execution:

* kernel ``K`` = the node's duration; host ``H`` = the dispatch's duration − ``K`` (the framework:
  op lookup, input checks and placement, kernel selection, tensor handles);
* per step (``dfc:step_begin``/``end``; a trace without steps is one window): the hiding ratio
  ``sum K / sum H`` (< 1: the run is host-bound: the framework costs more than the kernels);
* per op type: the means, ``median(H)``, the shortest kernel that would hide the framework's cost,
  and the share of *short* executions (``K < H``).

A dispatch with no node inside it (an op whose kernel the profiler did not record) is counted in
``unmatched`` and left out.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace

from tc_analyses.analyses.overhead import OUTSIDE_STEPS, WHOLE_TRACE, step_windows, stepper
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import AnnotationRun, NodeRun

EAGER_PREFIX = "tf.eager "
MAX_FINDINGS = 5


@dataclass(frozen=True)
class OpTypeOverhead:
    op: str
    count: int
    host_ns: int  # sum of H
    kernel_ns: int  # sum of K
    median_host_ns: int  # the shortest kernel that hides the framework's cost
    short_share: float  # executions with K < H

    @property
    def ratio(self) -> float:
        return self.kernel_ns / self.host_ns if self.host_ns else float("inf")


@dataclass(frozen=True)
class StepOverhead:
    step: int  # WHOLE_TRACE for a trace without steps
    ops: int
    host_ns: int
    kernel_ns: int

    @property
    def ratio(self) -> float:
        return self.kernel_ns / self.host_ns if self.host_ns else float("inf")


@dataclass(frozen=True)
class EagerOverhead:
    trace: str
    scope: str
    executions: int
    unmatched: int
    host_ns: int
    kernel_ns: int
    op_types: tuple[OpTypeOverhead, ...]  # by host time, most first
    steps: tuple[StepOverhead, ...]
    findings: tuple[Finding, ...]

    @property
    def ratio(self) -> float:
        return self.kernel_ns / self.host_ns if self.host_ns else float("inf")


def _kernel_of(dispatch: AnnotationRun, op: str, starts: list[int], nodes: list[NodeRun]) -> NodeRun | None:
    """The node of `op` inside `dispatch` on its thread (nodes sorted by start)."""
    at = bisect.bisect_left(starts, dispatch.start)
    while at < len(nodes) and nodes[at].start <= dispatch.end:
        node = nodes[at]
        if node.op == op and node.end <= dispatch.end:
            return node
        at += 1
    return None


def _findings(data: EagerOverhead) -> list[Finding]:
    out = []
    if data.host_ns > data.kernel_ns:
        out.append(Finding("host_bound", data.host_ns - data.kernel_ns,
                           f"eager ops spend {fmt_ns(data.host_ns)} in the framework against {fmt_ns(data.kernel_ns)} in "
                           f"their kernels (hiding ratio {data.ratio:.2f} < 1): the run is host-bound; wrap the loop "
                           "in tf.function so the ops run as one graph, or give each op more work (larger batches)"))
    for row in data.op_types[:MAX_FINDINGS]:
        if row.short_share > 0.5 and row.host_ns > row.kernel_ns:
            out.append(Finding("short_op", row.host_ns - row.kernel_ns,
                               f"{row.op}: {row.short_share:.0%} of {row.count} executions run shorter than their "
                               f"dispatch; a kernel needs about {fmt_ns(row.median_host_ns)} to hide it"))
    return sorted(out, key=lambda f: -f.impact_ns)[:MAX_FINDINGS]


def run(inputs: Inputs, options: Options) -> Result:
    """Eager overhead on the analysis window."""
    activity = inputs.activity
    dispatches = [a for a in activity.annotations if not a.on_gpu and a.name.startswith(EAGER_PREFIX)]
    if not dispatches:
        raise AnalysisUnavailable(f"{inputs.path}: no eager op dispatches (dfc:annotation 'tf.eager <op>', "
                                  f"written by the TensorFlow source) in {inputs.scope.window}")
    by_thread: dict[int, list[NodeRun]] = defaultdict(list)
    for node in activity.nodes:
        by_thread[node.tid].append(node)
    starts = {tid: [n.start for n in nodes] for tid, nodes in by_thread.items()}
    step_of = stepper(step_windows(activity)[0])  # overhead's steps: one window per number, all threads
    per_op: dict[str, list[tuple[int, int]]] = defaultdict(list)
    per_step: dict[int, list[tuple[int, int]]] = defaultdict(list)
    unmatched = 0
    for dispatch in dispatches:
        op = dispatch.name[len(EAGER_PREFIX):]
        kernel_node = _kernel_of(dispatch, op, starts.get(dispatch.track, []), by_thread.get(dispatch.track, []))
        if kernel_node is None:
            unmatched += 1
            continue
        kernel = kernel_node.duration
        host = max(0, (dispatch.end - dispatch.start) - kernel)
        per_op[op].append((host, kernel))
        per_step[step_of(kernel_node)].append((host, kernel))
    if not per_op:
        raise AnalysisUnavailable(f"{inputs.path}: {unmatched} eager dispatches, none with its kernel's node inside it")
    op_types = sorted((OpTypeOverhead(op, len(runs), sum(h for h, _ in runs), sum(k for _, k in runs),
                                      int(statistics.median(h for h, _ in runs)),
                                      sum(1 for h, k in runs if k < h) / len(runs)) for op, runs in per_op.items()),
                      key=lambda r: (-r.host_ns, r.op))
    step_rows = tuple(StepOverhead(step, len(runs), sum(h for h, _ in runs), sum(k for _, k in runs))
                      for step, runs in sorted(per_step.items()) if step != OUTSIDE_STEPS)
    data = EagerOverhead(str(inputs.path), inputs.scope.text(), sum(r.count for r in op_types), unmatched,
                         sum(r.host_ns for r in op_types), sum(r.kernel_ns for r in op_types), tuple(op_types),
                         step_rows, ())
    findings = tuple(_findings(data))
    data = replace(data, findings=findings)
    return Result("eager-overhead", data.trace, data, findings)
