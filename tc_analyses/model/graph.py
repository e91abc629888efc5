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

from collections.abc import Collection
from typing import Hashable

import networkx as nx

from tc_analyses.errors import GraphError
from tc_analyses.model import dag
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity
from tc_analyses.model.graph_table import graph_table
from tc_analyses.reader.fast import DfcTrace


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
    return graph_table(trace, activity, steps, executions).to_networkx()


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
