"""Verify a placement plan: its predictions against the program re-run under the plan and under the
placement it was recorded with, measured side by side.

`dfcompass verify PLAN -- COMMAND` runs COMMAND in interleaved rounds: round A with the baseline
placement (every node on the device it was recorded on, in its recorded order: :func:`baseline_plan`),
round B with the plan (programs built on :mod:`tracer.graph_program` read either from
``DFCOMPASS_PLAN``), A B A B ..., at least ``MIN_PAIRS`` pairs and more, up to ``MAX_PAIRS``, while the
speedup's confidence interval is wider than ±``CI_HALF_WIDTH`` of its median (:func:`run_rounds`). The
recorded trace is never the baseline: it was measured in another run, at another load.

* the speedup: the median of the per-pair ratios (A's median step over B's), with a bootstrap
  confidence interval over the pairs (:func:`summarise`), checked against the plan's printed range;
* per step: the plan rounds' step (the median of each round's median step after warm-up) against
  the step the plan's report printed ("estimated with the plan": the recorded step over the
  predicted speedup; the plan's makespan when it has no recorded step); each step of the median plan
  round is listed;
* per node (median plan round): the predicted duration and start (``schedule`` of plan.json) against
  the node's median duration and start offset.

Refit (``--refit``) rebuilds the costs from the median plan round itself, on half of its steps only
(every other step after warm-up): node medians, each lane's dispatch gap (the time between a node
being runnable and starting, when its inputs came from its own lane) and the hand-over delay between
lanes (the same gap when its last input came from another lane, less the dispatch gap). The same
simulator runs the plan with these costs, each lane in the plan's order, and the result is checked
against the other half of the steps.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.model.step_kinds import MIN_STEPS_FOR_WARMUP, WARMUP_STEPS
from tc_analyses.perf.cost import build_problem
from tc_analyses.perf.problem import Device, Link
from tc_analyses.perf.simulate import simulate
from tracer.schema import NO_STEP

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx

MIN_PAIRS = 5  # rounds of each side, at least
MAX_PAIRS = 15  # ... and at most, while the confidence interval stays wide
CI_HALF_WIDTH = 0.15  # stop once the interval lies within ±15% of the median speedup
CONFIDENCE = 0.90
RESAMPLES = 2000
SEED = 0  # the bootstrap is deterministic: the same rounds give the same interval
APPLIED_SHARE = 0.9  # a round whose program put fewer of the plan's nodes where it says did not apply it

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
class Round:
    """One run of the program: side "a" under the baseline placement, "b" under the plan."""

    side: str
    pair: int
    trace: str
    step_ns: float  # median step after warm-up
    steps: int  # steps kept after warm-up
    wall_s: float  # the whole program, start-up included
    load_before: float  # the machine's 1-minute load average before the run
    load_after: float  # ... and after it
    cpu_share: float | None  # CPU time of the program over its wall time: cores it kept busy

    @property
    def name(self) -> str:
        return f"{self.side}{self.pair}"


@dataclass(frozen=True)
class Rounds:
    """The interleaved rounds and the speedup measured from them (module docstring)."""

    rounds: list[Round]
    speedup: float  # the median of the per-pair ratios, baseline step over plan step
    ci: tuple[float, float]  # bootstrap over the pairs
    confidence: float
    stop: str  # why the rounds stopped
    predicted_speedup: float | None
    predicted_range: tuple[float, float] | None  # the range the plan's report printed
    baseline: str  # where the baseline placement came from
    baseline_devices: list[str]

    def side(self, side: str) -> list[Round]:
        return [r for r in self.rounds if r.side == side]

    @property
    def ratios(self) -> list[float]:
        return pair_ratios(self.rounds)

    @property
    def baseline_ns(self) -> float:
        return statistics.median(r.step_ns for r in self.side("a"))

    @property
    def plan_ns(self) -> float:
        return statistics.median(r.step_ns for r in self.side("b"))

    @property
    def in_range(self) -> bool | None:
        """Whether the printed range holds the measured median (None: the plan printed no range)."""
        if self.predicted_range is None:
            return None
        return self.predicted_range[0] <= self.speedup <= self.predicted_range[1]

    @property
    def overlaps(self) -> bool | None:
        """Whether the printed range and the confidence interval overlap."""
        if self.predicted_range is None:
            return None
        return self.predicted_range[0] <= self.ci[1] and self.ci[0] <= self.predicted_range[1]


@dataclass(frozen=True)
class Verification:
    plan: str
    rerun: str  # the plan round compared step by step and node by node (the median one)
    devices: list[str]  # the lanes the re-run used
    predicted_ns: int  # the step the plan's report printed (see `prediction`)
    prediction: str  # which figure predicted_ns is
    makespan_ns: int  # the plan's makespan (the optimiser's schedule), which the node starts come from
    measured_ns: float  # median re-run step after warm-up
    recorded_step_ns: float | None  # the step of the trace the plan was made from: never the baseline
    predicted_speedup: float | None
    steps: list[StepCheck]
    nodes: list[NodeCheck]
    refit: Refit | None = None
    notices: list[str] = field(default_factory=list)
    rounds: Rounds | None = None

    @property
    def error(self) -> float:
        return (self.predicted_ns - self.measured_ns) / self.measured_ns if self.measured_ns else 0.0

    @property
    def measured_speedup(self) -> float | None:
        """The baseline's step over the plan's, both measured by verify's rounds (None without rounds)."""
        return self.rounds.speedup if self.rounds is not None else None

    @property
    def measured_range_ns(self) -> tuple[int, int]:
        """The 10th and 90th percentiles of the kept steps (nearest rank): how noisy the re-run was."""
        kept = sorted(s.measured_ns for s in self.steps if not s.warmup)
        return kept[round(0.1 * (len(kept) - 1))], kept[round(0.9 * (len(kept) - 1))]

    @property
    def node_error_median(self) -> float | None:
        errors = [abs(n.error) for n in self.nodes if n.measured_ns]
        return statistics.median(errors) if errors else None


def pair_ratios(rounds: list[Round]) -> list[float]:
    """Per pair of rounds run back to back, the baseline's step over the plan's."""
    a = {r.pair: r.step_ns for r in rounds if r.side == "a"}
    b = {r.pair: r.step_ns for r in rounds if r.side == "b"}
    return [a[p] / b[p] for p in sorted(a.keys() & b.keys()) if b[p] > 0]


def bootstrap_ci(values: list[float], confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                 seed: int = SEED) -> tuple[float, float]:
    """The percentile bootstrap interval of the median of `values` (resampled with replacement)."""
    import numpy as np

    if not values:
        raise ValueError("no values to bootstrap")
    x = np.asarray(values, dtype=float)
    medians = np.median(x[np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))], axis=1)
    low, high = np.quantile(medians, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def stop_reason(ratios: list[float], min_pairs: int = MIN_PAIRS, max_pairs: int = MAX_PAIRS,
                half_width: float = CI_HALF_WIDTH, confidence: float = CONFIDENCE) -> str | None:
    """Why the rounds can stop after these pairs' ratios; None to run another pair."""
    if len(ratios) < min_pairs:
        return None
    median = statistics.median(ratios)
    low, high = bootstrap_ci(ratios, confidence)
    if median * (1 - half_width) <= low and high <= median * (1 + half_width):
        return (f"the {confidence:.0%} interval lies within ±{half_width:.0%} of the median after "
                f"{len(ratios)} pairs")
    if len(ratios) >= max_pairs:
        return (f"{len(ratios)} pairs, the most allowed: the {confidence:.0%} interval is still wider than "
                f"±{half_width:.0%} of the median (the machine's load varies; read the interval)")
    return None


def run_rounds(run: Callable[[str, int], Round], min_pairs: int = MIN_PAIRS, max_pairs: int = MAX_PAIRS,
               half_width: float = CI_HALF_WIDTH, after_pair: Callable[[list[Round]], None] | None = None,
               ) -> tuple[list[Round], str]:
    """Run rounds A B A B ... (`run(side, pair)` runs one) until :func:`stop_reason` says enough."""
    max_pairs = max(max_pairs, min_pairs)
    rounds: list[Round] = []
    for pair in range(max_pairs):
        rounds += [run("a", pair), run("b", pair)]
        if after_pair is not None:
            after_pair(rounds)
        reason = stop_reason(pair_ratios(rounds), min_pairs, max_pairs, half_width)
        if reason is not None:
            return rounds, reason
    raise AssertionError("unreachable: the last pair always stops")  # pragma: no cover


def summarise(rounds: list[Round], stop: str, plan: dict[str, Any], baseline: str,
              baseline_devices: list[str]) -> Rounds:
    """The measured speedup of `rounds` against what `plan` (a plan.json's content) printed."""
    ratios = pair_ratios(rounds)
    spread = plan.get("speedup_range")
    predicted_range = (float(spread[0]), float(spread[1])) if isinstance(spread, (list, tuple)) and len(spread) == 2 else None
    speedup = plan.get("speedup")
    return Rounds(rounds, statistics.median(ratios), bootstrap_ci(ratios), CONFIDENCE, stop,
                  float(speedup) if isinstance(speedup, (int, float)) else None, predicted_range, baseline,
                  baseline_devices)


def median_round(rounds: list[Round], side: str = "b") -> Round:
    """The round of `side` whose median step is the (lower) median of that side's."""
    ordered = sorted((r for r in rounds if r.side == side), key=lambda r: (r.step_ns, r.pair))
    return ordered[(len(ordered) - 1) // 2]


def baseline_plan(plan: dict[str, Any], recorded: Activity | None) -> tuple[dict[str, Any], str]:
    """A plan.json that puts every node where the trace recorded it, in its recorded order (the baseline
    rounds apply it); and where that placement came from. From `recorded` (the trace the plan was
    made from) when it holds every node of the plan, else from plan.json (``moved``: where each moved
    node ran; ``device``: the one lane a parallelism plan started from), in the plan's order."""
    schedule = plan.get("schedule") or []
    if not schedule:
        raise AnalysisUnavailable("the plan has no schedule to verify (made by an older dfcompass?)")
    names = {str(row["node"]) for row in schedule}
    rows: list[tuple[str, str, str]] = []  # node, op, device, in run order
    source = ""
    if recorded is not None and (by_step := _by_step(recorded)):
        steps = sorted(by_step)
        kept = [s for s in steps if s not in warmup_steps(steps)]
        runs = sorted(by_step[kept[0]], key=lambda r: (r.start, r.end))
        ran = {r.name: r for r in runs}
        if names <= ran.keys():
            rows = [(r.name, r.op, r.device) for r in runs if r.name in names]
            source = f"the recorded trace {recorded.path} (step {kept[0]})"
    if not rows:
        moved = {m.get("task"): str(m["from_device"]) for m in plan.get("moved") or [] if m.get("from_device")}
        if "moved" in plan:
            rows = [(str(row["node"]), str(row.get("op", "")), moved.get(row.get("task"), str(row["device"])))
                    for row in schedule]
        elif isinstance(plan.get("device"), str):
            rows = [(str(row["node"]), str(row.get("op", "")), str(plan["device"])) for row in schedule]
        else:
            raise AnalysisUnavailable("the plan does not say where its nodes were recorded (no moved nodes, "
                                      "no device) and its trace cannot be read: no baseline to run")
        source = "plan.json (the recorded trace could not be read: the plan's order)"
    return {"schedule": [{"node": n, "op": op, "device": d, "start_ns": i, "end_ns": i}
                         for i, (n, op, d) in enumerate(rows)], "baseline": True}, source


def measure_round(activity: Activity, assignment: dict[str, str], side: str, pair: int, wall_s: float,
                  load: tuple[float, float], cpu_share: float | None) -> Round:
    """One round's figures from its recorded `activity`, run under `assignment` (node -> device)."""
    by_step = _check_applied(activity, assignment)
    warm = warmup_steps(list(by_step))
    kept = [_span(runs) for s, runs in by_step.items() if s not in warm]
    return Round(side, pair, activity.path, statistics.median(kept), len(kept), wall_s, load[0], load[1], cpu_share)


def _check_applied(activity: Activity, assignment: dict[str, str]) -> dict[int, list[NodeRun]]:
    by_step = _by_step(activity)
    if not by_step:
        raise AnalysisUnavailable(f"{activity.path}: the re-run recorded no node inside a step: nothing to compare "
                                  "(did the program mark its steps?)")
    ran = [r for runs in by_step.values() for r in runs]
    placed = [r for r in ran if r.name in assignment]
    on_device = sum(r.device == assignment[r.name] for r in placed)
    if not placed or on_device < APPLIED_SHARE * len(placed):
        raise AnalysisUnavailable(
            f"{activity.path}: the re-run did not apply the plan ({len(placed)} of {len(ran)} nodes are in the plan, "
            f"{on_device} on its device): run a program built on "
            "tracer.graph_program, which reads the plan from DFCOMPASS_PLAN")
    return by_step


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


def verify(plan: dict[str, Any], plan_path: str, activity: Activity, graph: nx.DiGraph, refit: bool = False,
           rounds: Rounds | None = None) -> Verification:
    """Compare `plan` (a plan.json's content) with a plan round recorded in `activity` (and `graph`, its
    computation graph); `rounds`: the interleaved rounds the speedup is measured from."""
    try:
        return _verify(plan, plan_path, activity, graph, refit, rounds)
    except (KeyError, TypeError, ValueError) as exc:  # a plan.json edited by hand, or of another tool
        raise AnalysisUnavailable(f"{plan_path}: not a placement plan dfcompass can verify "
                                  f"({type(exc).__name__}: {exc})") from None


def predicted_step(plan: dict[str, Any]) -> tuple[int, str]:
    """The step the plan's report printed: the recorded step over the predicted speedup ("estimated
    with the plan", tc_analyses/export/reports.py), else the plan's makespan."""
    recorded, speedup = plan.get("measured_step_ns"), plan.get("speedup")
    if recorded and speedup:
        return round(float(recorded) / float(speedup)), "estimated with the plan (recorded step / predicted speedup)"
    return int(plan["predicted_makespan_ns"]), "the plan's makespan (it has no recorded step)"


def _verify(plan: dict[str, Any], plan_path: str, activity: Activity, graph: nx.DiGraph, refit: bool,
            rounds: Rounds | None) -> Verification:
    schedule = plan.get("schedule") or []
    if not schedule:
        raise AnalysisUnavailable(f"{plan_path}: the plan has no schedule to verify (made by an older dfcompass?)")
    planned = {str(row["node"]): row for row in schedule}
    by_step = _check_applied(activity, {name: str(row["device"]) for name, row in planned.items()})
    placed = [r for runs in by_step.values() for r in runs if r.name in planned]
    warm = warmup_steps(list(by_step))
    makespan = int(plan["predicted_makespan_ns"])
    predicted, prediction = predicted_step(plan)
    steps = [StepCheck(s, _span(runs), predicted, s in warm) for s, runs in sorted(by_step.items())]
    kept = [c for c in steps if not c.warmup]
    measured = statistics.median(c.measured_ns for c in kept)
    nodes = _node_checks(planned, {s: by_step[s] for s in (c.step for c in kept)})
    notices = []
    if warm:
        notices.append(f"step {min(warm)} is left out as warm-up")
    recorded = plan.get("measured_step_ns")
    return Verification(plan_path, activity.path, sorted({r.device for r in placed}), predicted, prediction, makespan,
                        measured, float(recorded) if recorded else None, plan.get("speedup"), steps, nodes,
                        _refit(activity, graph, planned, [c.step for c in kept]) if refit else None, notices, rounds)


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
