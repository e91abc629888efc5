"""The computation graph: aggregation across steps, critical path, slack and the graph files."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest

from tc_analyses.errors import DfcompassError, GraphError
from tc_analyses.export.graph_formats import node_label, write_dot, write_graphml
from tc_analyses.model import graph_keys as K
from tc_analyses.model.graph import build_graph, critical_path, slack
from tc_analyses.model.graph_keys import EdgeKind
from tc_analyses.reader import read_trace
from tests.data import make_traces
from tracer.builder import TraceBuilder

ALL_CLASSES = Path(make_traces.__file__).resolve().parent / "traces" / "succeed" / "all-classes"


@pytest.fixture(scope="module")
def all_classes() -> nx.DiGraph:
    return build_graph(read_trace(ALL_CLASSES))


def by_op(g: nx.DiGraph) -> dict[str, int]:
    return {attrs[K.OP]: n for n, attrs in g.nodes(data=True)}


def test_all_classes_nodes_aggregate_the_three_steps(all_classes: nx.DiGraph) -> None:
    g = all_classes
    assert sorted(g.nodes[n][K.OP] for n in g) == ["aten::relu", "aten::to", "read"]
    expected = {"read": ("cpu", 800), "aten::to": ("cuda:0", 60), "aten::relu": ("cuda:0", 70)}
    for n, attrs in g.nodes(data=True):
        device, duration = expected[attrs[K.OP]]
        assert attrs[K.EXECUTIONS] == 3
        assert attrs[K.DEVICE] == device
        assert attrs[K.DURATIONS_NS] == [duration] * 3  # make_traces.py: begin/end offsets
        assert attrs[K.MEAN_NS] == attrs[K.MIN_NS] == attrs[K.MAX_NS] == duration
        assert attrs[K.MEASURED] == {device: True}
    assert g.nodes[by_op(g)["aten::to"]][K.INPUT_SHAPES] == "[[1024], []]"
    assert g.nodes[by_op(g)["aten::to"]][K.INPUT_DTYPES] == "int32,"
    # the nine executions map onto the three nodes, step after step
    assert list(g.graph[K.EXECUTION_NODES].values()) == [by_op(g)[o] for o in ["read", "aten::to", "aten::relu"]] * 3


def test_all_classes_edges(all_classes: nx.DiGraph) -> None:
    g = all_classes
    ops = by_op(g)
    assert set(g.edges) == {(ops["read"], ops["aten::to"]), (ops["aten::to"], ops["aten::relu"])}
    transfer = g.edges[ops["read"], ops["aten::to"]]
    assert (transfer[K.KIND], transfer[K.SRC_DEVICE], transfer[K.DST_DEVICE]) == (EdgeKind.TRANSFER, "cpu", "cuda:0")
    data = g.edges[ops["aten::to"], ops["aten::relu"]]
    assert (data[K.KIND], data[K.SRC_DEVICE], data[K.DST_DEVICE]) == (EdgeKind.DATA, "cuda:0", "cuda:0")
    for _, _, attrs in g.edges(data=True):
        assert attrs[K.BYTES] == 4096 and attrs[K.COUNT] == 3
    assert g.graph[K.CROSS_STEP_EDGES] == []


def test_all_classes_critical_path_is_the_chain(all_classes: nx.DiGraph) -> None:
    g = all_classes
    ops = by_op(g)
    assert critical_path(g) == [ops["read"], ops["aten::to"], ops["aten::relu"]]
    assert slack(g) == {n: 0 for n in g}


def test_critical_path_weighs_nodes_exactly() -> None:
    g = nx.DiGraph()
    # a -> b -> d is longer by edges, a -> c -> d by node durations
    for n, w in {"a": 1, "b": 1, "c": 10, "d": 1, "e": 3}.items():
        g.add_node(n, **{K.MEAN_NS: w})
    g.add_edges_from([("a", "b"), ("b", "d"), ("a", "c"), ("c", "d")])
    assert critical_path(g) == ["a", "c", "d"]
    assert slack(g) == {"a": 0, "b": 9, "c": 0, "d": 0, "e": 9}  # makespan 12; e alone takes 3
    assert critical_path(nx.DiGraph()) == [] and slack(nx.DiGraph()) == {}


def test_cycle_raises_graph_error() -> None:
    g = nx.DiGraph()
    g.add_node("x", **{K.OP: "aten::add", K.NAME: "x", K.MEAN_NS: 1})
    g.add_node("y", **{K.OP: "aten::mul", K.NAME: "y", K.MEAN_NS: 1})
    g.add_edges_from([("x", "y"), ("y", "x")])
    for analysis in (critical_path, slack):
        with pytest.raises(GraphError, match="cycle") as info:
            analysis(g)
        assert isinstance(info.value, DfcompassError)
        assert "x[aten::add]" in str(info.value)


def test_cross_step_edges_stay_out_of_the_dag(tmp_path: Path) -> None:
    # An optimizer update in step s writes the weight that step s+1's matmul reads.
    with TraceBuilder(tmp_path / "t", clock_offset_ns=0, overwrite=True) as b:
        cpu = b.device("cpu", 1)
        t, nid, update = 100, 0, None
        for step in range(2):
            b.add("step_begin", "1", t, step, 1)
            mm, upd = nid, nid + 1
            b.add("node_begin", "1", t + 10, mm, "aten::mm", "fc", cpu, 1, step)
            if update is not None:
                b.add("tensor_edge", "1", t + 10, update, mm, nid, 64, cpu, cpu)
            b.add("node_end", "1", t + 20, mm, cpu, 1)
            b.add("node_begin", "1", t + 30, upd, "aten::add_", "optim", cpu, 1, step)
            b.add("tensor_edge", "1", t + 30, mm, upd, nid + 1, 64, cpu, cpu)
            b.add("node_end", "1", t + 40, upd, cpu, 1)
            b.add("step_end", "1", t + 50, step, 1)
            t, nid, update = t + 100, nid + 2, upd
    g = build_graph(read_trace(tmp_path / "t"))
    ops = by_op(g)
    assert list(g.edges) == [(ops["aten::mm"], ops["aten::add_"])]
    assert nx.is_directed_acyclic_graph(g)
    assert g.graph[K.CROSS_STEP_EDGES] == [{"src": ops["aten::add_"], "dst": ops["aten::mm"], K.KIND: EdgeKind.DATA,
                                            K.BYTES: 64, K.COUNT: 1, K.SRC_DEVICE: "cpu", K.DST_DEVICE: "cpu"}]


@pytest.mark.torch
def test_torch_branchy_model_aggregates_steps(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from tracer.torch_source import TorchRecorder

    torch.manual_seed(0)
    a_lin, b_lin = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    out = tmp_path / "trace"
    with TorchRecorder(str(out), wait=0, warmup=0, active=2, cuda=False) as rec:
        for _ in range(2):
            with torch.no_grad():
                a, b = a_lin(x), b_lin(x)
                torch.cat([a + a * b, b], dim=1)
            rec.step()
    trace = read_trace(out)
    assert len(set(trace.table("node_begin")["step"].tolist())) == 2
    g = build_graph(trace)
    assert sorted(g.nodes[n][K.OP] for n in g) == ["aten::add", "aten::cat", "aten::linear", "aten::linear",
                                                   "aten::mul"]
    assert all(g.nodes[n][K.EXECUTIONS] == 2 for n in g)
    assert g.number_of_edges() == 6  # the branchy block of test_torch_edges.py
    assert nx.is_directed_acyclic_graph(g)
    path = critical_path(g)
    assert all(g.has_edge(u, v) for u, v in zip(path, path[1:]))
    assert g.nodes[path[-1]][K.OP] == "aten::cat"
    slacks = slack(g)
    assert set(slacks) == set(g) and all(s >= 0 for s in slacks.values())
    assert all(slacks[n] == 0 for n in path)


def test_graphml_round_trip(all_classes: nx.DiGraph, tmp_path: Path) -> None:
    write_graphml(all_classes, tmp_path / "g.graphml")
    back = nx.read_graphml(tmp_path / "g.graphml")
    assert set(back.nodes) == {str(n) for n in all_classes}
    assert set(back.edges) == {(str(u), str(v)) for u, v in all_classes.edges}
    ops = by_op(all_classes)
    relu = back.nodes[str(ops["aten::relu"])]
    assert relu[K.NAME] == "model.relu (x.*+?)" and relu[K.MEAN_NS] == 70
    assert back.edges[str(ops["read"]), str(ops["aten::to"])][K.KIND] == "TRANSFER"


DOT_NODE = re.compile(r'^  (n\d+) \[label="((?:[^"\\]|\\.)*)", fillcolor="(#[0-9A-F]{6})"\];$')


def _dot_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def test_dot_escapes_hostile_names(tmp_path: Path) -> None:
    hostile = ['<&"\'>', "back\\slash\\n", "new\nline", 'end"\\']
    g = nx.DiGraph()
    for i, name in enumerate(hostile):
        g.add_node(f'weird "id" {i}', **{K.NAME: name, K.OP: f"op{i}", K.DEVICE: ["cpu", "cuda:0"][i % 2],
                                         K.MEAN_NS: i})
    nodes = list(g)
    g.add_edge(nodes[0], nodes[1], **{K.KIND: EdgeKind.TRANSFER, K.BYTES: 8})
    write_dot(g, tmp_path / "g.dot", name='graph "x"')
    lines = (tmp_path / "g.dot").read_text(encoding="utf-8").splitlines()
    assert lines[0] == 'digraph "graph \\"x\\"" {' and lines[-1] == "}"
    parsed = [m for m in map(DOT_NODE.match, lines) if m]
    assert len(parsed) == len(hostile)
    assert [_dot_unescape(m.group(2)) for m in parsed] == [node_label(g.nodes[n]) for n in nodes]
    colours = {g.nodes[n][K.DEVICE]: m.group(3) for n, m in zip(nodes, parsed)}
    assert len(set(colours.values())) == 2
    assert "  n0 -> n1 [label=\"8 B\", style=dashed];" in lines
    # every line is a whole statement: no label leaked a raw line break
    assert len(lines) == 2 + len(hostile) + 1 + 1


def test_graph_from_a_given_activity_is_the_same() -> None:
    from tc_analyses.model.activity import read_activity

    trace = read_trace(ALL_CLASSES)
    given = build_graph(trace, read_activity(trace))
    read = build_graph(trace)
    assert list(given.nodes(data=True)) == list(read.nodes(data=True))
    assert list(given.edges(data=True)) == list(read.edges(data=True))
