"""Nimble-style stream assignment: chains, syncs and the modelled speedup, computed by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import networkx as nx
import pytest

from tc_analyses.analyses.parallelism import (StreamPlan, gpu_work, plan_placement,
                                              plan_streams, plan_trace)
from tc_analyses.errors import AnalysisUnavailable, ConfigurationError, DfcompassError, GraphError
from tc_analyses.export.parallelism_plan import plan_json, plan_text
from tc_analyses.export.parallelism_report import write_parallelism_plot
from tc_analyses.export.parallelism_views import write_plan_view
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import read_activity
from tc_analyses.model.graph import build_graph
from tc_analyses.reader import read_trace
from tests.helpers import fork_join_cpu_trace
from tracer.builder import TraceBuilder


def dag(durations: dict[str, int], edges: list[tuple[str, str]], device: str = "cuda:0") -> nx.DiGraph:
    g = nx.DiGraph()
    for name, ns in durations.items():
        g.add_node(name, **{K.OP: f"op_{name}", K.NAME: name, K.DEVICE: device, K.MEAN_NS: ns})
    g.add_edges_from(edges, **{K.BYTES: 64})
    return g


def by_node(plan: StreamPlan) -> dict:
    return {op.node: op for op in plan.ops}


def assert_chains_are_paths(plan: StreamPlan) -> None:
    deps = set(plan.dependencies)
    for chain in plan.chains:
        assert all((u, v) in deps for u, v in zip(chain, chain[1:])), chain


DIAMOND = dict(durations={"a": 10_000, "b": 30_000, "c": 20_000, "d": 5_000},
               edges=[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_diamond() -> None:
    plan = plan_streams(dag(**DIAMOND), sync_ns=2_000)
    # Critical path a-b-d (10+30+5 = 45 us) is one chain; c is the other: 4 ops - 2 matched = 2 chains.
    assert plan.chains == (("a", "b", "d"), ("c",))
    assert (plan.matching, plan.streams, plan.lane, plan.device) == (2, 2, "stream", "cuda:0")
    # Syncs: a -> c (stream 0 -> 1) and c -> d (stream 1 -> 0).
    assert [(e.producer, e.consumer, e.src_stream, e.dst_stream, e.bytes) for e in plan.sync_edges] == [
        ("a", "c", 0, 1, 64), ("c", "d", 1, 0, 64)]
    assert plan.syncs == 2 and plan.redundant_syncs == 0
    ops = by_node(plan)
    # Plan: a 0-10, b 10-40 on stream 0; c waits a's event: 10+2 = 12, runs 12-32 on stream 1;
    # d waits b (stream order) and c's event 32+2 = 34: starts max(40, 34) = 40, ends 45 us.
    assert [(n, ops[n].stream, ops[n].order, ops[n].start_ns, ops[n].end_ns) for n in "abcd"] == [
        ("a", 0, 0, 0, 10_000), ("b", 0, 1, 10_000, 40_000), ("c", 1, 0, 12_000, 32_000), ("d", 0, 2, 40_000, 45_000)]
    assert ops["c"].waits_for == ("a",) and ops["d"].waits_for == ("c",)
    assert ops["a"].records_event and ops["c"].records_event and not ops["b"].records_event
    # Baseline: one stream, 10+30+20+5 = 65 us; speedup 65/45.
    assert (plan.baseline_ns, plan.plan_ns) == (65_000, 45_000)
    assert plan.speedup == pytest.approx(65 / 45)
    assert (plan.total_work_ns, plan.critical_path_ns, plan.critical_path) == (65_000, 45_000, ("a", "b", "d"))
    assert plan.ideal_speedup == pytest.approx(65 / 45)
    # b || c: width 2; ASAP b 10-40 and c 10-30 overlap: 2 at once.
    assert (plan.width, plan.peak_concurrency, plan.components) == (2, 2, 1)
    assert [ops[n].baseline_start_ns for n in "abcd"] == [0, 10_000, 40_000, 60_000]
    assert plan.model.startswith("modelled:")


def test_costly_syncs_make_the_plan_slower() -> None:
    plan = plan_streams(dag(**DIAMOND), sync_ns=100_000)
    # c starts at 10+100 = 110, ends 130; d at 130+100 = 230, ends 235 us: 65/235 < 1.
    assert plan.plan_ns == 235_000
    assert plan.speedup == pytest.approx(65 / 235)
    assert any("cost more than the overlap gains" in f.text for f in plan.findings)


def test_chain_has_one_stream() -> None:
    plan = plan_streams(dag({"a": 5, "b": 7, "c": 9}, [("a", "b"), ("b", "c")]))
    assert plan.chains == (("a", "b", "c"),) and plan.streams == 1 and plan.syncs == 0
    assert plan.speedup == 1.0 and plan.plan_ns == plan.baseline_ns == 21
    assert (plan.width, plan.peak_concurrency) == (1, 1)
    assert any("single chain" in f.text for f in plan.findings)


def test_transitive_edge_is_reduced() -> None:
    plan = plan_streams(dag({"a": 1, "b": 1, "c": 1}, [("a", "b"), ("b", "c"), ("a", "c")]))
    assert (plan.edges, plan.reduced_edges) == (3, 2)
    assert plan.dependencies == (("a", "b"), ("b", "c"))  # a -> c is implied by a -> b -> c
    assert plan.chains == (("a", "b", "c"),) and plan.syncs == 0


def fork_join() -> nx.DiGraph:
    xs = [f"x{i}" for i in range(1, 6)]
    return dag({"s": 1_000, **{x: 10_000 for x in xs}, "t": 1_000}, [("s", x) for x in xs] + [(x, "t") for x in xs])


def test_wide_fork_join_merged_onto_max_streams() -> None:
    plan = plan_streams(fork_join(), max_streams=2, sync_ns=0)
    # 7 ops - 2 matched (s -> x1 -> t, the critical path) = 5 chains: [s x1 t] 12 us, [x2]..[x5] 10 us.
    assert plan.chains == (("s", "x1", "t"), ("x2",), ("x3",), ("x4",), ("x5",))
    # Heaviest onto the least loaded: [s x1 t] -> 0 (12), x2 -> 1 (10), x3 -> 1 (20), x4 -> 0 (22), x5 -> 1 (30).
    assert [lane.chains for lane in plan.lanes] == [(0, 3), (1, 2, 4)]
    ops = by_node(plan)
    assert [(n, ops[n].stream, ops[n].order) for n in ("s", "x1", "x4", "t", "x2", "x3", "x5")] == [
        ("s", 0, 0), ("x1", 0, 1), ("x4", 0, 2), ("t", 0, 3), ("x2", 1, 0), ("x3", 1, 1), ("x5", 1, 2)]
    # 6 cross-stream edges (s->x2, s->x3, s->x5, x2->t, x3->t, x5->t); stream order implies all but
    # s -> x2 (the first op of stream 1) and x5 -> t (the last one).
    assert [(e.producer, e.consumer) for e in plan.sync_edges] == [("s", "x2"), ("x5", "t")]
    assert (plan.syncs, plan.redundant_syncs) == (2, 4)
    # Stream 0: s 0-1, x1 1-11, x4 11-21; stream 1: x2 1-11, x3 11-21, x5 21-31; t 31-32 us.
    assert (plan.baseline_ns, plan.plan_ns) == (52_000, 32_000)
    assert plan.speedup == pytest.approx(52 / 32)
    assert plan.ideal_speedup == pytest.approx(52 / 12)  # critical path s-x1-t
    assert (plan.width, plan.peak_concurrency) == (5, 5)
    assert any("merged onto 2 streams" in f.text for f in plan.findings)
    assert_chains_are_paths(plan)


def test_fork_join_with_sync_cost() -> None:
    plan = plan_streams(fork_join(), max_streams=2, sync_ns=1_000)
    # x2 starts at 1+1 = 2: stream 1 runs 2-32; t waits x5's event at 33, ends 34 us.
    assert plan.plan_ns == 34_000
    unlimited = plan_streams(fork_join(), max_streams=8, sync_ns=1_000)
    # 5 streams: every x starts at 1 (x1) or 2 (the others), ends by 12; t at 12+1 = 13, ends 14 us.
    assert (unlimited.streams, unlimited.syncs, unlimited.plan_ns) == (5, 8, 14_000)


def test_plan_placement_matches_the_plan() -> None:
    plan = plan_streams(dag(**DIAMOND), sync_ns=2_000)
    problem, placement = plan_placement(plan)
    assert [d.name for d in problem.devices] == ["stream 0", "stream 1"]
    assert {t.actual_device for t in problem.tasks} == {"stream 0"}
    assert placement.assignment == {0: "stream 0", 1: "stream 0", 2: "stream 1", 3: "stream 0"}
    assert placement.makespan_ns == 45_000
    assert problem.transfer_ns("stream 0", "stream 1", 1) == 2_000


def test_errors_name_the_graph() -> None:
    with pytest.raises(AnalysisUnavailable, match="no ops to plan"):
        plan_streams(nx.DiGraph())
    g = dag({"a": 1, "b": 1}, [("a", "b"), ("b", "a")])
    g.graph[K.SOURCE] = "/x/trace"
    with pytest.raises(GraphError, match="^/x/trace: .*cycle"):
        plan_streams(g)
    g = dag({"a": 1, "b": 1, "c": 1}, [("a", "b"), ("c", "a"), ("b", "c")])  # a cycle behind a backward edge
    with pytest.raises(GraphError, match="cycle"):
        plan_streams(g)
    backward = dag({"d": 5_000, "c": 20_000, "b": 30_000, "a": 10_000}, DIAMOND["edges"])  # type: ignore[arg-type]
    assert plan_streams(backward, sync_ns=2_000).plan_ns == plan_streams(dag(**DIAMOND), sync_ns=2_000).plan_ns
    with pytest.raises(ConfigurationError, match="no device 'tpu' in the trace"):  # a usage error: exit 2
        plan_streams(dag(**DIAMOND), device="tpu")
    assert issubclass(AnalysisUnavailable, DfcompassError)


def test_report_json_text_and_plot(tmp_path: Path) -> None:
    plan = plan_streams(dag(**DIAMOND), sync_ns=2_000)
    data = plan_json(plan)
    json.dumps(dataclasses.asdict(plan), default=str)  # what the lead's reports do
    op_c = next(o for o in data["ops"] if o["node"] == "c")
    assert (op_c["op"], op_c["name"], op_c["stream"], op_c["order"], op_c["waits_for"]) == ("op_c", "c", 1, 0, ["a"])
    text = plan_text(plan)
    assert "2 stream(s) (max 4), 2 sync(s) of 2000 ns" in text and "speedup:    1.44x" in text
    assert "waits on event(a)" in text
    first = [p.read_bytes() for p in write_parallelism_plot(plan, tmp_path / "1")]
    second = [p.read_bytes() for p in write_parallelism_plot(plan, tmp_path / "2")]
    assert first == second and first[0].startswith(b"\x89PNG") and b"<svg" in first[1]


def test_plan_view_opens_as_a_trace(tmp_path: Path) -> None:
    plan = plan_streams(dag(**DIAMOND), sync_ns=2_000)
    written = write_plan_view(plan, None, tmp_path / "view")
    trace = read_trace(written["predicted"])
    begins = trace.table("node_begin")
    # Start 1000 ns (no real trace); c moved to stream 1 at 12 us.
    assert sorted(zip(begins["timestamp"].tolist(), begins.text("name").tolist())) == [
        (1_000, "a (op_a)"), (11_000, "b (op_b)"), (13_000, "c (op_c) (from stream 0)"), (41_000, "d (op_d)")]
    assert sorted(trace.table("thread_info").text("name").tolist()) == [
        "stream 0: kept here", "stream 0: moved here", "stream 1: kept here", "stream 1: moved here"]
    assert len(trace.table("tensor_edge")) == 4  # a->b, b->d on stream 0; the syncs a->c, c->d
    assert (written["views"] / "xml").is_dir() and written["graph.dot"].exists()
    assert json.loads(written["plan.json"].read_text())["syncs"] == 2


def test_a_large_plan_is_one_compressed_file_each_and_no_drawing(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Output scales with what a user reads: above the drawing limit, the graph and the plan are
    one gzip file each (the full data) and no DOT is written."""
    import gzip

    from tc_analyses.export import placement_views

    monkeypatch.setattr(placement_views, "DRAWN_GRAPH_NODES", 3)
    written = write_plan_view(plan_streams(dag(**DIAMOND), sync_ns=2_000), None, tmp_path / "view")
    assert not (tmp_path / "view" / "graph.dot").exists() and not (tmp_path / "view" / "plan.json").exists()
    graph = nx.read_graphml(written["graph.graphml.gz"])
    assert graph.number_of_nodes() == 4 and graph.number_of_edges() == 4
    with gzip.open(written["plan.json.gz"], "rt") as handle:
        assert json.load(handle)["syncs"] == 2
    # A smaller plan written over it replaces it: verify must never find the earlier one.
    monkeypatch.setattr(placement_views, "DRAWN_GRAPH_NODES", 2_000)
    write_plan_view(plan_streams(dag(**DIAMOND), sync_ns=2_000), None, tmp_path / "view")
    assert (tmp_path / "view" / "plan.json").exists() and not (tmp_path / "view" / "plan.json.gz").exists()


# ---------------------------------------------------------------------------------------------
# GPU: each op's work is the GPU time it launched.

def gpu_trace(tmp_path: Path) -> Path:
    out = tmp_path / "gpu"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, gpu = b.device("cpu", ts=10), b.device("cuda:0", ts=10)
        b.add("step_begin", "1", 100, 0, 1)
        launches = {1: (100, "mm1"), 2: (200, "mm2"), 3: (400, "add")}
        for corr, (ts, name) in launches.items():
            b.add("node_begin", "1", ts, corr, "aten::" + name[:2], name, gpu, 1, 0)
            b.add("api_enter", "1", ts + 10, 1, "cudaLaunchKernel", corr)
            b.add("api_exit", "1", ts + 20, 1, "cudaLaunchKernel", corr)
            b.add("node_end", "1", ts + 90, corr, gpu, 1)
        b.add("node_begin", "1", 300, 4, "aten::view", "x", cpu, 1, 0)  # launches nothing: contracted
        b.add("node_end", "1", 390, 4, cpu, 1)
        b.add("tensor_edge", "1", 400, 1, 3, 11, 4096, gpu, gpu)  # mm1 -> add
        b.add("tensor_edge", "1", 300, 2, 4, 12, 4096, gpu, cpu)  # mm2 -> x -> add
        b.add("tensor_edge", "1", 400, 4, 3, 13, 4096, cpu, gpu)
        kernels = [(1, 1_000, 2_000, "k1"), (2, 2_000, 4_000, "k2"), (3, 4_300, 4_800, "k3"), (9, 5_000, 5_050, "orphan")]
        for corr, start, end, name in kernels:
            b.add("kernel_begin", "g", start, gpu, 7, corr, name, 1, 1, 1, 1, 1, 1)
            b.add("kernel_end", "g", end, gpu, 7, corr)
        b.add("memcpy_begin", "g", 4_000, gpu, 7, 2, 4096, "DtoD", gpu, gpu)  # also launched by mm2
        b.add("memcpy_end", "g", 4_300, gpu, 7, 2)
        b.add("step_end", "1", 5_100, 0, 1)
    return out


def test_gpu_work_joins_launches(tmp_path: Path) -> None:
    trace = read_trace(gpu_trace(tmp_path))
    graph = build_graph(trace)
    device, work, unattributed = gpu_work(graph, read_activity(trace))
    names = {graph.nodes[n][K.NAME]: w for n, w in work.items()}
    # mm1: k1 1000 ns; mm2: k2 2000 + memcpy 300; add: k3 500; the orphan kernel (50 ns) has no launch.
    assert (device, names, unattributed) == ("cuda:0", {"mm1": 1_000, "mm2": 2_300, "add": 500}, 50)


def test_gpu_plan(tmp_path: Path) -> None:
    path = gpu_trace(tmp_path)
    plan = plan_trace(path, sync_ns=0)
    names = {op.node: op.name for op in plan.ops}
    # x is contracted: mm1 -> add and mm2 -> add. Critical path mm2 -> add (2300 + 500) is chain 0.
    assert [[names[n] for n in c] for c in plan.chains] == [["mm2", "add"], ["mm1"]]
    assert (plan.device, plan.lane, plan.work, plan.streams, plan.syncs) == ("cuda:0", "stream", "gpu time launched", 2, 1)
    # Baseline 1000 + 2300 + 500 = 3800; plan: mm1 || mm2, add after mm2 at 2300: 2800 ns.
    assert (plan.baseline_ns, plan.plan_ns, plan.unattributed_ns) == (3_800, 2_800, 50)
    # With the default 2 us sync: add waits mm1's event at 1000 + 2000 = 3000, ends 3500.
    assert plan_trace(path).plan_ns == 3_500
    assert "streams:" in plan_text(plan) and plan.source == str(path)


# ---------------------------------------------------------------------------------------------
# End to end on a real PyTorch CPU trace.

@pytest.mark.slow
@pytest.mark.torch
def test_torch_branchy_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from tracer.torch_source import TorchRecorder

    torch.manual_seed(0)
    weights = [torch.randn(384, 384) for _ in range(3)]
    x = torch.randn(384, 384)
    out = tmp_path / "trace"
    with TorchRecorder(str(out), cuda=False):
        with torch.no_grad():
            a = torch.relu(torch.mm(x, weights[0]))
            b = torch.tanh(torch.mm(x, weights[1]))
            c = torch.mm(x, weights[2])
            torch.sum(a + b + c)
    plan = plan_trace(out, max_streams=4, cores=4 * torch.get_num_threads())  # room for 4 inter-op threads
    graph = build_graph(read_trace(out))
    assert plan.lane == "thread" and plan.device == "cpu"
    assert plan.streams >= 2 and plan.syncs >= 1
    assert sorted(op.node for op in plan.ops) == sorted(graph.nodes)  # every node once
    assert sorted(n for c in plan.chains for n in c) == sorted(graph.nodes)
    assert_chains_are_paths(plan)
    assert plan.speedup >= 1.0 and plan.plan_ns >= plan.critical_path_ns
    assert "threads:" in plan_text(plan)
    written = write_plan_view(plan, out, tmp_path / "view")
    predicted = read_trace(written["predicted"])
    assert len(predicted.table("node_begin")) == plan.nodes
    # Lined up with the real run: the plan starts at the real trace's first op.
    assert int(predicted.table("node_begin")["timestamp"].min()) == int(read_trace(out).table("node_begin")["timestamp"].min())


def _fork_join_cpu_trace(path: Path, intra_op_threads: int) -> Path:
    """a and b independent (1 us each), c joins them; recorded with `intra_op_threads` per op."""
    return fork_join_cpu_trace(path, ((100, 1_100), (1_100, 2_100), (2_100, 2_600)),
                               {"torch_num_threads": intra_op_threads})


def test_a_plan_never_uses_more_threads_than_the_free_cores(tmp_path: Path) -> None:
    """Two cores already busy with two intra-op threads per op leave room for one inter-op thread."""
    trace = _fork_join_cpu_trace(tmp_path / "t", intra_op_threads=2)
    busy = plan_trace(trace, sync_ns=0, cores=2)
    assert (busy.streams, busy.speedup) == (1, 1.0)
    assert "2 core(s) and 2 intra-op thread(s) per op leave room for 1 inter-op thread(s)" in busy.findings[-1].text
    asked = plan_trace(trace, sync_ns=0, max_streams=4, cores=2)
    assert asked.streams == 1 and "--max-streams 4 was lowered to 1" in asked.findings[-1].text
    free = plan_trace(trace, sync_ns=0, cores=4)
    assert free.streams == 2 and free.plan_ns == 1_500 and free.baseline_ns == 2_500


def test_trace_without_edges_is_refused(tmp_path: Path) -> None:
    from tc_analyses.analyses.parallelism import plan_trace

    out = tmp_path / "noedges"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        for nid in range(2):
            b.add("node_begin", "1", 100 + 100 * nid, nid, "op", f"n{nid}", cpu, 1, 0)
            b.add("node_end", "1", 150 + 100 * nid, nid, cpu, 1)
    with pytest.raises(AnalysisUnavailable, match="noedges: no dfc:tensor_edge events"):
        plan_trace(out)


def test_no_edges_is_decided_before_a_graph_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace without edges (a Kineto import), with steps or not, says so from its columns; a single
    node still gets its (trivial) plan, as when the graph decided."""
    from tc_analyses.analyses.parallelism import plan as plan_module
    from tc_analyses.model import step_kinds
    from tc_analyses.model.activity import read_activity

    def trace_of(name: str, nodes: int, steps: int) -> Path:
        out = tmp_path / name
        with TraceBuilder(out, clock_offset_ns=0) as b:
            cpu = b.device("cpu", 10)
            for step in range(steps or 1):
                base = 1_000 * step
                if steps:
                    b.add("step_begin", "1", base + 50, step, 1)
                for k in range(nodes):
                    nid = step * nodes + k
                    b.add("node_begin", "1", base + 100 + 100 * k, nid, "op", f"n{k}", cpu, 1, step)
                    b.add("node_end", "1", base + 150 + 100 * k, nid, cpu, 1)
                if steps:
                    b.add("step_end", "1", base + 900, step, 1)
        return out

    for name, nodes, steps in (("flat", 3, 0), ("stepped", 3, 4), ("one", 1, 4), ("one-flat", 1, 0)):
        trace = read_trace(trace_of(name, nodes, steps))
        activity = read_activity(trace)
        assert step_kinds.nodes_of_kind(trace, activity) == step_kinds.graph_of_kind(trace, activity)[0].number_of_nodes()
    with monkeypatch.context() as patched:
        patched.setattr(plan_module, "graph_table", lambda *a, **k: pytest.fail("a graph was built"))
        patched.setattr(plan_module, "table_of_kind", lambda *a, **k: pytest.fail("a graph was built"))
        for name in ("flat", "stepped"):
            with pytest.raises(AnalysisUnavailable, match="no dfc:tensor_edge events"):
                plan_trace(tmp_path / name)
    for name in ("one", "one-flat"):  # one node: no parallelism to promise, the plan is made
        assert plan_trace(tmp_path / name).nodes == 1


def test_large_graphs_skip_the_reduction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past REDUCTION_LIMIT ops the plan matches on the recorded edges: a -> c stays, and it says so."""
    from tc_analyses.analyses.parallelism import chains

    monkeypatch.setattr(chains, "REDUCTION_LIMIT", 2)
    g = dag({"a": 1000, "b": 1000, "c": 1000}, [("a", "b"), ("b", "c"), ("a", "c")])
    plan = plan_streams(g, sync_ns=0)
    assert plan.reduced_edges == 3 and plan.width is None  # the transitive edge 0 -> 2 is kept
    assert any("transitive reduction and the width were skipped" in f.text for f in plan.findings)


def test_a_dense_plan_s_svg_stays_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past RASTER_ABOVE ops the bars are an embedded image: the SVG no longer grows with the ops
    (at 333 k ops it was 134 MB of paths, and a job report inlines one per rank)."""
    from tc_analyses.export import parallelism_report

    n = 3_000
    plan = plan_streams(dag({f"n{i}": 1_000 + i % 7 for i in range(n)}, [(f"n{i}", f"n{i + 1}") for i in range(n - 1)]),
                        sync_ns=0)
    monkeypatch.setattr(parallelism_report, "RASTER_ABOVE", n + 1)
    vector = write_parallelism_plot(plan, tmp_path / "vector")[1].stat().st_size
    monkeypatch.setattr(parallelism_report, "RASTER_ABOVE", n // 2)
    raster = write_parallelism_plot(plan, tmp_path / "raster")[1]
    assert raster.stat().st_size < vector / 5 and b"<image" in raster.read_bytes()


def test_the_lane_image_marks_the_pixels_the_bars_cover() -> None:
    """Dense plans draw their bars as an image: each lane's pixels covered by a bar are blue, red
    where a critical-path bar covers them, clear elsewhere; a bar of no duration is not drawn."""
    from tc_analyses.export.plotting import LANE_IMAGE_COLUMNS, lane_image

    columns = LANE_IMAGE_COLUMNS
    image = lane_image([0.0, 50.0, 10.0, 70.0], [25.0, 10.0, 40.0, 0.0], [0, 0, 1, 1], [False, True, False, True],
                       2, 100.0)
    assert image.shape == (20, columns, 4)
    lane0, lane1 = image[5], image[15]  # rows inside each lane's bar
    assert (image[0] == 0).all() and (image[9] == 0).all()  # the gaps between lanes stay clear
    red, blue = lane0[columns // 2 + 1], lane0[1]
    assert red[0] > red[2] and blue[2] > blue[0] and red[3] == blue[3] == 255
    at = lambda x: int(x / 100.0 * columns)  # noqa: E731 - the column of time x
    assert (lane0[at(0):at(25)] == blue).all() and (lane0[at(25) + 1:at(50)] == 0).all()
    assert (lane0[at(50):at(60)] == red).all() and (lane0[at(60) + 1:] == 0).all()
    assert (lane1[at(10):at(50)] == blue).all() and (lane1[at(50) + 1:] == 0).all()  # the 0-long bar at 70: none


def test_a_loop_without_step_marks_is_planned_one_iteration_at_a_time(tmp_path: Path) -> None:
    """`dfcompass record` of a loop marks no steps: the plan covers one inferred iteration (its
    set-up and the other iterations left out) and says so, instead of planning the whole run."""
    import tracer
    from tc_analyses.analyses.parallelism import plan_trace

    with tracer.Session(str(tmp_path / "loop")):
        with tracer.node("load", op="load") as n:
            weights = bytearray(64)
            n.output(weights)
        for _ in range(6):
            with tracer.node("a", op="op_a", inputs=[weights]) as a:
                left = bytearray(8)
                a.output(left)
            with tracer.node("b", op="op_b", inputs=[weights]) as b:
                right = bytearray(8)
                b.output(right)
            with tracer.node("join", op="op_join", inputs=[left, right]):
                pass
    plan = plan_trace(tmp_path / "loop", cores=4)
    assert sorted(op.op for op in plan.ops) == ["op_a", "op_b", "op_join"]  # one iteration
    assert any(f.kind == "steps" and "steps inferred" in f.text for f in plan.findings)
