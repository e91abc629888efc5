"""Chains folded for the optimiser, and the plan expanded and scheduled on the full problem."""

from __future__ import annotations

import pytest

from tc_analyses.analyses.placement import contract, recommend
from tc_analyses.analyses.placement.contract import contract_chains
from tc_analyses.analyses.placement.heft import heft, list_schedule
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementProblem, Task

DEVICES = [Device("cpu", "CPU"), Device("cuda:0", "H100")]
LINKS = {("cpu", "cuda:0"): Link(1_000, 10.0, "test"), ("cuda:0", "cpu"): Link(1_000, 10.0, "test")}


def _chains(count: int, length: int) -> PlacementProblem:
    """`count` parallel chains of `length` tasks between a source and a sink; GPU 4x faster."""
    tasks = [Task(0, "source", "op", "cpu"), Task(1, "sink", "op", "cpu")]
    edges: dict[tuple[int, int], int] = {}
    for c in range(count):
        ids = [2 + c * length + k for k in range(length)]
        tasks += [Task(i, f"c{c}.{k}", "op", "cpu") for k, i in enumerate(ids)]
        edges[(0, ids[0])] = 4_000
        edges.update({(a, b): 4_000 for a, b in zip(ids, ids[1:])})
        edges[(ids[-1], 1)] = 4_000
    costs = {}
    for task in tasks:
        costs[(task.id, "cpu")] = Cost(40_000, CostSource.MEASURED)
        costs[(task.id, "cuda:0")] = Cost(10_000, CostSource.MODELLED)
    return PlacementProblem(tasks, DEVICES, costs, edges, LINKS)


def test_chains_fold_with_summed_costs_and_edges() -> None:
    problem = _chains(3, 5)
    folded = contract_chains(problem)
    assert folded is not None
    assert len(folded.problem.tasks) == 5  # source, sink, a chain each (the source opens no chain: 3 successors)
    chain = folded.members[2]
    assert chain == [2, 3, 4, 5, 6]
    assert folded.problem.cost(2, "cpu") == sum(problem.cost(t, "cpu") for t in chain)
    assert folded.problem.edges[(0, 2)] == 4_000 and (2, 3) not in folded.problem.edges
    plan = heft(folded.problem)
    full = folded.expand(plan.assignment)
    assert sorted(full) == sorted(t.id for t in problem.tasks)
    assert all(full[t] == plan.assignment[2] for t in chain)
    # The expanded plan is a valid schedule of the full problem; HEFT on the full problem is no
    # better here (each chain is best kept on one device).
    assert list_schedule(problem, full).makespan_ns <= heft(problem).makespan_ns


def test_a_graph_without_chains_is_not_folded() -> None:
    problem = _chains(40, 1)  # every task between source and sink is alone
    assert contract_chains(problem) is None


def test_recommend_plans_large_graphs_on_chains_with_a_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recommend, "CONTRACT_ABOVE", 10)
    problem = _chains(3, 5)
    notices: list[str] = []
    plan = recommend._optimise(problem, notices)
    assert plan.algorithm.endswith("on chains") and len(plan.assignment) == len(problem.tasks)
    assert any("17 nodes planned as 5 chains" in n for n in notices)
    assert contract.CONTRACT_ABOVE == 5_000  # the module's own bound is untouched


def test_memory_limits_dropped_when_the_trace_itself_breaks_them() -> None:
    """A long run's graph counts every output as resident: if what ran on a device already exceeds
    its memory, the limit is not applied (with a notice) instead of refusing every plan."""
    problem = _chains(2, 3)
    problem.tasks[:] = [Task(t.id, t.name, t.op, t.actual_device, 10**9) for t in problem.tasks]
    problem.devices[:] = [Device("cpu", "CPU", memory_bytes=4 * 10**9), Device("cuda:0", "H100", memory_bytes=4 * 10**9)]
    notices: list[str] = []
    fixed = recommend._memory_model_checked(problem, notices)
    assert all(d.memory_bytes is None for d in fixed.devices)
    assert notices and "cpu output 7.5 GiB in all, more than its 3.7 GiB" in notices[0]
    assert recommend._memory_model_checked(_chains(2, 3), []) is not None  # no limits: unchanged
