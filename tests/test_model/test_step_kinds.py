"""Step kinds: steps that ran different ops are planned apart, warm-up is left out, costs are medians."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tc_analyses.inputs import TraceInputs
from tc_analyses.model import graph_keys as K
from tc_analyses.model.graph import build_graph
from tc_analyses.model.step_kinds import choose, step_kinds
from tests.helpers import subprocess_env
from tracer.builder import TraceBuilder

# Steps 0-3 run a forward (mm, add) whose mm takes 5000 ns in the warm-up step 0 and 1000 ns after;
# steps 4-6 run another model (conv, relu), 300 + 300 ns.
FORWARD = [(5000, 500), (1000, 500), (1000, 500), (1200, 500)]
OTHER = [(300, 300)] * 3


def _two_kinds(path: Path) -> Path:
    with TraceBuilder(path, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        t, nid = 1_000, 0
        for step, ((first, second), names) in enumerate(
                [(d, ("aten::mm", "aten::add")) for d in FORWARD] + [(d, ("aten::conv2d", "aten::relu")) for d in OTHER]):
            b.add("step_begin", "1", t - 10, step, 1)
            b.add("node_begin", "1", t, nid, names[0], names[0].split("::")[1], cpu, 1, step)
            b.add("node_end", "1", t + first, nid, cpu, 1)
            b.add("node_begin", "1", t + first + 100, nid + 1, names[1], names[1].split("::")[1], cpu, 1, step)
            b.add("node_end", "1", t + first + 100 + second, nid + 1, cpu, 1)
            b.add("tensor_edge", "1", t + first + 100, nid, nid + 1, step, 64, cpu, cpu)
            b.add("step_end", "1", t + first + 200 + second, step, 1)
            t, nid = t + 10_000, nid + 2
    return path


def test_steps_that_ran_different_ops_are_different_kinds(tmp_path: Path) -> None:
    kinds = step_kinds(TraceInputs(_two_kinds(tmp_path / "t")).whole_activity)
    assert [k.steps for k in kinds] == [(0, 1, 2, 3), (4, 5, 6)]  # most time first
    assert kinds[0].warmup == (0,) and kinds[0].kept == (1, 2, 3)
    assert kinds[1].warmup == (4,)
    assert kinds[0].step_ns == 1000 + 100 + 500  # the median of the kept steps
    assert "kind 0: 4 step(s) (0-3) of 2 ops" in kinds[0].label and "warm-up step 0 left out" in kinds[0].label


def test_a_kind_s_graph_has_its_ops_only_and_median_costs(tmp_path: Path) -> None:
    inputs = TraceInputs(_two_kinds(tmp_path / "t"))
    kind = choose(step_kinds(inputs.activity), None)
    g = build_graph(inputs.trace, inputs.activity, steps=set(kind.kept))
    assert sorted(a[K.OP] for _, a in g.nodes(data=True)) == ["aten::add", "aten::mm"]
    mm = next(a for _, a in g.nodes(data=True) if a[K.OP] == "aten::mm")
    assert mm[K.DURATIONS_NS] == [1000, 1000, 1200]  # the 5000 ns warm-up is not there
    assert mm[K.MEDIAN_NS] == 1000 and mm[K.P10_NS] == 1000 and mm[K.P90_NS] == 1200


def test_choose_names_the_kinds_it_has(tmp_path: Path) -> None:
    kinds = step_kinds(TraceInputs(_two_kinds(tmp_path / "t")).whole_activity)
    assert choose(kinds, 1).steps == (4, 5, 6)
    with pytest.raises(ValueError, match="no step kind 2: the trace has 2"):
        choose(kinds, 2)


def test_recommend_placement_plans_one_kind_and_says_which(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    trace = _two_kinds(tmp_path / "t")

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*dfcompass_exe, "recommend-placement", str(trace), "--devices", "cpu",
                               "-o", str(tmp_path / "p"), *extra], capture_output=True, text=True,
                              env=subprocess_env(), timeout=120)

    first = run("--format", "json")
    assert first.returncode == 0, first.stderr
    plan = json.loads(first.stdout)
    assert plan["tasks"] == 2 and plan["step_kind"].startswith("kind 0: 4 step(s) (0-3)")
    assert {row["op"] for row in plan["schedule"]} == {"aten::mm", "aten::add"}
    assert plan["measured_step_ns"] == pytest.approx((1000 + 100 + 500 + 1000 + 100 + 500 + 1200 + 100 + 500) / 3)
    second = run("--step-kind", "1", "--format", "json")
    assert {row["op"] for row in json.loads(second.stdout)["schedule"]} == {"aten::conv2d", "aten::relu"}
    bad = run("--step-kind", "7")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "no step kind 7" in bad.stderr


def test_the_speedup_range_comes_from_the_spread_and_holds_the_point(tmp_path: Path) -> None:
    from dataclasses import replace as dc_replace

    from tc_analyses.analyses.placement.recommend import _speedup_range, recommend
    from tc_analyses.perf.cost import build_problem
    from tc_analyses.perf.devices import parse_devices

    inputs = TraceInputs(_two_kinds(tmp_path / "t"))
    kind = choose(step_kinds(inputs.activity), None)
    g = build_graph(inputs.trace, inputs.activity, steps=set(kind.kept))
    problem = build_problem(g, parse_devices("cpu,cuda:0=H100"), trace=inputs.activity)
    result, plan = recommend(problem, "t", g, inputs.activity)
    assert result.speedup is not None and result.speedup_range is not None
    low, high = result.speedup_range
    assert low <= result.speedup <= high and low < high  # mm's durations spread from 1000 to 1200 ns
    actual = {t.id: t.actual_device for t in problem.tasks if t.actual_device}
    flat = g.copy()
    for _, attrs in flat.nodes(data=True):
        attrs["p10_ns"] = attrs["p90_ns"] = attrs["median_ns"]
    point_low, point_high = _speedup_range(dc_replace(problem), flat, plan, actual, 0.0)
    assert point_low == pytest.approx(result.speedup) == pytest.approx(point_high)  # no spread, no error: a point
    widened = _speedup_range(problem, flat, plan, actual, 0.1)
    assert widened == pytest.approx((result.speedup / 1.1, 1.1 * result.speedup))  # divided, never below zero


def test_shapes_recorded_in_a_left_out_step_still_describe_the_node(tmp_path: Path) -> None:
    """Graph programs record input shapes in their first step only, which is warm-up."""
    path = tmp_path / "t"
    with TraceBuilder(path, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        for step in range(3):
            t = 1_000 + 10_000 * step
            b.add("node_begin", "1", t, step, "aten::mm", "mm", cpu, 1, step)
            b.add("node_end", "1", t + 500, step, cpu, 1)
            if step == 0:
                b.add("node_args", "1", t, step, "[[8, 8], [8, 8]]", "float32,float32")
    inputs = TraceInputs(path)
    g = build_graph(inputs.trace, inputs.activity, steps={1, 2})
    assert [a[K.INPUT_SHAPES] for _, a in g.nodes(data=True)] == ["[[8, 8], [8, 8]]"]
    assert [a[K.EXECUTIONS] for _, a in g.nodes(data=True)] == [2]
