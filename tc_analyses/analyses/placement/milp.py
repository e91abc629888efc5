"""Exact placement for small graphs: a mixed-integer program solved by ``scipy.optimize.milp`` (HiGHS).

Variables: ``x[t,d]`` (task t on device d, binary), start times ``s[t]``, the makespan ``C``, and for
every pair of tasks that no path orders, ``y[i,j]`` (i before j when they share a device, binary).
Minimise ``C`` subject to:

* every task on exactly one device; ``C >= s[t] + sum_d cost[t,d] x[t,d]``;
* for every edge u->v: ``s[v] >= s[u] + cost(u)`` and, for every pair of devices d1 != d2,
  ``s[v] >= s[u] + cost(u) + T(d1,d2) (x[u,d1] + x[v,d2] - 1)``: the linearised "u on d1 and v on d2"
  term, exact because the bracket is 1 only when both hold and <= 0 otherwise;
* for unordered pairs i, j and each device d, big-M disjunctions that forbid overlap when both are
  on d: ``s[i] + cost[i,d] <= s[j] + M (1 - y) + M (2 - x[i,d] - x[j,d])`` and the mirror with ``y``;
* memory: ``sum_t mem[t] x[t,d] <= capacity[d]``.

The bounds on ``s`` and ``C`` are HEFT's makespan, a feasible upper bound; ``M`` is that plus the
largest cost. The model
matches ``heft.list_schedule`` (transfers overlap freely; no copy-engine contention), so the returned
placement's makespan is the list scheduler's evaluation of the MILP's assignment in the MILP's
start order, which equals the optimum when the solver proves it.

Graphs above ``max_tasks`` tasks or ``max_devices`` devices are not attempted: ``solve`` returns
``MilpResult(None, False, reason)`` and callers fall back to ``search.local_search`` with a notice
quoting the reason. The same happens when the time limit passes without a feasible solution; a
solution found but not proven optimal in time comes back with ``optimal=False``.
"""

from __future__ import annotations

import heapq
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from tc_analyses.analyses.placement.heft import CompiledProblem, compile_problem, evaluate, heft_assign, to_placement
from tc_analyses.model.dag import reachability
from tc_analyses.perf.problem import Placement, PlacementProblem

if TYPE_CHECKING:  # scipy loads when a problem is small enough to solve (0.8 s of a 10k-node plan)
    from scipy.optimize import Bounds, LinearConstraint

MAX_TASKS = 20
MAX_DEVICES = 4


HIGHS_SOLVE_ERROR = 4  # scipy's status for "HiGHS Status 4: Solve error", seen with its presolve on


@contextmanager
def _stdout_silenced() -> Iterator[None]:
    """HiGHS writes to file descriptor 1 from C++ whatever its options say: point fd 1 at
    /dev/null meanwhile, so that `--format json` output stays JSON."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _solve_quietly(obj: np.ndarray, constraints: LinearConstraint, integrality: np.ndarray, bounds: Bounds,
                   time_limit_s: float) -> Any:
    """scipy's milp with its output silenced; once more without presolve when HiGHS reports a
    solve error, which its presolve gives on some small big-M models that it then solves."""
    from scipy.optimize import milp

    options: dict[str, Any] = {"time_limit": time_limit_s, "mip_rel_gap": 1e-7, "disp": False}
    with _stdout_silenced():
        res = milp(obj, constraints=constraints, integrality=integrality, bounds=bounds, options=options)
        if res.x is None and res.status == HIGHS_SOLVE_ERROR:
            res = milp(obj, constraints=constraints, integrality=integrality, bounds=bounds,
                       options={**options, "presolve": False})
    return res


@dataclass
class MilpResult:
    placement: Placement | None  # None: not attempted or nothing found; see reason
    optimal: bool  # the solver proved the makespan optimal
    reason: str  # why not attempted / solver status, one line


def solve(problem: PlacementProblem, time_limit_s: float = 30.0, max_tasks: int = MAX_TASKS,
          max_devices: int = MAX_DEVICES, compiled: CompiledProblem | None = None) -> MilpResult:
    """Optimal placement of a small problem (see the module doc); PlacementError on a cycle.
    `compiled`: ``compile_problem(problem)`` when the caller has it."""
    c = compiled if compiled is not None else compile_problem(problem)
    n, nd = len(c.ids), len(c.devices)
    if n > max_tasks or nd > max_devices:
        return MilpResult(None, False, f"the exact MILP handles up to {max_tasks} tasks and {max_devices} devices; "
                                       f"this problem has {n} tasks and {nd} devices")
    h_assign, _order, h_ms, h_start, h_end = heft_assign(c)
    if n == 0 or nd == 1 or h_ms == 0:
        return MilpResult(to_placement(c, h_assign, h_start, h_end, h_ms, "milp"), True, "trivial")

    # reachability, to skip pairs already ordered by a path
    reach = reachability(n, c.succ, order=c.topo)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if not (reach[i] >> j & 1 or reach[j] >> i & 1)]

    X = 0  # x[t,d] at X + t * nd + d
    S = n * nd
    CV = S + n
    Y = CV + 1
    nv = Y + len(pairs)
    big = float(h_ms)  # bound on every start and on the makespan
    bigm = big + float(max(max(row_) for row_ in c.cost))  # enough to relax any no-overlap row
    rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []

    def constrain(r: np.ndarray, low: float, high: float) -> None:
        """Add the constraint low <= r . x <= high."""
        rows.append(r)
        lo.append(low)
        hi.append(high)

    def row() -> np.ndarray:
        return np.zeros(nv)

    for t in range(n):
        r = row()
        r[X + t * nd: X + (t + 1) * nd] = 1
        constrain(r, 1, 1)
        r = row()
        r[S + t] = 1
        r[X + t * nd: X + (t + 1) * nd] = c.cost[t]
        r[CV] = -1
        constrain(r, -np.inf, 0)
    for v in range(n):
        for u, nbytes in c.preds[v]:
            base = row()
            base[S + v] = 1
            base[S + u] = -1
            base[X + u * nd: X + (u + 1) * nd] = [-k for k in c.cost[u]]
            constrain(base, 0, np.inf)
            for d1 in range(nd):
                for d2 in range(nd):
                    if d1 == d2:
                        continue
                    tr = c.transfer(nbytes, d1, d2)
                    if tr <= 0:
                        continue
                    r = base.copy()
                    r[X + u * nd + d1] -= tr
                    r[X + v * nd + d2] -= tr
                    constrain(r, -tr, np.inf)
    for k, (i, j) in enumerate(pairs):
        for d in range(nd):
            r = row()  # y = 1: i before j
            r[S + i], r[S + j], r[Y + k] = 1, -1, bigm
            r[X + i * nd + d] += bigm
            r[X + j * nd + d] += bigm
            constrain(r, -np.inf, 3 * bigm - c.cost[i][d])
            r = row()  # y = 0: j before i
            r[S + j], r[S + i], r[Y + k] = 1, -1, -bigm
            r[X + i * nd + d] += bigm
            r[X + j * nd + d] += bigm
            constrain(r, -np.inf, 2 * bigm - c.cost[j][d])
    for v, carried in enumerate(c.carried):  # placed apart, a carried tensor is copied before v starts
        for u, nbytes in carried:
            for d1 in range(nd):
                for d2 in range(nd):
                    tr = c.transfer(nbytes, d1, d2) if d1 != d2 else 0
                    if tr > 0:
                        r = row()
                        r[S + v], r[X + u * nd + d1], r[X + v * nd + d2] = 1, -tr, -tr
                        constrain(r, -tr, np.inf)
    for v, (home, nbytes) in enumerate(c.external):  # inputs from outside the step, copied when v leaves home
        for d in range(nd):
            tr = c.transfer(nbytes, home, d) if home >= 0 and d != home else 0
            if tr > 0:
                r = row()
                r[S + v], r[X + v * nd + d] = 1, -tr
                constrain(r, 0, np.inf)
    for t, root in enumerate(c.tie):  # a view or in-place op on its base tensor's device
        if root >= 0:
            for d in range(nd):
                r = row()
                r[X + t * nd + d], r[X + root * nd + d] = 1, -1
                constrain(r, 0, 0)
    for d, cap in enumerate(c.cap):
        if cap is not None and any(c.mem):  # an empty row (no task holds memory) trips HiGHS's presolve
            r = row()
            for t in range(n):
                r[X + t * nd + d] = c.mem[t]
            constrain(r, -np.inf, cap)

    integrality = np.zeros(nv)
    integrality[X:S] = 1
    integrality[Y:] = 1
    lb = np.zeros(nv)
    ub = np.full(nv, big)
    ub[X:S] = 1
    for t in range(n):  # a device a task may not run on is fixed off
        for d in range(nd):
            if not c.allowed[t][d]:
                ub[X + t * nd + d] = 0
    ub[Y:] = 1
    obj = np.zeros(nv)
    obj[CV] = 1
    from scipy.optimize import Bounds, LinearConstraint

    res = _solve_quietly(obj, LinearConstraint(np.array(rows), lo, hi), integrality, Bounds(lb, ub), time_limit_s)
    if res.x is None:
        return MilpResult(None, False, f"the MILP found no solution ({res.message.strip()}); use the heuristic")
    x = res.x
    assign = [int(np.argmax(x[X + t * nd: X + (t + 1) * nd])) for t in range(n)]
    starts = x[S:S + n]
    # the MILP's start order, made topological (Kahn's algorithm taking the earliest start first)
    indeg = [len(c.preds[t]) for t in range(n)]
    heap = [(round(float(starts[t]), 3), t) for t in range(n) if indeg[t] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        _s, t = heapq.heappop(heap)
        order.append(t)
        for v, _b in c.succs[t]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (round(float(starts[v]), 3), v))
    ms, start, end = evaluate(c, assign, order)
    optimal = res.status == 0 and c.host is None  # the MILP has no host thread: optimal for devices only
    if res.status == 0 and c.host is not None:
        res.message = "optimal without the host thread, which the MILP does not model; scheduled with it"
    if ms > h_ms:  # a time-limited incumbent worse than HEFT after rounding: keep HEFT's
        ms, assign, start, end = h_ms, h_assign, h_start, h_end
    return MilpResult(to_placement(c, assign, start, end, ms, "milp"), optimal,
                      "optimal" if optimal else f"not proven optimal: {res.message.strip()}")
