"""HEFT, the local search and the exact MILP on hand-made, brute-forced and generated problems."""

from __future__ import annotations

import itertools

import pytest

from tc_analyses.analyses.placement import generate
from tc_analyses.analyses.placement.heft import heft, list_schedule
from tc_analyses.analyses.placement.milp import solve
from tc_analyses.analyses.placement.search import local_search
from tc_analyses.perf.problem import (
    Cost,
    CostSource,
    Device,
    Link,
    PlacementError,
    PlacementProblem,
    Task,
)


def make(costs: dict[int, tuple[int, ...]], edges: dict[tuple[int, int], int], n_devices: int = 2,
         latency: float = 0.0, bytes_per_ns: float = 1.0, memory: list[int | None] | None = None,
         task_mem: dict[int, int] | None = None) -> PlacementProblem:
    names = [f"d{k}" for k in range(n_devices)]
    memory = memory or [None] * n_devices
    devices = [Device(nm, "X", memory_bytes=memory[k]) for k, nm in enumerate(names)]
    tasks = [Task(t, f"t{t}", "op", None, (task_mem or {}).get(t, 0)) for t in costs]
    cost_map = {(t, names[k]): Cost(ns, CostSource.MODELLED) for t, row in costs.items() for k, ns in enumerate(row)}
    links = {(a, b): Link(latency, bytes_per_ns, "test") for a in names for b in names if a != b}
    return PlacementProblem(tasks, devices, cost_map, edges, links)


def brute_force(problem: PlacementProblem) -> int:
    """Optimum over every assignment and every topological order of the list scheduler."""
    ids = [t.id for t in problem.tasks]
    preds = problem.predecessors()
    orders = [o for o in itertools.permutations(ids)
              if all(o.index(p) < o.index(t) for t in ids for p in preds[t])]
    best = None
    for devs in itertools.product(problem.device_names(), repeat=len(ids)):
        assignment = dict(zip(ids, devs))
        for order in orders:
            ms = list_schedule(problem, assignment, order).makespan_ns
            best = ms if best is None else min(best, ms)
    assert best is not None
    return best


def test_heft_chain_stays_on_fast_device_when_transfers_are_dear() -> None:
    # a chain: d1 is faster on every task, transfers cost 100 each
    p = make({0: (10, 5), 1: (10, 5), 2: (10, 5)}, {(0, 1): 100, (1, 2): 100}, latency=0)
    pl = heft(p)
    assert pl.assignment == {0: "d1", 1: "d1", 2: "d1"}
    assert pl.makespan_ns == 15
    assert [(s.task, s.start_ns, s.end_ns) for s in pl.schedule] == [(0, 0, 5), (1, 5, 10), (2, 10, 15)]


def test_heft_spreads_independent_tasks_over_devices() -> None:
    p = make({0: (10, 10), 1: (10, 10), 2: (10, 10), 3: (10, 10)}, {})
    pl = heft(p)
    assert pl.makespan_ns == 20  # optimal: two per device
    assert sorted(pl.assignment.values()) == ["d0", "d0", "d1", "d1"]


def test_heft_fork_join_known_optimum() -> None:
    # fork 0 -> {1, 2} -> join 3; free transfers; the branches run in parallel on both devices
    p = make({0: (1, 1), 1: (10, 10), 2: (10, 10), 3: (1, 1)}, {(0, 1): 0, (0, 2): 0, (1, 3): 0, (2, 3): 0})
    pl = heft(p)
    assert pl.makespan_ns == 12 == brute_force(p)


def test_insertion_fills_an_idle_gap() -> None:
    # task 1 on d0 waits for task 2's output from d1; tasks 0 and 3 fit in the idle gap before it
    costs = {0: (5, 1000), 1: (5, 1000), 2: (1000, 20), 3: (3, 1000)}
    edges = {(2, 1): 1}  # 2 runs on d1 until 20, its output reaches d0 at 20 + 10 = 30
    p = make(costs, edges, latency=9.0, bytes_per_ns=1.0)
    # priority: 2, 1, 0, 3 -> on d0: 1 at [30, 35); 0 goes into the gap [0, 5), 3 into [5, 8)
    pl = list_schedule(p, {0: "d0", 1: "d0", 2: "d1", 3: "d0"}, [2, 1, 0, 3])
    slots = {s.task: (s.start_ns, s.end_ns) for s in pl.schedule}
    assert slots[1] == (30, 35)
    assert slots[0] == (0, 5)
    assert slots[3] == (5, 8)
    assert pl.makespan_ns == 35
    assert heft(p).makespan_ns == 35


def test_schedule_rejects_a_non_topological_priority() -> None:
    p = make({0: (1, 1), 1: (1, 1)}, {(0, 1): 1})
    with pytest.raises(PlacementError, match="before its input"):
        list_schedule(p, {0: "d0", 1: "d0"}, [1, 0])


def test_cycle_raises() -> None:
    p = make({0: (1, 1), 1: (1, 1)}, {(0, 1): 1, (1, 0): 1})
    for algorithm in (heft, local_search, solve):
        with pytest.raises(PlacementError, match="cycle"):
            algorithm(p)


def test_memory_capacity_respected() -> None:
    # d1 is faster but holds only two of the four tasks
    costs = {t: (100, 10) for t in range(4)}
    p = make(costs, {}, memory=[None, 200], task_mem={t: 100 for t in range(4)})
    for pl in (heft(p), local_search(p), solve(p).placement):
        assert pl is not None
        assert sum(1 for d in pl.assignment.values() if d == "d1") <= 2
    with pytest.raises(PlacementError, match="holds"):
        list_schedule(p, {t: "d1" for t in range(4)})
    tight = make(costs, {}, memory=[50, 50], task_mem={t: 100 for t in range(4)})
    with pytest.raises(PlacementError, match="fits in no device"):
        heft(tight)


@pytest.mark.parametrize("seed", range(30))
def test_search_never_worse_thanheft_assign(seed: int) -> None:
    shape = seed % 3
    if shape == 0:
        p = generate.random_layered(40, 3, seed)
    elif shape == 1:
        p = generate.fork_join(4, 3, 3, seed, stages=2)
    else:
        p = generate.series_parallel(40, 3, seed)
    h = heft(p)
    s = local_search(p, seed=seed, max_evals=400)
    assert s.makespan_ns <= h.makespan_ns
    # the reported schedule is the list scheduler's own evaluation
    assert list_schedule(p, s.assignment, [sl.task for sl in s.schedule]).makespan_ns == s.makespan_ns


def test_search_is_deterministic() -> None:
    p = generate.random_layered(60, 3, 5)
    a = local_search(p, seed=1, max_evals=300, time_budget_s=None)
    b = local_search(p, seed=1, max_evals=300, time_budget_s=None)
    assert a.assignment == b.assignment and a.makespan_ns == b.makespan_ns


@pytest.mark.parametrize("seed", range(6))
def test_milp_matches_brute_force(seed: int) -> None:
    p = generate.random_layered(6, 2, seed, width=2)
    res = solve(p, time_limit_s=30)
    assert res.optimal and res.placement is not None
    assert res.placement.makespan_ns == brute_force(p)
    # consistency: the placement's makespan is the list scheduler's evaluation of its assignment
    order = [s.task for s in res.placement.schedule]
    assert list_schedule(p, res.placement.assignment, order).makespan_ns == res.placement.makespan_ns
    assert res.placement.makespan_ns <= heft(p).makespan_ns


@pytest.mark.slow
def test_milp_on_generated_small_graphs_beats_or_equals_heuristics() -> None:
    for seed in range(3):
        p = generate.random_layered(10, 3, seed)
        res = solve(p, time_limit_s=30)
        assert res.optimal and res.placement is not None
        assert res.placement.makespan_ns <= local_search(p, seed=0).makespan_ns


def test_milp_falls_back_above_its_size_limit() -> None:
    p = generate.random_layered(21, 3, 0)
    res = solve(p)
    assert res.placement is None and not res.optimal
    assert "up to 20 tasks" in res.reason
    res = solve(generate.random_layered(8, 4, 0), max_devices=3)
    assert res.placement is None and "3 devices" in res.reason


def test_generators_are_deterministic_and_valid() -> None:
    for make_problem in (lambda s: generate.random_layered(50, 3, s), lambda s: generate.fork_join(3, 4, 2, s),
                         lambda s: generate.series_parallel(30, 4, s)):
        a, b = make_problem(7), make_problem(7)
        a.validate()
        assert a.edges == b.edges and a.costs == b.costs
    assert len(generate.series_parallel(30, 2, 0).tasks) == 30


@pytest.mark.slow
def test_two_host_case_naive_split_is_worse() -> None:
    p, naive = generate.two_host_case()
    naive_ms = list_schedule(p, naive).makespan_ns
    best = local_search(p)
    assert best.makespan_ns * 2 < naive_ms  # keeping each tower on one host cuts the per-layer transfers
    hosts_crossed = sum(1 for (u, v) in p.edges if best.assignment[u] != best.assignment[v])
    assert hosts_crossed <= 2
