"""A discrete-event simulator predicting the makespan of any placement.

Model:

* each device has one compute queue: its tasks run one at a time, strictly in priority order
  (the given `order`, else decreasing upward rank on the assigned devices);
* a task starts when its device is free and all its inputs have arrived; it runs for
  ``problem.cost(task, device)``, which includes the device's launch overhead;
* a tensor carried over from the previous step (``problem.carried``) whose producer is placed on
  another device is copied from the step's start (not through the copy engines), and so are a
  task's inputs from outside the step (``problem.external``) when it leaves the device it ran on;
* with host shares (``problem.host_ns``), a task also needs the host thread for that long from its
  start: tasks are issued one at a time;
* a tensor between two devices is copied when its producer ends, on the copy engine of that
  direction ``(src, dst)``: copies of one direction are serialized, both directions and compute
  overlap. Tensors on one device arrive when their producer ends.

:func:`replay_actual` runs the trace's own placement in the trace's own order, with the measured
host gaps as launch overhead (each op weighted by the fraction of steps it ran in) and the observed producer-end -> consumer-begin delays of the
trace's cross-device edges as their transfer times; it should reproduce the measured step time
(:func:`tc_analyses.perf.cost.measure_steps`).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tc_analyses.model import graph_keys as K
from tc_analyses.model.dag import lexicographic_order, upward_rank
from tc_analyses.perf.cost import activity_of, measure_steps, trace_of
from tc_analyses.perf.problem import Cost, Link, Placement, PlacementError, PlacementProblem, Slot
from tracer.schema import NO_STEP

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx


def upward_ranks(problem: PlacementProblem, assignment: dict[int, str]) -> dict[int, int]:
    """rank(t) = cost on its device + max over successors (transfer + rank(successor))."""
    succs = problem.successors()
    order = problem.topological_order()
    work = {t: problem.cost(t, assignment[t]) for t in order}
    weights = {t: [problem.transfer_ns(assignment[t], assignment[s], problem.edges[(t, s)]) for s in succs[t]]
               for t in order}
    return upward_rank(order, work, succs, weights)


def _priority(problem: PlacementProblem, assignment: dict[int, str], order: list[int] | None) -> list[int]:
    if order is None:
        topo = problem.topological_order()
        index = {t: i for i, t in enumerate(topo)}
        rank = upward_ranks(problem, assignment)
        return sorted(topo, key=lambda t: (-rank[t], index[t]))
    ids = {t.id for t in problem.tasks}
    if sorted(order) != sorted(ids):
        raise PlacementError("order must list every task exactly once")
    pos = {t: i for i, t in enumerate(order)}
    for (u, v) in problem.edges:
        if pos[u] > pos[v]:
            raise PlacementError(f"order puts task {v} before its input task {u}: it must follow the dependencies")
    return list(order)


def simulate(problem: PlacementProblem, assignment: dict[int, str], order: list[int] | None = None,
             *, transfer_override: dict[tuple[int, int], int] | None = None, algorithm: str = "simulated"
             ) -> Placement:
    """Simulate `assignment` (task -> device) and return its schedule and makespan.

    `transfer_override` gives the transfer time of particular cross-device edges directly.
    """
    names = set(problem.device_names())
    for task in problem.tasks:
        dev = assignment.get(task.id)
        if dev is None:
            raise PlacementError(f"task {task.id} ({task.name}) is not assigned to a device")
        if dev not in names:
            raise PlacementError(f"task {task.id} ({task.name}) is assigned to unknown device {dev!r}")
    priority = _priority(problem, assignment, order)
    preds, succs = problem.predecessors(), problem.successors()
    queues: dict[str, list[int]] = {d: [] for d in names}
    for t in priority:
        queues[assignment[t]].append(t)
    head = {d: 0 for d in names}
    busy_until = {d: 0 for d in names}
    running = {d: False for d in names}
    waiting = {t: len(preds[t]) for t in preds}
    ready_at = {t: 0 for t in preds}
    for (u, v), nbytes in problem.carried.items():  # read from the previous step: copied from the step's start
        if v in ready_at and u in assignment and assignment[u] != assignment[v]:
            ready_at[v] = max(ready_at[v], problem.transfer_ns(assignment[u], assignment[v], nbytes))
    for task in problem.tasks:  # inputs from outside the step, held where the task ran
        nbytes = problem.external.get(task.id, 0)
        home = task.actual_device
        if nbytes and home in names and assignment[task.id] != home:
            ready_at[task.id] = max(ready_at[task.id], problem.transfer_ns(home, assignment[task.id], nbytes))
    engine_free: dict[tuple[str, str], int] = {}
    host_free = 0  # when the host thread can issue the next task
    override = transfer_override or {}
    slots: dict[int, Slot] = {}
    # Each task's cost and host share on its device, looked up once (the loop below is the hot path
    # of every prediction: 333 k tasks in a 1M-event trace's parallelism plan).
    try:
        cost: dict[int, int] | None = {task.id: problem.cost(task.id, assignment[task.id]) for task in problem.tasks}
        held_of = ({task.id: problem.host(task.id, assignment[task.id]) for task in problem.tasks}
                   if problem.blocking or any(v > 0 for v in problem.host_ns.values()) else None)
    except KeyError:  # a cost missing: looked up as each task starts, so the error is the one it always was
        cost = held_of = None
    edge_bytes = problem.edges
    heappush, heappop = heapq.heappush, heapq.heappop

    # (time, seq, kind, task): ends and arrivals in time order, ties in the order they were pushed
    events: list[tuple[int, int, str, int]] = []
    seq = 0

    def try_start(dev: str, now: int) -> None:
        nonlocal seq, host_free
        if running[dev] or head[dev] >= len(queues[dev]):
            return
        t = queues[dev][head[dev]]
        if waiting[t] > 0:
            return
        start = max(now, busy_until[dev], ready_at[t], host_free)
        end = start + (cost[t] if cost is not None else problem.cost(t, dev))
        held = held_of[t] if held_of is not None else (0 if cost is not None else problem.host(t, dev))
        if held > 0:  # the host thread issues tasks one at a time, in start order
            host_free = start + held
        running[dev] = True
        head[dev] += 1
        slots[t] = Slot(t, dev, start, end)
        heappush(events, (end, seq, "end", t))
        seq += 1

    for d in sorted(names):
        try_start(d, 0)
    while events:
        now, _, kind, t = heappop(events)
        if kind == "end":
            dev = assignment[t]
            running[dev], busy_until[dev] = False, now
            for s in succs[t]:
                dst = assignment[s]
                if dst == dev:
                    heappush(events, (now, seq, "arrive", s))
                    seq += 1
                    continue
                duration = override.get((t, s))
                if duration is None:
                    duration = problem.transfer_ns(dev, dst, edge_bytes[(t, s)])
                if duration <= 0:
                    heappush(events, (now, seq, "arrive", s))
                    seq += 1
                    continue
                engine = (dev, dst)
                start = max(now, engine_free.get(engine, 0))
                engine_free[engine] = start + duration
                heappush(events, (start + duration, seq, "arrive", s))
                seq += 1
            try_start(dev, now)
        else:  # an input of task t arrived
            waiting[t] -= 1
            if now > ready_at[t]:
                ready_at[t] = now
            if waiting[t] == 0:
                try_start(assignment[t], now)
    if len(slots) != len(problem.tasks):
        raise PlacementError("the simulation deadlocked: the order is not consistent with the dependencies")
    schedule = sorted(slots.values(), key=lambda s: (s.start_ns, s.task))
    makespan = max((s.end_ns for s in schedule), default=0)
    return Placement(dict(assignment), makespan, schedule, algorithm)


def _actual_order(problem: PlacementProblem, offsets: dict[int, float]) -> list[int]:
    """A topological order following the trace's mean start offsets."""
    tasks = [t.id for t in problem.tasks]
    order = lexicographic_order(tasks, problem.successors(), lambda t: (offsets.get(t, 0.0), t))
    if len(order) != len(problem.tasks):
        problem.topological_order()  # raises, naming the cycle
    return order


def replay_actual(problem: PlacementProblem, graph: nx.DiGraph, trace: Any | None = None,
                  steps: Collection[int] | None = None) -> Placement:
    """Simulate the trace's own placement and order (see the module docstring).

    `trace` (or its activity) defaults to the trace the graph was built from (``graph.graph["source"]``).
    With `steps`, every timing (op durations, host gaps, delays, order) comes from those steps
    only, so the replay can be checked on steps it did not see (:func:`heldout_replay`).
    """
    if trace is None:
        trace = trace_of(graph)
    if trace is None:
        raise PlacementError("replaying the actual placement needs the trace the graph was built from")
    names = set(problem.device_names())
    assignment: dict[int, str] = {}
    for t in problem.tasks:
        if t.actual_device not in names:
            raise PlacementError(f"task {t.id} ({t.name}) ran on {t.actual_device!r}, which is not among the "
                                 f"devices {sorted(names)}")
        assignment[t.id] = t.actual_device
    timing = measure_steps(trace, graph, steps)
    # The threads the trace used are the lanes: ops of one device on two threads overlap, as they
    # did. Each op pays its lane's wait between being ready and starting; ops that ran in only some
    # steps count for the fraction of steps they ran in. Both are folded into the replayed cost.
    lane_of = {t.id: timing.node_lane.get(t.id, f"{assignment[t.id]}#") for t in problem.tasks}
    device_of = {lane: lane.rsplit("#", 1)[0] for lane in lane_of.values()}
    models = {d.name: d for d in problem.devices}
    costs: dict[tuple[int, str], Cost] = {}
    for t in problem.tasks:
        dev, lane = assignment[t.id], lane_of[t.id]
        weight = timing.runs_per_step.get(t.id, 1.0 if steps is None else 0.0)  # absent from those steps
        measured = timing.node_ns.get(t.id)  # the mean over the replayed steps (the costs are medians)
        per_run = (problem.costs[(t.id, dev)].ns if measured is None else measured) + timing.lane_gaps_ns.get(lane, 0.0)
        costs[(t.id, lane)] = Cost(int(round(per_run * weight)), problem.costs[(t.id, dev)].source)
    lanes = sorted(device_of)
    links = {(a, b): problem.links[(device_of[a], device_of[b])] if device_of[a] != device_of[b]
             else Link(0, 1e18, "one device: shared memory") for a in lanes for b in lanes if a != b}
    replayed = replace(problem, devices=[replace(models[device_of[lane]], name=lane) for lane in lanes],
                       costs=costs, links=links, launch_overhead_ns={}, host_ns={}, tied={}, carried={},
                       external={}, forbidden=frozenset(),
                       tasks=[replace(t, actual_device=lane_of[t.id]) for t in problem.tasks])
    override = {e: int(round(d)) for e, d in timing.edge_delay_ns.items() if e in problem.edges}
    return simulate(replayed, lane_of, _actual_order(problem, timing.start_offset_ns),
                    transfer_override=override, algorithm="actual (replay)")


@dataclass(frozen=True)
class HeldOut:
    """The replay calibrated on some steps, against the measured time of the other steps."""

    calibration_steps: tuple[int, ...]
    heldout_steps: tuple[int, ...]
    replay_ns: int
    measured_ns: float

    @property
    def error(self) -> float:
        return abs(self.replay_ns - self.measured_ns) / self.measured_ns if self.measured_ns else 0.0


def heldout_replay(problem: PlacementProblem, graph: nx.DiGraph, trace: Any) -> HeldOut | None:
    """Replay the actual placement with timings from every other step (the 1st, 3rd...) and compare it
    with the mean measured time of the steps in between, which it did not see; None with fewer than
    two steps."""
    in_graph = graph.graph.get(K.EXECUTION_NODES, {})
    steps = sorted({n.step for n in activity_of(trace).nodes if n.node_id in in_graph} - {NO_STEP})
    if len(steps) < 2:
        return None
    calibration, heldout = tuple(steps[0::2]), tuple(steps[1::2])
    replay = replay_actual(problem, graph, trace, calibration).makespan_ns
    return HeldOut(calibration, heldout, replay, measure_steps(trace, graph, heldout).step_ns)
