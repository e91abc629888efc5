"""Trace diff: per op and per kernel, how often each ran and for how long in two traces.

HTA's ``TraceDiff.compare_traces`` (HolisticTraceAnalysis 0.6.1) on two dfcompass traces, each
restricted by the same analysis window (:mod:`tc_analyses.model.window`). Rows are keyed by
(side, name): CPU rows are framework ops (by op name), user annotations, runtime API calls and
steps (``ProfilerStep#N``);
GPU rows are kernels, copies (``Memcpy <copy kind>``), memsets and synchronisations. Per row: the
count and total time in the control and in the test trace, and their differences (test −
control). Rows are ordered by the absolute time difference, largest first.

GPU work with no recorded launch call is left out when the trace has launched GPU work (HTA
assigns GPU work to an iteration through its launch and drops the rest): in a step window,
unlaunched work counted by its start made fake deltas, a collective's kernels "3 -> 6 runs".
Their number is reported.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from tc_analyses.analyses.breakdown import gpu_events
from tc_analyses.analyses.kernels import display_name
from tc_analyses.analyses.result import Finding, Inputs, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity

CPU, GPU = "cpu", "gpu"
SAME_PROGRAM_SHARE = 0.5  # two runs of one program share most op names; fewer shared: say so


@dataclass(frozen=True)
class DiffRow:
    side: str  # "cpu" or "gpu"
    name: str
    control_count: int
    control_ns: int
    test_count: int
    test_ns: int

    @property
    def count_change(self) -> int:
        return self.test_count - self.control_count

    @property
    def time_change_ns(self) -> int:
        return self.test_ns - self.control_ns


@dataclass(frozen=True)
class TraceDiff:
    control: str
    test: str
    scope: str
    rows: tuple[DiffRow, ...]  # by |time change|, largest first
    control_gpu_ns: int  # summed GPU operation time
    test_gpu_ns: int
    findings: tuple[Finding, ...]
    control_unlaunched: int = 0  # GPU operations and syncs left out: no launch call recorded
    test_unlaunched: int = 0

    def json_data(self) -> dict[str, object]:
        return {"control": self.control, "test": self.test, "scope": self.scope, "control_gpu_ns": self.control_gpu_ns,
                "test_gpu_ns": self.test_gpu_ns, "control_unlaunched": self.control_unlaunched,
                "test_unlaunched": self.test_unlaunched,
                "rows": [dict(r.__dict__, count_change=r.count_change, time_change_ns=r.time_change_ns)
                         for r in self.rows]}


def summarize(activity: Activity) -> dict[tuple[str, str], tuple[int, int]]:
    """(side, name) -> (count, total ns) of every op, annotation, API call and GPU operation."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    cpu = [(n.op or n.name, n.duration) for n in activity.nodes]
    cpu += [(a.name, a.end - a.start) for a in activity.annotations if not a.on_gpu]
    cpu += [(c.name, c.duration) for c in activity.api]
    cpu += [(f"ProfilerStep#{r.step}", r.end - r.start) for r in activity.steps]  # as HTA's step annotations
    for name, duration in cpu:
        entry = counts[(CPU, name)]
        entry[0] += 1
        entry[1] += duration
    for op in gpu_events(activity):
        entry = counts[(GPU, display_name(op))]
        entry[0] += 1
        entry[1] += op.duration
    return {key: (c, t) for key, (c, t) in counts.items()}


def launched_only(activity: Activity) -> tuple[Activity, int]:
    """`activity` without its GPU work that has no launch call, and how much that was; unchanged
    when none of its GPU work has one (a trace of the GPU side alone)."""
    gpu = activity.launch_indexes() >= 0
    syncs = activity.calls_with_correlation(activity.syncs.column("correlation_id")) >= 0
    if not gpu.any() and not syncs.any():
        return activity, 0
    left_out = int((~gpu).sum() + (~syncs).sum())
    if not left_out:
        return activity, 0
    return replace(activity, gpu=activity.gpu.take(np.flatnonzero(gpu)),
                   syncs=activity.syncs.take(np.flatnonzero(syncs)), _launch={}), left_out


def compare(control: Activity, test: Activity) -> list[DiffRow]:
    """The rows of the diff of `test` against `control`."""
    a, b = summarize(control), summarize(test)
    rows = [DiffRow(side, name, *a.get((side, name), (0, 0)), *b.get((side, name), (0, 0)))
            for side, name in set(a) | set(b)]
    return sorted(rows, key=lambda r: (-abs(r.time_change_ns), r.side, r.name))


def _findings(rows: list[DiffRow], control_gpu: int, test_gpu: int) -> list[Finding]:
    out = []
    gpu = [r for r in rows if r.side == GPU and r.time_change_ns]
    if gpu and control_gpu:
        change = test_gpu - control_gpu
        top = gpu[0]
        out.append(Finding("gpu_time_change", abs(change), f"GPU time {'+' if change >= 0 else ''}{fmt_ns(change)} "
                           f"({100 * change / control_gpu:+.1f}%); the largest change is {top.name[:80]} "
                           f"({'+' if top.time_change_ns >= 0 else ''}{fmt_ns(top.time_change_ns)}, "
                           f"{top.control_count} -> {top.test_count} runs)"))
    appeared = [r for r in rows if r.control_count == 0]
    vanished = [r for r in rows if r.test_count == 0]
    cpu = [r for r in rows if r.side == CPU and not r.name.startswith("ProfilerStep#")]  # steps' numbers differ
    shared = sum(1 for r in cpu if r.control_count and r.test_count)
    if len(cpu) >= 4 and shared < SAME_PROGRAM_SHARE * len(cpu):
        # listed first: every other row compares two programs, not two runs of one
        out.insert(0, Finding("not_comparable", 0, f"the two traces share {shared} of their {len(cpu)} CPU op and "
                              "call names: they may not record the same program, and the deltas below compare "
                              "different work"))
    if appeared or vanished:
        out.append(Finding("changed_ops", sum(r.test_ns for r in appeared) + sum(r.control_ns for r in vanished),
                           f"{len(appeared)} ops/kernels appear only in the test trace and {len(vanished)} only in "
                           "the control (a different code path, fusion, or a different kernel choice)"))
    return out


def run(control: Inputs, test: Inputs) -> Result:
    """The diff of `test` against `control`, both read through their (same) window."""
    (before, control_unlaunched), (after, test_unlaunched) = launched_only(control.activity), launched_only(test.activity)
    rows = compare(before, after)
    if not rows:
        raise AnalysisUnavailable(f"{control.path}, {test.path}: nothing ran in {control.scope.window} of either trace")
    sums = [sum(o.duration for o in gpu_events(a)) for a in (before, after)]
    findings = tuple(_findings(rows, sums[0], sums[1]))
    data = TraceDiff(str(control.path), str(test.path), control.scope.text(), tuple(rows), sums[0], sums[1], findings,
                     control_unlaunched, test_unlaunched)
    return Result("diff", f"{control.path} -> {test.path}", data, findings)
