"""Analytic op costs, measured vs modelled costs, and transfer fits."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from tc_analyses.model import graph_keys as K
from tc_analyses.model.graph import build_graph
from tc_analyses.perf.cost import (build_problem, estimate_op, fit_link, modelled_ns, observed_copies,
                                   parse_shapes, task_memory)
from tc_analyses.perf.devices import parse_devices, spec
from tc_analyses.perf.problem import CostSource, Device
from tc_analyses.reader import read_trace
from tests.data import make_traces
from tracer.builder import TraceBuilder

ALL_CLASSES = Path(make_traces.__file__).resolve().parent / "traces" / "succeed" / "all-classes"


def test_parse_shapes() -> None:
    assert parse_shapes("[[8, 3, 32, 32], [64, 3, 7, 7], [64], [], []]") == [[8, 3, 32, 32], [64, 3, 7, 7], [64],
                                                                               [], []]
    assert parse_shapes("not a list") == []


def test_conv_flops() -> None:
    # 2 * out elements * C_in * R * S, out = 2 x 8 x 6 x 6 (taken from the output bytes)
    est = estimate_op("aten::conv2d", "[[2, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []]",
                      "float32,float32,float32,,,,", out_bytes=2 * 8 * 6 * 6 * 4)
    assert est.known and est.flops == 2 * (2 * 8 * 6 * 6) * (3 * 3 * 3)
    assert est.bytes == (2 * 3 * 8 * 8 + 8 * 3 * 3 * 3 + 8) * 4 + 2 * 8 * 6 * 6 * 4
    # without the output size: stride 1, size-preserving padding
    assert estimate_op("aten::conv2d", "[[1, 3, 32, 32], [64, 3, 7, 7]]", "float32,float32").flops == \
        2 * (64 * 32 * 32) * (3 * 7 * 7)
    back = estimate_op("aten::convolution_backward", "[[2, 8, 6, 6], [2, 3, 8, 8], [8, 3, 3, 3]]",
                       "float32,float32,float32")
    assert back.flops == 2 * 2 * (2 * 8 * 6 * 6) * (3 * 3 * 3)


def test_linear_and_matmul_flops() -> None:
    assert estimate_op("aten::linear", "[[2, 288], [10, 288], [10]]", "float32,float32,float32").flops == \
        2 * 2 * 288 * 10 + 2 * 10
    assert estimate_op("aten::mm", "[[10, 2], [2, 288]]", "float32,float32").flops == 2 * 10 * 2 * 288
    assert estimate_op("aten::matmul", "[[4, 5, 6], [6, 7]]", "float32,float32").flops == 2 * 4 * 5 * 6 * 7
    assert estimate_op("aten::bmm", "[[3, 4, 5], [3, 5, 6]]", "bfloat16,bfloat16").flops == 2 * 3 * 4 * 5 * 6
    assert estimate_op("aten::addmm", "[[6], [4, 5], [5, 6]]", "float32,float32,float32").flops == \
        2 * 4 * 5 * 6 + 4 * 6


def test_elementwise_reduction_and_unknown() -> None:
    add = estimate_op("aten::add_", "[[10, 288], [10, 288], []]", "float32,float32,")
    assert add.known and add.flops == 2880 and add.bytes == 3 * 2880 * 4
    assert estimate_op("aten::softmax", "[[4, 100], [], []]", "float32,,").flops == 5 * 400
    assert estimate_op("aten::layer_norm", "[[4, 100], [], [100], [100]]", "float32,,float32,float32").flops == 8 * 400
    emb = estimate_op("aten::embedding", "[[1000, 64], [8, 16]]", "float32,int64")
    assert emb.flops == 0 and emb.bytes == 8 * 16 * 8 + 2 * 8 * 16 * 64 * 4
    unknown = estimate_op("my::op", "[[1024]]", "int32")
    assert not unknown.known and unknown.flops == 0 and unknown.bytes == 2 * 4096


def test_modelled_time_is_a_roofline_plus_launch() -> None:
    gpu = Device("cuda:0", "H100")
    est = estimate_op("aten::mm", "[[4096, 4096], [4096, 4096]]", "bfloat16,bfloat16")
    expected = round(2 * 4096**3 / spec("H100").half_flops * 1e9) + spec("H100").launch_ns
    assert modelled_ns(est, gpu) == expected


def test_measured_and_modelled_costs_on_all_classes() -> None:
    trace = read_trace(ALL_CLASSES)
    g = build_graph(trace)
    problem = build_problem(g, parse_devices("cpu,cuda:0=H100,cuda:1"), trace=trace)
    problem.validate()
    by_op = {t.op: t.id for t in problem.tasks}
    assert problem.costs[(by_op["read"], "cpu")].source is CostSource.MEASURED
    assert problem.costs[(by_op["read"], "cpu")].ns == 800
    # "read" has no FLOP model: on the GPU it costs its CPU time scaled by the peak ratio, not its bytes
    read_gpu = problem.costs[(by_op["read"], "cuda:0")]
    assert read_gpu.source is CostSource.SCALED
    assert read_gpu.ns >= round(800 * spec("CPU").fp32_flops / spec("H100").fp32_flops) > 0
    assert problem.costs[(by_op["aten::relu"], "cuda:0")].ns == 70
    assert problem.costs[(by_op["aten::relu"], "cuda:1")].source is CostSource.MODELLED  # never ran there
    assert problem.tasks[by_op["read"]].memory_bytes == task_memory(g, by_op["read"]) == 4096
    # one copy size in the trace: the spec is used
    assert problem.links[("cpu", "cuda:0")].source == "link spec: PCIe 4.0 x16"
    assert problem.links[("cuda:0", "cuda:1")].source == "link spec: PCIe 4.0 x16"  # H100 and A100: no shared NVLink
    assert problem.launch_overhead_ns == {"cpu": 0, "cuda:0": 20, "cuda:1": 10}


def test_trace_device_absent_from_devices_is_modelled_everywhere() -> None:
    trace = read_trace(ALL_CLASSES)
    problem = build_problem(build_graph(trace), parse_devices("cpu,hostB:cuda:0"), trace=trace)
    assert all(c.source in (CostSource.MODELLED, CostSource.SCALED)
               for (t, d), c in problem.costs.items() if d == "hostB:cuda:0")
    assert problem.links[("cpu", "hostB:cuda:0")].source == "link spec: 25 Gb Ethernet"


def test_fit_link_recovers_the_generating_line() -> None:
    a, b = 0.04, 1_500.0  # 25 bytes/ns, 1.5 µs
    sizes = [1_000, 10_000, 100_000, 1_000_000]
    link = fit_link(sizes, [round(a * s + b) for s in sizes])
    assert link is not None
    assert link.latency_ns == pytest.approx(b, abs=1) and link.bytes_per_ns == pytest.approx(1 / a, rel=1e-4)
    assert fit_link([4096, 4096], [300, 310]) is None  # one size only


def test_fitted_link_from_trace_copies(tmp_path: Path) -> None:
    a, b = 0.02, 2_000
    with TraceBuilder(tmp_path / "t", clock_offset_ns=0, overwrite=True) as tb:
        cpu, gpu = tb.device("cpu", 100), tb.device("cuda:0", 100)
        t = 1_000
        for corr, size in enumerate([4_096, 65_536, 1_048_576, 65_536]):
            tb.add("memcpy_begin", "gpu0-q1", t, gpu, 1, corr, size, "HtoD", cpu, gpu)
            tb.add("memcpy_end", "gpu0-q1", t + round(a * size + b), gpu, 1, corr)
            t += 100_000
    trace = read_trace(tmp_path / "t")
    copies = observed_copies(trace)
    assert list(copies) == [("cpu", "cuda:0")]
    link = fit_link(*copies[("cpu", "cuda:0")])
    assert link is not None and link.source == "fitted from 4 copies in the trace"
    assert link.latency_ns == pytest.approx(b, abs=1) and link.bytes_per_ns == pytest.approx(1 / a, rel=1e-4)
    empty = nx.DiGraph()
    empty.graph[K.EXECUTION_NODES] = {}
    problem = build_problem(empty, parse_devices("cpu,cuda:0"), trace=trace)
    assert problem.links[("cpu", "cuda:0")] == link
    assert problem.links[("cuda:0", "cpu")].source == "link spec: PCIe 4.0 x16"  # no copies that way


def test_views_cost_only_their_dispatch() -> None:
    view = estimate_op("aten::view", "[[64, 1024], []]", "float32,")
    assert view.known and view.flops == 0 and view.bytes == 0
    assert modelled_ns(view, Device("cuda:0", "A100")) == spec("A100").launch_ns


def test_unmodelled_ops_are_listed_and_views_are_not() -> None:
    import networkx as nx

    from tc_analyses.perf.cost import unmodelled_ops

    g = nx.DiGraph()
    for i, op in enumerate(["aten::lstm", "aten::lstm", "aten::t", "aten::mm", "aten::_transformer_encoder_layer_fwd"]):
        g.add_node(i, op=op)
    assert unmodelled_ops(g) == {"aten::lstm": 2, "aten::_transformer_encoder_layer_fwd": 1}
