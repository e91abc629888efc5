"""Verify a placement plan: its predictions against a re-run of the program under the plan.

`dfcompass verify PLAN -- COMMAND` runs COMMAND with the plan applied (programs built on
:mod:`tracer.graph_program` read it from ``DFCOMPASS_PLAN``) and records it. This module compares
what the plan predicted with what the re-run measured, which the plan never saw:

* per step: each re-run step's span (first node start to last node end) against the predicted
  makespan; the headline is the median over the steps after warm-up;
* per node: the predicted duration and start (``schedule`` of plan.json) against the node's median
  duration and start offset in the re-run;
* the speedup: predicted (plan.json) against measured, the baseline's median step over the re-run's.

Refit (``--refit``) rebuilds the costs from the re-run itself, on half of its steps only (every
other step after warm-up): node medians, each lane's dispatch gap (the time between a node being
runnable and starting, when its inputs came from its own lane) and the hand-over delay between
lanes (the same gap when its last input came from another lane, less the dispatch gap). The same
simulator runs the plan with these costs, each lane in the plan's order,, and the result is checked against the other
half of the steps.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.model.step_kinds import MIN_STEPS_FOR_WARMUP, WARMUP_STEPS
from tc_analyses.perf.cost import build_problem
from tc_analyses.perf.problem import Device, Link
from tc_analyses.perf.simulate import simulate
from tracer.schema import NO_STEP



@dataclass(frozen=True)
class StepCheck:
    step: int
    measured_ns: int
    predicted_ns: int
    warmup: bool

    @property
    def error(self) -> float:
        return (self.predicted_ns - self.measured_ns) / self.measured_ns if self.measured_ns else 0.0


@dataclass(frozen=True)
class NodeCheck:
    node: str
    op: str
    device: str
    predicted_ns: int  # duration in the plan's schedule
    measured_ns: float  # median duration in the re-run (after warm-up)
    predicted_start_ns: int  # start in the plan's schedule, from the step's start
    measured_start_ns: float  # median start offset in the re-run

    @property
    def error(self) -> float:
        return (self.predicted_ns - self.measured_ns) / self.measured_ns if self.measured_ns else 0.0


@dataclass(frozen=True)
class Refit:
    calibration_steps: tuple[int, ...]
    heldout_steps: tuple[int, ...]
    predicted_ns: int  # the plan scheduled with costs from the calibration steps
    measured_ns: float  # median step of the held-out steps
    dispatch_ns: dict[str, float]  # lane -> fitted gap per node
    handover_ns: float  # fitted extra delay when an input comes from another lane

    @property
    def error(self) -> float:
        return (self.predicted_ns - self.measured_ns) / self.measured_ns if self.measured_ns else 0.0


@dataclass(frozen=True)
class Verification:
    plan: str
    rerun: str
    devices: list[str]  # the lanes the re-run used
    predicted_ns: int  # the plan's predicted makespan
    measured_ns: float  # median re-run step after warm-up
    baseline_ns: float | None  # the measured step of the trace the plan was made from
    predicted_speedup: float | None
    steps: list[StepCheck]
    nodes: list[NodeCheck]
    refit: Refit | None = None
    notices: list[str] = field(default_factory=list)

    @property
    def error(self) -> float:
        return (self.predicted_ns - self.measured_ns) / self.measured_ns if self.measured_ns else 0.0

    @property
    def measured_speedup(self) -> float | None:
        return self.baseline_ns / self.measured_ns if self.baseline_ns and self.measured_ns else None

    @property
    def measured_range_ns(self) -> tuple[int, int]:
        """The 10th and 90th percentiles of the kept steps (nearest rank): how noisy the re-run was."""
        kept = sorted(s.measured_ns for s in self.steps if not s.warmup)
        return kept[round(0.1 * (len(kept) - 1))], kept[round(0.9 * (len(kept) - 1))]

    @property
    def node_error_median(self) -> float | None:
        errors = [abs(n.error) for n in self.nodes if n.measured_ns]
        return statistics.median(errors) if errors else None


def warmup_steps(steps: list[int]) -> set[int]:
    """The steps left out as warm-up, by the rule of :mod:`tc_analyses.model.step_kinds`."""
    ordered = sorted(steps)
    return set(ordered[:WARMUP_STEPS]) if len(ordered) >= MIN_STEPS_FOR_WARMUP else set()


def _by_step(activity: Activity) -> dict[int, list[NodeRun]]:
    runs: dict[int, list[NodeRun]] = defaultdict(list)
    for run in activity.nodes:
        if run.step != NO_STEP:
            runs[run.step].append(run)
    return runs


def _span(runs: list[NodeRun]) -> int:
    return max(r.end for r in runs) - min(r.start for r in runs)


def verify(plan: dict[str, Any], plan_path: str, activity: Activity, graph: nx.DiGraph, refit: bool = False) -> Verification:
    """Compare `plan` (a plan.json's content) with the re-run recorded in `activity` (and `graph`, its
    computation graph)."""
    try:
        return _verify(plan, plan_path, activity, graph, refit)
    except (KeyError, TypeError, ValueError) as exc:  # a plan.json edited by hand, or of another tool
        raise AnalysisUnavailable(f"{plan_path}: not a placement plan dfcompass can verify "
                                  f"({type(exc).__name__}: {exc})") from None


def _verify(plan: dict[str, Any], plan_path: str, activity: Activity, graph: nx.DiGraph, refit: bool) -> Verification:
    schedule = plan.get("schedule") or []
    if not schedule:
        raise AnalysisUnavailable(f"{plan_path}: the plan has no schedule to verify (made by an older dfcompass?)")
    by_step = _by_step(activity)
    if not by_step:
        raise AnalysisUnavailable(f"{activity.path}: the re-run recorded no node inside a step: nothing to compare "
                                  "(did the program mark its steps?)")
    planned = {str(row["node"]): row for row in schedule}
    ran = [r for runs in by_step.values() for r in runs]
    placed = [r for r in ran if r.name in planned]
    if not placed or sum(r.device == planned[r.name]["device"] for r in placed) < 0.9 * len(placed):
        raise AnalysisUnavailable(
            f"{activity.path}: the re-run did not apply the plan ({len(placed)} of {len(ran)} nodes are in the plan, "
            f"{sum(r.device == planned[r.name]['device'] for r in placed)} on its device): run a program built on "
            "tracer.graph_program, which reads the plan from DFCOMPASS_PLAN")
    warm = warmup_steps(list(by_step))
    predicted = int(plan["predicted_makespan_ns"])
    steps = [StepCheck(s, _span(runs), predicted, s in warm) for s, runs in sorted(by_step.items())]
    kept = [c for c in steps if not c.warmup]
    measured = statistics.median(c.measured_ns for c in kept)
    nodes = _node_checks(planned, {s: by_step[s] for s in (c.step for c in kept)})
    notices = []
    if warm:
        notices.append(f"step {min(warm)} is left out as warm-up")
    baseline = plan.get("measured_step_ns")
    return Verification(plan_path, activity.path, sorted({r.device for r in placed}), predicted, measured,
                        float(baseline) if baseline else None, plan.get("speedup"), steps, nodes,
                        _refit(activity, graph, planned, [c.step for c in kept]) if refit else None, notices)


def _node_checks(planned: dict[str, dict[str, Any]], by_step: dict[int, list[NodeRun]]) -> list[NodeCheck]:
    durations: dict[str, list[int]] = defaultdict(list)
    starts: dict[str, list[int]] = defaultdict(list)
    for runs in by_step.values():
        first = min(r.start for r in runs)
        for r in runs:
            durations[r.name].append(r.duration)
            starts[r.name].append(r.start - first)
    checks = []
    for name, row in planned.items():
        if name not in durations:
            continue
        checks.append(NodeCheck(name, str(row.get("op", "")), str(row["device"]), int(row.get("ns", row["end_ns"] - row["start_ns"])),
                                statistics.median(durations[name]), int(row["start_ns"]), statistics.median(starts[name])))
    return checks


def _refit(activity: Activity, graph: nx.DiGraph, planned: dict[str, dict[str, Any]], steps: list[int]) -> Refit | None:
    """Costs fitted on every other step of the re-run, checked against the steps in between."""
    if len(steps) < 2:
        return None
    calibration, heldout = tuple(steps[0::2]), tuple(steps[1::2])
    graph = _calibrated(graph, activity, set(calibration))
    by_step = _by_step(activity)
    dispatch, handover = _gaps(graph, {s: by_step[s] for s in calibration})
    lanes = sorted({str(attrs[K.DEVICE]) for _, attrs in graph.nodes(data=True)})
    devices = [Device(lane, "CPU" if lane.startswith("cpu") else lane) for lane in lanes]
    links = {(a, b): Link(handover, 1e12, "fitted: hand-over delay between lanes in the re-run")
             for a in lanes for b in lanes if a != b}
    problem = build_problem(graph, devices, links, trace=None)
    problem = replace(problem, launch_overhead_ns={d: int(round(g)) for d, g in dispatch.items()})
    order = sorted(graph.nodes, key=lambda n: (planned[graph.nodes[n][K.NAME]]["start_ns"],
                                              planned[graph.nodes[n][K.NAME]]["end_ns"], n))
    assignment = {n: graph.nodes[n][K.DEVICE] for n in graph.nodes}
    # Lanes run their nodes strictly in the plan's order: the simulator's queues, not insertion.
    predicted = simulate(problem, assignment, order, algorithm="refit").makespan_ns
    measured = statistics.median(_span(by_step[s]) for s in heldout)
    return Refit(calibration, heldout, predicted, measured, dispatch, handover)


def _calibrated(graph: nx.DiGraph, activity: Activity, steps: set[int]) -> nx.DiGraph:
    """A copy of the re-run's graph (its structure is the same in every step) whose durations come
    from `steps` only."""
    g = graph.copy()
    durations: dict[str, list[int]] = defaultdict(list)
    for run in activity.nodes:
        if run.step in steps:
            durations[run.name].append(run.duration)
    for n, attrs in g.nodes(data=True):
        found = durations.get(attrs[K.NAME], [])
        attrs[K.DURATIONS_NS] = found
        attrs[K.MEAN_NS] = round(statistics.median(found)) if found else 0
        attrs[K.MEASURED] = {attrs[K.DEVICE]: bool(found)}
    g.graph.pop(K.SOURCE, None)  # costs come from here, not from re-reading the trace
    return g


def _gaps(graph: nx.DiGraph, by_step: dict[int, list[NodeRun]]) -> tuple[dict[str, float], float]:
    """Per lane, the mean wait between a node being runnable and starting, when its inputs came from
    its own lane; and the mean extra wait when its last input came from another lane."""
    index = {graph.nodes[n][K.NAME]: n for n in graph.nodes}
    own: dict[str, list[int]] = defaultdict(list)
    other: list[int] = []
    for runs in by_step.values():
        end = {r.name: r.end for r in runs}
        lane_prev: dict[str, int] = {}
        for run in sorted(runs, key=lambda r: r.start):
            inputs = [graph.nodes[p][K.NAME] for p in graph.predecessors(index[run.name])]
            last_input = max(inputs, key=lambda p: end.get(p, 0), default=None)
            ready = max([lane_prev.get(run.device, run.start)] + [end[p] for p in inputs if p in end])
            gap = max(0, run.start - ready)
            if last_input is not None and graph.nodes[index[last_input]][K.DEVICE] != run.device \
                    and end.get(last_input, 0) >= lane_prev.get(run.device, 0):
                other.append(gap)
            else:
                own[run.device].append(gap)
            lane_prev[run.device] = run.end
    dispatch = {lane: sum(g) / len(g) for lane, g in own.items() if g}
    mean_dispatch = sum(dispatch.values()) / len(dispatch) if dispatch else 0.0
    handover = max(0.0, (sum(other) / len(other) - mean_dispatch)) if other else 0.0
    return dispatch, handover
