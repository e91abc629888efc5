"""Differential test: the columnar graph build equals the execution-by-execution fold it replaced
(kept here as the reference), node and edge attributes in the same order, on our traces, with
steps and analysis windows."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import read_activity
from tc_analyses.model.graph import build_graph
from tc_analyses.reader import read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = sorted(p.parent for p in DATA.rglob("node_begin-*"))


def _quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else 0


def reference(trace: Any, activity: Any, steps: Any = None, executions: Any = None) -> nx.DiGraph:
    table = trace.table("node_args")
    args = {n: (s or "", d or "") for n, s, d in zip(table["node_id"].tolist(), table.text("shapes").tolist(),
                                                     table.text("dtypes").tolist())}
    runs = {run.node_id: run for run in activity.nodes}
    begins = trace.table("node_begin")
    accs: dict[Any, dict[str, Any]] = {}
    where: dict[int, tuple[int, int]] = {}  # execution -> (node, step)
    seen: dict[Any, int] = defaultdict(int)
    spare: dict[Any, tuple[str, str]] = {}
    for nid, op, name, dev, step in zip(begins["node_id"].tolist(), begins.text("op").tolist(),
                                        begins.text("name").tolist(), begins["device"].tolist(),
                                        begins["step"].tolist()):
        if executions is not None and nid not in executions:
            continue
        op, name, device, run = op or "", name or "", activity.device(dev).name, runs.get(nid)
        step = run.step if run is not None else step
        k = seen[(step, name, op, device)]
        seen[(step, name, op, device)] += 1
        key = (name, op, device, k)
        if steps is not None and step not in steps:
            if nid in args:
                spare.setdefault(key, args[nid])
            continue
        acc = accs.setdefault(key, {"node": len(accs), "n": 0, "d": [], "lost": 0, "s": "", "t": ""})
        acc["n"] += 1
        acc["lost"] += run is None
        acc["d"] += [] if run is None else [run.duration]
        if nid in args and not acc["s"]:
            acc["s"], acc["t"] = args[nid]
        where[nid] = (acc["node"], step)
    g: nx.DiGraph[int] = nx.DiGraph()
    for (name, op, device, k), acc in accs.items():
        if not acc["s"] and (name, op, device, k) in spare:
            acc["s"], acc["t"] = spare[(name, op, device, k)]
        d = acc["d"]
        g.add_node(acc["node"], **{
            K.OP: op, K.NAME: name, K.DEVICE: device, K.OCCURRENCE: k, K.EXECUTIONS: acc["n"], K.DURATIONS_NS: d,
            K.MEAN_NS: round(sum(d) / len(d)) if d else 0, K.MEDIAN_NS: round(statistics.median(d)) if d else 0,
            K.P10_NS: _quantile(d, 0.1), K.P90_NS: _quantile(d, 0.9), K.MIN_NS: min(d, default=0),
            K.MAX_NS: max(d, default=0), K.MEASURED: {device: bool(d) and acc["lost"] == 0},
            K.INPUT_SHAPES: acc["s"], K.INPUT_DTYPES: acc["t"]})
    pairs: list[dict[Any, Any]] = [{}, {}]
    edges = trace.table("tensor_edge")
    for producer, consumer, nbytes in zip(edges["producer"].tolist(), edges["consumer"].tolist(),
                                          edges["bytes"].tolist()):
        if producer not in where or consumer not in where:
            continue
        (u, step_u), (v, step) = where[producer], where[consumer]
        if step_u == step and u == v:
            continue
        acc = pairs[step_u != step].setdefault((u, v), {"steps": defaultdict(int), "count": 0})
        acc["steps"][step] += nbytes
        acc["count"] += 1

    def attrs(u: int, v: int, acc: dict[str, Any]) -> dict[str, Any]:
        src, dst = g.nodes[u][K.DEVICE], g.nodes[v][K.DEVICE]
        return {K.KIND: K.EdgeKind.DATA if src == dst else K.EdgeKind.TRANSFER,
                K.BYTES: max(acc["steps"].values(), default=0), K.COUNT: acc["count"], K.SRC_DEVICE: src,
                K.DST_DEVICE: dst}
    for (u, v), acc in pairs[0].items():
        g.add_edge(u, v, **attrs(u, v, acc))
    g.graph[K.EXECUTION_NODES] = {nid: node for nid, (node, _) in where.items()}
    g.graph[K.CROSS_STEP_EDGES] = [{"src": u, "dst": v, **attrs(u, v, acc)} for (u, v), acc in pairs[1].items()]
    g.graph[K.SOURCE] = str(trace.path)
    return g


def _plain(g: nx.DiGraph) -> tuple[Any, ...]:
    return list(g.nodes(data=True)), list(g.edges(data=True)), dict(g.graph)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(DATA)))
def test_columns_fold_as_the_reference(path: Path) -> None:
    trace = read_trace(path)
    activity = read_activity(trace)
    steps = sorted({run.step for run in activity.nodes})
    ids = activity.nodes.column("node_id").tolist()
    variants: list[dict[str, Any]] = [{}, {"steps": set(steps[1:])}, {"executions": set(ids[::2])},
                                      {"steps": set(steps[:1]), "executions": set(ids[1::3])}]
    for options in variants:
        assert _plain(build_graph(trace, activity, **options)) == _plain(reference(trace, activity, **options))


def test_groups_by_one_combined_key_equal_the_lexsort(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys that fit one integer are grouped by one sort; the groups, in order of first appearance,
    and their first rows are those the lexsort of the keys gives (ranges up to 2**40, which do not fit)."""
    import numpy as np

    from tc_analyses.model import graph_columns

    rng = np.random.default_rng(5)
    combined = 0
    for _ in range(300):
        rows, count = int(rng.integers(0, 60)), int(rng.integers(1, 5))
        keys = tuple(rng.integers(0, int(rng.choice([2, 5, 1 << 20, 1 << 40])), rows) for _ in range(count))
        fast = graph_columns._groups(*keys)
        combined += graph_columns._combined_key(keys) is not None
        with monkeypatch.context() as patched:
            patched.setattr(graph_columns, "_combined_key", lambda keys: None)
            slow = graph_columns._groups(*keys)
        assert fast[0].tolist() == slow[0].tolist() and fast[1].tolist() == slow[1].tolist()
    assert 50 < combined < 290  # both paths ran
