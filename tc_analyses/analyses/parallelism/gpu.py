"""The GPU work of each graph node: the GPU time of the operations it launched."""

from __future__ import annotations

import bisect
from collections import defaultdict

import networkx as nx

from tc_analyses.analyses.parallelism.result import Node
from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity


def gpu_work(graph: nx.DiGraph, activity: Activity, device: str | None = None) -> tuple[str, dict[Node, int], int]:
    """The GPU work of each graph node: mean over its executions of the GPU time it launched.

    A GPU op (kernel, copy, memset) belongs to the op that issued its launch call (same
    correlation id): the outermost node open on the launching thread, step markers
    (``ProfilerStep#N`` of Kineto imports) excepted. Returns (device, node -> ns, GPU ns that no
    node launched); `device` defaults to the GPU with the most work.
    """
    busy: dict[str, int] = defaultdict(int)
    for op in activity.gpu:
        busy[op.device] += op.duration
    if device is None:
        device = max(sorted(busy), key=lambda d: busy[d]) if busy else ""
    owners = _launch_owners(activity)
    execution_nodes = graph.graph.get(K.EXECUTION_NODES, {})
    total: dict[Node, int] = defaultdict(int)
    unattributed = 0
    for op in activity.gpu:
        if op.device != device:
            continue
        owner = owners.get(op.correlation_id, -1) if op.correlation_id else -1
        node = execution_nodes.get(activity.nodes[owner].node_id) if owner >= 0 else None
        if node is None:
            unattributed += op.duration
        else:
            total[node] += op.duration
    means = {n: int(round(t / max(1, int(graph.nodes[n].get(K.EXECUTIONS, 1))))) for n, t in total.items()}
    return device, means, unattributed


def _launch_owners(activity: Activity) -> dict[int, int]:
    """Correlation id -> index of the node that issued that launch: the outermost node open on the
    calling thread at the call's start, step markers excepted (a Kineto ``ProfilerStep#N`` op
    encloses every op of its step, so ``ApiCall.owner`` would name it)."""
    per_tid: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # tid -> (start, end, node index)
    for i, node in enumerate(activity.nodes):  # by start, enclosing nodes first
        if node.op.startswith("ProfilerStep#"):
            continue
        runs = per_tid[node.tid]
        if not runs or node.start >= runs[-1][1]:
            runs.append((node.start, node.end, i))
    starts = {tid: [r[0] for r in runs] for tid, runs in per_tid.items()}
    owners: dict[int, int] = {}
    for call in activity.api:
        outermost = per_tid.get(call.tid)
        if not outermost or not call.correlation_id:
            continue
        at = bisect.bisect_right(starts[call.tid], call.start) - 1
        if at >= 0 and outermost[at][0] <= call.start <= outermost[at][1]:
            owners[call.correlation_id] = outermost[at][2]  # the last call of an id, as Activity.launch_of
    return owners
