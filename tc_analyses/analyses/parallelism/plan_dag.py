"""The DAG a stream plan is made on, from a networkx graph or from the graph's columns.

Tasks are ``0..n-1`` in a topological order; the dependencies are the contracted graph's edges
(ops left out joined through), each once, as two integer columns. The columns path makes no
Python object per node or edge: on a 1M-event trace it is what lets ``analyze`` skip networkx.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tc_analyses.analyses.parallelism import chains as decompose
from tc_analyses.model import graph_keys as K
from tc_analyses.model.dag import lexicographic_order
from tc_analyses.model.graph_table import GraphTable

if TYPE_CHECKING:  # networkx takes 0.3 s to import; a plan on the graph's columns never needs it
    import networkx as nx

Array = np.ndarray[Any, Any]
Node = Any


@dataclass(frozen=True)
class PlanDag:
    """Tasks in a topological order, their graph nodes, work, op and name, and the dependencies."""

    order: Sequence[Node]  # graph node of each task (a range: task t is node t)
    work: list[int]
    tails: Array  # the contracted edges tails[i] -> heads[i], in task numbers, each once
    heads: Array
    ops: list[str]
    names: list[str]
    edge_bytes: Callable[[Array, Array], list[int]]  # bytes of the graph's edge per task pair (0: none)

    def successors(self) -> list[list[int]]:
        """Each task's successors."""
        return successor_lists(len(self.order), self.tails, self.heads)


def successor_lists(n: int, tails: Array, heads: Array) -> list[list[int]]:
    """Per task ``0..n-1``, the heads of its edges ``tails[i] -> heads[i]``, in the edges' order."""
    by_tail = np.argsort(tails, kind="stable")
    offsets = np.searchsorted(tails[by_tail], np.arange(n + 1)).tolist()
    found = heads[by_tail].tolist()
    return [found[offsets[t]:offsets[t + 1]] for t in range(n)]


def of_graph(graph: nx.DiGraph, keep: dict[Node, int]) -> PlanDag:
    """The kept nodes of `graph`, contracted and put in the graph's order where the edges allow."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    dag = decompose.contract(graph, keep)
    order = lexicographic_order(list(dag), dag, position.__getitem__)
    idx = {n: i for i, n in enumerate(order)}
    lists = list(dag.values())
    tails = np.repeat(np.fromiter((idx[u] for u in dag), np.int64, len(lists)), [len(vs) for vs in lists])
    heads = np.fromiter((idx[v] for v in itertools.chain.from_iterable(lists)), np.int64, len(tails))
    adjacency = dict(graph.adjacency())  # node -> {successor: edge attributes}, the graph's own dicts

    def edge_bytes(us: Array, vs: Array) -> list[int]:
        """0 where the dependency passes through dropped ops (no edge of the graph joins them)."""
        found = (adjacency[order[u]].get(order[v]) for u, v in zip(us.tolist(), vs.tolist()))
        return [int(attrs.get(K.BYTES, 0)) if attrs is not None else 0 for attrs in found]

    node_attrs = dict(graph.nodes(data=True))
    return PlanDag(order, [keep[n] for n in order], tails, heads,
                   [str(node_attrs[n].get(K.OP, "") or "") for n in order],
                   [str(node_attrs[n].get(K.NAME, "") or "") for n in order], edge_bytes)


def of_table(table: GraphTable, work: Array) -> PlanDag:
    """Every node of `table` in node order, which is a topological order when every edge goes
    forward (the caller checks): what :func:`of_graph` gives for its networkx graph."""
    n = len(table)
    intra = table.intra
    keys = intra.producer * max(n, 1) + intra.consumer  # the pairs are distinct
    by_key = np.argsort(keys)

    def edge_bytes(us: Array, vs: Array) -> list[int]:
        if not len(keys):
            return [0] * len(us)
        wanted = us * max(n, 1) + vs
        at = np.minimum(np.searchsorted(keys[by_key], wanted), len(keys) - 1)
        found = keys[by_key][at] == wanted
        return np.where(found, intra.bytes[by_key][at], 0).tolist()

    return PlanDag(range(n), work.tolist(), intra.producer, intra.consumer, table.text_of(table.nodes.op),
                   table.text_of(table.nodes.name), edge_bytes)
