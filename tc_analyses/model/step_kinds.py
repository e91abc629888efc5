"""Steps of different kinds kept apart: a model's training and inference steps, or two models.

Two steps are of one kind when they ran the same ops: the same multiset of (name, op, device) node
runs (a multiset, not a sequence, so that threads interleaving differently do not split a kind). A
plan is made for one kind at a time: folding a ResNet step and a transformer step onto one graph
would overlap ops that never ran together.

Warm-up: the first ``warmup`` steps of a kind with at least ``MIN_STEPS_FOR_WARMUP`` steps are left
out of its costs (allocations, caches and lazy initialisation make them slower); a kind with fewer
steps keeps all of them, since it has none to spare.

>>> import networkx as nx

from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.reader.fast import DfcTrace
>>> runs = [NodeRun(i, op, op, "cpu", 1, step, 10 * i, 10 * i + 5, True)
...         for i, (op, step) in enumerate([("a", 0), ("a", 1), ("a", 2), ("b", 3)])]
>>> [(k.steps, k.warmup) for k in step_kinds(Activity("t", runs, [], [], [], {}))]
[((0, 1, 2), (0,)), ((3,), ())]
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.reader.fast import DfcTrace
from tracer.schema import NO_STEP

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx

    from tc_analyses.model.graph_table import GraphTable

WARMUP_STEPS = 1
MIN_STEPS_FOR_WARMUP = 3


@dataclass(frozen=True)
class StepKind:
    index: int  # 0 = the steady state: the kind with the most steps (then the most measured time)
    steps: tuple[int, ...]  # every step of the kind, in order
    warmup: tuple[int, ...]  # left out of costs and figures
    ops: int  # node runs per step
    step_ns: float  # median span of the kept steps (first node start to last node end)
    total_ns: int  # summed spans of all its steps
    top_ops: tuple[str, ...]  # the op types it spends most time in, for the label

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(s for s in self.steps if s not in self.warmup)

    @property
    def label(self) -> str:
        warm = f", warm-up step {','.join(map(str, self.warmup))} left out" if self.warmup else ""
        return (f"kind {self.index}: {len(self.steps)} step(s) ({_ranges(self.steps)}) of {self.ops} ops, "
                f"most time in {', '.join(self.top_ops)}{warm}")


def _ranges(steps: tuple[int, ...]) -> str:
    parts: list[str] = []
    for s in steps:
        if parts and parts[-1].rsplit("-", 1)[-1] == str(s - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{s}"
        else:
            parts.append(str(s))
    return ",".join(parts)


def _span(runs: list[NodeRun]) -> int:
    return max(r.end for r in runs) - min(r.start for r in runs)


def step_kinds(activity: Activity, warmup: int = WARMUP_STEPS) -> list[StepKind]:
    """The trace's step kinds, the steady state first (the most steps, then the most measured time: a
    loop's usual step, not a slow one-off); [] without steps."""
    in_steps = activity.nodes.column("step") != NO_STEP
    if not in_steps.any():  # decided from the column: no row objects for a trace without steps
        return []
    by_step: dict[int, list[NodeRun]] = defaultdict(list)
    for run in activity.nodes.take(in_steps):
        by_step[run.step].append(run)
    groups: dict[tuple[tuple[tuple[str, str, str], int], ...], list[int]] = defaultdict(list)
    for step in sorted(by_step):
        signature = tuple(sorted(Counter((r.name, r.op, r.device) for r in by_step[step]).items()))
        groups[signature].append(step)
    kinds = []
    for steps in groups.values():
        left_out = tuple(steps[:warmup]) if len(steps) >= MIN_STEPS_FOR_WARMUP else ()
        kept = [s for s in steps if s not in left_out]
        ops: Counter[str] = Counter()
        for r in by_step[steps[-1]]:
            if r.outermost:
                ops[r.op.rsplit("::", 1)[-1]] += r.duration
        kinds.append((tuple(steps), left_out, len(by_step[steps[0]]),
                      statistics.median(_span(by_step[s]) for s in kept), sum(_span(by_step[s]) for s in steps),
                      tuple(op for op, _ in ops.most_common(3))))
    kinds.sort(key=lambda k: (-len(k[0]), -k[4], k[0]))
    return [StepKind(i, *k) for i, k in enumerate(kinds)]


def choose(kinds: list[StepKind], index: int | None) -> StepKind:
    """Kind `index`, or the steady state (kind 0); ValueError naming the kinds."""
    if index is None:
        return kinds[0]
    if not 0 <= index < len(kinds):
        raise ValueError(f"no step kind {index}: the trace has {len(kinds)} ({'; '.join(k.label for k in kinds)})")
    return kinds[index]


def nodes_of_kind(trace: DfcTrace, activity: Activity, index: int | None = None) -> int:
    """How many nodes :func:`graph_of_kind`'s graph has, counted on the columns (no graph built)."""
    from tc_analyses.model import graph_columns  # noqa: PLC0415 - as graph_of_kind imports the graph

    kinds = step_kinds(activity)
    steps = set(choose(kinds, index).kept) if kinds else None
    return len(graph_columns.fold(graph_columns.executions(trace, activity, None), steps).first_row)


def graph_of_kind(trace: DfcTrace, activity: Activity, index: int | None = None) -> tuple[nx.DiGraph, StepKind | None]:
    """The computation graph of one step kind (warm-up left out; the steady state unless
    `index` names one) and that kind; the whole trace's graph and None when it has no steps."""
    table, kind = table_of_kind(trace, activity, index)
    return table.to_networkx(), kind


def table_of_kind(trace: DfcTrace, activity: Activity, index: int | None = None) -> tuple[GraphTable, StepKind | None]:
    """:func:`graph_of_kind`'s graph as columns (:mod:`tc_analyses.model.graph_table`)."""
    from tc_analyses.model.graph_table import graph_table  # noqa: PLC0415 - as nodes_of_kind imports the columns

    kinds = step_kinds(activity)
    if not kinds:
        return graph_table(trace, activity), None
    kind = choose(kinds, index)
    return graph_table(trace, activity, steps=set(kind.kept)), kind


@dataclass(frozen=True)
class TypicalStep:
    """The step a picture of one step shows: the median span of the steady kind's kept steps."""

    step: int
    start: int  # its first node's start
    end: int  # its last node's end
    why: str  # how it was chosen, for a title


def typical_step(activity: Activity) -> TypicalStep | None:
    """The kept step of the steady kind whose span (first node start to last node end) is the median
    (the shorter of the two middle ones); None without steps. A slow one-off step or the warm-up
    would show what a loop does not usually do."""
    kinds = step_kinds(activity)
    if not kinds:
        return None
    kind = kinds[0]
    step_column = activity.nodes.column("step")
    kept = np.isin(step_column, np.asarray(kind.kept, dtype=np.int64))
    steps, at = np.unique(step_column[kept], return_inverse=True)
    first = np.full(len(steps), np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(len(steps), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, at, activity.nodes.column("start")[kept])
    np.maximum.at(last, at, activity.nodes.column("end")[kept])
    middle = int(np.argsort(last - first, kind="stable")[(len(steps) - 1) // 2])
    others = f" of the commonest of {len(kinds)} step kinds" if len(kinds) > 1 else ""
    why = (f"step {int(steps[middle])}, the median of the {len(steps)} kept steps{others}" if len(steps) > 1
           else f"step {int(steps[middle])}, the only kept step{others}")
    return TypicalStep(int(steps[middle]), int(first[middle]), int(last[middle]), why)
