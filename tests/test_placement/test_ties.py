"""Views and in-place ops stay with their base tensor, in every optimiser."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import pytest

from tc_analyses.analyses.placement import milp
from tc_analyses.analyses.placement.heft import heft
from tc_analyses.analyses.placement.search import local_search
from tc_analyses.model import graph_keys as K
from tc_analyses.perf.cost import base_tensor_ties
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementProblem, Task


def _problem() -> PlacementProblem:
    """a -> v -> c: `a` is far cheaper on the CPU, its view `v` on the GPU; `c` is cheap anywhere."""
    devices = [Device("cpu", "CPU"), Device("cuda:0", "A100")]
    tasks = [Task(0, "a", "aten::mm", "cpu"), Task(1, "v", "aten::t", "cpu"), Task(2, "c", "aten::relu", "cpu")]
    ns = {(0, "cpu"): 100, (0, "cuda:0"): 5_000, (1, "cpu"): 3_000, (1, "cuda:0"): 10,
          (2, "cpu"): 50, (2, "cuda:0"): 50}
    costs = {k: Cost(v, CostSource.MODELLED) for k, v in ns.items()}
    links = {("cpu", "cuda:0"): Link(20, 1e9, "t"), ("cuda:0", "cpu"): Link(20, 1e9, "t")}
    return PlacementProblem(tasks, devices, costs, {(0, 1): 64, (1, 2): 64}, links)


@pytest.mark.parametrize("optimise", [heft, local_search, lambda p: milp.solve(p).placement])
def test_a_view_goes_where_its_base_went(optimise) -> None:  # type: ignore[no-untyped-def]
    free = optimise(_problem())
    assert free.assignment[1] == "cuda:0" and free.assignment[0] == "cpu"  # untied, they split
    tied = optimise(replace(_problem(), tied={1: 0}))
    assert tied.assignment[1] == tied.assignment[0]


def test_a_chain_of_views_follows_its_root() -> None:
    problem = replace(_problem(), tied={1: 0, 2: 1})
    assert problem.tie_root(2) == 0
    plan = local_search(problem)
    assert len(set(plan.assignment.values())) == 1


def test_ties_come_from_views_and_in_place_ops_of_the_graph() -> None:
    g = nx.DiGraph()
    for node, op in enumerate(["aten::mm", "aten::t", "aten::add_", "aten::relu", "aten::view"]):
        g.add_node(node, **{K.OP: op})
    g.add_edge(0, 1, **{K.BYTES: 400})     # t reads mm's output
    g.add_edge(0, 2, **{K.BYTES: 4000})    # add_ writes into mm's output (the larger input)...
    g.add_edge(3, 2, **{K.BYTES: 40})      # ...and reads relu's
    assert base_tensor_ties(g) == {1: 0, 2: 0}  # the view of a parameter (4, no in-edge) is free
