"""Plan the ops of one device onto lanes and predict the speedup (see the package docstring)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from dataclasses import replace
from collections import defaultdict

import networkx as nx

from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.parallelism import chains as decompose
from tc_analyses.analyses.parallelism.findings import findings
from tc_analyses.analyses.parallelism.gpu import gpu_work
from tc_analyses.analyses.parallelism.lane_sim import simulate_lanes
from tc_analyses.analyses.parallelism.result import (DEFAULT_GPU_STREAMS, DEFAULT_SYNC_NS, MODEL_NOTE, STREAM, THREAD,
                                                     LaneSummary, Node, PlannedOp, StreamPlan,
                                                     SyncEdge)
from tc_analyses.analyses.result import Finding
from tc_analyses.errors import AnalysisUnavailable, ConfigurationError, GraphError
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.activity import Device as TraceDevice
from tc_analyses.model.dag import (critical_path, lexicographic_order, reachability, transitive_reduction,
                                  upward_rank, width)
from tc_analyses.model.graph import build_graph
from tc_analyses.model.step_inference import infer_steps, with_steps
from tc_analyses.model.step_kinds import graph_of_kind, nodes_of_kind, step_kinds
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, Placement, PlacementProblem, Slot, Task
from tc_analyses.reader.fast import DfcTrace


# ---------------------------------------------------------------------------------------------
# Public entry points.

def plan_streams(graph: nx.DiGraph, *, device: str | None = None, weights: dict[Node, int] | None = None,
                 max_streams: int | None = None, sync_ns: int | None = None, lane: str | None = None,
                 unattributed_ns: int = 0, framework: str = PYTORCH) -> StreamPlan:
    """Assign the ops of `device` in `graph` to lanes (Nimble) and predict the speedup.

    Parameters
    ----------
    graph : nx.DiGraph
        A computation graph (:func:`~tc_analyses.model.graph.build_graph`) or any DAG whose nodes
        carry ``mean_ns`` (and optionally ``op``, ``name``, ``device``).
    device : str, optional
        Plan the nodes of this device; default: the device with the most work. Ignored when
        `weights` is given.
    weights : dict, optional
        node -> work in ns; only these nodes are planned (GPU plans: :func:`gpu_work`).
    max_streams : int, optional
        Lanes available; default 4 streams on a GPU, ``os.cpu_count()`` threads on a CPU.
    sync_ns : int, optional
        Cost of one synchronisation; default 2 µs (GPU streams), 5 µs (CPU threads).
    lane : {"stream", "thread"}, optional
        Default: "stream" unless the device is a CPU.
    framework : str, optional
        Whose words the advice uses (:mod:`~tc_analyses.analyses.frameworks`); default PyTorch's.
    """
    source = str(graph.graph.get(K.SOURCE, ""))
    where = source or "graph"
    position = {n: i for i, n in enumerate(graph)}  # edges that all go forward in it make a DAG: no search
    if (graph.number_of_nodes() and not all(position[u] < position[v] for u, v in graph.edges)
            and not nx.is_directed_acyclic_graph(graph)):
        cycle = nx.find_cycle(graph)
        raise GraphError(f"{where}: the computation graph has a cycle through nodes "
                         f"{[u for u, _ in cycle[:6]]}: stream assignment needs a DAG")
    if weights is None:
        device = device if device is not None else _busiest_device(graph)
        keep = {n: int(a.get(K.MEDIAN_NS) or a.get(K.MEAN_NS, 0)) for n, a in graph.nodes(data=True)
                if str(a.get(K.DEVICE, "")) == device}
        work_kind = "op duration"
    else:
        keep = {n: int(w) for n, w in weights.items() if n in graph}
        device = device or "gpu"
        work_kind = "gpu time launched"
    if not keep:
        known = sorted({str(a.get(K.DEVICE, "")) for _, a in graph.nodes(data=True)})
        if weights is None and known and device not in known:  # a typo, not a trace that cannot be planned
            raise ConfigurationError(f"{where}: no device {device!r} in the trace (its devices: {', '.join(known) or 'none'})")
        if graph.number_of_nodes() == 0 and Path(where).is_dir():
            from tc_analyses.analyses.trace_info import nothing_to_analyse

            raise AnalysisUnavailable(nothing_to_analyse(where))
        raise AnalysisUnavailable(f"{where}: no ops to plan on device {device!r}")
    lane = lane or (STREAM if TraceDevice.named(str(device)).is_gpu else THREAD)
    if lane not in (STREAM, THREAD):
        raise ConfigurationError(f"{where}: lane must be 'stream' or 'thread', not {lane!r}")
    if max_streams is None:
        max_streams = DEFAULT_GPU_STREAMS if lane == STREAM else (os.cpu_count() or 1)
    if max_streams < 1:
        raise ConfigurationError(f"{where}: max_streams must be at least 1, not {max_streams}")
    sync = DEFAULT_SYNC_NS[lane] if sync_ns is None else int(sync_ns)
    if sync < 0:
        raise ConfigurationError(f"{where}: sync_ns must not be negative, not {sync}")
    return _plan(graph, keep, source, str(device), lane, work_kind, max_streams, sync, unattributed_ns, framework)



NO_EDGES = ("no dfc:tensor_edge events, so the dependencies between ops are unknown (Kineto imports carry "
            "none): record with the PyTorch source or tracer.node to plan streams")


def plan_trace(trace: str | os.PathLike[str] | DfcTrace, *, device: str | None = None,
               max_streams: int | None = None, sync_ns: int | None = None, graph: nx.DiGraph | None = None,
               activity: Activity | None = None, cores: int | None = None) -> StreamPlan:
    """Read a trace and plan it: its GPU work when it has any (or `device` names a GPU), else the
    ops of `device` (default: the busiest) on threads, never more threads than the free cores give
    (`cores`, default this machine's, over the intra-op threads each op used)."""
    if not isinstance(trace, DfcTrace):
        from tc_analyses.reader import read_trace  # noqa: PLC0415 - callers with a DfcTrace skip it

        trace = read_trace(trace)
    activity = activity if activity is not None else read_activity(trace)
    inferred = None
    if not activity.steps and (inferred := infer_steps(activity)) is not None:
        # No step marks (`dfcompass record`, no code change): plan one iteration of the loop, not
        # the set-up and warm-up folded in with it.
        activity = with_steps(activity, inferred)
    if not len(trace.table("tensor_edge")) and (
            graph.number_of_nodes() if graph is not None and not step_kinds(activity)
            else nodes_of_kind(trace, activity)) > 1:
        # Decided before a graph is built (a Kineto import has no edges: a second of `analyze`'s time
        # there went into a graph for this message). Without edges every op looks independent: a
        # plan would promise parallelism that is not there.
        raise AnalysisUnavailable(f"{trace.path}: {NO_EDGES}")
    if step_kinds(activity):  # plan one kind of step, warm-up left out, as placement does
        graph, _ = graph_of_kind(trace, activity)
    graph = graph if graph is not None else build_graph(trace, activity)
    if graph.number_of_nodes() > 1 and not len(trace.table("tensor_edge")):
        # Without edges every op looks independent: a plan would promise parallelism that is not there.
        raise AnalysisUnavailable(f"{trace.path}: {NO_EDGES}")
    framework = framework_of(trace)
    gpu_devices = {op.device for op in activity.gpu}
    if activity.gpu and (device is None or device in gpu_devices):
        gpu, weights, unattributed = gpu_work(graph, activity, device)
        if weights:
            return plan_streams(graph, device=gpu, weights=weights, max_streams=max_streams, sync_ns=sync_ns,
                                lane=STREAM, unattributed_ns=unattributed, framework=framework)
        if device is not None:
            raise AnalysisUnavailable(f"{trace.path}: no op of the graph launched GPU work on {device}")
    limit, why = free_threads(trace, cores)
    plan = plan_streams(graph, device=device, max_streams=min(max_streams or limit, limit), sync_ns=sync_ns,
                        framework=framework)
    if max_streams is not None and max_streams > limit:
        why += f"; --max-streams {max_streams} was lowered to {limit}"
    fewer = (": the plan keeps one thread; to run chains side by side, give each fewer intra-op threads "
             f"({advice('intra_op_threads', framework)})" if limit == 1 else "")
    steps = (Finding("steps", 0, inferred.describe() + ": the plan covers one of them"),) if inferred else ()
    return replace(plan, findings=plan.findings + steps + (Finding("cores", 0, why + fewer),))


def free_threads(trace: DfcTrace, cores: int | None = None) -> tuple[int, str]:
    """How many inter-op threads can run at once: the cores (default: this machine's) over the
    intra-op threads each op already used (``torch_num_threads`` in the trace, else 1); and why."""
    from tc_analyses.analyses.roofline import recorded_threads

    cores = cores or os.cpu_count() or 1
    threads = recorded_threads(trace) or 1
    limit = max(1, cores // threads)
    return limit, (f"{cores} core(s) and {threads} intra-op thread(s) per op leave room for {limit} inter-op "
                   f"thread(s) at once")


def plan_placement(plan: StreamPlan) -> tuple[PlacementProblem, Placement]:
    """The plan as a placement problem (one device per lane) and its schedule, for the views.

    Tasks are numbered in recorded order; each task's ``actual_device`` is lane 0 (the single
    lane of the baseline), so the views show which ops the plan moves to other lanes.
    """
    index = {op.node: i for i, op in enumerate(plan.ops)}
    problem = _problem(plan.ops, plan.lane, plan.device, plan.streams, plan.sync_ns,
                       _plan_edges(plan, index))
    schedule = [Slot(index[op.node], _lane_name(plan.lane, op.stream), op.start_ns, op.end_ns) for op in plan.ops]
    schedule.sort(key=lambda s: (s.start_ns, s.task))
    assignment = {index[op.node]: _lane_name(plan.lane, op.stream) for op in plan.ops}
    return problem, Placement(assignment, plan.plan_ns, schedule, f"nimble {plan.lane}s")


# ---------------------------------------------------------------------------------------------
# The algorithm.

def _plan(graph: nx.DiGraph, keep: dict[Node, int], source: str, device: str, lane: str, work_kind: str,
          max_streams: int, sync: int, unattributed_ns: int, framework: str) -> StreamPlan:
    position = {n: i for i, n in enumerate(graph.nodes)}
    dag = decompose.contract(graph, keep)
    order = lexicographic_order(list(dag), dag, position.__getitem__)
    idx = {n: i for i, n in enumerate(order)}
    work = [keep[n] for n in order]
    n = len(order)
    full: dict[int, list[int]] = defaultdict(list)
    for u, successors in dag.items():
        full[idx[u]] += [idx[v] for v in successors]
    # Reachability bitsets cost n^2 bits: past REDUCTION_LIMIT ops the reduction is skipped and
    # matching runs on the recorded edges (still a valid plan; it may keep syncs the reduction would drop).
    reach = reachability(len(order), full) if len(order) <= decompose.REDUCTION_LIMIT else None
    red_edges = transitive_reduction(len(order), full, reach) if reach is not None else _distinct_edges(full, n)
    succ: dict[int, list[int]] = defaultdict(list)
    pred: dict[int, list[int]] = defaultdict(list)
    for u, v in red_edges:
        succ[u].append(v)
        pred[v].append(u)
    rank = upward_rank(range(n), work, succ)
    cp_tasks = critical_path(range(n), work, succ, rank=rank)
    nxt = decompose.match(n, succ, rank, cp_tasks)
    chains, chain_work = decompose.chains(n, nxt, work)
    stream_of_chain, streams = decompose.merge(chain_work, max_streams)
    stream = [0] * n
    chain_of = [0] * n
    for c, chain in enumerate(chains):
        for t in chain:
            stream[t], chain_of[t] = stream_of_chain[c], c
    lane_tasks: dict[int, list[int]] = defaultdict(list)
    for t in range(n):  # lanes run their ops in recorded order, a topological order
        lane_tasks[stream[t]].append(t)
    pos = [0] * n
    for tasks in lane_tasks.values():
        for p, t in enumerate(tasks):
            pos[t] = p
    cross = [(u, v) for u, v in red_edges if stream[u] != stream[v]]
    kept = decompose.prune_syncs(n, cross, stream, pos, lane_tasks, streams) if len(chains) > streams else cross
    kept_set = set(kept)

    adjacency = dict(graph.adjacency())  # node -> {successor: edge attributes}, the graph's own dicts

    def edge_bytes(u: int, v: int) -> int:
        """Bytes of the graph's edge between tasks u and v; 0 when their dependency passes through dropped ops."""
        attrs = adjacency[order[u]].get(order[v])
        return int(attrs.get(K.BYTES, 0)) if attrs is not None else 0

    node_attrs = dict(graph.nodes(data=True))
    ops = [str(node_attrs[n_].get(K.OP, "") or "") for n_ in order]
    names = [str(node_attrs[n_].get(K.NAME, "") or "") for n_ in order]
    # The simulator's run of the plan (the problem plan_placement gives, simulated), on lists.
    sim_edges = [(u, v) for u, v in red_edges if stream[u] == stream[v] or (u, v) in kept_set]
    try:
        planned = simulate_lanes(stream, work, sim_edges, sync, streams)
    except ValueError as exc:  # not expected: lanes follow a topological order
        raise AnalysisUnavailable(f"{source or 'graph'}: {exc}") from exc
    baseline_start = [0] * n
    clock = 0
    for t in range(n):
        baseline_start[t] = clock
        clock += work[t]
    baseline_ns = clock

    critical = set(cp_tasks)
    waits: dict[int, list[int]] = defaultdict(list)
    records: set[int] = set()
    for u, v in kept:
        waits[v].append(u)
        records.add(u)
    waits_for = {t: tuple(order[u] for u in sorted(producers)) for t, producers in waits.items()}
    planned_ops = PlannedOp.from_columns(
        order, ops, names, stream, pos, chain_of, work, planned.start_ns, planned.end_ns, baseline_start,
        [waits_for.get(t, ()) for t in range(n)], [t in records for t in range(n)], [t in critical for t in range(n)])
    sync_edges = tuple(SyncEdge(order[u], order[v], stream[u], stream[v], edge_bytes(u, v)) for u, v in sorted(kept))
    lanes = tuple(LaneSummary(s, _lane_name(lane, s), len(lane_tasks[s]), sum(work[t] for t in lane_tasks[s]),
                              tuple(c for c in range(len(chains)) if stream_of_chain[c] == s))
                  for s in range(streams))
    total = sum(work)
    cp_ns = sum(work[t] for t in cp_tasks)
    plan_ns = planned.makespan_ns
    speedup = baseline_ns / plan_ns if plan_ns > 0 else 1.0
    ideal = total / cp_ns if cp_ns > 0 else 1.0
    result = dict(
        source=source, device=device, lane=lane, work=work_kind, nodes=n, edges=sum(map(len, full.values())),
        components=decompose.weak_components(n, full),
        reduced_edges=len(red_edges), matching=len(nxt), chains=tuple(tuple(map(order.__getitem__, c)) for c in chains),
        streams=streams, max_streams=max_streams, sync_ns=sync, syncs=len(kept),
        redundant_syncs=len(cross) - len(kept), ops=planned_ops, sync_edges=sync_edges, lanes=lanes,
        dependencies=tuple((order[u], order[v]) for u, v in red_edges), total_work_ns=total,
        critical_path_ns=cp_ns, critical_path=tuple(order[t] for t in cp_tasks), ideal_speedup=ideal,
        width=width(n, reach) if reach is not None else None,
        peak_concurrency=decompose.peak_concurrency(n, work, pred), baseline_ns=baseline_ns,
        plan_ns=plan_ns, speedup=speedup, model=MODEL_NOTE.format(lane=lane, sync=sync),
        unattributed_ns=unattributed_ns)
    return StreamPlan(**result, findings=findings(result, planned_ops, framework))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The problem handed to the simulator and to the views.

def _lane_name(lane: str, s: int) -> str:
    return f"{lane} {s}"


def _problem_from(protos: list[tuple[str, str, int]], lane: str, device: str, streams: int, sync: int,
                  edges: dict[tuple[int, int], int]) -> PlacementProblem:
    names = [_lane_name(lane, s) for s in range(streams)]
    tasks = [Task(i, label, op, names[0]) for i, (op, label, _) in enumerate(protos)]
    devices = [Device(name, f"{device} {lane}") for name in names]
    measured = [Cost(w, CostSource.MEASURED) for _, _, w in protos]  # one per task, shared by its lanes
    costs = {(i, name): cost for i, cost in enumerate(measured) for name in names}
    # bytes never count: a sync costs the same whatever the tensor (bytes_per_ns infinite)
    link = Link(float(sync), float("inf"), f"sync model: {sync} ns per cross-{lane} dependency")
    links = {(a, b): link for a in names for b in names if a != b}
    return PlacementProblem(tasks, devices, costs, dict(edges), links)


def _problem(ops: tuple[PlannedOp, ...], lane: str, device: str, streams: int, sync: int,
             edges: dict[tuple[int, int], int]) -> PlacementProblem:
    protos = [(op.op, f"{op.name} ({op.op})" if op.name and op.name != op.op else op.op or str(op.node), op.work_ns)
              for op in ops]
    return _problem_from(protos, lane, device, streams, sync, edges)


def _plan_edges(plan: StreamPlan, index: dict[Node, int]) -> dict[tuple[int, int], int]:
    """Dependencies the plan keeps: same-lane reduced edges and the syncs."""
    lane = {op.node: op.stream for op in plan.ops}
    edges = {(index[u], index[v]): 0 for u, v in plan.dependencies if lane[u] == lane[v]}
    edges.update({(index[e.producer], index[e.consumer]): e.bytes for e in plan.sync_edges})
    return edges


def _distinct_edges(successors: dict[int, list[int]], n: int) -> list[tuple[int, int]]:
    """The distinct ``(u, v)`` of `successors` (tasks ``0..n-1``), sorted: one sort of integer keys."""
    import numpy as np

    lists = list(successors.values())
    tails = np.repeat(np.fromiter(successors.keys(), np.int64, len(lists)), [len(vs) for vs in lists])
    heads = np.fromiter(itertools.chain.from_iterable(lists), np.int64, len(tails))
    keys = decompose.distinct_sorted(tails * max(n, 1) + heads)
    return list(zip((keys // max(n, 1)).tolist(), (keys % max(n, 1)).tolist()))


def _busiest_device(graph: nx.DiGraph) -> str:
    work: dict[str, int] = defaultdict(int)
    for _, a in graph.nodes(data=True):
        work[str(a.get(K.DEVICE, ""))] += int(a.get(K.MEAN_NS, 0))
    return max(sorted(work), key=lambda d: work[d]) if work else ""
