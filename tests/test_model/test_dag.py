"""The DAG algorithms every analysis shares: upward rank, critical path, reachability, reduction, width."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest

from tc_analyses.model.dag import critical_path, reachability, transitive_reduction, upward_rank, width


def random_dag(n: int, p: float, seed: int) -> tuple[nx.DiGraph, dict[int, list[int]]]:
    g = nx.gnp_random_graph(n, p, seed=seed, directed=True)
    dag = nx.DiGraph((u, v) for u, v in g.edges if u < v)  # edges forward in index order: a DAG
    dag.add_nodes_from(range(n))
    return dag, {u: sorted(dag.successors(u)) for u in range(n)}


def test_reduction_equals_networkx() -> None:
    dag, succ = random_dag(60, 0.15, 3)
    reach = reachability(60, succ)
    assert set(transitive_reduction(60, succ, reach)) == set(nx.transitive_reduction(dag).edges)
    assert [reach[0] >> v & 1 for v in range(60)] == [int(nx.has_path(dag, 0, v) and v != 0) for v in range(60)]


def test_reachability_in_any_topological_order() -> None:
    # nodes numbered against the edges: 3 -> 2 -> 0, 3 -> 1
    succ = {3: [2, 1], 2: [0], 1: [], 0: []}
    assert reachability(4, succ, order=[3, 2, 1, 0]) == [0, 0, 1, 0b111]


def test_upward_rank_and_critical_path_follow_the_longest_path() -> None:
    dag, succ = random_dag(40, 0.1, 7)
    work = [(7 * i) % 11 + 1 for i in range(40)]
    rank = upward_rank(range(40), work, succ)
    for t in range(40):  # the longest node-weighted path from t
        longest = max(sum(work[v] for v in path) for s in range(40)
                      for path in nx.all_simple_paths(dag, t, s)) if dag.out_degree(t) else work[t]
        assert rank[t] == max(longest, work[t])
    path = critical_path(range(40), work, succ, rank=rank)
    assert all(dag.has_edge(u, v) for u, v in itertools.pairwise(path))
    assert sum(work[t] for t in path) == max(rank.values())


def test_edge_weights_count_in_the_rank() -> None:
    succ = [[1, 2], [], []]
    assert upward_rank([0, 1, 2], [1, 5, 1], succ) == {2: 1, 1: 5, 0: 6}
    assert upward_rank([0, 1, 2], [1, 5, 1], succ, weights=[[0, 10], [], []]) == {2: 1, 1: 5, 0: 12}
    assert critical_path([0, 1, 2], [1, 5, 1], succ, weights=[[0, 10], [], []]) == [0, 2]
    assert critical_path([], [], {}) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_width_is_the_largest_antichain(seed: int) -> None:
    dag, succ = random_dag(12, 0.2, seed)
    closure = nx.transitive_closure_dag(dag)
    largest = max(len(a) for a in nx.antichains(closure))
    assert width(12, reachability(12, succ)) == largest


@pytest.mark.parametrize("seed", range(6))
def test_width_equals_scipys_matching_on_random_closures(seed: int) -> None:
    """Our Hopcroft-Karp against scipy's maximum_bipartite_matching (kept for this check: it is
    correct, only too slow on dense closures), on random DAGs of several shapes."""
    import random

    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rng = random.Random(seed)
    n = rng.choice([30, 120, 300])
    succ = [sorted({u + rng.randint(1, 12) for _ in range(rng.randint(0, 3))} - set(range(n, n + 13)))
            for u in range(n)]
    reach = reachability(n, succ)
    rows = [[v for v in range(n) if reach[u] >> v & 1] for u in range(n)]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    closure = csr_matrix((np.ones(int(indptr[-1])), [v for r in rows for v in r], indptr), shape=(n, n))
    expected = n - int((maximum_bipartite_matching(closure, perm_type="column") >= 0).sum())
    assert width(n, reach) == expected


def test_width_on_a_dense_closure() -> None:
    """1,000 nodes, 320 k reachable pairs (the shape on which scipy's matching took 10 s; speed is
    for the benchmarks: here no budget, only the answer)."""
    import random

    rng = random.Random(0)
    n = 1000
    succ = [[v for v in (u + rng.randint(1, 60) for _ in range(2)) if v < n] for u in range(n)]
    assert width(n, reachability(n, succ), budget_s=float("inf")) == 158


def test_lexicographic_order_is_networkx_s_and_stops_short_on_a_cycle() -> None:
    import random

    import networkx as nx

    from tc_analyses.model.dag import lexicographic_order

    rng = random.Random(3)
    for _ in range(400):
        n = rng.randint(1, 15)
        names = [f"t{i}" for i in range(n)]
        succ = {name: sorted({names[j] for j in rng.sample(range(i + 1, n), min(n - i - 1, rng.randint(0, 3)))})
                for i, name in enumerate(names)}
        roll = rng.random()  # keys in no order; never decreasing (the shortcut), with ties; names shuffled
        key = {name: (rng.random() if roll < .4 else i // 2 if roll < .7 else i) for i, name in enumerate(names)}
        if rng.random() < .3:
            rng.shuffle(names)  # edges that go backward in `names`: no shortcut
        graph: nx.DiGraph[str] = nx.DiGraph()
        graph.add_nodes_from(names)
        graph.add_edges_from((u, v) for u, vs in succ.items() for v in vs)
        assert lexicographic_order(names, succ, key.__getitem__) == \
            list(nx.lexicographical_topological_sort(graph, key=key.__getitem__))
    assert lexicographic_order(["a", "b", "c"], {"a": ["b"], "b": ["a"], "c": []}, str) == ["c"]
    # keys the heap never compares (one node ready at a time) are not compared by the shortcut either
    assert lexicographic_order([0, 1], {0: [1], 1: []}, {0: 1, 1: None}.__getitem__) == [0, 1]
