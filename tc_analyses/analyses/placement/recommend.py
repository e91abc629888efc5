"""Recommend a placement: the plan, its predicted speedup, and why each node moves.

Input: a dfcompass trace (its computation graph, measured costs) or a graph file (node-link JSON
with per-device costs, so benchmark suites run without traces). The exact MILP solves graphs of
up to ``milp.MAX_TASKS`` tasks; larger ones use HEFT plus critical-path local search, with a
notice. One model gives every figure: the plan reported, exported and drawn is the optimiser's
own schedule, and the trace's actual placement is list-scheduled by the same model
(``heft.list_schedule``), so the speedup compares like with like. The discrete-event simulator
replays the trace's own run to check the costs against the measured step time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tc_analyses.analyses.placement import milp
from tc_analyses.analyses.placement.contract import CONTRACT_ABOVE, contract_chains
from tc_analyses.analyses.placement.heft import compile_problem, heft, list_schedule
from tc_analyses.analyses.placement.search import local_search
from tc_analyses.errors import AnalysisUnavailable, ConfigurationError
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity
from tc_analyses.perf.calibration import Calibration, busy_plan
from tc_analyses.perf.cost import activity_of, build_problem, measure_steps, unmodelled_ops
from tc_analyses.perf.devices import GPU_MODEL_ERROR, spec_of
from tc_analyses.perf.problem import (
    Cost, CostSource, Device, Link, Placement, PlacementProblem, Task,
)
from tc_analyses.perf.simulate import heldout_replay, replay_actual

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx


@dataclass(frozen=True)
class MovedNode:
    task: int
    name: str
    op: str
    from_device: str
    to_device: str
    reason: str


@dataclass(frozen=True)
class Recommendation:
    input: str
    devices: list[dict[str, Any]]  # name, model, host, model_is_default
    algorithm: str
    tasks: int
    actual_makespan_ns: int | None  # the trace's own placement, list-scheduled (None for graph files without one)
    measured_step_ns: float | None  # what the trace measured, to judge the simulator
    replay_error: float | None  # |replay - measured| / measured, on the steps the replay was fitted to
    heldout_replay_error: float | None  # the same, fitted on every other step and checked on the others
    predicted_makespan_ns: int
    speedup: float | None  # actual / predicted, both under the optimiser's model
    assignment: dict[str, str]  # task name -> device
    moved: list[MovedNode] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    cost_sources: dict[str, int] = field(default_factory=dict)  # measured / modelled counts
    links: dict[str, str] = field(default_factory=dict)  # "src->dst" -> how its transfer time was set
    # The predicted schedule, one row per graph node in start order: what `dfcompass verify` applies
    # (node name -> device, in this order) and compares the re-run with, node by node.
    schedule: list[dict[str, Any]] = field(default_factory=list)
    step_kind: str | None = None  # which steps the graph covers (model.step_kinds), None without steps
    # The speedup with every measured cost at its 10th, then its 90th percentile and every modelled
    # GPU cost at the kernel model's p10/p90 error (both plans rescheduled by the same model),
    # widened by the held-out replay error.
    speedup_range: tuple[float, float] | None = None
    modelled_on: dict[str, int] = field(default_factory=dict)  # device -> plan nodes there whose cost is modelled
    range_covers: str = ""  # what the speedup range includes, as the report prints it


ALGORITHMS = ("auto", "heft", "search", "milp")
NO_STEPS = ("the trace has no step marks, so the graph is the whole run, set-up and warm-up included: mark "
            "the steps (tracer.step, TorchRecorder.step) to plan one step")


def _optimise(problem: PlacementProblem, notices: list[str], algorithm: str = "auto") -> Placement:
    """auto: the exact MILP when the problem is small enough, else HEFT plus local search; or the
    one `algorithm` names (the MILP falls back to the heuristic, with a notice, when it cannot run).
    The candidates are compared by the makespan of their own schedules. Above
    :data:`CONTRACT_ABOVE` tasks, the optimiser places chains (contract.py), and the plan is then
    scheduled on the full problem."""
    if algorithm not in ALGORITHMS:
        raise ConfigurationError(f"no placement algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    if len(problem.tasks) > CONTRACT_ABOVE and (contraction := contract_chains(problem)) is not None:
        notices.append(contraction.notice(len(problem.tasks)))
        folded = _optimise_tasks(contraction.problem, notices, algorithm)
        compiled = compile_problem(problem)  # once for both schedules of the full problem
        plan = list_schedule(problem, contraction.expand(folded.assignment), algorithm=f"{folded.algorithm} on chains",
                             compiled=compiled)
        actual = actual_assignment(problem)
        if len(actual) == len(problem.tasks):  # the coarser plan never loses to what ran
            kept = list_schedule(problem, actual, algorithm="actual placement (no better plan on chains)",
                                 compiled=compiled)
            if kept.makespan_ns < plan.makespan_ns:
                return kept
        return plan
    return _optimise_tasks(problem, notices, algorithm)


# An evaluation of the schedule costs ~15 us a task here, and the search's 4 s budget buys ~50 of them
# at 5,000 tasks: on 10,000 it evaluated 21 schedules and kept HEFT's plan, for 4 s of 8.
SEARCH_MAX_TASKS = 5_000


def _optimise_tasks(problem: PlacementProblem, notices: list[str], algorithm: str) -> Placement:
    compiled = compile_problem(problem)  # once: HEFT's result is kept with it for the others to start from
    candidates = [heft(problem, compiled)]
    if algorithm == "heft":
        return candidates[0]
    if algorithm == "search":
        return local_search(problem, compiled=compiled)  # never worse than HEFT
    exact = milp.solve(problem, compiled=compiled)
    if algorithm == "milp" and exact.placement is not None:
        if not exact.optimal:
            notices.append(f"the exact solver stopped before proving optimality ({exact.reason})")
        return exact.placement  # never worse than HEFT either
    if exact.placement is not None:
        candidates.append(exact.placement)
        if not exact.optimal:
            notices.append(f"the exact solver stopped before proving optimality ({exact.reason})")
    elif len(problem.tasks) > SEARCH_MAX_TASKS:
        notices.append(f"{exact.reason}: using HEFT; the local search needs ~50 evaluations of the whole schedule "
                       f"to improve on it, more than its budget buys on {len(problem.tasks):,} tasks "
                       "(--algorithm search runs it anyway)")
    else:
        notices.append(f"{exact.reason}: using HEFT with critical-path local search instead")
        candidates.append(local_search(problem, compiled=compiled))
    return min(candidates, key=lambda p: (p.makespan_ns, p.algorithm))


def actual_assignment(problem: PlacementProblem) -> dict[int, str]:
    """Where each task ran, for the tasks that ran on one of the problem's devices."""
    names = set(problem.device_names())
    return {t.id: t.actual_device for t in problem.tasks if t.actual_device in names}


def _memory_model_checked(problem: PlacementProblem, notices: list[str]) -> PlacementProblem:
    """The problem without memory limits when the trace itself breaks them: the model counts every
    output as resident for the whole run, which a long run's graph (outputs freed as it goes) is not."""
    used: dict[str, int] = {}
    for task in problem.tasks:
        if task.actual_device:
            used[task.actual_device] = used.get(task.actual_device, 0) + task.memory_bytes
    broken = [d for d in problem.devices if d.memory_bytes is not None and used.get(d.name, 0) > d.memory_bytes]
    if not broken:
        return problem
    worst = broken[0]
    capacity = worst.memory_bytes or 0
    notices.append(f"the nodes that ran on {worst.name} output {used[worst.name] / 2**30:,.1f} GiB in all, more than "
                   f"its {capacity / 2**30:,.1f} GiB: outputs are not all resident at once, so no device's "
                   "memory limit is applied")
    return replace(problem, devices=[replace(d, memory_bytes=None) for d in problem.devices])


def _reason(problem: PlacementProblem, task: Task, src: str | None, dst: str) -> str:
    to_cost = problem.costs[(task.id, dst)]
    text = f"{dst}: {to_cost.ns / 1e3:.1f} us ({to_cost.source.value}"
    text += ("; a sync: device-to-host copy and a wait for the queue, the host held)" if (task.id, dst) in problem.blocking
             else ")")
    if src is not None and (task.id, src) in problem.costs:
        from_cost = problem.costs[(task.id, src)]
        text = f"{src}: {from_cost.ns / 1e3:.1f} us ({from_cost.source.value}) -> " + text
    return text


def recommend(problem: PlacementProblem, source: str, graph: nx.DiGraph | None = None,
              trace: Any | None = None, algorithm: str = "auto",
              notices: Sequence[str] = (), step_kind: str | None = None,
              calibration: Calibration | None = None) -> tuple[Recommendation, Placement]:
    """Optimise `problem` and compare it with the trace's own placement; `notices` are printed first,
    `step_kind` says which steps the graph covers, `calibration` (the machine's measured lane costs)
    widens the speedup range to a busy machine."""
    problem.validate()
    notices = list(notices)
    problem = _memory_model_checked(problem, notices)
    cpus = [d.name for d in problem.devices if d.host == "localhost" and d.name.split(":")[0] == "cpu"]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if len(cpus) > cores:
        notices.append(f"{len(cpus)} CPU devices on this host, which has {cores} core(s): lanes would share cores, "
                       "so the plan promises more overlap than this machine gives")
    for device in problem.devices:
        if device.model_is_default:
            notices.append(f"{device.name}: no model given, assumed {device.model} (name it: {device.name}=MODEL)")
    # One model: the optimiser's own schedule is what is reported, exported and drawn, and the
    # actual placement is scheduled by the same list scheduler, so the speedup compares like with like.
    predicted = _optimise(problem, notices, algorithm)
    if trace is not None and not activity_of(trace).steps:
        notices.append(NO_STEPS)
    if graph is not None and (unknown := unmodelled_ops(graph)):
        named = ", ".join(f"{op} x{n}" for op, n in list(unknown.items())[:4])
        more = f" and {len(unknown) - 4} more" if len(unknown) > 4 else ""
        notices.append(f"{sum(unknown.values())} nodes have no FLOP model ({named}{more}): on other devices "
                       "they cost their measured time scaled by the peak ratio, at least")
    actual_placement = actual_assignment(problem)
    actual = measured = error = heldout_error = None
    if len(actual_placement) == len(problem.tasks):
        actual = list_schedule(problem, actual_placement, algorithm="actual").makespan_ns
        if graph is not None and trace is not None:
            activity = activity_of(trace)  # paired once for both
            measured = measure_steps(activity, graph).step_ns
            replay = replay_actual(problem, graph, activity).makespan_ns
            error = abs(replay - measured) / measured if measured else None
            heldout = heldout_replay(problem, graph, activity)
            heldout_error = heldout.error if heldout is not None else None
    elif any(t.actual_device for t in problem.tasks):
        notices.append("some nodes ran on devices not in --devices: no actual placement to compare with")
    speedup_range = None
    if actual and graph is not None and predicted.makespan_ns:
        spread = step_spread(activity_of(trace)) if trace is not None else 0.0
        speedup_range = _speedup_range(problem, graph, predicted, actual_placement, heldout_error or 0.0,
                                       calibration, spread)
        speedup_range = at_least_the_step_spread(speedup_range, actual / predicted.makespan_ns, spread)
    moved = [MovedNode(t.id, t.name, t.op, t.actual_device or "", predicted.assignment[t.id],
                       _reason(problem, t, t.actual_device, predicted.assignment[t.id]))
             for t in problem.tasks if t.actual_device and t.actual_device != predicted.assignment[t.id]]
    sources: dict[str, int] = {}
    for cost in problem.costs.values():
        sources[cost.source.value] = sources.get(cost.source.value, 0) + 1
    recommendation = Recommendation(
        source, [{"name": d.name, "model": d.model, "host": d.host, "model_is_default": d.model_is_default}
                 for d in problem.devices],
        predicted.algorithm, len(problem.tasks), actual, measured, error, heldout_error, predicted.makespan_ns,
        (actual / predicted.makespan_ns) if actual and predicted.makespan_ns else None,
        {t.name: predicted.assignment[t.id] for t in problem.tasks}, moved, notices, sources,
        {f"{a}->{b}": link.source for (a, b), link in sorted(problem.links.items())},
        schedule_rows(problem, predicted, graph), step_kind, speedup_range, modelled_on(problem, predicted.assignment),
        range_covers(problem, predicted.assignment, calibration) if speedup_range else "",
    )
    return recommendation, predicted


def range_covers(problem: PlacementProblem, plan: dict[int, str], calibration: Calibration | None) -> str:
    """What :func:`_speedup_range` put in the range, in the words the report prints."""
    parts = ["p10-p90 measured costs"]
    if any(spec_of(d).kind == "gpu" for d in problem.devices):
        parts.append("the kernel model's error")
    if calibration is not None and busy_plan(problem, plan, calibration) is not problem:
        parts.append(f"lanes {calibration.busy_factor:.2f}x slower beside a busy core (measured at record)")
    return ", ".join(parts) + "; widened by the held-out replay error, never narrower than the recorded steps' spread"


def modelled_on(problem: PlacementProblem, plan: dict[int, str]) -> dict[str, int]:
    """Per device, how many of the plan's nodes there have a modelled (or scaled) cost, not a measured one."""
    out: dict[str, int] = {}
    for task, device in plan.items():
        if problem.costs[(task, device)].source in (CostSource.MODELLED, CostSource.SCALED):
            out[device] = out.get(device, 0) + 1
    return out


def model_factors(model_error: tuple[float, float] = GPU_MODEL_ERROR) -> tuple[float, float]:
    """The factors that move a modelled GPU cost to its fast and its slow bound, from the kernel
    model's p10 and p90 of predicted / measured - 1 (a model that over-predicts by 228% at p90
    gives the fast bound: the cost / 3.28)."""
    low, high = model_error
    return 1 / (1 + high), 1 / (1 + max(low, -0.95))


def with_quantile(problem: PlacementProblem, graph: nx.DiGraph, key: str, model_factor: float = 1.0) -> PlacementProblem:
    """`problem` with each cost that came from a measurement scaled from the node's median to its
    `key` quantile, and each modelled GPU cost multiplied by `model_factor` (:func:`model_factors`)."""
    gpu = {d.name for d in problem.devices if spec_of(d).kind == "gpu"}
    costs = dict(problem.costs)
    for (task, device), cost in problem.costs.items():
        attrs = graph.nodes[task] if task in graph else {}
        median, quantile = attrs.get(K.MEDIAN_NS, 0), attrs.get(key, 0)
        if cost.source is CostSource.MODELLED:
            if device in gpu and model_factor != 1.0:
                costs[(task, device)] = Cost(max(1, int(round(cost.ns * model_factor))), cost.source)
        elif median > 0 and quantile > 0:
            costs[(task, device)] = Cost(int(round(cost.ns * quantile / median)), cost.source)
    return replace(problem, costs=costs)


def _speedup_range(problem: PlacementProblem, graph: nx.DiGraph, predicted: Placement, actual: dict[int, str],
                   error: float, calibration: Calibration | None = None, spread: float = 0.0) -> tuple[float, float]:
    """Every pairing of measured costs at p10 or p90 with modelled GPU costs at their fast or slow
    bound (which pairing gives the extremes depends on where each plan runs what); with a
    calibration, also the plan's lanes at the busy contention and hand-over (calibration.busy_plan)
    against the recorded placement's steps at their fast end (`spread`: :func:`step_spread`).
    Never negative: the replay error divides the low bound, where subtracting it went below zero
    past 100%."""
    order = [slot.task for slot in sorted(predicted.schedule, key=lambda s: (s.start_ns, s.end_ns, s.task))]
    factors = model_factors() if any(spec_of(d).kind == "gpu" for d in problem.devices) else (1.0,)
    ratios = []
    for key in (K.P10_NS, K.P90_NS):
        for factor in factors:
            bound = with_quantile(problem, graph, key, factor)
            ratios.append(predicted_speedup(bound, predicted.assignment, order, actual))
            if calibration is not None:
                # Beside a busy core the recorded placement, one thread, keeps a core of its own and
                # runs its steps at their fast end (shorter beside a burner than alone, on this VM),
                # while the plan's lanes share the cores.
                busy = busy_plan(bound, predicted.assignment, calibration)
                ratios.append(predicted_speedup(bound, predicted.assignment, order, actual, plan_problem=busy)
                              / (1 + spread))
    point = predicted_speedup(problem, predicted.assignment, order, actual)
    return min(ratios + [point]) / (1 + error), max(ratios + [point]) * (1 + error)


def step_spread(activity: Activity) -> float:
    """How much the recorded steps vary: (p90 - p10) / 2 over the median of their durations (0 with
    fewer than three steps)."""
    spans = sorted(s.end - s.start for s in activity.steps if s.end > s.start)
    if len(spans) < 3:
        return 0.0
    pick = lambda q: spans[min(len(spans) - 1, round(q * (len(spans) - 1)))]  # noqa: E731
    median = pick(0.5)
    return (pick(0.9) - pick(0.1)) / 2 / median if median else 0.0


def at_least_the_step_spread(bounds: tuple[float, float], point: float, spread: float) -> tuple[float, float]:
    """A speedup range never narrower than the recorded steps' own spread (:func:`step_spread`): a
    step that varied by 30% from one step to the next cannot promise a speedup to better than 30%."""
    return min(bounds[0], point / (1 + spread)), max(bounds[1], point * (1 + spread))


def predicted_speedup(problem: PlacementProblem, plan: dict[int, str], order: list[int], actual: dict[int, str],
                      plan_problem: PlacementProblem | None = None) -> float:
    """The actual placement's makespan over the plan's (in its own order), both list-scheduled; the
    plan under `plan_problem` when given (the machine it would meet), else under `problem`."""
    compiled = compile_problem(problem)  # once for both schedules
    if plan_problem is None:
        planned = list_schedule(problem, plan, order, compiled=compiled).makespan_ns
    else:
        planned = list_schedule(plan_problem, plan, order).makespan_ns
    return list_schedule(problem, actual, compiled=compiled).makespan_ns / planned if planned else 1.0


def schedule_rows(problem: PlacementProblem, plan: Placement, graph: nx.DiGraph | None) -> list[dict[str, Any]]:
    """The plan's schedule as plain rows; ``node`` is the graph node's name (the task's name for graph
    files), which is what a program that applies the plan knows its nodes by."""
    tasks = {t.id: t for t in problem.tasks}
    rows = []
    for slot in sorted(plan.schedule, key=lambda s: (s.start_ns, s.end_ns, s.task)):
        task = tasks[slot.task]
        node = graph.nodes[slot.task].get(K.NAME, task.name) if graph is not None and slot.task in graph else task.name
        rows.append({"task": slot.task, "node": node, "op": task.op, "device": slot.device,
                     "start_ns": slot.start_ns, "end_ns": slot.end_ns,
                     "ns": problem.costs[(slot.task, slot.device)].ns})  # the op alone, without dispatch
    return rows


def problem_from_trace(activity: Activity, graph: nx.DiGraph, devices: list[Device],
                       links: dict[tuple[str, str], Link] | None = None) -> PlacementProblem:
    """The placement problem of a trace's activity (its paired intervals) and computation graph;
    `links` sets the transfer model of device pairs (else fitted from the trace's copies, or a spec)."""
    if graph.number_of_nodes() == 0:
        from tc_analyses.analyses.trace_info import nothing_to_analyse

        raise AnalysisUnavailable(nothing_to_analyse(activity.path))
    return build_problem(graph, devices, links, trace=activity)
