"""The columnar engine orders its units without networkx (start-up): its strongly connected
components and topological order equal networkx's on random small graphs."""

from __future__ import annotations

import random

import networkx as nx

from tc_analyses.engine.columnar import _cycles, _generations


def test_components_and_order_match_networkx() -> None:
    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(1, 12)
        successors = [sorted(rng.sample(range(n), rng.randint(0, min(n, 3)))) for _ in range(n)]
        graph: nx.DiGraph[int] = nx.DiGraph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from((j, i) for i in range(n) for j in range(n) if i in successors[j])
        expected = sorted(sorted(c) for c in nx.strongly_connected_components(graph))
        assert sorted(sorted(c) for c in _cycles(successors)) == expected
        acyclic = [[i for i in out if i > j] for j, out in enumerate(successors)]  # edges forward only
        dag: nx.DiGraph[int] = nx.DiGraph()
        dag.add_nodes_from(range(n))
        dag.add_edges_from((j, i) for i in range(n) for j in range(n) if i in acyclic[j])
        assert _generations(acyclic) == list(nx.topological_sort(dag))
