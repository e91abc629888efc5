"""The machine's lane costs: what `record` measures (tracer/calibrate.py), how a plan reads them
(tc_analyses/perf/calibration.py) and how they widen the speedup range to a busy machine.

The measurement's figures are this machine's, so the tests check their making (keys, order, a file
that cannot be written) and the model's use of them on fixed calibrations."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from tc_analyses.analyses.placement.recommend import _speedup_range, range_covers
from tc_analyses.model import graph_keys as K
from tc_analyses.perf.calibration import Calibration, busy_plan, handover_links, read_calibration
from tc_analyses.analyses.placement.heft import list_schedule
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementProblem, Task
from tracer import calibrate, schema

KEYS = (schema.CAL_CORES, schema.CAL_LANES, schema.CAL_HANDOVER_P50_NS, schema.CAL_HANDOVER_P90_NS,
        schema.CAL_BUSY_HANDOVER_P90_NS, schema.CAL_CONTENTION, schema.CAL_BUSY_CONTENTION, schema.CAL_NODE_NS)


def test_handover_samples_each_wake_up() -> None:
    waits = calibrate.handover_ns(samples=15)
    assert len(waits) == 15 and all(w > 0 for w in waits)


def test_node_ratios_pair_each_round_of_lanes_with_one_alone() -> None:
    node, ratios = calibrate.node_ratios(2)
    assert 0 < node < 0.05 and len(ratios) == calibrate.ROUNDS and all(r > 0 for r in ratios)


def test_calibrate_into_writes_every_key_beside_the_traces(tmp_path: Path) -> None:
    assert calibrate.calibrate_into(tmp_path) is None
    data = json.loads((tmp_path / schema.CALIBRATION_FILE).read_text())
    assert set(KEYS) <= set(data) and "record" in data["source"]
    assert 0 < data[schema.CAL_HANDOVER_P50_NS] <= data[schema.CAL_HANDOVER_P90_NS]
    assert data[schema.CAL_CONTENTION] >= 1.0 and data[schema.CAL_BUSY_CONTENTION] >= 1.0
    assert 1 <= data[schema.CAL_LANES] <= data[schema.CAL_CORES]
    assert read_calibration(tmp_path) is not None


def test_a_calibration_that_cannot_be_written_is_a_line_not_an_exception(tmp_path: Path) -> None:
    problem = calibrate.calibrate_into(tmp_path / "missing" / "folder")
    assert problem is not None and problem.startswith("calibration failed") and "\n" not in problem


def _write(folder: Path, **values: float) -> None:
    base = dict(zip(KEYS, (2, 2, 40_000, 50_000, 60_000, 1.1, 1.3, 400_000)))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / schema.CALIBRATION_FILE).write_text(json.dumps({**base, **values}))


def test_read_from_the_job_or_a_process_trace_of_it(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "host-1").mkdir()
    for where in (tmp_path, tmp_path / "host-1"):
        cal = read_calibration(where)
        assert cal is not None and cal.handover_p50_ns == 40_000 and cal.busy_contention == 1.3
    assert read_calibration(tmp_path / "nowhere") is None


@pytest.mark.parametrize("text", ["{", "[]", '{"cores": 2}', '{"cores": "x"}'])
def test_a_broken_calibration_reads_as_none(tmp_path: Path, text: str) -> None:
    (tmp_path / schema.CALIBRATION_FILE).write_text(text)
    assert read_calibration(tmp_path) is None


def _cal(cores: int = 2, contention: float = 1.0, busy: float = 1.1) -> Calibration:
    return Calibration(Path("calibration.json"), cores, 30_000, 40_000, 70_000, contention, busy)


def test_a_busy_core_is_shared_fairly_when_lanes_and_the_background_job_outnumber_the_cores() -> None:
    assert _cal(cores=2, busy=1.1).busy_factor == pytest.approx(1.5)  # 3 threads on 2 cores: 2/3 of a core each
    assert _cal(cores=2, contention=1.2, busy=1.1).busy_factor == pytest.approx(1.5)
    assert _cal(cores=3, busy=1.1).busy_factor == pytest.approx(1.1)  # a core each: what was measured
    assert _cal(cores=16, busy=1.1).busy_factor == pytest.approx(1.1)
    assert _cal(cores=2, busy=2.1).busy_factor == pytest.approx(2.1)  # the measured figure when it is larger


def _fork_join() -> tuple[PlacementProblem, nx.DiGraph]:
    """a -> (b, c) -> d, every op 10 ms on either CPU lane, each edge 1 MB."""
    devices = [Device("cpu:0", "CPU"), Device("cpu:1", "CPU")]
    tasks = [Task(i, n, "aten::mm", "cpu:0") for i, n in enumerate("abcd")]
    costs = {(t.id, d.name): Cost(10_000_000, CostSource.MEASURED if d.name == "cpu:0" else CostSource.IDENTICAL)
             for t in tasks for d in devices}
    edges = {(0, 1): 1 << 20, (0, 2): 1 << 20, (1, 3): 1 << 20, (2, 3): 1 << 20}
    links = {("cpu:0", "cpu:1"): Link(90_000, 1e12, "spec"), ("cpu:1", "cpu:0"): Link(90_000, 1e12, "spec")}
    graph = nx.DiGraph(list(edges))
    for t in tasks:
        graph.nodes[t.id].update({K.MEDIAN_NS: 10_000_000, K.P10_NS: 9_500_000, K.P90_NS: 10_500_000})
    return PlacementProblem(tasks, devices, costs, edges, links), graph


def test_handover_links_join_cpu_lanes_at_the_measured_figure() -> None:
    problem, _ = _fork_join()
    links = handover_links(_cal(), problem.devices)
    assert set(links) == {("cpu:0", "cpu:1"), ("cpu:1", "cpu:0")}
    assert links[("cpu:0", "cpu:1")].latency_ns == 30_000 and "measured at record" in links[("cpu:0", "cpu:1")].source
    assert handover_links(_cal(), problem.devices, busy=True)[("cpu:1", "cpu:0")].latency_ns == 70_000
    assert handover_links(_cal(), [Device("cpu:0", "CPU"), Device("cuda:0", "H100")]) == {}


def test_a_busy_machine_slows_a_plan_of_two_lanes_and_not_one_of_one() -> None:
    problem, _ = _fork_join()
    one_lane = {t.id: "cpu:0" for t in problem.tasks}
    assert busy_plan(problem, one_lane, _cal()) is problem
    two = {0: "cpu:0", 1: "cpu:0", 2: "cpu:1", 3: "cpu:0"}
    busy = busy_plan(problem, two, _cal())
    assert busy.costs[(2, "cpu:1")].ns == 15_000_000 and busy.links[("cpu:0", "cpu:1")].latency_ns == 70_000
    assert list_schedule(busy, two).makespan_ns > list_schedule(problem, two).makespan_ns


def test_the_range_reaches_down_to_the_busy_machine() -> None:
    problem, graph = _fork_join()
    plan = list_schedule(problem, {0: "cpu:0", 1: "cpu:0", 2: "cpu:1", 3: "cpu:0"})
    actual = {t.id: "cpu:0" for t in problem.tasks}
    quiet = _speedup_range(problem, graph, plan, actual, 0.0)
    busy = _speedup_range(problem, graph, plan, actual, 0.0, _cal())
    point = 40_000_000 / plan.makespan_ns
    assert quiet[0] <= point <= quiet[1] and busy[1] == pytest.approx(quiet[1])
    # every op of the plan 1.5x slower: 4 ops of 10 ms sequential against 3 ops at 15 ms, at best
    assert busy[0] < quiet[0] and busy[0] <= 40 / 45 + 1e-9
    # the recorded placement's steps at their fast end against the busy plan; the quiet range keeps its spread
    spread = _speedup_range(problem, graph, plan, actual, 0.0, _cal(), spread=0.25)
    assert spread[0] == pytest.approx(busy[0] / 1.25) and spread[1] == pytest.approx(busy[1])
    assert _speedup_range(problem, graph, plan, actual, 0.0, None, spread=0.25) == pytest.approx(quiet)
    assert "busy core" in range_covers(problem, plan.assignment, _cal())
    assert "busy core" not in range_covers(problem, plan.assignment, None)
