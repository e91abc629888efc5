"""The discrete-event simulator: hand-made schedules, and replays of real traces within 5%."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tc_analyses.model.graph import build_graph
from tc_analyses.perf.cost import build_problem, measure_steps
from tc_analyses.perf.devices import parse_devices
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementError, PlacementProblem, Task
from tc_analyses.perf.simulate import replay_actual, simulate
from tc_analyses.reader import read_trace
from tests.data import make_traces

ALL_CLASSES = Path(make_traces.__file__).resolve().parent / "traces" / "succeed" / "all-classes"
LINK = Link(5, 10.0, "test")  # 100 bytes -> 5 + 10 = 15 ns


def problem(costs: dict[int, dict[str, int]], edges: dict[tuple[int, int], int],
            overhead: dict[str, int] | None = None) -> PlacementProblem:
    tasks = [Task(t, f"t{t}", "op", None) for t in sorted(costs)]
    devices = [Device("A", "H100"), Device("B", "H100")]
    table = {(t, d): Cost(ns, CostSource.MODELLED) for t, per in costs.items() for d, ns in per.items()}
    p = PlacementProblem(tasks, devices, table, edges, {("A", "B"): LINK, ("B", "A"): LINK}, overhead or {})
    p.validate()
    return p


def both(ns: int) -> dict[str, int]:
    return {"A": ns, "B": ns}


def test_chain_on_one_device() -> None:
    p = problem({0: both(10), 1: both(20), 2: both(30)}, {(0, 1): 100, (1, 2): 100})
    placed = simulate(p, {0: "A", 1: "A", 2: "A"})
    assert placed.makespan_ns == 60
    assert [(s.task, s.start_ns, s.end_ns) for s in placed.schedule] == [(0, 0, 10), (1, 10, 30), (2, 30, 60)]


def test_launch_overhead_is_added_to_every_task() -> None:
    p = problem({0: both(10), 1: both(20), 2: both(30)}, {(0, 1): 100, (1, 2): 100}, overhead={"A": 5})
    assert simulate(p, {0: "A", 1: "A", 2: "A"}).makespan_ns == 75
    assert simulate(p, {0: "B", 1: "B", 2: "B"}).makespan_ns == 60


def test_fork_join_across_two_devices_with_transfers() -> None:
    p = problem({0: both(10), 1: both(50), 2: both(40), 3: both(10)},
                {(0, 1): 100, (0, 2): 100, (1, 3): 100, (2, 3): 100})
    placed = simulate(p, {0: "A", 1: "A", 2: "B", 3: "A"})
    slots = {s.task: (s.start_ns, s.end_ns) for s in placed.schedule}
    # copy 0->2 runs 10..25; task 2 runs 25..65; copy 2->3 runs 65..80; task 3 waits for it
    assert slots == {0: (0, 10), 1: (10, 60), 2: (25, 65), 3: (80, 90)}
    assert placed.makespan_ns == 90


def test_copies_serialize_per_direction_and_overlap_compute() -> None:
    p = problem({0: both(10), 1: both(1), 2: both(1), 3: both(30)}, {(0, 1): 100, (0, 2): 100, (0, 3): 0})
    placed = simulate(p, {0: "A", 1: "B", 2: "B", 3: "A"})
    slots = {s.task: (s.start_ns, s.end_ns) for s in placed.schedule}
    # two copies A->B, one after the other (10..25, 25..40), while task 3 computes on A (10..40)
    assert slots[3] == (10, 40)
    assert sorted([slots[1], slots[2]]) == [(25, 26), (40, 41)]
    assert placed.makespan_ns == 41


def test_opposite_directions_do_not_serialize() -> None:
    p = problem({0: both(10), 1: both(10), 2: both(1), 3: both(1)}, {(0, 2): 100, (1, 3): 100})
    placed = simulate(p, {0: "A", 1: "B", 2: "B", 3: "A"})
    slots = {s.task: (s.start_ns, s.end_ns) for s in placed.schedule}
    assert slots[2] == (25, 26) and slots[3] == (25, 26)


def test_given_order_is_kept_per_device_and_checked() -> None:
    p = problem({0: both(10), 1: both(20), 2: both(5)}, {(0, 1): 0})
    placed = simulate(p, {0: "A", 1: "A", 2: "A"}, order=[2, 0, 1])
    assert [s.task for s in placed.schedule] == [2, 0, 1] and placed.makespan_ns == 35
    with pytest.raises(PlacementError):
        simulate(p, {0: "A", 1: "A", 2: "A"}, order=[1, 0, 2])
    with pytest.raises(PlacementError):
        simulate(p, {0: "A", 1: "C", 2: "A"})


def _relative_error(path: Path, devices: str) -> float:
    trace = read_trace(path)
    g = build_graph(trace)
    p = build_problem(g, parse_devices(devices), trace=trace)
    measured = measure_steps(trace, g).step_ns
    replayed = replay_actual(p, g, trace).makespan_ns
    return abs(replayed - measured) / measured


def test_replay_all_classes_within_5_percent() -> None:
    trace = read_trace(ALL_CLASSES)
    g = build_graph(trace)
    assert measure_steps(trace, g).step_ns == 1070  # make_traces.py: read at +100, relu ends at +1170
    assert _relative_error(ALL_CLASSES, "cpu,cuda:0=H100") <= 0.05


@pytest.mark.torch
def test_replay_torch_trace_within_5_percent(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from tracer.torch_source import TorchRecorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 10))
    x = torch.randn(2, 3, 8, 8)
    out = tmp_path / "trace"
    with TorchRecorder(str(out), wait=0, warmup=0, active=3, cuda=False) as rec:
        for _ in range(3):  # step 0 creates the gradients (detach), steps 1-2 accumulate (add_)
            model(x).sum().backward()
            rec.step()
    assert _relative_error(out, "cpu") <= 0.05


def _steps_trace(path: Path, durations: list[tuple[int, int]]) -> Path:
    """One step per (mm, add) duration pair: mm then add on the CPU, 100 ns apart, add fed by mm."""
    from tracer.builder import TraceBuilder

    with TraceBuilder(path, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        t = 1_000
        for step, (mm, add) in enumerate(durations):
            b.add("node_begin", "1", t, 2 * step, "aten::mm", "mm", cpu, 1, step)
            b.add("node_end", "1", t + mm, 2 * step, cpu, 1)
            b.add("node_begin", "1", t + mm + 100, 2 * step + 1, "aten::add", "add", cpu, 1, step)
            b.add("node_end", "1", t + mm + 100 + add, 2 * step + 1, cpu, 1)
            b.add("tensor_edge", "1", t + mm + 100, 2 * step, 2 * step + 1, step, 64, cpu, cpu)
            t += 10_000
    return path


def _heldout(path: Path) -> Any:
    from tc_analyses.perf.simulate import heldout_replay

    trace = read_trace(path)
    g = build_graph(trace)
    return heldout_replay(build_problem(g, parse_devices("cpu"), trace=trace), g, trace)


def test_the_heldout_replay_sees_only_its_calibration_steps(tmp_path: Path) -> None:
    # Steps 0 and 2 calibrate (mm 1000, add 500, gap 100: 1600 ns); steps 1 and 3 are slower (2400 ns).
    slow = _heldout(_steps_trace(tmp_path / "slow", [(1_000, 500), (1_600, 700), (1_000, 500), (1_600, 700)]))
    assert (slow.calibration_steps, slow.heldout_steps) == ((0, 2), (1, 3))
    assert (slow.replay_ns, slow.measured_ns) == (1_600, 2_400) and slow.error == pytest.approx(1 / 3)
    steady = _heldout(_steps_trace(tmp_path / "steady", [(1_000, 500)] * 4))
    assert steady.replay_ns == steady.measured_ns == 1_600 and steady.error == 0.0
    assert _heldout(_steps_trace(tmp_path / "one", [(1_000, 500)])) is None  # nothing to hold out


def _two_thread_trace(path: Path, steps: int = 4) -> Path:
    """Each step: `left` on thread 1 and `right` on thread 2 run at the same time (1,000 ns each),
    then `join` on thread 1 reads both (200 ns), 50 ns after the later one ends."""
    from tracer.builder import TraceBuilder

    with TraceBuilder(path, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        for step in range(steps):
            t, nid = 10_000 * (step + 1), 3 * step
            b.add("step_begin", "1", t - 10, step, 1)
            for k, (name, tid, start, end) in enumerate([("left", 1, t, t + 1000), ("right", 2, t + 20, t + 1020),
                                                         ("join", 1, t + 1070, t + 1270)]):
                b.add("node_begin", str(tid), start, nid + k, "aten::mm", name, cpu, tid, step)
                b.add("node_end", str(tid), end, nid + k, cpu, tid)
            b.add("tensor_edge", "1", t + 1070, nid, nid + 2, 1, 64, cpu, cpu)
            b.add("tensor_edge", "1", t + 1070, nid + 1, nid + 2, 2, 64, cpu, cpu)
            b.add("step_end", "1", t + 1300, step, 1)
    return path


def test_the_replay_runs_each_thread_as_its_own_lane(tmp_path: Path) -> None:
    """Two ops that ran side by side on two threads overlap in the replay, as they did."""
    from tc_analyses.model.activity import read_activity
    from tc_analyses.perf.simulate import heldout_replay

    trace = read_trace(_two_thread_trace(tmp_path / "t"))
    activity = read_activity(trace)
    g = build_graph(trace, activity)
    problem = build_problem(g, parse_devices("cpu"), trace=activity)
    timing = measure_steps(activity, g)
    assert timing.step_ns == 1270
    assert sorted(set(timing.node_lane.values())) == ["cpu#1", "cpu#2"]
    replay = replay_actual(problem, g, activity)
    # Serialised on one queue it would be 2,270 ns; lanes give 1,250: the join's 50 ns wait is
    # spread over its lane's ops, and `right`'s 20 ns late start is not modelled.
    assert abs(replay.makespan_ns - 1270) <= 0.02 * 1270
    assert {slot.device for slot in replay.schedule} == {"cpu#1", "cpu#2"}
    held = heldout_replay(problem, g, activity)
    assert held is not None and held.error <= 0.02


def test_a_problem_missing_a_cost_fails_as_it_always_did() -> None:
    """The simulator looks each task's cost up once before its loop; where one is missing it looks
    them up as tasks start, so the error is the one a task meets first (a missing link here, a
    deadlock there), not a KeyError from the look-ahead."""
    devices = [Device("a", "H100"), Device("b", "H100")]
    tasks = [Task(0, "t0", "op", None), Task(1, "t1", "op", None)]
    no_link = PlacementProblem(tasks, devices, {(0, "a"): Cost(5, CostSource.MEASURED)}, {(0, 1): 10}, {})
    with pytest.raises(PlacementError, match="no transfer model from a to b"):
        simulate(no_link, {0: "a", 1: "b"}, [0, 1])
    loop = PlacementProblem(tasks[:1], devices, {}, {(0, 0): 1}, {})
    with pytest.raises(PlacementError, match="deadlocked"):
        simulate(loop, {0: "a"}, [0])


def test_the_kept_topological_order_sees_edges_edited_in_place() -> None:
    devices = [Device("a", "H100")]
    tasks = [Task(0, "t0", "op", None), Task(1, "t1", "op", None)]
    costs = {(t.id, "a"): Cost(5, CostSource.MEASURED) for t in tasks}
    problem = PlacementProblem(tasks, devices, costs, {(0, 1): 1}, {})
    assert problem.topological_order() == [0, 1]
    del problem.edges[(0, 1)]
    problem.edges[(1, 0)] = 1  # the same dict, the same length
    assert problem.topological_order() == [1, 0]
    assert [s.task for s in simulate(problem, {0: "a", 1: "a"}).schedule] == [1, 0]
