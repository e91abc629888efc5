"""The placement simulator's run of a lane plan, as one pass over the tasks.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class LaneSchedule:
    start_ns: list[int]  # by task
    end_ns: list[int]
    makespan_ns: int


def simulate_lanes(lane_of: Sequence[int], work: Sequence[int], edges: Sequence[tuple[int, int]], sync_ns: int,
                   lanes: int) -> LaneSchedule:
    """Tasks ``0..n-1`` (each lane runs its tasks in this order) on `lanes` lanes; `edges` are the
    dependencies the plan keeps, each going forward, each once, in the order the simulator's problem
    lists them: within a lane an input arrives when its producer ends, across lanes ``sync_ns`` later
    (every cross-lane edge the plan keeps is a sync), one sync at a time per (producer lane, consumer lane)."""
    n = len(work)
    successors: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        if u >= v:
            raise ValueError(f"task {v} comes before its input task {u}: the lanes' order must follow the dependencies")
        successors[u].append(v)
    ready_at = [0] * n
    lane_free = [0] * lanes
    sync_free = [0] * (lanes * lanes)  # by producer lane * lanes + consumer lane
    start_ns = [0] * n
    end_ns = [0] * n
    for t in range(n):
        lane = lane_of[t]
        start = max(lane_free[lane], ready_at[t])
        end = lane_free[lane] = end_ns[t] = start + work[t]
        start_ns[t] = start
        for s in successors[t]:
            other = lane_of[s]
            if other == lane or sync_ns <= 0:
                at = end
            else:
                pair = lane * lanes + other
                at = sync_free[pair] = max(end, sync_free[pair]) + sync_ns
            if at > ready_at[s]:
                ready_at[s] = at
    return LaneSchedule(start_ns, end_ns, max(end_ns, default=0))
