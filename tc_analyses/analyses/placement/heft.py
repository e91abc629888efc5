"""Insertion-based HEFT (Topcuoglu, Hariri & Wu, IEEE TPDS 13(3), 2002) and a list scheduler.

HEFT ranks every task by its *upward rank*: its mean cost over the devices plus the largest, over
its successors, of the mean transfer time of the edge and the successor's rank. Taking tasks by
decreasing rank (a topological order), it puts each on the device where it would *finish*
earliest, looking for the earliest idle gap of that device's schedule long enough for the task
after its inputs arrive (insertion), not only the end of the schedule.

``list_schedule(problem, assignment, priority)`` is the same list scheduler with the devices fixed;
``evaluate`` is its core on a ``CompiledProblem``, which the local search and the MILP check reuse.
Upward ranks come from :func:`tc_analyses.model.dag.upward_rank`. Transfers cost ``problem.transfer_ns`` between
different devices and overlap freely with compute and with each other (no copy-engine contention:
the simulator models that separately).

The host thread: when the problem gives devices a host share (``PlacementProblem.host_ns``), each
task also holds the one host thread for that long from its start (dispatch, launch, the GIL), so
tasks of different devices take turns there; a task starts when both its device and the host have
room for it.

Carried tensors: a tensor made in one step and read in the next (``PlacementProblem.carried``)
costs its copy when producer and consumer are placed apart: the consumer cannot start before it.
Inputs from outside the step (``PlacementProblem.external``: the batch, parameters) likewise cost
their copy from the device where the task ran when it is placed elsewhere.

Ties: a view or an in-place op (``PlacementProblem.tied``) goes where its base tensor's producer
went; the local search moves such a group as one.

Memory: a device with ``memory_bytes`` set only takes tasks while the sum of their
``Task.memory_bytes`` fits (the footprint is counted as resident for the whole run).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from tc_analyses.model.dag import upward_rank
from tc_analyses.perf.problem import Placement, PlacementError, PlacementProblem, Slot

Busy = tuple[list[int], list[int]]  # a resource's busy intervals: sorted starts and their ends


def _insert(busy: Busy, k: int, s: int, e: int) -> None:
    """Occupy [s, e) at insert index `k`, merged with the intervals it touches.

    Only the union of the busy intervals matters to :func:`_earliest_gap`, so merging changes no
    schedule; it keeps back-to-back tasks (a chain on one device) as one interval, where a list
    of every task made each gap search scan them all: quadratic on long chains (79 of 101 s of
    recommend-placement on a 32 k-node LSTM trace).
    """
    if s == e:  # a zero-length task occupies nothing (see _earliest_gap)
        return
    starts, ends = busy
    left = k > 0 and ends[k - 1] == s
    right = k < len(starts) and starts[k] == e
    if left and right:
        ends[k - 1] = ends[k]
        del starts[k], ends[k]
    elif left:
        ends[k - 1] = e
    elif right:
        starts[k] = s
    else:
        starts.insert(k, s)
        ends.insert(k, e)


@dataclass
class CompiledProblem:
    """The problem as dense lists indexed by task position and device position (fast inner loops)."""

    ids: list[int]  # position -> task id
    index: dict[int, int]  # task id -> position
    devices: list[str]
    cost: list[list[int]]  # [task][device] ns, launch overhead included
    preds: list[list[tuple[int, int]]]  # [task] -> (pred position, bytes)
    succs: list[list[tuple[int, int]]]
    succ: list[list[int]]  # [task] -> successor positions (the positions of succs)
    lat: list[list[float | None]]  # [src][dst] link latency; None = no link
    bw: list[list[float]]
    mem: list[int]
    cap: list[int | None]
    topo: list[int]  # positions in a topological order
    allowed: list[list[bool]]  # [task][device]: False where the problem forbids the device (cost 0 there, unused)
    host: list[list[int]] | None = None  # [task][device] ns holding the host thread from the task's start; None = no host
    tie: list[int] = field(default_factory=list)  # [task] -> position of the task deciding its device, or -1
    carried: list[list[tuple[int, int]]] = field(default_factory=list)  # [task] -> (producer position, bytes) from the previous step
    external: list[tuple[int, int]] = field(default_factory=list)  # [task] -> (device holding its outside inputs, bytes)
    # HEFT's result, kept: every optimiser starts from it, and on 10k tasks it costs seconds
    heft_result: tuple[list[int], list[int], int, list[int], list[int]] | None = field(default=None, repr=False)

    def release(self, i: int, d: int, assign: list[int]) -> int:
        """When task i on device d can start at the earliest: after the copies of what it reads from
        the previous step, from wherever their producers are placed (unplaced ones count as local)."""
        ready = 0
        for j, nbytes in self.carried[i] if self.carried else ():
            dj = assign[j]
            if dj >= 0 and dj != d and nbytes > 0:
                ready = max(ready, self.transfer(nbytes, dj, d))
        if self.external:
            home, nbytes = self.external[i]
            if home >= 0 and home != d and nbytes > 0:
                ready = max(ready, self.transfer(nbytes, home, d))
        return ready

    def groups(self) -> dict[int, list[int]]:
        """Root position -> itself and the positions tied to it (only roots with tied tasks)."""
        out: dict[int, list[int]] = {}
        for i, root in enumerate(self.tie):
            if root >= 0:
                out.setdefault(root, [root]).append(i)
        return out

    def fit(self, busy: "Busy", host: "Busy", i: int, d: int, ready: int) -> tuple[int, int, int]:
        """Earliest start >= ready where task i fits on device d and, for its host share, on the host
        thread; (start, insert index on the device, insert index on the host or -1)."""
        dur = self.cost[i][d]
        held = self.host[i][d] if self.host is not None else 0
        s = ready
        while True:
            s, k = _earliest_gap(busy[0], busy[1], s, dur)
            if held <= 0:
                return s, k, -1
            h, hk = _earliest_gap(host[0], host[1], s, held)
            if h == s:
                return s, k, hk
            s = h  # the host is busy then: try the device again from when it frees up

    def transfer(self, nbytes: int, src: int, dst: int) -> int:
        if src == dst or nbytes <= 0:
            return 0
        lat = self.lat[src][dst]
        if lat is None:
            raise PlacementError(f"no transfer model from {self.devices[src]} to {self.devices[dst]}")
        return int(round(lat + nbytes / self.bw[src][dst]))


def compile_problem(problem: PlacementProblem) -> CompiledProblem:
    """`problem` validated and laid out as dense lists; PlacementError on a cycle or no device."""
    problem.validate()  # costs complete, edges known, acyclic (PlacementError otherwise)
    if not problem.devices:
        raise PlacementError("the problem has no device to place tasks on")
    ids = [t.id for t in problem.tasks]
    index = {tid: i for i, tid in enumerate(ids)}
    devices = problem.device_names()
    allowed = [[problem.allowed(tid, d) for d in devices] for tid in ids]
    cost = [[problem.cost(tid, d) if ok else 0 for d, ok in zip(devices, row)] for tid, row in zip(ids, allowed)]
    preds: list[list[tuple[int, int]]] = [[] for _ in ids]
    succs: list[list[tuple[int, int]]] = [[] for _ in ids]
    for (u, v), nbytes in problem.edges.items():
        preds[index[v]].append((index[u], nbytes))
        succs[index[u]].append((index[v], nbytes))
    nd = len(devices)
    lat: list[list[float | None]] = [[None] * nd for _ in range(nd)]
    bw = [[1.0] * nd for _ in range(nd)]
    for a, da in enumerate(devices):
        for b, db in enumerate(devices):
            link = problem.links.get((da, db))
            if a != b and link is not None:
                lat[a][b], bw[a][b] = link.latency_ns, link.bytes_per_ns
    host = ([[problem.host(tid, d) if ok else 0 for d, ok in zip(devices, row)] for tid, row in zip(ids, allowed)]
            if any(v > 0 for v in problem.host_ns.values()) or problem.blocking else None)
    tie = [index[problem.tie_root(tid)] if tid in problem.tied and problem.tie_root(tid) in index else -1
           for tid in ids]
    carried: list[list[tuple[int, int]]] = [[] for _ in ids]
    for (u, v), nbytes in problem.carried.items():
        if u in index and v in index:
            carried[index[v]].append((index[u], nbytes))
    dev_index = {name: k for k, name in enumerate(devices)}
    external = [(dev_index.get(t.actual_device or "", -1), problem.external.get(t.id, 0)) for t in problem.tasks]
    if not any(nbytes for _, nbytes in external):
        external = []
    for i, root in enumerate(tie):  # a tied task may only go where its root may go too
        if root >= 0:
            allowed[root] = [a and b for a, b in zip(allowed[root], allowed[i])]
            allowed[i] = list(allowed[root])
    return CompiledProblem(ids, index, devices, cost, preds, succs, [[j for j, _ in out] for out in succs], lat, bw,
                           [t.memory_bytes for t in problem.tasks], [d.memory_bytes for d in problem.devices],
                           [index[t] for t in problem.topological_order()], allowed, host, tie, carried, external)


def mean_transfers(c: CompiledProblem, sizes: list[int]) -> list[float]:
    """HEFT's mean transfer time of each of `sizes` bytes over all ordered device pairs (same-device
    pairs cost 0 and count), the linked pairs looked up once."""
    nd = len(c.devices)
    if nd < 2:
        return [0.0] * len(sizes)
    pairs = [(lat, c.bw[a][b]) for a in range(nd) for b in range(nd) if a != b and (lat := c.lat[a][b]) is not None]
    means = []
    for nbytes in sizes:
        total = 0.0
        if nbytes > 0:
            for lat, bw in pairs:
                total += int(round(lat + nbytes / bw))
        means.append(total / (nd * nd))  # same-device pairs cost 0 and count in the mean, as in the paper
    return means


def rank_order(c: CompiledProblem, assign: list[int] | None = None) -> list[int]:
    """Positions by decreasing upward rank (ties: topological position), a topological order.

    Without ``assign``: HEFT's mean costs and mean transfers. With it: the costs and transfers of
    that assignment (the critical-path-to-exit order of a fixed placement).
    """
    n = len(c.ids)
    if assign is None:
        work = [sum(k for k, ok in zip(row, oks) if ok) / sum(oks) for row, oks in zip(c.cost, c.allowed)]
        means = iter(mean_transfers(c, [nbytes for out in c.succs for _, nbytes in out]))
        weights = [[next(means) for _ in out] for out in c.succs]
    else:
        work = [float(c.cost[i][assign[i]]) for i in range(n)]
        transfer = c.transfer
        weights = [[0 if assign[j] == d or nbytes <= 0 else transfer(nbytes, d, assign[j]) for j, nbytes in out]
                   for out, d in zip(c.succs, assign)]
    rank = upward_rank(c.topo, work, c.succ, weights)
    return sorted(c.topo, key=rank.__getitem__, reverse=True)  # stable: equal ranks keep the topological order


# How many busy intervals the gap search looks through before it appends the task after the last
# one. Insertion scheduling scans every later interval, so a device cut into many small gaps made
# the list scheduler quadratic (a 160 k-node LSTM: most of recommend-placement's time).
GAP_SCAN = 256


def _earliest_gap(starts: list[int], ends: list[int], ready: int, dur: int) -> tuple[int, int]:
    """Earliest start >= ready where [start, start + dur) fits between the busy intervals (among the
    next :data:`GAP_SCAN`), or after the last; and the insert index.

    A zero-length task starts when it is ready: it occupies no time, so it needs no gap (and the
    merged busy intervals of :func:`_insert` keep no boundaries for it to sit on)."""
    k = bisect_right(ends, ready)
    if dur == 0:
        return ready, k
    t = ready
    for i in range(k, min(len(starts), k + GAP_SCAN)):
        if t + dur <= starts[i]:
            return t, i
        if ends[i] > t:
            t = ends[i]
    if len(starts) > k + GAP_SCAN:  # a long fragmented stretch: after the last interval (always free)
        return max(t, ends[-1]), len(starts)
    return t, len(starts)


def evaluate(c: CompiledProblem, assign: list[int], order: Sequence[int]) -> tuple[int, list[int], list[int]]:
    """List-schedule positions in ``order`` on their assigned devices with insertion; (makespan, start, end)."""
    n = len(c.ids)
    nd = len(c.devices)
    start = [0] * n
    end = [-1] * n
    busy_s: list[list[int]] = [[] for _ in range(nd)]
    busy_e: list[list[int]] = [[] for _ in range(nd)]
    cost, preds, transfer, host = c.cost, c.preds, c.transfer, c.host
    host_busy: Busy = ([], [])
    makespan = 0
    for i in order:
        d = assign[i]
        if not c.allowed[i][d]:
            raise PlacementError(f"task {c.ids[i]} is placed on {c.devices[d]}, which it may not run on")
        ready = c.release(i, d, assign) if c.carried or c.external else 0
        for j, nbytes in preds[i]:
            ej = end[j]
            if ej < 0:
                raise PlacementError(f"priority order schedules task {c.ids[i]} before its input {c.ids[j]}")
            dj = assign[j]
            arrive = ej if dj == d or nbytes <= 0 else ej + transfer(nbytes, dj, d)
            if arrive > ready:
                ready = arrive
        dur = cost[i][d]
        bs, be = busy_s[d], busy_e[d]
        if host is not None:
            s, k, hk = c.fit((bs, be), host_busy, i, d, ready)
            if hk >= 0:
                _insert(host_busy, hk, s, s + host[i][d])
        elif not bs or ready >= be[-1]:
            s, k = ready, len(bs)
        else:
            s, k = _earliest_gap(bs, be, ready, dur)
        e = s + dur
        _insert((bs, be), k, s, e)
        start[i], end[i] = s, e
        if e > makespan:
            makespan = e
    return makespan, start, end


def _check_memory(c: CompiledProblem, assign: list[int]) -> None:
    used = [0] * len(c.devices)
    for i, d in enumerate(assign):
        used[d] += c.mem[i]
    for d, cap in enumerate(c.cap):
        if cap is not None and used[d] > cap:
            raise PlacementError(f"tasks placed on {c.devices[d]} need {used[d]:,} bytes; it holds {cap:,}")


def to_placement(c: CompiledProblem, assign: list[int], start: list[int], end: list[int], makespan: int,
                 algorithm: str) -> Placement:
    """A schedule over positions and device indexes as a :class:`Placement` of task ids and device names."""
    slots = sorted((Slot(c.ids[i], c.devices[assign[i]], start[i], end[i]) for i in range(len(c.ids))),
                   key=lambda s: (s.start_ns, s.device, s.task))
    return Placement({c.ids[i]: c.devices[assign[i]] for i in range(len(c.ids))}, makespan, slots, algorithm)


def list_schedule(problem: PlacementProblem, assignment: dict[int, str], priority: Sequence[int] | None = None,
                  algorithm: str = "list schedule", compiled: CompiledProblem | None = None) -> Placement:
    """Schedule a fixed assignment: tasks in ``priority`` order (task ids, a topological order; default:
    decreasing upward rank under that assignment), each at its earliest start on its device after its
    inputs arrive, in the first idle gap long enough (insertion). PlacementError on a cycle, a task
    without a device, an unknown device, a priority that is not a topological order, or memory overflow.
    `compiled`: ``compile_problem(problem)``, given by a caller that schedules one problem several
    times (compiling a problem of a million tasks costs more than scheduling it).
    """
    c = compiled if compiled is not None else compile_problem(problem)
    dev_index = {d: k for k, d in enumerate(c.devices)}
    try:
        assign = [dev_index[assignment[tid]] for tid in c.ids]
    except KeyError as exc:
        raise PlacementError(f"the assignment has no known device for {exc.args[0]!r}") from None
    _check_memory(c, assign)
    if priority is None:
        order = rank_order(c, assign)
    else:
        order = [c.index[tid] for tid in priority]
        if sorted(order) != list(range(len(c.ids))):
            raise PlacementError("the priority order must list every task exactly once")
    makespan, start, end = evaluate(c, assign, order)
    return to_placement(c, assign, start, end, makespan, algorithm)


def heft_assign(c: CompiledProblem) -> tuple[list[int], list[int], int, list[int], list[int]]:
    """HEFT on a compiled problem: (assignment, order, makespan, start, end), computed once per
    compiled problem; the lists are the caller's to change."""
    if c.heft_result is None:
        c.heft_result = _heft_assign(c)
    assign, order, makespan, start, end = c.heft_result
    return list(assign), list(order), makespan, list(start), list(end)


def _heft_assign(c: CompiledProblem) -> tuple[list[int], list[int], int, list[int], list[int]]:
    n, nd = len(c.ids), len(c.devices)
    order = rank_order(c)
    assign = [-1] * n
    start = [0] * n
    end = [0] * n
    busy_s: list[list[int]] = [[] for _ in range(nd)]
    busy_e: list[list[int]] = [[] for _ in range(nd)]
    used = [0] * nd
    host_busy: Busy = ([], [])
    makespan = 0
    for i in order:
        best: tuple[int, int, int, int, int] | None = None  # (finish, device, start, insert index, host index)
        root = c.tie[i] if c.tie else -1
        for d in range(nd):
            cap = c.cap[d]
            if not c.allowed[i][d] or (cap is not None and used[d] + c.mem[i] > cap):
                continue
            if root >= 0 and assign[root] >= 0 and d != assign[root]:
                continue  # a view or in-place op stays with its base tensor
            ready = c.release(i, d, assign) if c.carried or c.external else 0
            for j, nbytes in c.preds[i]:
                arrive = end[j] + c.transfer(nbytes, assign[j], d)
                if arrive > ready:
                    ready = arrive
            dur = c.cost[i][d]
            s, k, hk = c.fit((busy_s[d], busy_e[d]), host_busy, i, d, ready)
            if best is None or s + dur < best[0]:
                best = (s + dur, d, s, k, hk)
        if best is None:
            raise PlacementError(f"task {c.ids[i]} ({c.mem[i]:,} bytes) fits in no device's remaining memory")
        e, d, s, k, hk = best
        _insert((busy_s[d], busy_e[d]), k, s, e)
        if hk >= 0 and c.host is not None:
            _insert(host_busy, hk, s, s + c.host[i][d])
        used[d] += c.mem[i]
        assign[i], start[i], end[i] = d, s, e
        makespan = max(makespan, e)
    if any(c.carried):  # a consumer placed before its carried tensor's producer did not see the copy
        makespan, start, end = evaluate(c, assign, order)
    return assign, order, makespan, start, end


def heft(problem: PlacementProblem, compiled: CompiledProblem | None = None) -> Placement:
    """Insertion-based HEFT placement with its schedule and makespan (PlacementError on a cycle or no
    fit); `compiled`: ``compile_problem(problem)`` when the caller has it."""
    c = compiled if compiled is not None else compile_problem(problem)
    assign, _order, makespan, start, end = heft_assign(c)
    return to_placement(c, assign, start, end, makespan, "heft")
