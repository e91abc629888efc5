"""Local search on top of HEFT: critical-path moves, swaps, re-ranking and seeded perturbation.

Start from HEFT's placement. Every candidate is evaluated exactly with the list scheduler of
``heft`` (insertion, transfers between devices), so the result is never worse than HEFT: the best
evaluated candidate is kept. Steps, repeated until no step improves or the budget is spent:

1. move a task on the current critical path (the chain of data and device dependencies that ends
   at the last-finishing task) to another device, accepting the first improvement;
2. on small graphs (<= ``full_neighbourhood_max`` tasks), move any task, then swap the devices of
   two tasks of the critical path;
3. re-rank: list-schedule the current assignment in the upward-rank order of *that* assignment;
4. at a local optimum, on small graphs only, perturb the best placement (move a few random tasks,
   seeded RNG) and descend again (iterated local search).

Memory: a move or swap that makes a device's resident bytes exceed ``Device.memory_bytes`` is
skipped. The budget is ``max_evals`` evaluations (deterministic) and ``time_budget_s`` seconds
(a safety cap for big graphs; results then depend on the machine's speed).
"""

from __future__ import annotations

import time

import numpy as np

from tc_analyses.analyses.placement.heft import (CompiledProblem, compile_problem, evaluate, heft_assign, rank_order,
                                                 to_placement)
from tc_analyses.perf.problem import Placement, PlacementProblem


def _critical_path(c: CompiledProblem, assign: list[int], start: list[int], end: list[int]) -> list[int]:
    """Positions on the chain that determines the makespan, last task first."""
    n = len(c.ids)
    if n == 0:
        return []
    # the task just before each one on its device, by start time
    prev_on_dev = [-1] * n
    last_on_dev: dict[int, int] = {}
    for i in sorted(range(n), key=lambda k: (start[k], end[k])):
        d = assign[i]
        prev_on_dev[i] = last_on_dev.get(d, -1)
        last_on_dev[d] = i
    path = []
    i = max(range(n), key=lambda k: end[k])
    seen = set()
    while i >= 0 and i not in seen:
        seen.add(i)
        path.append(i)
        s = start[i]
        if s == 0:
            break
        nxt = -1
        for j, nbytes in c.preds[i]:
            if end[j] + c.transfer(nbytes, assign[j], assign[i]) == s:
                nxt = j
                break
        if nxt < 0:
            p = prev_on_dev[i]
            if p >= 0 and end[p] == s:
                nxt = p
        i = nxt
    return path


def local_search(problem: PlacementProblem, seed: int = 0, max_evals: int = 20_000,
                 time_budget_s: float | None = 4.0, full_neighbourhood_max: int = 2_000,
                 perturb: bool = True, compiled: CompiledProblem | None = None) -> Placement:
    """HEFT improved by critical-path local search; never worse than HEFT (see the module doc).
    `compiled`: ``compile_problem(problem)`` when the caller has it (and HEFT's result with it)."""
    t0 = time.perf_counter()
    c = compiled if compiled is not None else compile_problem(problem)
    n, nd = len(c.ids), len(c.devices)
    assign, order, makespan, start, end = heft_assign(c)
    if n == 0 or nd < 2:
        return to_placement(c, assign, start, end, makespan, "heft+search")
    rng = np.random.default_rng(seed)
    evals = 0

    def out_of_budget() -> bool:
        return evals >= max_evals or (time_budget_s is not None and time.perf_counter() - t0 > time_budget_s)

    used = [0] * nd
    for i, d in enumerate(assign):
        used[d] += c.mem[i]

    def fits(d: int, extra: int) -> bool:
        cap = c.cap[d]
        return cap is None or used[d] + extra <= cap

    tie = c.tie or [-1] * n
    groups = c.groups()
    tied = {m for members in groups.values() for m in members}  # roots included
    cur = (makespan, list(assign), list(order), start, end)
    best = cur
    small = n <= full_neighbourhood_max

    def try_assign(new_assign: list[int]) -> tuple[int, list[int], list[int]] | None:
        """Evaluate in the current order and in the re-ranked order; the better if it beats ``cur``."""
        nonlocal evals
        evals += 1
        ms, s, e = evaluate(c, new_assign, cur[2])
        result = (ms, s, e, cur[2])
        if small or ms >= cur[0]:
            if out_of_budget():
                return None if ms >= cur[0] else (ms, s, e)
            evals += 1
            order2 = rank_order(c, new_assign)
            ms2, s2, e2 = evaluate(c, new_assign, order2)
            if ms2 < ms:
                result = (ms2, s2, e2, order2)
        if result[0] < cur[0]:
            nonlocal_order[0] = result[3]
            return result[0], result[1], result[2]
        return None

    nonlocal_order: list[list[int]] = [cur[2]]

    while not out_of_budget():
        ms0, a0, o0, s0, e0 = cur
        improved = None
        crit = _critical_path(c, a0, s0, e0)
        candidates = list(crit)
        if small:
            on_path = set(crit)
            rest = [i for i in rng.permutation(n).tolist() if i not in on_path]
            candidates += rest
        # 1-2: single-task moves (critical path first); a tied group (a tensor's producer with its
        # views and in-place ops) moves as one
        tried: set[int] = set()
        for i in candidates:
            if out_of_budget():
                break
            root = tie[i] if tie[i] >= 0 else i
            if root in tried:
                continue
            tried.add(root)
            members = groups.get(root, [root])
            mem = sum(c.mem[m] for m in members)
            for d in range(nd):
                if d == a0[root] or not c.allowed[root][d] or not fits(d, mem):
                    continue
                na = list(a0)
                for m in members:
                    na[m] = d
                r = try_assign(na)
                if r is not None:
                    used[a0[root]] -= mem
                    used[d] += mem
                    improved = (r[0], na, nonlocal_order[0], r[1], r[2])
                    break
                if out_of_budget():
                    break
            if improved:
                break
        # swaps of two critical tasks on different devices
        if improved is None and small:
            for x in range(len(crit)):
                if improved or out_of_budget():
                    break
                for y in range(x + 1, len(crit)):
                    i, j = crit[x], crit[y]
                    di, dj = a0[i], a0[j]
                    if di == dj or not (c.allowed[i][dj] and c.allowed[j][di]) or i in tied or j in tied:
                        continue  # groups move only as a whole, above
                    ci, cj = c.cap[di], c.cap[dj]
                    if ci is not None and used[di] - c.mem[i] + c.mem[j] > ci:
                        continue
                    if cj is not None and used[dj] - c.mem[j] + c.mem[i] > cj:
                        continue
                    na = list(a0)
                    na[i], na[j] = dj, di
                    r = try_assign(na)
                    if r is not None:
                        used[di] += c.mem[j] - c.mem[i]
                        used[dj] += c.mem[i] - c.mem[j]
                        improved = (r[0], na, nonlocal_order[0], r[1], r[2])
                        break
                    if out_of_budget():
                        break
        if improved is not None:
            cur = improved
            nonlocal_order[0] = cur[2]
            if cur[0] < best[0]:
                best = cur
            continue
        # local optimum
        if not (perturb and small) or out_of_budget():
            break
        # iterated local search: perturb the best placement (memory-feasible moves only)
        pa = list(best[1])
        used = [0] * nd
        for i, d in enumerate(pa):
            used[d] += c.mem[i]
        for _ in range(max(2, n // 10)):
            i = int(rng.integers(0, n))
            d = int(rng.integers(0, nd))
            root = tie[i] if tie[i] >= 0 else i
            members = groups.get(root, [root])
            mem = sum(c.mem[m] for m in members)
            if d != pa[root] and c.allowed[root][d] and fits(d, mem):
                used[pa[root]] -= mem
                used[d] += mem
                for m in members:
                    pa[m] = d
        po = rank_order(c, pa)
        evals += 1
        ms, s, e = evaluate(c, pa, po)
        cur = (ms, pa, po, s, e)
        nonlocal_order[0] = po
        if ms < best[0]:
            best = cur
    ms, a, _o, s, e = best
    return to_placement(c, a, s, e, ms, "heft+search")
