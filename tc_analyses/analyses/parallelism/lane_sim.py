"""The placement simulator's run of a lane plan, as one pass over the tasks that sync.

A plan's lanes run their ops in recorded order, each op costing its work on any lane, and a sync
is the one cost between lanes: :func:`tc_analyses.perf.simulate.simulate` on the problem
``_problem_from`` builds gives the schedule, but building that problem (a task, a cost per lane and
a link per lane pair, all objects) and the simulator's event loop cost 5 s of a 333k-op plan.
Its events need no queue here: a task starts when its lane's previous task has ended and its last
input has arrived, whatever the order those events came in, and the simulator's one shared
resource, the copy engine of a lane pair (syncs one after another), is only asked by the producer
lane's tasks as each ends, one at a time in lane order, each asking for its consumers in the
problem's edge order. One pass in recorded order (every edge goes forward in it) makes the same
requests in the same order, so the same schedule to the nanosecond; ``tests/test_analyses/
test_lane_sim.py`` checks it against the simulator.

Only the tasks at either end of a cross-lane edge need that pass: an edge within a lane is already
kept by the lane's order, and between two syncing tasks a lane runs its tasks back to back, so their
times are the last syncing task's start plus the work in between (a running sum per lane).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

IntArray = np.ndarray[Any, np.dtype[np.int64]]

# Times are int64 below: a schedule that runs past this is refused.
TIME_LIMIT_NS = 1 << 62


@dataclass(frozen=True)
class LaneSchedule:
    start_ns: list[int]  # by task
    end_ns: list[int]
    makespan_ns: int


def simulate_lanes(lane_of: Sequence[int] | IntArray, work: Sequence[int] | IntArray, tails: Sequence[int] | IntArray,
                   heads: Sequence[int] | IntArray, sync_ns: int, lanes: int) -> LaneSchedule:
    """Tasks ``0..n-1`` (each lane runs its tasks in this order) on `lanes` lanes; the edges
    ``tails[i] -> heads[i]`` are the dependencies the plan keeps, each going forward, each once, in
    the order the simulator's problem lists them: within a lane an input arrives when its producer
    ends, across lanes ``sync_ns`` later (every cross-lane edge the plan keeps is a sync), one sync
    at a time per (producer lane, consumer lane)."""
    lane = np.asarray(lane_of, dtype=np.int64).reshape(-1)
    cost = np.asarray(work, dtype=np.int64).reshape(-1)
    tail = np.asarray(tails, dtype=np.int64).reshape(-1)
    head = np.asarray(heads, dtype=np.int64).reshape(-1)
    n = len(cost)
    backward = np.flatnonzero(tail >= head)
    if len(backward):
        u, v = int(tail[backward[0]]), int(head[backward[0]])
        raise ValueError(f"task {v} comes before its input task {u}: the lanes' order must follow the dependencies")
    cross = lane[tail] != lane[head]  # an edge within a lane: its lane's order already keeps it
    tail, head = tail[cross], head[cross]
    negative = np.flatnonzero(cost < 0)
    if len(negative):  # a lane's tasks run back to back only when none ends before it starts
        raise ValueError(f"task {int(negative[0])} has negative work ({int(cost[negative[0]])} ns)")
    total = int(cost.sum()) if int(cost.max(initial=0)) * n < TIME_LIMIT_NS else sum(cost.tolist())
    if total >= TIME_LIMIT_NS:
        raise ValueError(f"the tasks' work adds up to {total} ns, past 2^62 ns: too long to schedule")
    lanes_order = _LaneOrder.of(lane)
    before = lanes_order.running_sum(cost)  # each task's lane's work before it
    syncing = np.zeros(n, dtype=bool)
    syncing[tail] = syncing[head] = True
    at = np.flatnonzero(syncing)
    starts = _syncing_starts(at, lane, cost, before, tail, head, sync_ns, lanes)
    if max(starts, default=0) + total >= TIME_LIMIT_NS:  # every end is at most the last sync's start + all work
        raise ValueError("the schedule runs past 2^62 ns (its syncs): too long to schedule")
    start = lanes_order.back_to_back(before, at, starts)
    end = start + cost
    return LaneSchedule(start.tolist(), end.tolist(), int(end.max(initial=0)))


@dataclass(frozen=True)
class _LaneOrder:
    """The tasks grouped by lane, each lane's in recorded order, and where each one's lane begins there."""

    by_lane: IntArray
    lane_begins: IntArray  # by position in by_lane

    @classmethod
    def of(cls, lane: IntArray) -> "_LaneOrder":
        by_lane = np.argsort(lane, kind="stable")
        grouped = lane[by_lane]
        first = np.ones(len(lane), dtype=bool)
        first[1:] = grouped[1:] != grouped[:-1]
        return cls(by_lane, np.maximum.accumulate(np.where(first, np.arange(len(lane)), 0)))

    def running_sum(self, values: IntArray) -> IntArray:
        """The sum of the values of the tasks before each one on its own lane."""
        grouped = values[self.by_lane]
        total = np.cumsum(grouped) - grouped
        out = np.empty(len(values), dtype=np.int64)
        out[self.by_lane] = total - total[self.lane_begins]
        return out

    def back_to_back(self, before: IntArray, syncing: IntArray, starts: list[int]) -> IntArray:
        """Every task's start: its lane's last syncing task at or before it (that one's start, less
        the work before it) plus the work before the task; a lane starts at 0."""
        n = len(before)
        marked = np.zeros(n, dtype=bool)
        marked[syncing] = True
        last = np.maximum.accumulate(np.where(marked[self.by_lane], np.arange(n), -1))  # restarted per lane below
        has = last >= self.lane_begins
        start_of = np.zeros(n, dtype=np.int64)
        start_of[syncing] = np.asarray(starts, dtype=np.int64)
        anchored = self.by_lane[last[has]]
        offset = np.zeros(n, dtype=np.int64)
        offset[has] = start_of[anchored] - before[anchored]
        start = np.empty(n, dtype=np.int64)
        start[self.by_lane] = before[self.by_lane] + offset
        return start


def _syncing_starts(syncing: IntArray, lane: IntArray, cost: IntArray, before: IntArray, tail: IntArray,
                    head: IntArray, sync_ns: int, lanes: int) -> list[int]:
    """The start of each syncing task, in recorded order: the simulator's pass, on those tasks only."""
    by_tail = np.argsort(tail, kind="stable")  # each producer's consumers in the edges' order
    consumers, consumer_lanes = head[by_tail].tolist(), lane[head[by_tail]].tolist()
    sorted_tails = tail[by_tail]
    firsts = np.searchsorted(sorted_tails, syncing).tolist()
    lasts = np.searchsorted(sorted_tails, syncing, side="right").tolist()
    anchor_start = [0] * lanes  # per lane: the start of its last syncing task, and the work before it
    anchor_before = [0] * lanes
    ready_at = [0] * len(lane)
    sync_free = [0] * (lanes * lanes)  # by producer lane * lanes + consumer lane
    starts = []
    for t, own, work_before, work, first, last in zip(syncing.tolist(), lane[syncing].tolist(),
                                                      before[syncing].tolist(), cost[syncing].tolist(), firsts, lasts):
        start = anchor_start[own] + work_before - anchor_before[own]
        if ready_at[t] > start:
            start = ready_at[t]
        anchor_start[own], anchor_before[own] = start, work_before
        starts.append(start)
        end = start + work
        for k in range(first, last):
            if sync_ns <= 0:
                at = end
            else:
                pair = own * lanes + consumer_lanes[k]
                free = sync_free[pair]
                at = sync_free[pair] = (end if end > free else free) + sync_ns
            if at > ready_at[consumers[k]]:
                ready_at[consumers[k]] = at
    return starts

