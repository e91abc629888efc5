"""The host thread as a resource: every op is issued by one thread (or under one GIL), in turn."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tc_analyses.analyses.placement import generate, milp
from tc_analyses.analyses.placement.heft import heft, list_schedule
from tc_analyses.analyses.placement.search import local_search
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementProblem, Task
from tc_analyses.perf.simulate import simulate


def _two_independent(host: int) -> PlacementProblem:
    devices = [Device("cpu:0", "CPU"), Device("cpu:1", "CPU")]
    tasks = [Task(i, f"t{i}", "op", "cpu:0") for i in range(2)]
    costs = {(i, d.name): Cost(100, CostSource.MEASURED) for i in range(2) for d in devices}
    links = {("cpu:0", "cpu:1"): Link(0, 1e12, "test"), ("cpu:1", "cpu:0"): Link(0, 1e12, "test")}
    return PlacementProblem(tasks, devices, costs, {}, links, host_ns={"cpu:0": host, "cpu:1": host})


@pytest.mark.parametrize("host, makespan", [(0, 100), (40, 140), (100, 200), (500, 200)])
def test_tasks_of_two_devices_take_turns_on_the_host(host: int, makespan: int) -> None:
    """Two 100 ns tasks on two devices overlap except for their host shares (capped at the task)."""
    problem = _two_independent(host)
    assignment = {0: "cpu:0", 1: "cpu:1"}
    assert list_schedule(problem, assignment, [0, 1]).makespan_ns == makespan
    assert simulate(problem, assignment, [0, 1]).makespan_ns == makespan


def test_no_schedule_beats_the_host_thread_s_total() -> None:
    """Whatever the optimiser does, the host must issue every task: the makespan is at least the
    sum of the host shares of the tasks where they are placed."""
    for seed in range(4):
        base = generate.random_layered(40, 3, seed)
        problem = replace(base, host_ns={d: 30_000 for d in base.device_names()})
        for plan in (heft(problem), local_search(problem)):
            held = sum(problem.host(t, d) for t, d in plan.assignment.items())
            assert plan.makespan_ns >= held
            assert list_schedule(problem, plan.assignment).makespan_ns >= held


def test_the_host_changes_the_plan_when_it_is_the_bottleneck() -> None:
    """A fan-out of cheap tasks gains nothing from a second device once issuing them costs as much
    as running them; with a free host it would halve the time."""
    devices = [Device("cpu:0", "CPU"), Device("cpu:1", "CPU")]
    n = 8
    tasks = [Task(i, f"t{i}", "op", "cpu:0") for i in range(n)]
    costs = {(i, d.name): Cost(100, CostSource.MEASURED) for i in range(n) for d in devices}
    links = {("cpu:0", "cpu:1"): Link(0, 1e12, "test"), ("cpu:1", "cpu:0"): Link(0, 1e12, "test")}
    free = PlacementProblem(tasks, devices, costs, {}, links)
    busy = replace(free, host_ns={"cpu:0": 100, "cpu:1": 100})
    assert heft(free).makespan_ns == n * 100 // 2
    assert heft(busy).makespan_ns == n * 100


def test_the_milp_does_not_claim_optimality_under_a_host_thread() -> None:
    problem = replace(generate.random_layered(8, 2, 0), host_ns={"cpu": 20_000})
    result = milp.solve(problem)
    assert result.placement is not None and not result.optimal
    assert "host thread" in result.reason
    held = sum(problem.host(t, d) for t, d in result.placement.assignment.items())
    assert result.placement.makespan_ns >= held


def test_more_cpu_lanes_than_cores_is_said() -> None:
    import os

    from tc_analyses.analyses.placement.recommend import recommend

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    devices = [Device(f"cpu:{i}", "CPU") for i in range(cores + 1)]
    tasks = [Task(0, "t0", "op", "cpu:0")]
    problem = PlacementProblem(tasks, devices, {(0, d.name): Cost(10, CostSource.MEASURED) for d in devices}, {},
                               {(a.name, b.name): Link(0, 1e12, "t") for a in devices for b in devices if a != b})
    result, _ = recommend(problem, "g")
    assert any(f"{cores + 1} CPU devices on this host, which has {cores} core(s)" in n for n in result.notices)
    fits, _ = recommend(replace(problem, devices=devices[:cores],
                                costs={k: v for k, v in problem.costs.items() if k[1] != f"cpu:{cores}"}), "g")
    assert not any("CPU devices on this host" in n for n in fits.notices)
