"""Plan the ops of one device onto lanes and predict the speedup (see the package docstring)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from dataclasses import replace
from collections.abc import Sequence
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.parallelism import chains as decompose
from tc_analyses.analyses.parallelism import longest_paths, plan_dag
from tc_analyses.analyses.parallelism.plan_dag import PlanDag
from tc_analyses.analyses.parallelism.findings import findings
from tc_analyses.analyses.parallelism.gpu import gpu_work
from tc_analyses.analyses.parallelism.lane_sim import simulate_lanes
from tc_analyses.analyses.parallelism.result import (DEFAULT_GPU_STREAMS, DEFAULT_SYNC_NS, MODEL_NOTE, STREAM, THREAD,
                                                     LaneSummary, Node, PlannedOp, PlannedOps, StreamPlan,
                                                     SyncEdge)
from tc_analyses.analyses.result import Finding
from tc_analyses.errors import AnalysisUnavailable, ConfigurationError, GraphError
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.activity import Device as TraceDevice
from tc_analyses.model.dag import reachability, transitive_reduction, upward_rank, width
from tc_analyses.model.graph_table import GraphTable, graph_table
from tc_analyses.model.step_inference import infer_steps, with_steps
from tc_analyses.model.step_kinds import nodes_of_kind, step_kinds, table_of_kind
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, Placement, PlacementProblem, Slot, Task
from tc_analyses.reader.fast import DfcTrace

if TYPE_CHECKING:  # networkx takes 0.3 s to import; a plan on the graph's columns never needs it
    import networkx as nx


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
    import networkx as nx

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
    lane, max_streams, sync = _settings(where, str(device), lane, max_streams, sync_ns)
    return _plan(plan_dag.of_graph(graph, keep), source, str(device), lane, work_kind, max_streams, sync, unattributed_ns,
                 framework)


def _settings(where: str, device: str, lane: str | None, max_streams: int | None,
              sync_ns: int | None) -> tuple[str, int, int]:
    """The lane kind, lanes and sync cost: checked, defaults filled in."""
    lane = lane or (STREAM if TraceDevice.named(device).is_gpu else THREAD)
    if lane not in (STREAM, THREAD):
        raise ConfigurationError(f"{where}: lane must be 'stream' or 'thread', not {lane!r}")
    if max_streams is None:
        max_streams = DEFAULT_GPU_STREAMS if lane == STREAM else (os.cpu_count() or 1)
    if max_streams < 1:
        raise ConfigurationError(f"{where}: max_streams must be at least 1, not {max_streams}")
    sync = DEFAULT_SYNC_NS[lane] if sync_ns is None else int(sync_ns)
    if sync < 0:
        raise ConfigurationError(f"{where}: sync_ns must not be negative, not {sync}")
    return lane, max_streams, sync


def _plan_table(table: GraphTable, device: str | None, max_streams: int | None, sync_ns: int | None,
                framework: str) -> StreamPlan | None:
    """:func:`plan_streams` on the graph's columns, without making the graph: when every node runs
    on `device` (default: the only one) and every edge goes forward (the graph is a DAG, its node
    order a topological order). None otherwise: the caller plans the networkx graph."""
    nodes = table.nodes
    codes = np.unique(nodes.device)
    intra = table.intra
    if len(codes) != 1 or (device is not None and table.texts[int(codes[0])] != device) \
            or not bool(np.all(intra.producer < intra.consumer)):
        return None
    device = table.texts[int(codes[0])]
    lane, max_streams, sync = _settings(table.source or "graph", device, None, max_streams, sync_ns)
    mean, median = nodes.mean_ns(), nodes.median_ns()
    return _plan(plan_dag.of_table(table, np.where(median != 0, median, mean)), table.source, device, lane,
                 "op duration", max_streams, sync, 0, framework)


WORK_LIMIT_NS = 1 << 62

NO_EDGES = ("no dfc:tensor_edge events, so the dependencies between ops are unknown (Kineto imports carry "
            "none): record with the PyTorch source or tracer.node to plan streams")


def plan_trace(trace: str | os.PathLike[str] | DfcTrace, *, device: str | None = None,
               max_streams: int | None = None, sync_ns: int | None = None,
               graph: nx.DiGraph | GraphTable | None = None, activity: Activity | None = None,
               cores: int | None = None) -> StreamPlan:
    """Read a trace and plan it: its GPU work when it has any (or `device` names a GPU), else the
    ops of `device` (default: the busiest) on threads, never more threads than the free cores give
    (`cores`, default this machine's, over the intra-op threads each op used). `graph`: the trace's
    computation graph when the caller has it, as networkx or as columns (a one-device CPU plan
    reads the columns and makes no graph)."""
    if not isinstance(trace, DfcTrace):
        from tc_analyses.reader import read_trace  # noqa: PLC0415 - callers with a DfcTrace skip it

        trace = read_trace(trace)
    activity = activity if activity is not None else read_activity(trace)
    inferred = None
    if not activity.steps and (inferred := infer_steps(activity)) is not None:
        # No step marks (`dfcompass record`, no code change): plan one iteration of the loop, not
        # the set-up and warm-up folded in with it.
        activity = with_steps(activity, inferred)
    table = graph if isinstance(graph, GraphTable) else None
    network = graph if not isinstance(graph, GraphTable) else None
    if not len(trace.table("tensor_edge")) and (
            _node_count(network, table) if graph is not None and not step_kinds(activity)
            else nodes_of_kind(trace, activity)) > 1:
        # Decided before a graph is built (a Kineto import has no edges: a second of `analyze`'s time
        # there went into a graph for this message). Without edges every op looks independent: a
        # plan would promise parallelism that is not there.
        raise AnalysisUnavailable(f"{trace.path}: {NO_EDGES}")
    if step_kinds(activity):  # plan one kind of step, warm-up left out, as placement does
        (table, _), network = table_of_kind(trace, activity), None
    elif network is None and table is None:
        table = graph_table(trace, activity)
    if _node_count(network, table) > 1 and not len(trace.table("tensor_edge")):
        # Without edges every op looks independent: a plan would promise parallelism that is not there.
        raise AnalysisUnavailable(f"{trace.path}: {NO_EDGES}")
    framework = framework_of(trace)
    gpu_devices = {op.device for op in activity.gpu}
    if activity.gpu and (device is None or device in gpu_devices):
        network = network if network is not None else table.to_networkx()  # type: ignore[union-attr]
        gpu, weights, unattributed = gpu_work(network, activity, device)
        if weights:
            return plan_streams(network, device=gpu, weights=weights, max_streams=max_streams, sync_ns=sync_ns,
                                lane=STREAM, unattributed_ns=unattributed, framework=framework)
        if device is not None:
            raise AnalysisUnavailable(f"{trace.path}: no op of the graph launched GPU work on {device}")
    limit, why = free_threads(trace, cores)
    lanes = min(max_streams or limit, limit)
    plan = _plan_table(table, device, lanes, sync_ns, framework) if network is None and table is not None else None
    if plan is None:  # more than one device, or edges that go back: the graph's own path
        network = network if network is not None else table.to_networkx()  # type: ignore[union-attr]
        plan = plan_streams(network, device=device, max_streams=lanes, sync_ns=sync_ns, framework=framework)
    if max_streams is not None and max_streams > limit:
        why += f"; --max-streams {max_streams} was lowered to {limit}"
    fewer = (": the plan keeps one thread; to run chains side by side, give each fewer intra-op threads "
             f"({advice('intra_op_threads', framework)})" if limit == 1 else "")
    steps = (Finding("steps", 0, inferred.describe() + ": the plan covers one of them"),) if inferred else ()
    return replace(plan, findings=plan.findings + steps + (Finding("cores", 0, why + fewer),))


def _node_count(network: nx.DiGraph | None, table: GraphTable | None) -> int:
    return network.number_of_nodes() if network is not None else len(table) if table is not None else 0


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

def _plan(dag: PlanDag, source: str, device: str, lane: str, work_kind: str,
          max_streams: int, sync: int, unattributed_ns: int, framework: str) -> StreamPlan:
    order, work = dag.order, dag.work
    n = len(order)
    if sum(work) >= WORK_LIMIT_NS:  # the sums below are int64
        raise AnalysisUnavailable(f"{source or 'graph'}: the ops' work adds up to {sum(work)} ns, past 2^62 ns "
                                  "(146 years): damaged durations")
    work_column = np.asarray(work, dtype=np.int64)
    if len(work_column) and int(work_column.min()) < 0:  # durations that end before they start
        raise AnalysisUnavailable(f"{source or 'graph'}: an op's work is negative ({int(work_column.min())} ns): "
                                  "damaged durations")
    # Reachability bitsets cost n^2 bits: past REDUCTION_LIMIT ops the reduction is skipped and
    # matching runs on the recorded edges (still a valid plan; it may keep syncs the reduction would drop).
    reach = reachability(n, dag.successors()) if n <= decompose.REDUCTION_LIMIT else None
    reduced = _reduced_edges(dag, reach)
    level = longest_paths.levels(n, *reduced)
    succ: _Successors | list[list[int]]
    if level is not None:  # shallow for its size: the longest paths a level at a time
        succ = _Successors(*reduced, n)
        rank = longest_paths.upward_ranks(level, work_column, *reduced)
        peak = decompose.peak_of(longest_paths.earliest_starts(level, work_column, *reduced), work_column)
    else:
        succ = plan_dag.successor_lists(n, *reduced)
        rank = np.array(list(upward_rank(range(n), work, succ).values())[::-1])  # it lists the tasks last first
        peak = decompose.peak_concurrency(work, succ)
    cp_tasks = _critical_path(rank.tolist(), succ, reduced[1])
    nxt = decompose.match(n, reduced, rank, cp_tasks)
    chains = decompose.chains(nxt, work_column)
    stream_of_chain, streams = decompose.merge(chains.work, max_streams)
    chain_of = chains.of_task
    stream = np.asarray(stream_of_chain, dtype=np.int64)[chain_of]
    per_lane = np.bincount(stream, minlength=streams)
    by_lane = np.argsort(stream, kind="stable")  # lanes run their ops in recorded order, a topological order
    pos = np.empty(n, dtype=np.int64)
    pos[by_lane] = np.arange(n) - np.repeat(np.cumsum(per_lane) - per_lane, per_lane)
    same_lane = stream[reduced[0]] == stream[reduced[1]]
    cross = reduced[0][~same_lane], reduced[1][~same_lane]
    kept = decompose.prune_syncs(cross, stream, pos, streams) if len(chains) > streams else cross
    # The simulator's run of the plan (the problem plan_placement gives, simulated), on lists.
    simulated = same_lane | np.isin(reduced[0] * max(n, 1) + reduced[1], kept[0] * max(n, 1) + kept[1])
    stream_list = stream.tolist()
    try:
        planned = simulate_lanes(stream, work_column, reduced[0][simulated], reduced[1][simulated], sync, streams)
    except ValueError as exc:  # not expected: lanes follow a topological order
        raise AnalysisUnavailable(f"{source or 'graph'}: {exc}") from exc
    baseline_ns = int(work_column.sum())

    waits: list[tuple[Node, ...]] = [()] * n
    kept_u, kept_v = kept[0].tolist(), kept[1].tolist()
    for v, producers in itertools.groupby(sorted(zip(kept_v, kept_u)), key=lambda pair: pair[0]):
        waits[v] = tuple(order[u] for _, u in producers)
    records = np.zeros(n, dtype=bool)
    records[kept[0]] = True
    critical = np.zeros(n, dtype=bool)
    critical[np.asarray(cp_tasks, dtype=np.int64)] = True
    planned_ops = PlannedOps(
        list(order), dag.ops, dag.names, stream_list, pos.tolist(), chain_of.tolist(), work, planned.start_ns,
        planned.end_ns, (np.cumsum(work_column) - work_column).tolist(), waits, records.tolist(), critical.tolist())
    sync_edges = tuple(SyncEdge(order[u], order[v], stream_list[u], stream_list[v], size)
                       for u, v, size in zip(kept_u, kept_v, dag.edge_bytes(*kept)))
    lane_work = np.zeros(streams, dtype=np.int64)
    np.add.at(lane_work, stream, work_column)
    lane_of_chain = np.asarray(stream_of_chain, dtype=np.int64)
    lanes = tuple(LaneSummary(s, _lane_name(lane, s), int(per_lane[s]), int(lane_work[s]),
                              tuple(np.flatnonzero(lane_of_chain == s).tolist())) for s in range(streams))
    cp_ns = sum(work[t] for t in cp_tasks)
    plan_ns = planned.makespan_ns
    speedup = baseline_ns / plan_ns if plan_ns > 0 else 1.0
    ideal = baseline_ns / cp_ns if cp_ns > 0 else 1.0
    result = dict(
        source=source, device=device, lane=lane, work=work_kind, nodes=n, edges=len(dag.tails),
        components=decompose.weak_components(n, dag.tails, dag.heads),
        reduced_edges=len(reduced[0]), matching=int(np.count_nonzero(nxt >= 0)), chains=_chain_nodes(order, chains),
        streams=streams, max_streams=max_streams, sync_ns=sync, syncs=len(kept_u),
        redundant_syncs=len(cross[0]) - len(kept_u), ops=planned_ops, sync_edges=sync_edges, lanes=lanes,
        dependencies=tuple(zip(_nodes(order, reduced[0]), _nodes(order, reduced[1]))), total_work_ns=baseline_ns,
        critical_path_ns=cp_ns, critical_path=tuple(order[t] for t in cp_tasks), ideal_speedup=ideal,
        width=width(n, reach) if reach is not None else None,
        peak_concurrency=peak,
        baseline_ns=baseline_ns, plan_ns=plan_ns, speedup=speedup, model=MODEL_NOTE.format(lane=lane, sync=sync),
        unattributed_ns=unattributed_ns)
    return StreamPlan(**result, findings=findings(result, planned_ops, framework))  # type: ignore[arg-type]


def _reduced_edges(dag: PlanDag, reach: list[int] | None) -> decompose.Edges:
    """The transitive reduction's edges (all distinct edges without `reach`), sorted by tail then head."""
    n = len(dag.order)
    if reach is not None:
        pairs = transitive_reduction(n, dag.successors(), reach)
        return (np.fromiter((u for u, _ in pairs), np.int64, len(pairs)),
                np.fromiter((v for _, v in pairs), np.int64, len(pairs)))
    keys = decompose.distinct_sorted(np.sort(dag.tails * max(n, 1) + dag.heads))
    return keys // max(n, 1), keys % max(n, 1)


def _critical_path(rank: list[int], succ: "_Successors | list[list[int]]", heads: np.ndarray) -> list[int]:
    """:func:`~tc_analyses.model.dag.critical_path` of tasks ``0..n-1`` in order, from their ranks:
    the source of highest rank, then each time the successor of highest rank (ties: the first)."""
    source = np.ones(len(rank), dtype=bool)
    source[heads] = False
    sources = np.flatnonzero(source)
    if not len(sources):
        return []
    t = int(sources[np.argmax(np.asarray(rank)[sources])])  # argmax: the first of the highest
    path = [t]
    while succ[t]:
        t = max(succ[t], key=lambda s: (rank[s], -s))
        path.append(t)
    return path


class _Successors:
    """Each task's successors, read from edges sorted by tail then head (no list per task)."""

    def __init__(self, tails: np.ndarray, heads: np.ndarray, n: int) -> None:
        self._heads = heads
        self._offsets = np.searchsorted(tails, np.arange(n + 1)).tolist()

    def __getitem__(self, task: int) -> list[int]:
        found: list[int] = self._heads[self._offsets[task]:self._offsets[task + 1]].tolist()
        return found


def _nodes(order: Sequence[Node], tasks: np.ndarray) -> list[Node]:
    if isinstance(order, range):  # task t is node t
        return tasks.tolist()
    return [order[t] for t in tasks.tolist()]


def _chain_nodes(order: Sequence[Node], chains: decompose.Chains) -> tuple[tuple[Node, ...], ...]:
    """Each chain's graph nodes, heaviest chain first."""
    nodes = _nodes(order, chains.tasks)
    ends = np.cumsum(chains.sizes).tolist()
    return tuple(tuple(nodes[a:b]) for a, b in zip([0] + ends, ends))


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


def _problem(ops: Sequence[PlannedOp], lane: str, device: str, streams: int, sync: int,
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


def _busiest_device(graph: nx.DiGraph) -> str:
    work: dict[str, int] = defaultdict(int)
    for _, a in graph.nodes(data=True):
        work[str(a.get(K.DEVICE, ""))] += int(a.get(K.MEAN_NS, 0))
    return max(sorted(work), key=lambda d: work[d]) if work else ""
