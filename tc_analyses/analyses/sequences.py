"""Frequent kernel sequences: the same op launching the same kernels again and again, as fusion candidates.

HTA's ``get_frequent_cuda_kernel_sequences`` (HolisticTraceAnalysis 0.6.1) on the analysis window.
The *roots* are the CPU ops whose name contains ``operator`` (the outermost framework ops when empty) at the
shallowest call depth among them (depth counts the ops and user annotations open on the thread),
that launched at least ``min_length`` GPU operations in their subtree (launch calls on the
same thread inside the op). A root's *pattern* is its name followed by the names of those GPU
operations in start order. Per pattern: how often it occurs, the GPU time of its operations and
the CPU time of its roots, most frequent first (then by pattern).

A pattern that recurs many times with short kernels is what a compiler (``torch.compile``) or a
hand-fused kernel turns into one launch: the launches and the memory round trips between the
kernels go away.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from tc_analyses.analyses.breakdown import gpu_events
from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.kernels import display_name
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, GpuOp

SEPARATOR = "|"  # between the names of a pattern, as HTA


@dataclass(frozen=True)
class Pattern:
    root: str
    kernels: tuple[str, ...]
    count: int
    gpu_ns: int  # the GPU time of its operations, over all occurrences
    cpu_ns: int  # the CPU time of its roots, over all occurrences

    @property
    def text(self) -> str:
        return SEPARATOR.join((self.root,) + self.kernels)


@dataclass(frozen=True)
class Sequences:
    trace: str
    scope: str
    operator: str
    min_length: int
    roots: int  # ops that matched
    patterns: tuple[Pattern, ...]  # most frequent first, then by text
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class _Span:
    name: str
    tid: int
    start: int
    end: int


def _depths(spans: list[_Span]) -> list[int]:
    """The call depth of each span on its thread (0: nothing open around it); `spans` by (start, -end)."""
    open_ends: dict[int, list[int]] = defaultdict(list)
    depths = []
    for span in spans:
        stack = open_ends[span.tid]
        while stack and stack[-1] < span.start:
            stack.pop()
        depths.append(len(stack))
        stack.append(span.end)
    return depths


def _launched(activity: Activity) -> dict[int, list[tuple[int, GpuOp]]]:
    """tid -> (launch call start, GPU operation) of every GPU operation with a recorded call, by start."""
    per_tid: dict[int, list[tuple[int, GpuOp]]] = defaultdict(list)
    for op in gpu_events(activity):
        call = activity.call_with_correlation(op.correlation_id)
        if call is not None:
            per_tid[call.tid].append((call.start, op))
    for rows in per_tid.values():
        rows.sort(key=lambda r: r[0])
    return per_tid


def frequent_sequences(activity: Activity, operator: str = "", min_length: int = 3) -> tuple[int, list[Pattern]]:
    """(how many roots matched, their patterns by count then text). Without `operator` the roots are
    the outermost framework ops (user annotations, which may wrap the whole run, are left out)."""
    if not len(activity.gpu) and min_length > 0:  # nothing launched: no root can have a sequence
        return 0, []
    annotations = [_Span(a.name, a.track, a.start, a.end) for a in activity.annotations if not a.on_gpu]
    spans = sorted([_Span(n.name or n.op, n.tid, n.start, n.end) for n in activity.nodes]
                   + (annotations if operator else []), key=lambda s: (s.tid, s.start, -s.end))
    depths = _depths(spans)
    candidates = [(s, d) for s, d in zip(spans, depths) if operator in s.name]
    if not candidates:
        return 0, []
    shallowest = min(d for _, d in candidates)
    launched = _launched(activity)
    counts: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(lambda: [0, 0, 0])
    roots = 0
    for span, depth in candidates:
        if depth != shallowest:
            continue
        rows = launched.get(span.tid, [])
        lo = bisect.bisect_left(rows, span.start, key=lambda r: r[0])
        hi = bisect.bisect_right(rows, span.end, key=lambda r: r[0])
        ops = sorted((op for _, op in rows[lo:hi]), key=lambda o: o.start)
        if len(ops) < min_length:
            continue
        roots += 1
        entry = counts[(span.name, tuple(display_name(o) for o in ops))]
        entry[0] += 1
        entry[1] += sum(o.duration for o in ops)
        entry[2] += span.end - span.start
    patterns = [Pattern(root, kernels, c, g, cpu) for (root, kernels), (c, g, cpu) in counts.items()]
    return roots, sorted(patterns, key=lambda p: (-p.count, p.text))


def _findings(patterns: list[Pattern], framework: str = PYTORCH) -> list[Finding]:
    repeated = [p for p in patterns if p.count >= 2]
    if not repeated:
        return []
    best = max(repeated, key=lambda p: p.gpu_ns)
    launches = best.count * len(best.kernels)
    return [Finding("fusion_candidate", best.gpu_ns, f"{best.root} launches the same {len(best.kernels)} GPU operations "
                    f"{best.count} times ({launches} launches, {fmt_ns(best.gpu_ns)} of GPU time): a fusion candidate "
                    f"({advice('fuse_module', framework)}, or a fused kernel), which saves the launches and the memory round "
                    "trips between the kernels")]


def run(inputs: Inputs, options: Options) -> Result:
    """Kernel sequences of the roots named like ``options["operator"]`` with at least
    ``options["min_length"]`` operations; the ``options["top"]`` most frequent are kept."""
    operator, min_length = str(options["operator"] or ""), int(options["min_length"])
    roots, patterns = frequent_sequences(inputs.activity, operator, min_length)
    if not patterns:
        what = f"ops named like {operator!r}" if operator else "ops"
        raise AnalysisUnavailable(f"{inputs.path}: no {what} launched {min_length} or more GPU operations in "
                                  f"{inputs.scope.window} (dfcompass sequences --operator NAME --min-length N "
                                  "looks at other roots)")
    findings = tuple(_findings(patterns, framework_of(inputs.trace)))
    data = Sequences(str(inputs.path), inputs.scope.text(), operator, min_length, roots,
                     tuple(patterns[:int(options["top"])]), findings)
    return Result("sequences", data.trace, data, findings)
