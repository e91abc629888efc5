"""Nimble's chain decomposition on a DAG of tasks 0..n-1: matching, chains, lanes and syncs.

Tasks are numbered in a topological order (the recorded order); ``succ``/``pred`` hold the edges
of the transitive reduction. Pure functions: no trace, no simulator. The generic DAG measures
(upward rank, critical path, reachability, transitive reduction, width) are in
:mod:`tc_analyses.model.dag`.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np

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


def weak_components(n: int, succ: Mapping[int, list[int]]) -> int:
    """How many weakly connected components tasks 0..n-1 form."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    if not n:
        return 0
    rows = np.fromiter((u for u, vs in succ.items() for _ in vs), dtype=np.int64)
    cols = np.fromiter((v for vs in succ.values() for v in vs), dtype=np.int64)
    matrix = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n, n))
    return int(connected_components(matrix, directed=True, connection="weak")[0])


def match(n: int, succ: dict[int, list[int]], rank: Mapping[int, int], critical: list[int]) -> dict[int, int]:
    """Maximum matching of u_out -> v_in over the reduced edges: task u -> the task after it.

    Any maximum matching gives the fewest chains. Among them, prefer one that keeps the critical
    path on one lane (no sync on it): match the critical path's edges first and the rest around
    them; that matching is used when it is as large as an unconstrained maximum matching.
    """
    edges = _ranked_edges(n, succ, rank)
    free = max_matching(n, edges, {})
    fixed = dict(zip(critical, critical[1:]))
    if not fixed:
        return free
    kept = max_matching(n, edges, fixed)
    return kept if len(kept) >= len(free) else free


def _ranked_edges(n: int, succ: dict[int, list[int]], rank: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the distinct edges, by row, each row's successors heaviest path first, then by task."""
    sizes = np.fromiter((len(succ[u]) for u in range(n)), dtype=np.int64, count=n)
    rows = np.repeat(np.arange(n, dtype=np.int64), sizes)
    cols = np.fromiter((v for u in range(n) for v in succ[u]), dtype=np.int64, count=len(rows))
    pairs = distinct_sorted(rows * max(n, 1) + cols)  # each edge once
    rows, cols = pairs // max(n, 1), pairs % max(n, 1)
    ranks = np.array([rank[t] for t in range(n)])  # ints (ns) or floats, as upward_rank gave them
    order = np.lexsort((cols, -ranks[cols], rows))  # per row: heaviest path first, then by task
    return rows[order], cols[order]


def max_matching(n: int, edges: tuple[np.ndarray, np.ndarray], fixed: dict[int, int]) -> dict[int, int]:
    """Hopcroft-Karp (scipy, compiled) on the `edges` of :func:`_ranked_edges`, with the edges of
    `fixed` forced into the matching.

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
    column_of_row = maximum_bipartite_matching(graph, perm_type="column") if len(indices) else np.full(n, -1)
    matched = np.flatnonzero(column_of_row >= 0)
    found = dict(zip(matched.tolist(), column_of_row[matched].tolist()))
    found.update(fixed)
    return found


def chains(n: int, nxt: dict[int, int], work: list[int]) -> tuple[list[list[int]], list[int]]:
    """The chains the matching makes, heaviest first (ties: the earlier head), and each one's work."""
    has_prev = set(nxt.values())
    found = []
    for head in range(n):
        if head in has_prev:
            continue
        chain = [head]
        while chain[-1] in nxt:
            chain.append(nxt[chain[-1]])
        found.append(chain)
    weight = [sum(map(work.__getitem__, chain)) for chain in found]
    ranked = sorted(range(len(found)), key=lambda c: (-weight[c], found[c][0]))  # heaviest first: it gets lane 0
    return [found[c] for c in ranked], [weight[c] for c in ranked]


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


def distinct_sorted(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)``; keys already strictly increasing (the edges of a reduction, in order) come back as they are."""
    if len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1])):
        return keys
    return np.unique(keys)


def prune_syncs(n: int, cross: list[tuple[int, int]], stream: list[int], pos: list[int],
                 lane_tasks: dict[int, list[int]], streams: int) -> list[tuple[int, int]]:
    """Drop the cross-lane edges already implied by lane order and the syncs kept (vector clocks).

    ``clock[t][s]`` is the last position of lane ``s`` known to be done when ``t`` ends. A sync
    ``u -> v`` is redundant when the clock ``v`` starts with already covers ``u``.
    """
    incoming: dict[int, list[int]] = defaultdict(list)
    for u, v in cross:
        incoming[v].append(u)
    prev = {t: tasks[i - 1] for tasks in lane_tasks.values() for i, t in enumerate(tasks) if i}
    clock: list[list[int]] = [[] for _ in range(n)]
    kept = []
    for t in range(n):  # a topological order of lane order and syncs
        base = list(clock[prev[t]]) if t in prev else [-1] * streams
        for u in sorted(incoming[t], reverse=True):  # later producers first: they imply more
            if base[stream[u]] >= pos[u]:
                continue
            kept.append((u, t))
            base = [max(a, b) for a, b in zip(base, clock[u])]
        base[stream[t]] = pos[t]
        clock[t] = base
    return sorted(kept)


def peak_concurrency(n: int, work: list[int], pred: dict[int, list[int]]) -> int:
    """Most ops running at once when each starts as soon as its inputs are done (unlimited lanes)."""
    start = [0] * n
    for t in range(n):  # a loop, not max() over a generator: 333 k tasks in a 1M-event trace
        earliest: int | None = None
        for p in pred.get(t, ()):
            ready = start[p] + work[p]
            if earliest is None or ready > earliest:
                earliest = ready
        start[t] = 0 if earliest is None else earliest
    busy = np.flatnonzero(np.asarray(work, dtype=np.int64) > 0)
    begin = np.asarray(start, dtype=np.int64)[busy]
    times = np.concatenate([begin, begin + np.asarray(work, dtype=np.int64)[busy]])
    deltas = np.concatenate([np.ones(len(busy), np.int64), -np.ones(len(busy), np.int64)])
    running = np.cumsum(deltas[np.lexsort((deltas, times))])  # ends sort before starts at one time
    peak = int(running.max()) if len(running) else 0
    return max(peak, 1 if n else 0)
