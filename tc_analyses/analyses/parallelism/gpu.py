"""The GPU work of each graph node: the GPU time of the operations it launched."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from tc_analyses.analyses.parallelism.result import Node
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity

if TYPE_CHECKING:  # networkx takes 0.3 s to import; a plan on the graph's columns never needs it
    import networkx as nx


def gpu_work(graph: nx.DiGraph, activity: Activity, device: str | None = None) -> tuple[str, dict[Node, int], int]:
    """The GPU work of each graph node: mean over its executions of the GPU time it launched.

    A GPU op (kernel, copy, memset) belongs to the op that issued its launch call (same
    correlation id): the outermost node open on the launching thread, step markers
    (``ProfilerStep#N`` of Kineto imports) excepted. Returns (device, node -> ns, GPU ns that no
    node launched); `device` defaults to the GPU with the most work.
    """
    gpu = activity.gpu
    durations = gpu.column("end") - gpu.column("start")
    codes = gpu.column("device")
    sums = np.bincount(codes, weights=durations, minlength=len(gpu.labels("device"))) if len(gpu) else np.zeros(0)
    busy = {str(name): int(total) for name, total, used in zip(gpu.labels("device") if len(gpu) else [], sums.tolist(),
                                                               np.bincount(codes, minlength=len(sums)).tolist())
            if used}
    if device is None:
        device = max(sorted(busy), key=lambda d: busy[d]) if busy else ""
    mine = np.flatnonzero(gpu.text("device") == device) if len(gpu) else np.zeros(0, dtype=np.int64)
    owner = _launch_owners(activity, gpu.column("correlation_id")[mine])
    owned = owner >= 0
    unattributed = int(durations[mine[~owned]].sum())
    per_owner = np.bincount(owner[owned], weights=durations[mine[owned]], minlength=len(activity.nodes))
    execution_nodes = graph.graph.get(K.EXECUTION_NODES, {})
    node_ids = activity.nodes.column("node_id").tolist() if len(activity.nodes) else []
    total: dict[Node, int] = defaultdict(int)
    for index in np.flatnonzero(np.bincount(owner[owned], minlength=len(activity.nodes))).tolist():
        node = execution_nodes.get(node_ids[index])
        if node is None:
            unattributed += int(per_owner[index])
        else:
            total[node] += int(per_owner[index])
    means = {n: int(round(t / max(1, int(graph.nodes[n].get(K.EXECUTIONS, 1))))) for n, t in total.items()}
    return device, means, unattributed


def _launch_owners(activity: Activity, correlation_ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Index of the node that issued the launch with each correlation id (-1 if none): the
    outermost node open on the calling thread at the call's start, step markers excepted (a
    Kineto ``ProfilerStep#N`` op encloses every op of its step, so ``ApiCall.owner`` would name
    it). When several calls share an id, the last one with an owner decides."""
    nodes, api = activity.nodes, activity.api
    not_marker = ~nodes.codes_where("op", lambda op: op.startswith("ProfilerStep#")) if len(nodes) else np.zeros(0, bool)
    per_tid: dict[int, tuple[list[int], list[int], list[int]]] = {}  # tid -> starts, ends, node indexes
    for i, tid, start, end in zip(np.flatnonzero(not_marker).tolist(), nodes.column("tid")[not_marker].tolist(),
                                  nodes.column("start")[not_marker].tolist(), nodes.column("end")[not_marker].tolist()):
        starts, ends, index = per_tid.setdefault(tid, ([], [], []))
        if not ends or start >= ends[-1]:  # by start, enclosing nodes first
            starts.append(start)
            ends.append(end)
            index.append(i)
    call_owner = np.full(len(api), -1, dtype=np.int64)
    tids, call_starts = api.column("tid"), api.column("start")
    for tid, (starts, ends, index) in per_tid.items():
        mine = np.flatnonzero(tids == tid)
        at = np.searchsorted(np.asarray(starts), call_starts[mine], side="right") - 1
        inside = (at >= 0) & (call_starts[mine] <= np.asarray(ends)[np.maximum(at, 0)])
        call_owner[mine[inside]] = np.asarray(index)[at[inside]]
    corr = api.column("correlation_id")
    known = np.flatnonzero((call_owner >= 0) & (corr != 0))
    order = known[np.argsort(corr[known], kind="stable")]
    keys = corr[order]
    last = np.append(keys[1:] != keys[:-1], True) if len(keys) else np.zeros(0, dtype=bool)
    keys, owners = keys[last], call_owner[order[last]]
    if not len(keys):
        return np.full(len(correlation_ids), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, correlation_ids), len(keys) - 1)
    return np.where((keys[at] == correlation_ids) & (correlation_ids != 0), owners[at], -1)
