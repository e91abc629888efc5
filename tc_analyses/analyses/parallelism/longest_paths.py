"""Longest paths through a plan's DAG, a level at a time on arrays.

The plan needs two longest-path passes over its reduced DAG: each task's upward rank (the longest
path from it to a sink, its own work included) and each task's earliest start with unlimited
lanes (for the peak concurrency). Done task by task they are Python loops over every edge (0.4 s
of a 333k-op plan). A task's level (the most edges on a path from a source to it) orders the
tasks so that a whole level is final at once: the ranks are taken level by level from the last,
the starts from the first, each level as a few numpy calls over its edges. That pays while the DAG
is shallow for its size; a deep one (a long chain of ops) would make a call per few tasks, so
:func:`levels` gives up past a bound and the caller keeps the loops. Both give the same integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

IntArray = np.ndarray[Any, np.dtype[np.int64]]

# Levels beyond n / this many tasks: each level's calls would cost more than the loops they replace.
TASKS_PER_LEVEL = 32


def levels(n: int, tails: IntArray, heads: IntArray, limit: int | None = None) -> IntArray | None:
    """Each task's level for the edges ``tails[i] -> heads[i]`` (each going forward, tasks
    ``0..n-1``), by Kahn's frontiers; None when there are more than `limit` levels (default:
    ``n // TASKS_PER_LEVEL``, at least 8)."""
    limit = max(8, n // TASKS_PER_LEVEL) if limit is None else limit
    remaining = np.bincount(heads, minlength=n)  # inputs not yet placed on a level
    by_tail = np.argsort(tails, kind="stable")
    out_heads = heads[by_tail]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tails, minlength=n), out=offsets[1:])
    level = np.zeros(n, dtype=np.int64)
    frontier = np.flatnonzero(remaining == 0)
    depth = 0
    while len(frontier):
        if depth >= limit:  # the level about to be placed would be level limit + 1
            return None
        level[frontier] = depth
        first = offsets[frontier]
        sizes = offsets[frontier + 1] - first
        total = int(sizes.sum())
        if not total:
            break
        targets = out_heads[np.repeat(first - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)]
        np.subtract.at(remaining, targets, 1)
        frontier = np.unique(targets[remaining[targets] == 0])
        depth += 1
    return level


def upward_ranks(level: IntArray, work: IntArray, tails: IntArray, heads: IntArray) -> IntArray:
    """``rank[t] = work[t] + max(0, rank[s] for each successor s)``: :func:`tc_analyses.model.dag.upward_rank`."""
    rank = np.array(work, dtype=np.int64)
    for tasks, best in _by_level(level, tails, heads, lambda ends: rank[ends], reverse=True):
        rank[tasks] = work[tasks] + np.maximum(best, 0)
    return rank


def earliest_starts(level: IntArray, work: IntArray, tails: IntArray, heads: IntArray) -> IntArray:
    """Each task's start when it starts as soon as its inputs are done: ``max(0, start[u] + work[u]
    for each input u)``."""
    start = np.zeros(len(work), dtype=np.int64)
    for tasks, best in _by_level(level, heads, tails, lambda ends: start[ends] + work[ends], reverse=False):
        start[tasks] = np.maximum(best, 0)
    return start


def _by_level(level: IntArray, keys: IntArray, ends: IntArray, value: Any, reverse: bool) -> Any:
    """Per level of the `keys` (in order, or the last first), the distinct keys of that level and
    the largest ``value(ends)`` over each one's edges; `value` is called when its level comes, so it
    reads what the levels before wrote."""
    order = np.argsort(level[keys] * len(level) + keys)  # the edges by their key's level, then key (n^2 < 2^63)
    keys, ends = keys[order], ends[order]
    key_level = level[keys]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    groups = np.flatnonzero(first)  # where each key's edges begin
    count = int(key_level[-1]) + 1 if len(keys) else 0
    bounds = np.searchsorted(key_level, np.arange(count + 1)).tolist()
    group_bounds = np.searchsorted(groups, bounds).tolist()
    steps = range(count - 1, -1, -1) if reverse else range(count)
    for lv in steps:
        a, b = bounds[lv], bounds[lv + 1]
        if a == b:
            continue
        starts = groups[group_bounds[lv]:group_bounds[lv + 1]]
        yield keys[starts], np.maximum.reduceat(value(ends[a:b]), starts - a)
