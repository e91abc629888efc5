"""The computation graph as columns: what :func:`~tc_analyses.model.graph.build_graph` puts in an
``nx.DiGraph``, before it does.

networkx holds a dict per node and per edge: on a 1M-event trace making them takes 3 to 5 s, more
than reading the trace. An analysis that walks the graph's arrays (the stream plan of a one-device
trace) reads a :class:`GraphTable` instead and never makes them; :meth:`GraphTable.to_networkx` is
the graph that ``build_graph`` returns, made from the same columns.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tc_analyses.model import graph_columns
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.graph_columns import EdgeColumns, NodeColumns
from tc_analyses.reader.fast import DfcTrace

if TYPE_CHECKING:  # networkx loads when a graph is made
    import networkx as nx

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class GraphTable:
    """Nodes ``0..n-1`` in order of first execution, their columns and the aggregated tensor edges."""

    source: str  # the trace's path
    texts: list[str]  # what the name, op and device codes stand for
    nodes: NodeColumns
    intra: EdgeColumns  # edges within a step: the graph's edges
    cross: EdgeColumns  # edges between steps: the graph attribute cross_step_edges
    execution_ids: Array  # the node_id of each execution folded in
    execution_node: Array  # and its graph node

    def __len__(self) -> int:
        return len(self.nodes)

    def text_of(self, codes: Array) -> list[str]:
        """The texts of `codes`, one per code."""
        return np.asarray(self.texts, dtype=object)[codes].tolist() if len(codes) else []

    def to_networkx(self) -> nx.DiGraph:
        """The ``nx.DiGraph`` of :func:`~tc_analyses.model.graph.build_graph`."""
        import networkx as nx

        g: nx.DiGraph[int] = nx.DiGraph()
        g.add_nodes_from(graph_columns.node_attributes(self.nodes, self.texts))
        g.add_edges_from(self.intra.tuples(self.texts))
        g.graph[K.EXECUTION_NODES] = dict(zip(self.execution_ids.tolist(), self.execution_node.tolist()))
        g.graph[K.CROSS_STEP_EDGES] = [{"src": u, "dst": v, **attrs} for u, v, attrs in self.cross.tuples(self.texts)]
        g.graph[K.SOURCE] = self.source
        return g


def graph_table(trace: DfcTrace, activity: Activity | None = None, steps: Collection[int] | None = None,
                executions: Collection[int] | None = None) -> GraphTable:
    """The columns of the computation graph of `trace` (the parameters of
    :func:`~tc_analyses.model.graph.build_graph`)."""
    if activity is None:
        activity = read_activity(trace)
    rows = graph_columns.executions(trace, activity, executions)
    nodes = graph_columns.fold(rows, steps)
    intra, cross = graph_columns.edge_columns(trace, rows, nodes)
    return GraphTable(str(trace.path), rows.texts, graph_columns.node_columns(rows, nodes), intra, cross,
                      rows.node_id[nodes.kept], nodes.node)
