"""The computation graph of a trace: dataflow nodes aggregated across steps, as an ``nx.DiGraph``.

A graph node is one op instance of a step: executions are keyed by ``(name, op, device, k)``
where ``k`` counts the earlier executions with the same ``(name, op, device)`` in the same step,
so the k-th ``conv`` of every step maps to one node. Nodes recorded outside any step (step
``4294967295``) form a step of their own. A graph edge aggregates the ``dfc:tensor_edge`` events
between the executions of two nodes.

Only edges whose producer and consumer run in the same step enter the graph: an edge between
steps (an optimizer writing a weight that the next forward reads) would close a cycle once the
steps are folded onto each other, and it says nothing about the critical path of one step. Such
edges are kept, aggregated the same way, in the graph attribute ``cross_step_edges``.

Attribute keys are the constants of :mod:`tc_analyses.model.graph_keys`; ``docs/graph.md``
describes them.

Examples
--------
>>> import networkx as nx
>>> g = nx.DiGraph()
>>> g.add_node("a", mean_ns=5); g.add_node("b", mean_ns=7); g.add_node("c", mean_ns=1)
>>> g.add_edge("a", "b"); g.add_edge("a", "c")
>>> critical_path(g)
['a', 'b']
>>> slack(g)
{'a': 0, 'b': 0, 'c': 6}
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Hashable

import networkx as nx

from tc_analyses.errors import GraphError
from tc_analyses.model import dag
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.graph_keys import EdgeKind
from tc_analyses.reader.fast import DfcTrace

NodeKey = tuple[str, str, str, int]  # (name, op, device, occurrence in its step)


@dataclass
class _NodeAcc:
    """Executions gathered for one graph node while the trace is scanned."""

    node: int
    key: NodeKey
    executions: int = 0
    durations: list[int] = field(default_factory=list)
    unmatched: int = 0  # executions without a dfc:node_end
    shapes: str = ""
    dtypes: str = ""


@dataclass
class _EdgeAcc:
    """Tensor edges gathered for one (producer node, consumer node) pair."""

    per_step: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # step -> bytes
    count: int = 0


def _node_args(trace: DfcTrace) -> dict[int, tuple[str, str]]:
    table = trace.table("node_args")
    shapes, dtypes = table.text("shapes").tolist(), table.text("dtypes").tolist()
    return {nid: (s or "", d or "") for nid, s, d in zip(table["node_id"].tolist(), shapes, dtypes)}


def build_graph(trace: DfcTrace, activity: Activity | None = None, steps: Collection[int] | None = None,
                executions: Collection[int] | None = None) -> nx.DiGraph:
    """Build the computation graph of `trace`.

    Parameters
    ----------
    trace : DfcTrace
        A trace read by :func:`tc_analyses.reader.read_trace`.
    activity : Activity, optional
        The trace's :func:`~tc_analyses.model.activity.read_activity`, when the caller has it:
        node durations and device names come from its paired node runs. Read when not given.
    steps : collection of int, optional
        Only the executions of these steps (one step kind, warm-up left out:
        :mod:`tc_analyses.model.step_kinds`).
    executions : collection of int, optional
        Only these executions (node ids): an analysis window (:mod:`tc_analyses.model.window`).

    Returns
    -------
    nx.DiGraph
        Nodes are integers ``0..n-1`` in order of first execution, with the node attributes of
        :mod:`~tc_analyses.model.graph_keys`; edges carry the edge attributes. ``g.graph`` holds
        ``execution_nodes`` (execution ``node_id`` -> graph node), ``cross_step_edges`` and
        ``source``.

    Notes
    -----
    The graph is a DAG when every step runs the same ops in the same order; a step whose
    structure differs could fold into a cycle, which :func:`critical_path` and :func:`slack`
    report as a :class:`~tc_analyses.errors.GraphError`.
    """
    if activity is None:
        activity = read_activity(trace)
    args = _node_args(trace)
    runs = {run.node_id: run for run in activity.nodes}
    begins = trace.table("node_begin")
    accs: dict[NodeKey, _NodeAcc] = {}
    execution_nodes: dict[int, int] = {}
    execution_step: dict[int, int] = {}
    seen: dict[tuple[int, str, str, str], int] = defaultdict(int)  # (step, name, op, device) -> count
    spare_args: dict[NodeKey, tuple[str, str]] = {}  # shapes of executions outside `steps`
    # Every execution counts, finished or not (an execution without its end is unmatched); the
    # table is sorted by timestamp, so occurrence indexes follow start order within a step.
    for nid, op, name, dev, step in zip(begins["node_id"].tolist(), begins.text("op").tolist(),
                                        begins.text("name").tolist(), begins["device"].tolist(),
                                        begins["step"].tolist()):
        if executions is not None and nid not in executions:
            continue
        op, name = op or "", name or ""
        device = activity.device(dev).name
        run = runs.get(nid)
        if run is not None:
            step = run.step  # the activity's numbering: recorded, or inferred (model.step_inference)
        k = seen[(step, name, op, device)]
        seen[(step, name, op, device)] = k + 1
        key = (name, op, device, k)
        if steps is not None and step not in steps:
            if nid in args:  # shapes recorded once (a warm-up step) still describe the node
                spare_args.setdefault(key, args[nid])
            continue
        acc = accs.get(key)
        if acc is None:
            acc = accs[key] = _NodeAcc(len(accs), key)
        acc.executions += 1
        if run is None:
            acc.unmatched += 1
        else:
            acc.durations.append(run.duration)
        if nid in args and not acc.shapes:
            acc.shapes, acc.dtypes = args[nid]
        execution_nodes[nid] = acc.node
        execution_step[nid] = step

    g: nx.DiGraph[int] = nx.DiGraph()
    for acc in accs.values():
        if not acc.shapes and acc.key in spare_args:
            acc.shapes, acc.dtypes = spare_args[acc.key]
        name, op, device, k = acc.key
        durations = acc.durations
        g.add_node(acc.node, **{
            K.OP: op, K.NAME: name, K.DEVICE: device, K.OCCURRENCE: k, K.EXECUTIONS: acc.executions,
            K.DURATIONS_NS: durations,
            K.MEAN_NS: round(sum(durations) / len(durations)) if durations else 0,
            K.MEDIAN_NS: round(statistics.median(durations)) if durations else 0,
            K.P10_NS: _quantile(durations, 0.1), K.P90_NS: _quantile(durations, 0.9),
            K.MIN_NS: min(durations, default=0), K.MAX_NS: max(durations, default=0),
            # Measured on its own device only when every execution has its end event.
            K.MEASURED: {device: bool(durations) and acc.unmatched == 0},
            K.INPUT_SHAPES: acc.shapes, K.INPUT_DTYPES: acc.dtypes,
        })

    intra: dict[tuple[int, int], _EdgeAcc] = defaultdict(_EdgeAcc)
    cross: dict[tuple[int, int], _EdgeAcc] = defaultdict(_EdgeAcc)
    edges = trace.table("tensor_edge")
    for producer, consumer, nbytes in zip(edges["producer"].tolist(), edges["consumer"].tolist(),
                                          edges["bytes"].tolist()):
        if producer not in execution_nodes or consumer not in execution_nodes:
            continue  # an end of the edge was not recorded (lost events, partial trace)
        u, v = execution_nodes[producer], execution_nodes[consumer]
        step = execution_step[consumer]
        same_step = execution_step[producer] == step
        if same_step and u == v:
            continue  # an execution feeding itself carries no dependency
        acc_e = (intra if same_step else cross)[(u, v)]
        acc_e.per_step[step] += nbytes
        acc_e.count += 1

    for (u, v), acc_e in intra.items():
        g.add_edge(u, v, **_edge_attrs(g, u, v, acc_e))
    g.graph[K.EXECUTION_NODES] = execution_nodes
    g.graph[K.CROSS_STEP_EDGES] = [{"src": u, "dst": v, **_edge_attrs(g, u, v, acc_e)}
                                   for (u, v), acc_e in cross.items()]
    g.graph[K.SOURCE] = str(trace.path)
    return g


def _quantile(values: list[int], q: float) -> int:
    """The `q` quantile of `values` (nearest rank on the sorted values); 0 for none."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _edge_attrs(g: nx.DiGraph, u: int, v: int, acc: _EdgeAcc) -> dict[str, Any]:
    src, dst = g.nodes[u][K.DEVICE], g.nodes[v][K.DEVICE]
    return {
        K.KIND: EdgeKind.DATA if src == dst else EdgeKind.TRANSFER,
        # Several tensors may flow between the same two nodes in a step: sum them, then take the
        # largest step, so a placement never underestimates a transfer.
        K.BYTES: max(acc.per_step.values(), default=0),
        K.COUNT: acc.count,
        K.SRC_DEVICE: src,
        K.DST_DEVICE: dst,
    }


def _check_dag(g: nx.DiGraph) -> None:
    """networkx-style precondition: raise GraphError naming a cycle if `g` is not a DAG."""
    if nx.is_directed_acyclic_graph(g):
        return
    cycle = nx.find_cycle(g)
    nodes = " -> ".join(_describe(g, u) for u, _ in cycle[:6])
    more = " ..." if len(cycle) > 6 else ""
    raise GraphError(f"the computation graph has a cycle ({nodes}{more}); "
                     "critical path and slack need a directed acyclic graph")


def _describe(g: nx.DiGraph, node: Hashable) -> str:
    attrs = g.nodes[node]
    if K.OP in attrs:
        return f"{attrs.get(K.NAME, '')}[{attrs[K.OP]}]"
    return str(node)


def _weights(g: nx.DiGraph, weight: str) -> dict[Hashable, int]:
    return {n: int(w) for n, w in g.nodes(data=weight, default=0)}  # type: ignore[call-overload]  # networkx's stubs type data=str as the whole dict


def critical_path(g: nx.DiGraph, weight: str = K.MEAN_NS) -> list[Hashable]:
    """The longest path of `g`, where a path is as long as the sum of its nodes' durations.

    Parameters
    ----------
    g : nx.DiGraph
        A computation graph (or any DAG whose nodes carry `weight`).
    weight : str
        Node attribute holding the duration in ns (missing = 0).

    Returns
    -------
    list
        The nodes of the path, in order; empty for an empty graph.

    Raises
    ------
    GraphError
        If `g` has a cycle.
    """
    _check_dag(g)
    w = _weights(g, weight)
    # A topological order that keeps g's node order where the edges allow; between equally long
    # paths the path follows the node that comes first in it, the same way every run.
    position = {n: i for i, n in enumerate(g)}
    order = list(nx.lexicographical_topological_sort(g, key=position.__getitem__))
    return dag.critical_path(order, w, {n: list(g.successors(n)) for n in g})


def slack(g: nx.DiGraph, weight: str = K.MEAN_NS) -> dict[Hashable, int]:
    """Slack of each node: latest start - earliest start, in ns, keeping the makespan.

    Nodes start as soon as all their predecessors end (unlimited resources). A node on a
    critical path has slack 0; any other node can start that much later without delaying the end.

    Raises
    ------
    GraphError
        If `g` has a cycle.
    """
    _check_dag(g)
    w = _weights(g, weight)
    order = list(nx.topological_sort(g))
    earliest: dict[Hashable, int] = {}
    for n in order:
        earliest[n] = max((earliest[p] + w[p] for p in g.predecessors(n)), default=0)
    makespan = max((earliest[n] + w[n] for n in order), default=0)
    latest: dict[Hashable, int] = {}
    for n in reversed(order):
        latest[n] = min((latest[s] for s in g.successors(n)), default=makespan) - w[n]
    return {n: latest[n] - earliest[n] for n in g}
