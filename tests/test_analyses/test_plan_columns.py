"""The stream plan made on the graph's columns equals the plan made on the networkx graph.

A one-device CPU trace is planned from :class:`~tc_analyses.model.graph_table.GraphTable` without
making the graph (on a 1M-event trace that saves the 3 to 5 s networkx takes); the plan must be
the same object, field for field. The array versions of the chain decomposition and of the sync
pruning are checked against the plain loops they replaced, kept here as the reference.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tc_analyses.analyses.parallelism import chains as decompose
from tc_analyses.analyses.parallelism import plan_trace
from tc_analyses.inputs import TraceInputs
from tc_analyses.model import graph_keys as K
from tc_analyses.model.graph_table import GraphTable
from tracer.builder import TraceBuilder
from tracer.schema import NO_STEP

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
CPU_TRACES = ("tf/keras-cnn", "jobs/ddp-2rank/vm-18735", "cuda/h200-eager/convnet-cpu/trace",
              "cuda/h200-eager/encoder-cpu/trace", "cuda/h200-eager/recommender-cpu/trace")


def random_trace(path: Path, seed: int) -> Path:
    """Steps of the same random DAG of CPU ops (names repeat, so occurrences count), random
    durations (even counts: medians that round half to even), edges forward within a step and
    a few from one step into the next."""
    rng = random.Random(seed)
    size = rng.randint(2, 30)
    names = [f"op{rng.randint(0, size // 2)}" for _ in range(size)]
    edges = {(rng.randrange(v), v) for v in range(1, size) for _ in range(rng.randint(0, 3))}
    steps = rng.choice([0, 2, 4])
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True) as b:
        cpu = b.device("cpu", 10)
        clock, tensor = 100, 1
        for step in range(max(steps, 1)):
            if steps:
                b.add("step_begin", "1", clock, step, 1)
            first = step * size
            for k, name in enumerate(names):
                duration = rng.choice([1_000, 1_001, 2_500, rng.randint(1, 50_000)])
                b.add("node_begin", "1", clock, first + k, name, f"n{name}", cpu, 1, step if steps else 0)
                for u, v in sorted(edges):
                    if v == k:
                        b.add("tensor_edge", "1", clock, first + u, first + v, tensor, 64 * (u + 1), cpu, cpu)
                        tensor += 1
                if step and rng.random() < 0.2:  # from the step before: kept beside the graph, not in it
                    b.add("tensor_edge", "1", clock, first - size + k, first + k, tensor, 8, cpu, cpu)
                    tensor += 1
                clock += duration
                b.add("node_end", "1", clock, first + k, cpu, 1)
                clock += 10
            if steps:
                b.add("step_end", "1", clock, step, 1)
                clock += 10
    return path


def plans(path: Path, monkeypatch: pytest.MonkeyPatch, max_streams: int | None) -> tuple[str, str]:
    """repr of the plan on the networkx graph, and of the plan on the columns (no graph made)."""
    on_graph = TraceInputs(path)
    graph_plan = repr(plan_trace(on_graph.trace, graph=on_graph.graph, activity=on_graph.activity,
                                 max_streams=max_streams, cores=8))
    on_columns = TraceInputs(path)
    with monkeypatch.context() as patched:
        patched.setattr(GraphTable, "to_networkx", lambda self: pytest.fail("the columns path made a graph"))
        columns_plan = repr(plan_trace(on_columns.trace, graph=on_columns.graph_table, activity=on_columns.activity,
                                       max_streams=max_streams, cores=8))
    return graph_plan, columns_plan


@pytest.mark.parametrize("name", CPU_TRACES)
def test_committed_cpu_traces_plan_the_same_on_columns(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (DATA / name).is_dir():
        pytest.skip(f"{name} is not committed here")
    for max_streams in (None, 1, 2):
        graph_plan, columns_plan = plans(DATA / name, monkeypatch, max_streams)
        assert columns_plan == graph_plan


def test_random_traces_plan_the_same_on_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    merged = 0
    for seed in range(24):
        path = random_trace(tmp_path / f"t{seed}", seed)
        for max_streams in (1, 2, 5):
            graph_plan, columns_plan = plans(path, monkeypatch, max_streams)
            assert columns_plan == graph_plan, seed
            merged += "were merged onto" in graph_plan
    assert merged  # some plans merged chains: the sync pruning ran


def test_two_devices_fall_back_to_the_graph(tmp_path: Path) -> None:
    """Ops on two devices: the columns path declines and the graph's path plans the busiest."""
    out = tmp_path / "two"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, other = b.device("cpu", 10), b.device("cpu:1", 11)
        for nid, device in enumerate((cpu, cpu, other)):
            b.add("node_begin", "1", 100 + 1000 * nid, nid, "op", f"n{nid}", device, 1, 0)
            b.add("node_end", "1", 900 + 1000 * nid, nid, device, 1)
        b.add("tensor_edge", "1", 1_000, 0, 1, 1, 64, cpu, cpu)
    inputs = TraceInputs(out)
    from_columns = plan_trace(inputs.trace, graph=inputs.graph_table, activity=inputs.activity, cores=4)
    assert repr(from_columns) == repr(plan_trace(inputs.trace, graph=inputs.graph, activity=inputs.activity, cores=4))
    assert from_columns.device == "cpu" and from_columns.nodes == 2


def test_node_columns_round_as_python(tmp_path: Path) -> None:
    """The mean and median the plan weighs ops by equal the graph's, which Python's round gives."""
    for seed in range(6):
        inputs = TraceInputs(random_trace(tmp_path / f"t{seed}", seed))
        nodes = inputs.graph_table.nodes
        graph = inputs.graph
        assert nodes.mean_ns().tolist() == [a[K.MEAN_NS] for _, a in graph.nodes(data=True)]
        assert nodes.median_ns().tolist() == [a[K.MEDIAN_NS] for _, a in graph.nodes(data=True)]


# The loops the array versions replaced: the reference.

def reference_chains(n: int, nxt: dict[int, int], work: list[int]) -> list[list[int]]:
    has_prev = set(nxt.values())
    found = []
    for head in range(n):
        if head in has_prev:
            continue
        chain = [head]
        while chain[-1] in nxt:
            chain.append(nxt[chain[-1]])
        found.append(chain)
    weight = [sum(work[t] for t in chain) for chain in found]
    return [found[c] for c in sorted(range(len(found)), key=lambda c: (-weight[c], found[c][0]))]


def reference_prune(n: int, cross: list[tuple[int, int]], stream: list[int], pos: list[int],
                    streams: int) -> list[tuple[int, int]]:
    lane_tasks: dict[int, list[int]] = defaultdict(list)
    for t in range(n):
        lane_tasks[stream[t]].append(t)
    incoming: dict[int, list[int]] = defaultdict(list)
    for u, v in cross:
        incoming[v].append(u)
    prev = {t: tasks[i - 1] for tasks in lane_tasks.values() for i, t in enumerate(tasks) if i}
    clock: list[list[int]] = [[] for _ in range(n)]
    kept = []
    for t in range(n):
        base = list(clock[prev[t]]) if t in prev else [-1] * streams
        for u in sorted(incoming[t], reverse=True):
            if base[stream[u]] >= pos[u]:
                continue
            kept.append((u, t))
            base = [max(a, b) for a, b in zip(base, clock[u])]
        base[stream[t]] = pos[t]
        clock[t] = base
    return sorted(kept)


def reference_peak(n: int, work: list[int], edges: list[tuple[int, int]]) -> int:
    pred: dict[int, list[int]] = defaultdict(list)
    for u, v in edges:
        pred[v].append(u)
    start = [0] * n
    for t in range(n):
        start[t] = max((start[p] + work[p] for p in pred[t]), default=0)
    events = sorted([(start[t], 1) for t in range(n) if work[t] > 0] + [(start[t] + work[t], -1) for t in range(n)
                                                                         if work[t] > 0])
    running = peak = 0
    for _, delta in events:  # an end sorts before a start at one time
        running += delta
        peak = max(peak, running)
    return max(peak, 1 if n else 0)


def test_chains_pruning_path_and_peak_equal_the_loops() -> None:
    from tc_analyses.analyses.parallelism.plan import _critical_path
    from tc_analyses.model.dag import critical_path, upward_rank

    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(1, 60)
        edges = sorted({(u, rng.randint(u + 1, n - 1)) for u in range(n - 1) for _ in range(rng.randint(0, 3))})
        work_of = [rng.choice([0, 3, 7, rng.randint(1, 20)]) for _ in range(n)]
        succ: list[list[int]] = [[] for _ in range(n)]
        for u, v in edges:
            succ[u].append(v)
        rank = upward_rank(range(n), work_of, succ)
        heads = np.asarray([v for _, v in edges], dtype=np.int64)
        assert _critical_path([rank[t] for t in range(n)], succ, heads) == critical_path(range(n), work_of, succ,
                                                                                          rank=rank)
        assert decompose.peak_concurrency(work_of, succ) == reference_peak(n, work_of, edges)
        nxt: dict[int, int] = {}
        taken = set()
        for u, v in rng.sample(edges, len(edges)):
            if u not in nxt and v not in taken:
                nxt[u], _ = v, taken.add(v)
        work = [rng.choice([0, 5, 10, rng.randint(1, 100)]) for _ in range(n)]
        next_of = np.full(n, -1, dtype=np.int64)
        next_of[list(nxt)] = list(nxt.values())
        found = decompose.chains(next_of, np.asarray(work, dtype=np.int64))
        expected = reference_chains(n, nxt, work)
        ends = np.cumsum(found.sizes).tolist()
        tasks = found.tasks.tolist()
        assert [tasks[a:b] for a, b in zip([0] + ends, ends)] == expected
        assert found.work == [sum(work[t] for t in chain) for chain in expected]
        streams = rng.randint(1, 4)
        lane_of_chain, streams = decompose.merge(found.work, streams)
        stream = np.asarray(lane_of_chain, dtype=np.int64)[found.of_task]
        pos = np.zeros(n, dtype=np.int64)
        seen: dict[int, int] = defaultdict(int)
        for t in range(n):
            pos[t], seen[int(stream[t])] = seen[int(stream[t])], seen[int(stream[t])] + 1
        cross = [(u, v) for u, v in edges if stream[u] != stream[v]]
        tails = np.asarray([u for u, _ in cross], dtype=np.int64)
        heads = np.asarray([v for _, v in cross], dtype=np.int64)
        kept = decompose.prune_syncs((tails, heads), stream, pos, streams)
        assert list(zip(kept[0].tolist(), kept[1].tolist())) == reference_prune(n, cross, stream.tolist(),
                                                                                 pos.tolist(), streams)


def test_planned_ops_behave_as_the_tuple_of_their_ops(tmp_path: Path) -> None:
    """The plan keeps its ops as columns: equal to, hashed, printed, sliced, pickled and written to
    JSON as the tuple of the ops they make."""
    import dataclasses
    import json
    import pickle

    from tc_analyses.analyses.result import one_level

    inputs = TraceInputs(random_trace(tmp_path / "t", 3))
    ops = plan_trace(inputs.trace, graph=inputs.graph_table, activity=inputs.activity, cores=8).ops
    made = tuple(ops)
    assert len(made) == len(ops) > 1 and ops == made and made == tuple(ops[:]) and hash(ops) == hash(made)
    assert repr(ops) == repr(made) and ops[-1] == made[-1] and ops[1:3] == made[1:3]
    assert ops.column("node") == [op.node for op in made]
    assert pickle.loads(pickle.dumps(ops)) == ops
    assert json.dumps(ops, default=one_level) == json.dumps([dataclasses.asdict(op) for op in made])
    with pytest.raises(ValueError, match="columns of one length"):
        type(ops)(*([[1]] * 12 + [[]]))


def test_means_past_2_to_the_53_round_as_python(tmp_path: Path) -> None:
    """numpy rounds a total past 2**53 ns to a float before dividing; the plan's work must be the
    graph's, which Python divides exactly (an op of 417 days: a damaged duration, still the same)."""
    from tc_analyses.model.graph_columns import NodeColumns

    totals = np.array([36028797018963969, 9007199254740993, 7, 0, 2**62 + 1], dtype=np.int64)
    measured = np.array([3, 2, 2, 0, 7], dtype=np.int64)
    zeros = np.zeros(len(totals), dtype=np.int64)
    columns = NodeColumns(*([zeros] * 5), measured, totals, *([zeros] * 10))
    assert columns.mean_ns().tolist() == [round(int(t) / int(m)) if m else 0 for t, m in zip(totals, measured)]


def test_work_past_int64_sums_is_refused() -> None:
    """The plan sums work in int64: a graph whose work passes 2**62 ns is damaged data, said so."""
    import networkx as nx

    from tc_analyses.analyses.parallelism import plan_streams
    from tc_analyses.errors import AnalysisUnavailable

    graph = nx.DiGraph()
    for node in range(3):
        graph.add_node(node, mean_ns=2**61, device="cpu")
    with pytest.raises(AnalysisUnavailable, match="past 2\\^62 ns"):
        plan_streams(graph)


def test_a_gpu_trace_s_sections_make_its_graph_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU plan needs the networkx graph: without steps it takes the one the other sections share."""
    from tc_analyses.registry import entry

    out = tmp_path / "gpu"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        gpu = b.device("cuda:0", ts=10)
        for corr, name in ((1, "mm1"), (2, "mm2"), (3, "add")):
            b.add("node_begin", "1", 100 * corr, corr, "aten::" + name, name, gpu, 1, NO_STEP)
            b.add("api_enter", "1", 100 * corr + 10, 1, "cudaLaunchKernel", corr)
            b.add("api_exit", "1", 100 * corr + 20, 1, "cudaLaunchKernel", corr)
            b.add("node_end", "1", 100 * corr + 90, corr, gpu, 1)
            b.add("kernel_begin", "g", 1_000 * corr, gpu, 7, corr, f"k{corr}", 1, 1, 1, 1, 1, 1)
            b.add("kernel_end", "g", 1_000 * corr + 500, gpu, 7, corr)
        b.add("tensor_edge", "1", 300, 1, 3, 11, 4096, gpu, gpu)
        b.add("tensor_edge", "1", 300, 2, 3, 12, 4096, gpu, gpu)
    made: list[int] = []
    real = GraphTable.to_networkx
    monkeypatch.setattr(GraphTable, "to_networkx", lambda self: (made.append(len(self)), real(self))[1])
    inputs = TraceInputs(out)
    assert inputs.graph.number_of_nodes() == 3  # another section made it
    plan = entry("parallelism").run(inputs, {"device": None, "max_streams": None, "sync_ns": 0}).data
    assert plan.lane == "stream" and plan.streams == 2 and made == [3]
