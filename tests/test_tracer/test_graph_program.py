"""Graph programs: a make_fx step run node by node on lanes, recorded with its exact edges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tracer
from tc_analyses.inputs import TraceInputs
from tc_analyses.model.window import Window
from tc_analyses.model import graph_keys as K

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from tracer.graph_program import GraphProgram, Plan, PlanError, Runner  # noqa: E402


def _step(x: Any, w: Any) -> Any:
    """Two branches of x that join, and a multi-output op whose outputs are read apart."""
    a = torch.relu(x @ w)
    b = torch.tanh(x)
    values, indices = torch.max(a + b @ w, dim=1)
    return values * 2, indices


def _program() -> tuple[GraphProgram, list[Any]]:
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    return GraphProgram(make_fx(_step)(x, w), "toy"), [x, w]


def _fx_edges(program: GraphProgram) -> set[tuple[str, str]]:
    """The program's data dependencies between op nodes (getitems folded into their readers)."""
    ops = set(program.by_name)
    return {(src, node.name) for node in program.nodes for src in node.inputs if src in ops}


def _two_lane_plan(program: GraphProgram) -> Plan:
    names = [n.name for n in program.nodes]
    return Plan({name: f"cpu:{i % 2}" for i, name in enumerate(names)}, tuple(names), "test plan")


def test_the_plan_changes_where_nodes_run_not_what_they_compute() -> None:
    program, inputs = _program()
    expected = _step(*inputs)
    with Runner(program) as runner:
        sequential = runner.step(inputs)
    with Runner(program, _two_lane_plan(program)) as runner:
        planned = runner.step(inputs)
    for got in (sequential, planned):
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_getitem_nodes_are_folded_into_their_readers() -> None:
    program, _ = _program()
    assert all(n.op != "getitem" and "getitem" not in n.name for n in program.nodes)
    assert any(n.op == "aten::max" for n in program.nodes)


def test_recorded_nodes_and_edges_are_the_graph_s(tmp_path: Path) -> None:
    program, inputs = _program()
    plan = _two_lane_plan(program)
    with tracer.Session(tmp_path / "t"):
        with Runner(program, plan) as runner:
            for i in range(3):
                with tracer.step(i):
                    runner.step(inputs, record_args=i == 0)
    run = TraceInputs(tmp_path / "t", window=Window(include_last_step=True))
    g = run.graph
    names = {g.nodes[n][K.NAME]: n for n in g.nodes}
    assert set(names) == set(program.by_name)
    assert all(g.nodes[n][K.EXECUTIONS] == 3 for n in g.nodes)
    # By default the analyses leave the last step out, the graph included.
    assert all(a[K.EXECUTIONS] == 2 for _, a in TraceInputs(tmp_path / "t").graph.nodes(data=True))
    recorded = {(g.nodes[u][K.NAME], g.nodes[v][K.NAME]) for u, v in g.edges}
    assert recorded == _fx_edges(program)
    for name, node in names.items():
        assert g.nodes[node][K.DEVICE] == plan.assignment[name]
    threads = {r.device: r.tid for r in run.activity.nodes}
    assert len(set(threads.values())) == 2, "each lane is its own thread"
    matmul = next(n for n in g.nodes if g.nodes[n][K.OP] == "aten::mm")
    assert g.nodes[matmul][K.INPUT_SHAPES] == "[[16, 16], [16, 16]]"


def test_a_plan_that_does_not_fit_is_a_one_line_error(tmp_path: Path) -> None:
    program, _ = _program()
    names = [n.name for n in program.nodes]
    with pytest.raises(PlanError, match=r"does not fit program toy: 1 unknown nodes \['nope'\], 1 missing"):
        Runner(program, Plan({**{n: "cpu:0" for n in names[1:]}, "nope": "cpu:0"}))
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"assignment": {}}))
    with pytest.raises(PlanError, match="not a placement plan with a schedule"):
        Plan.load(bad)


def test_plan_load_orders_nodes_by_predicted_start(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"schedule": [
        {"node": "b", "device": "cpu:1", "start_ns": 5, "end_ns": 9},
        {"node": "a", "device": "cpu:0", "start_ns": 0, "end_ns": 5},
        {"node": "c", "device": "cpu:0", "start_ns": 5, "end_ns": 7}]}))
    plan = Plan.load(path)
    assert plan.order == ("a", "c", "b")
    assert plan.assignment == {"a": "cpu:0", "b": "cpu:1", "c": "cpu:0"}
    import gzip

    from tracer.graph_program import plan_file_in

    packed = tmp_path / "large" / "plan.json.gz"  # what a plan of over 2,000 ops is written as
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert plan_file_in(packed.parent) == packed
    assert Plan.load(packed).order == plan.order


def test_a_failing_node_fails_the_step_in_the_caller(tmp_path: Path) -> None:
    program, inputs = _program()
    with Runner(program, _two_lane_plan(program)) as runner:
        with pytest.raises(RuntimeError):
            runner.step([torch.randn(3, 5), inputs[1]])  # shapes that do not multiply
        assert torch.equal(runner.step(inputs)[1], _step(*inputs)[1]), "the lanes survive a failed step"


def test_a_lane_on_a_device_the_machine_lacks_is_a_plan_error() -> None:
    program, _ = _program()
    names = [n.name for n in program.nodes]
    missing = torch.cuda.device_count()  # the first index this machine does not have
    with pytest.raises(PlanError, match=rf"lane 'cuda:{missing}': this machine has {missing} CUDA device"):
        Runner(program, Plan({n: f"cuda:{missing}" for n in names}))
    with pytest.raises(PlanError, match="runs on cpu:N and cuda:N lanes|run on cpu:N and cuda:N lanes"):
        Runner(program, Plan({n: "tpu:0" for n in names}))
