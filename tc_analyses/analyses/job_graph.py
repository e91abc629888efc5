"""One dependency graph over every rank of a job, its critical path and each node's slack.

Vertices are node executions ``(rank, node_id)``, on the wall clock. Edges are the dependencies
a node cannot start before:

* ``thread``: the previous outermost node on the same thread (a thread runs one op at a time);
* ``tensor``: the node that produced a tensor it reads (``dfc:tensor_edge``, exact);
* ``collective``: the backend's communication span of a collective (``gloo:all_reduce``...) on
  rank r depends on rank r's own collective node and on the collective node of the rank that
  arrived last (a collective completes only when every rank has joined): the cross-rank edges;
* ``wait``: the first node its issuing thread starts after that span ends depends on it (the
  thread waited for the collective's result).

The **critical path** is found backward from the node that ends last in the job: at each node,
its binding dependency is the predecessor that ended last before the node's start (before its
end, for a communication span: a collective's span starts when its rank arrives and ends when
the last rank has), up to a tolerance for clock jitter. The path crosses processes wherever a
collective binds. A node's **slack** is how much later it could end without delaying the job's
end, under these edges: ``latest_finish(n) = min over successors s of (latest_finish(s) -
own(s))`` (the job's end for nodes without successors), ``slack = latest_finish - end``, where
``own(s)`` is the part of s after its last predecessor ended (all of it for an op; for a span,
the transfer after the last arrival, not the wait). Gaps no node explains (Python between ops, a
sleep) are not edges, so a node on the path may have slack: the gap after it.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

COMM_SPAN_PREFIXES = ("gloo:", "nccl:")
COLLECTIVE_PREFIX = "c10d::"
JITTER_NS = 1_000  # a predecessor may end this much after its successor starts (clock rounding)


@dataclass
class RankNodes:
    """One rank's node executions (wall-clock ns) and its recorded dependencies."""

    rank: int
    node_ids: list[int]
    tids: list[int]
    starts: list[int]
    ends: list[int]
    ops: list[str]
    names: list[str]
    tensor_edges: list[tuple[int, int]] = field(default_factory=list)  # producer, consumer node ids
    collectives: list[tuple[int, str, int]] = field(default_factory=list)  # seq, kind, node id


@dataclass(frozen=True)
class PathStep:
    rank: int
    node_id: int
    op: str
    name: str
    start_ns: int
    end_ns: int
    via: str  # the edge kind that led here from the previous step ("" for the first)


@dataclass(frozen=True)
class CriticalPath:
    steps: list[PathStep]  # in time order
    length_ns: int  # first step's start to the job's last end
    busy_ns: int  # time on the path's nodes themselves, each from when the step before it ended
    by_rank_ns: dict[int, int]  # that time per rank
    crossings: int  # collective edges between ranks on the path
    slack: list[tuple[int, int, str, int]]  # (rank, node id, op, slack ns) of every node


def _outermost(nodes: RankNodes) -> list[int]:
    """Indices of nodes no other node of the same thread contains (nested ops are inside their parent)."""
    order = sorted(range(len(nodes.node_ids)), key=lambda i: (nodes.tids[i], nodes.starts[i], -nodes.ends[i]))
    kept: list[int] = []
    reach: dict[int, int] = {}
    for i in order:
        tid = nodes.tids[i]
        if nodes.ends[i] <= reach.get(tid, -1):
            continue
        kept.append(i)
        reach[tid] = max(reach.get(tid, -1), nodes.ends[i])
    return kept


def build_job_graph(ranks: list[RankNodes], joined: list[tuple[int, str, int]]) -> nx.DiGraph:
    """The job's dependency graph. `joined`: (seq, kind, last rank) of each collective joined across ranks."""
    graph: nx.DiGraph = nx.DiGraph()
    by_thread: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)  # (rank, tid) -> (start, id)
    for r in ranks:
        for i in _outermost(r):
            key = (r.rank, r.node_ids[i])
            graph.add_node(key, start=r.starts[i], end=r.ends[i], op=r.ops[i], name=r.names[i], tid=r.tids[i])
            by_thread[(r.rank, r.tids[i])].append((r.starts[i], r.node_ids[i]))
    for (rank, _), items in by_thread.items():
        items.sort()
        for (_, a), (_, b) in zip(items, items[1:]):
            graph.add_edge((rank, a), (rank, b), kind="thread")
    for r in ranks:
        for producer, consumer in r.tensor_edges:
            if (r.rank, producer) in graph and (r.rank, consumer) in graph and producer != consumer:
                graph.add_edge((r.rank, producer), (r.rank, consumer), kind="tensor")
    issued = {(r.rank, seq): node for r in ranks for seq, _, node in r.collectives}
    spans = spans_by_collective(ranks)
    for seq, _, last in joined:
        for r in ranks:
            span = spans.get((r.rank, seq))
            own, gate = issued.get((r.rank, seq)), issued.get((last, seq))
            if span is None or (r.rank, span) not in graph:
                continue
            if own is not None and (r.rank, own) in graph:
                graph.add_edge((r.rank, own), (r.rank, span), kind="collective")
            if gate is not None and (last, gate) in graph and last != r.rank:
                graph.add_edge((last, gate), (r.rank, span), kind="collective")
            if own is not None and (r.rank, own) in graph:
                _add_wait_edge(graph, by_thread, r.rank, own, span)
    return graph


def spans_by_collective(ranks: list[RankNodes]) -> dict[tuple[int, int], int]:
    """(rank, seq) -> node id of the backend span of that collective: the k-th span of a kind is the
    k-th collective of that kind the rank issued."""
    found: dict[tuple[int, int], int] = {}
    for r in ranks:
        spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, op in enumerate(r.ops):
            if op.startswith(COMM_SPAN_PREFIXES):
                spans[op.split(":", 1)[1]].append((r.starts[i], r.node_ids[i]))
        issued: dict[str, list[int]] = defaultdict(list)
        for seq, kind, _ in sorted(r.collectives):
            issued[kind].append(seq)
        for kind, seqs in issued.items():
            for seq, (_, node) in zip(seqs, sorted(spans.get(kind, []))):
                found[(r.rank, seq)] = node
    return found


def _add_wait_edge(graph: nx.DiGraph, by_thread: dict[tuple[int, int], list[tuple[int, int]]], rank: int,
                   issuer: int, span: int) -> None:
    """The issuing thread's first node after the span ends waited for it."""
    tid = graph.nodes[(rank, issuer)]["tid"]
    items = by_thread[(rank, tid)]
    end = graph.nodes[(rank, span)]["end"]
    at = bisect.bisect_left(items, (end, -1))
    if at < len(items) and items[at][1] != span:
        graph.add_edge((rank, span), (rank, items[at][1]), kind="wait")


def critical_path(graph: nx.DiGraph) -> CriticalPath | None:
    """The job's critical path and every node's slack; None for an empty graph."""
    if not graph:
        return None
    nodes = graph.nodes
    current = max(graph, key=lambda n: (nodes[n]["end"], n))
    job_end = nodes[current]["end"]
    chain = [current]  # backward from the job's end
    seen = {current}
    into: dict[Any, str] = {}  # node -> kind of the path's edge into it
    while True:
        data = nodes[current]
        bound = data["end"] if data["op"].startswith(COMM_SPAN_PREFIXES) else data["start"]
        ready = [(nodes[p]["end"], p) for p in graph.predecessors(current)
                 if nodes[p]["end"] <= bound + JITTER_NS and p not in seen]
        if not ready:
            break
        _, previous = max(ready)
        into[current] = graph.edges[previous, current]["kind"]
        chain.append(previous)
        seen.add(previous)
        current = previous
    steps = [PathStep(n[0], n[1], nodes[n]["op"], nodes[n]["name"], nodes[n]["start"], nodes[n]["end"], into.get(n, ""))
             for n in reversed(chain)]
    by_rank: dict[int, int] = defaultdict(int)
    previous_end = steps[0].start_ns
    for s in steps:  # a step's own time starts when the step before it ended (a span's wait is not work)
        by_rank[s.rank] += max(s.end_ns - max(s.start_ns, previous_end), 0)
        previous_end = s.end_ns
    crossings = sum(1 for a, b in zip(steps, steps[1:]) if a.rank != b.rank)
    return CriticalPath(steps, job_end - steps[0].start_ns, sum(by_rank.values()), dict(sorted(by_rank.items())),
                        crossings, _slack(graph, job_end))


def _slack(graph: nx.DiGraph, job_end: int) -> list[tuple[int, int, str, int]]:
    nodes = graph.nodes
    if not nx.is_directed_acyclic_graph(graph):  # edges go forward in time, so this is damaged input
        graph = nx.DiGraph([(a, b) for a, b in graph.edges if nodes[a]["start"] <= nodes[b]["start"]])
        graph.add_nodes_from(nodes)
    own = {n: nodes[n]["end"] - max([nodes[n]["start"]] + [min(nodes[p]["end"], nodes[n]["end"])
                                                             for p in graph.predecessors(n)]) for n in graph}
    latest: dict[Any, int] = {}
    for n in reversed(list(nx.topological_sort(graph))):
        finish = job_end
        for s in graph.successors(n):
            finish = min(finish, latest[s] - own[s])
        latest[n] = finish
    return sorted(((n[0], n[1], nodes[n]["op"], max(latest[n] - nodes[n]["end"], 0)) for n in graph),
                  key=lambda item: (item[0], nodes[(item[0], item[1])]["start"]))
