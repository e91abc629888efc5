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


def _carried_problem() -> PlacementProblem:
    """`w` (the optimizer's update) is cheap only on the CPU; `f` (next step's forward, reading w)
    only on the GPU; the weight (1 MB) crosses every step when they are apart."""
    devices = [Device("cpu", "CPU"), Device("cuda:0", "A100")]
    tasks = [Task(0, "f", "aten::mm", "cpu"), Task(1, "w", "aten::add_", "cpu")]
    ns = {(0, "cpu"): 900, (0, "cuda:0"): 100, (1, "cpu"): 100, (1, "cuda:0"): 900}
    links = {("cpu", "cuda:0"): Link(0, 1.0, "t"), ("cuda:0", "cpu"): Link(0, 1.0, "t")}  # 1 byte/ns
    return PlacementProblem(tasks, devices, {k: Cost(v, CostSource.MODELLED) for k, v in ns.items()}, {}, links,
                            carried={(1, 0): 1_000_000})


def test_heft_reports_the_carried_copy_it_did_not_foresee() -> None:
    """HEFT places the consumer before the producer of what it carries, so it cannot avoid the copy;
    the schedule it reports still pays it."""
    from tc_analyses.analyses.placement.heft import list_schedule

    problem = _carried_problem()
    plan = heft(problem)
    assert plan.makespan_ns == list_schedule(problem, plan.assignment).makespan_ns


@pytest.mark.parametrize("optimise", [local_search, lambda p: milp.solve(p).placement])
def test_a_tensor_carried_to_the_next_step_is_charged_when_placed_apart(optimise) -> None:  # type: ignore[no-untyped-def]
    from tc_analyses.analyses.placement.heft import list_schedule
    from tc_analyses.perf.simulate import simulate

    problem = _carried_problem()
    apart = {0: "cuda:0", 1: "cpu"}
    assert list_schedule(problem, apart).makespan_ns == simulate(problem, apart).makespan_ns == 1_000_100
    assert list_schedule(replace(problem, carried={}), apart).makespan_ns == 100
    plan = optimise(problem)
    assert plan.assignment[0] == plan.assignment[1]  # the 1 ms copy outweighs the 800 ns saved
    assert plan.makespan_ns == 1000


@pytest.mark.parametrize("optimise", [heft, local_search, lambda p: milp.solve(p).placement])
def test_inputs_from_outside_the_step_are_copied_when_the_task_leaves_home(optimise) -> None:  # type: ignore[no-untyped-def]
    from tc_analyses.analyses.placement.heft import list_schedule
    from tc_analyses.perf.simulate import simulate

    devices = [Device("cpu", "CPU"), Device("cuda:0", "A100")]
    tasks = [Task(0, "first_layer", "aten::mm", "cpu")]
    costs = {(0, "cpu"): Cost(900, CostSource.MEASURED), (0, "cuda:0"): Cost(100, CostSource.MODELLED)}
    links = {("cpu", "cuda:0"): Link(0, 1.0, "t"), ("cuda:0", "cpu"): Link(0, 1.0, "t")}
    free = PlacementProblem(tasks, devices, costs, {}, links)
    batch = replace(free, external={0: 2_000})  # the input batch: 2,000 bytes at 1 byte/ns
    assert list_schedule(batch, {0: "cuda:0"}).makespan_ns == simulate(batch, {0: "cuda:0"}).makespan_ns == 2_100
    assert optimise(free).assignment[0] == "cuda:0"
    assert optimise(batch).assignment[0] == "cpu" and optimise(batch).makespan_ns == 900


def test_external_inputs_are_what_the_shapes_read_less_what_edges_bring() -> None:
    from tc_analyses.perf.cost import external_inputs

    g = nx.DiGraph()
    g.add_node(0, **{K.OP: "aten::relu", K.INPUT_SHAPES: "[[256]]", K.INPUT_DTYPES: "float32"})
    g.add_node(1, **{K.OP: "aten::mm", K.INPUT_SHAPES: "[[256, 4], [4, 8]]", K.INPUT_DTYPES: "float32,float32"})
    g.add_node(2, **{K.OP: "aten::t", K.INPUT_SHAPES: "[[4, 8]]", K.INPUT_DTYPES: "float32"})
    g.add_edge(0, 1, **{K.BYTES: 4096})  # relu's output is mm's first input
    assert external_inputs(g, {}) == {0: 1024, 1: 128}  # mm's weight (4x8 floats) comes from outside
    assert external_inputs(g, {(1, 1): 128}) == {0: 1024}  # ... unless the previous step made it
