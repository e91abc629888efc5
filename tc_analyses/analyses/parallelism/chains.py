"""Nimble's chain decomposition on a DAG of tasks 0..n-1: matching, chains, lanes and syncs.

Tasks are numbered in a topological order (the recorded order); ``succ``/``pred`` hold the edges
of the transitive reduction. Pure functions: no trace, no simulator. The generic DAG measures
(upward rank, critical path, reachability, transitive reduction, width) are in
:mod:`tc_analyses.model.dag`.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # networkx takes 0.3 s to import; a plan on the graph's columns never needs it
    import networkx as nx

Array = np.ndarray[Any, Any]
Edges = tuple[Array, Array]  # (tails, heads) of distinct edges, sorted by tail then head

REDUCTION_LIMIT = 20_000  # ops above which the transitive reduction (n^2 bits) is skipped


def contract(graph: nx.DiGraph, keep: dict[Any, int]) -> dict[Any, list[Any]]:
    """The DAG on the kept nodes, as successor lists (nodes in graph order): u -> v when a path joins
    them through dropped nodes only, each node's successors in the order a depth-first search finds them."""
    if all(n in keep for n in graph.nodes):  # nothing dropped: the graph's edges, in that order
        return {u: list(successors)[::-1] for u, successors in graph.succ.items()}
    dag: dict[Any, list[Any]] = {}
    for u in (n for n in graph.nodes if n in keep):
        found = dag[u] = []
        stack, seen = list(graph.successors(u)), set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in keep:
                found.append(v)
            else:
                stack.extend(graph.successors(v))
    return dag


def weak_components(n: int, tails: Array, heads: Array) -> int:
    """How many weakly connected components tasks 0..n-1 form with the edges ``tails[i] -> heads[i]``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    if not n:
        return 0
    matrix = csr_matrix((np.ones(len(tails), dtype=np.int8), (tails, heads)), shape=(n, n))
    return int(connected_components(matrix, directed=True, connection="weak")[0])


def match(n: int, edges: Edges, rank: Array, critical: list[int]) -> Array:
    """Maximum matching of u_out -> v_in over the reduced `edges` (distinct, sorted): per task u, the
    task after it on its chain (-1: none).

    Any maximum matching gives the fewest chains. Among them, prefer one that keeps the critical
    path on one lane (no sync on it): match the critical path's edges first and the rest around
    them; that matching is used when it is as large as an unconstrained maximum matching.
    """
    ranked = _ranked_edges(edges, rank)
    free = max_matching(n, ranked, {})
    fixed = dict(zip(critical, critical[1:]))
    if not fixed:
        return free
    kept = max_matching(n, ranked, fixed)
    return kept if np.count_nonzero(kept >= 0) >= np.count_nonzero(free >= 0) else free


def _ranked_edges(edges: Edges, rank: Array) -> Edges:
    """The edges by row, each row's successors heaviest path first, then by task."""
    rows, cols = edges
    order = np.lexsort((cols, -rank[cols], rows))
    return rows[order], cols[order]


def max_matching(n: int, edges: Edges, fixed: dict[int, int]) -> Array:
    """Hopcroft-Karp (scipy, compiled) on the `edges` of :func:`_ranked_edges`, with the edges of
    `fixed` forced into the matching: the matched column of each row, -1 where none.

    Rows are u_out, columns v_in. Each row lists its successors heaviest path first, so the
    greedy first phase follows the longest paths; the result is deterministic.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rows, indices = edges
    if fixed:
        keep = ~np.isin(rows, np.fromiter(fixed, np.int64, len(fixed))) \
            & ~np.isin(indices, np.fromiter(fixed.values(), np.int64, len(fixed)))
        rows, indices = rows[keep], indices[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    graph = csr_matrix((np.ones(len(indices), dtype=np.int8), indices.astype(np.int32), indptr.astype(np.int32)),
                       shape=(n, n))
    found = maximum_bipartite_matching(graph, perm_type="column").astype(np.int64) if len(indices) \
        else np.full(n, -1, dtype=np.int64)
    if fixed:
        found[np.fromiter(fixed, np.int64, len(fixed))] = np.fromiter(fixed.values(), np.int64, len(fixed))
    return found


@dataclass(frozen=True)
class Chains:
    """The chains a matching makes, heaviest first (ties: the earlier head)."""

    of_task: Array  # chain index of each task
    tasks: Array  # the tasks chain by chain, each chain in task order
    sizes: Array  # tasks per chain
    work: list[int]  # per chain

    def __len__(self) -> int:
        return len(self.sizes)


def chains(nxt: Array, work: Array) -> Chains:
    """The chains of the matching `nxt` (task -> the next task on its chain, -1 at a chain's end;
    every next task comes later: tasks are numbered in a topological order)."""
    n = len(nxt)
    head = np.arange(n, dtype=np.int64)
    linked = np.flatnonzero(nxt >= 0)
    head[nxt[linked]] = linked  # first each task's predecessor on its chain, then, doubling, its head
    while True:
        further = head[head]
        if np.array_equal(further, head):
            break
        head = further
    heads, chain_of_head = np.unique(head, return_inverse=True)
    weight = np.zeros(len(heads), dtype=np.int64)
    np.add.at(weight, chain_of_head, work)
    ranked = np.lexsort((heads, -weight))  # heaviest first: it gets lane 0
    rank = np.empty(len(heads), dtype=np.int64)
    rank[ranked] = np.arange(len(heads))
    of_task = rank[chain_of_head.reshape(-1)]
    tasks = np.lexsort((np.arange(n), of_task))
    return Chains(of_task, tasks, np.bincount(of_task, minlength=len(heads)), weight[ranked].tolist())


def merge(chain_work: list[int], max_streams: int) -> tuple[list[int], int]:
    """Chain -> lane: one lane each when they fit, else heaviest chain onto the least loaded lane
    (`chain_work`: each chain's work, heaviest first)."""
    if len(chain_work) <= max_streams:
        return list(range(len(chain_work))), len(chain_work)
    loads = [(0, s) for s in range(max_streams)]
    heapq.heapify(loads)
    lane_of = []
    for weight in chain_work:
        load, s = heapq.heappop(loads)
        lane_of.append(s)
        heapq.heappush(loads, (load + weight, s))
    return lane_of, max_streams


def distinct_sorted(keys: Array) -> Array:
    """``np.unique(keys)``; keys already strictly increasing (the edges of a reduction, in order) come back as they are."""
    if len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1])):
        return keys
    return np.unique(keys)


def prune_syncs(cross: Edges, stream: Array, pos: Array, streams: int) -> Edges:
    """Drop the cross-lane edges already implied by lane order and the syncs kept (vector clocks);
    the kept ones, sorted.

    ``clock[t][s]`` is the last position of lane ``s`` known to be done when ``t`` ends. A sync
    ``u -> v`` is redundant when the clock ``v`` starts with already covers ``u``. A task's clock
    is its lane predecessor's, its own position set, merged with the clocks of the syncs it
    keeps; so a lane's clock changes only at the tasks that keep a sync, and only those changes
    are kept (per lane, by position), the rest looked up.
    """
    producers, consumers = cross
    by_consumer = np.lexsort((-producers, consumers))  # per consumer, later producers first: they imply more
    us, vs = producers[by_consumer].tolist(), consumers[by_consumer].tolist()
    lane_of, position = stream.tolist(), pos.tolist()
    changed_at: list[list[int]] = [[-1] for _ in range(streams)]  # per lane: positions where its clock changed
    clock_at: list[list[list[int]]] = [[[-1] * streams] for _ in range(streams)]  # and the clock from there
    kept_u, kept_v = [], []
    i = 0
    while i < len(vs):
        t, lane = vs[i], lane_of[vs[i]]
        base = clock_at[lane][-1]
        changed = False
        while i < len(vs) and vs[i] == t:
            u = us[i]
            i += 1
            other, at = lane_of[u], position[u]
            if base[other] >= at:
                continue
            kept_u.append(u)
            kept_v.append(t)
            known = clock_at[other][bisect.bisect_right(changed_at[other], at) - 1]
            base = [max(a, b) for a, b in zip(base, known)]
            base[other] = max(base[other], at)
            changed = True
        if changed:
            base[lane] = position[t]
            changed_at[lane].append(position[t])
            clock_at[lane].append(base)
    order = np.lexsort((np.asarray(kept_v, dtype=np.int64), np.asarray(kept_u, dtype=np.int64)))
    return np.asarray(kept_u, dtype=np.int64)[order], np.asarray(kept_v, dtype=np.int64)[order]


def peak_concurrency(work: list[int], succ: list[list[int]]) -> int:
    """Most ops running at once when each starts as soon as its inputs are done (unlimited lanes)."""
    n = len(work)
    start = [0] * n
    for t in range(n):  # tasks in a topological order: t's start is final when it is reached
        ready = start[t] + work[t]
        for s in succ[t]:
            if ready > start[s]:
                start[s] = ready
    return peak_of(np.asarray(start, dtype=np.int64), np.asarray(work, dtype=np.int64))


def peak_of(start: Array, work: Array) -> int:
    """Most ops running at once, each running from `start` for its `work`."""
    n = len(work)
    busy = np.flatnonzero(work > 0)
    begin = start[busy]
    # time * 2 + 1 for a start, * 2 for an end: one sort puts ends before starts at one time
    # (times stay below the plan's 2^62 ns of work)
    events = np.sort(np.concatenate([begin * 2 + 1, (begin + work[busy]) * 2]))
    running = np.cumsum((events & 1) * 2 - 1)
    peak = int(running.max()) if len(running) else 0
    return max(peak, 1 if n else 0)
