"""GPU-aware critical path of one trace: the chain of CPU work, launches, GPU operations and
synchronisations that set the window's end time, and what bounds it.

The analysis walks backwards from the interval that ends last in the analysis window
(:mod:`tc_analyses.model.window`). At each interval it asks what it was waiting for, and follows
the dependency that became ready last (the binding one):

* a **CPU interval** (a user annotation, a framework op or a runtime API call, split into the
  pieces where it is the innermost interval of its thread) waits for the previous piece of its thread; a
  **synchronising call** (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize``, synchronous ``cudaMemcpy``) whose GPU synchronisation or awaited GPU
  operation ended inside it waits for that GPU operation instead;
* a **GPU operation** waits for the latest of: the previous operation of its queue (a *queue gap*
  when there is one), its launch call (a *launch delay*), and, after a ``Stream Wait Event`` on its
  queue, the last operation of the queue waited on (a *cross-queue wait*).

Each step of the walk adds a segment: the interval's own time, or the gap before it. The segments
add up to the path's length: the end of the last interval minus the start of the first one. Per
segment kind (HTA's ``bound_by``): ``cpu_bound``, ``cpu_idle`` (the thread ran nothing),
``gpu_compute_bound``, ``gpu_communication_bound``, ``gpu_memory_bound``,
``gpu_kernel_launch_overhead``, ``gpu_kernel_kernel_overhead`` and ``gpu_wait``. Two more, where HTA's
labels mislead: a thread's idle gap that ends right after another thread of the process ended
work (within :data:`RELEASE_NS`) is ``cpu_other_thread`` (the main thread waiting for the autograd
engine's backward is not idle), and a queue's gap that ends right after another queue of its
device ended an operation is ``gpu_other_queue`` (a kernel waiting on another stream is not a
kernel-to-kernel overhead). Work that merely runs at the same time does not count: concurrent
streams are not waiting on each other.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Union

from tc_analyses.analyses.breakdown import kernel_type
from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.kernels import display_name
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, ApiCall, GpuOp
from tc_analyses.model.intervals import merge_intervals

# syncs by which a queue waits for another (args.wait_on_stream): CUDA's, and MTIA's (tracer.importers)
QUEUE_WAITS = frozenset({"Stream Wait Event", "event_wait"})
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                        "hipStreamSynchronize", "hipDeviceSynchronize"})
BOUNDS = ("cpu_bound", "cpu_idle", "cpu_other_thread", "gpu_compute_bound", "gpu_communication_bound",
          "gpu_memory_bound", "gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead", "gpu_other_queue", "gpu_wait")
# A gap's kind, and the kind of its parts during which another thread (queue) works.
_COVERED = {"cpu_idle": "cpu_other_thread", "gpu_kernel_kernel_overhead": "gpu_other_queue"}
# How soon after another thread's (queue's) work ends a thread (queue) must resume to be taken as
# having waited for it: a thread wakes within tens of µs, a queue's next kernel within a few.
RELEASE_NS = {"thread": 50_000, "queue": 10_000}


@dataclass(frozen=True, slots=True)
class CpuPiece:
    """Where an interval is the innermost one open on its thread: [start, end)."""

    tid: int
    name: str
    start: int
    end: int
    call: ApiCall | None  # the runtime call, when the piece is one


Item = Union[CpuPiece, GpuOp]


@dataclass(frozen=True)
class Segment:
    bound: str  # one of BOUNDS
    name: str  # the interval, or what the gap waited for
    where: str  # "thread <tid>" or "<device> queue <q>"
    start: int
    end: int

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class CriticalPath:
    trace: str
    scope: str
    start: int
    end: int
    segments: tuple[Segment, ...]  # in time order
    bound_ns: dict[str, int]  # per bound kind, every kind present
    top: tuple[tuple[str, str, int], ...]  # (bound, name, ns): the intervals with most time on the path
    findings: tuple[Finding, ...]

    @property
    def length_ns(self) -> int:
        return self.end - self.start

    def json_data(self) -> dict[str, object]:
        return {"trace": self.trace, "scope": self.scope, "start": self.start, "end": self.end,
                "length_ns": self.length_ns, "bound_ns": self.bound_ns,
                "bound_pct": {k: 100.0 * v / self.length_ns if self.length_ns else 0.0 for k, v in self.bound_ns.items()},
                "top": [list(t) for t in self.top], "segments": [s.__dict__ for s in self.segments]}


def cpu_pieces(activity: Activity) -> dict[int, list[CpuPiece]]:
    """tid -> the thread's timeline as disjoint pieces, each the innermost op or runtime call open there."""
    intervals: dict[int, list[tuple[int, int, str, ApiCall | None]]] = defaultdict(list)
    for a in activity.annotations:  # the outermost: a thread inside '## backward ##' is busy, as in HTA
        if not a.on_gpu:
            intervals[a.track].append((a.start, a.end, a.name, None))
    for n in activity.nodes:
        intervals[n.tid].append((n.start, n.end, n.op or n.name, None))
    for c in activity.api:
        intervals[c.tid].append((c.start, c.end, c.name, c))
    pieces: dict[int, list[CpuPiece]] = {}
    for tid, spans in intervals.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        out: list[CpuPiece] = []
        stack: list[tuple[int, int, str, ApiCall | None]] = []
        at = spans[0][0]

        def emit(until: int) -> None:
            nonlocal at
            if stack and until > at:
                _, _, name, call = stack[-1]
                out.append(CpuPiece(tid, name, at, until, call))
            at = max(at, until)

        for span in spans:
            while stack and stack[-1][1] <= span[0]:
                emit(stack[-1][1])
                stack.pop()
            emit(span[0])  # the enclosing interval's own time up to this one (nothing when none is open)
            stack.append(span)
        while stack:
            emit(stack[-1][1])
            stack.pop()
        pieces[tid] = out
    return pieces


class _Walk:
    """The indexes the backward walk looks things up in."""

    def __init__(self, activity: Activity) -> None:
        self.activity = activity
        self.pieces = cpu_pieces(activity)
        self.piece_ends = {tid: [p.end for p in ps] for tid, ps in self.pieces.items()}
        self.ops = list(activity.gpu)  # the walk compares operations by identity: one object each
        self.queues: dict[tuple[str, int], list[GpuOp]] = defaultdict(list)
        for op in self.ops:
            self.queues[(op.device, op.queue)].append(op)
        for ops in self.queues.values():
            ops.sort(key=lambda o: (o.start, o.end))
        self.queue_ends = {k: [o.end for o in v] for k, v in self.queues.items()}
        self.position = {id(o): i for ops in self.queues.values() for i, o in enumerate(ops)}
        self.syncs_by_call = {s.correlation_id: s for s in activity.syncs if s.correlation_id}
        self.waits = defaultdict(list)  # (device, queue) -> [(time, queue waited on)], Stream Wait Events
        for s in activity.syncs:
            if s.kind in QUEUE_WAITS and s.wait_queue >= 0:
                self.waits[(s.device, s.queue)].append((s.start, s.wait_queue))
        # Where each thread's and queue's work ends, its intervals merged: a nested op's end is no
        # end of the thread's work.
        self.work_ends: dict[str, list[int]] = {
            f"thread {tid}": _merged_ends([p.start for p in ps], [p.end for p in ps])
            for tid, ps in self.pieces.items()}
        for (device, queue), ops in self.queues.items():
            self.work_ends[f"{device} queue {queue}"] = _merged_ends([o.start for o in ops], [o.end for o in ops])

    def gap(self, bound: str, where: str, start: int, end: int) -> Segment:
        """The gap [start, end) of `where` as a segment: `bound`, or its covered kind when another
        thread (for a thread) or another queue of the device (for a queue) ended work within
        :data:`RELEASE_NS` before the gap ends: the sign that it waited for that work."""
        covered = _COVERED.get(bound)
        released = self.released_by(where, start, end) if covered is not None else None
        if covered is None or released is None:
            return Segment(bound, "idle" if bound == "cpu_idle" else "gap", where, start, end)
        return Segment(covered, released, where, start, end)

    def released_by(self, where: str, start: int, end: int) -> str | None:
        """The other thread (queue of the device) whose work ended last in (start, end], if that
        was at most RELEASE_NS before `end`."""
        kind = where.split(" queue ")[0] + " queue " if " queue " in where else "thread "
        latest, name = start, None
        for other, ends in self.work_ends.items():
            if other == where or not other.startswith(kind):
                continue
            at = bisect.bisect_right(ends, end) - 1
            if at >= 0 and ends[at] > latest:
                latest, name = ends[at], other
        window = RELEASE_NS["thread" if kind == "thread " else "queue"]
        return name if name is not None and end - latest <= window else None

    def previous_piece(self, piece: CpuPiece) -> CpuPiece | None:
        ends = self.piece_ends[piece.tid]
        at = bisect.bisect_right(ends, piece.start) - 1
        return self.pieces[piece.tid][at] if at >= 0 else None

    def piece_at(self, tid: int, time: int) -> CpuPiece | None:
        """The piece of thread `tid` that ends at or before `time`, latest first."""
        ends = self.piece_ends.get(tid, [])
        at = bisect.bisect_right(ends, time) - 1
        return self.pieces[tid][at] if at >= 0 else None

    def last_op_before(self, device: str, queue: int, time: int) -> GpuOp | None:
        ends = self.queue_ends.get((device, queue), [])
        at = bisect.bisect_right(ends, time) - 1
        return self.queues[(device, queue)][at] if at >= 0 else None

    def awaited_op(self, call: ApiCall) -> GpuOp | None:
        """The GPU operation whose end let a synchronising call return (ended inside it), if any."""
        if call.name not in SYNC_CALLS:
            return None
        sync = self.syncs_by_call.get(call.correlation_id)
        keys = [k for k in self.queues if sync is None or sync.queue < 0 or k == (sync.device, sync.queue)]
        found = [op for k in keys if (op := self.last_op_before(*k, call.end)) is not None and op.end > call.start]
        return max(found, key=lambda o: o.end) if found else None


def _merged_ends(starts: list[int], ends: list[int]) -> list[int]:
    """The ends of the intervals merged (:func:`merge_intervals`), in time order."""
    return merge_intervals(starts, ends)[1].tolist() if starts else []


def _gpu_bound(op: GpuOp) -> str:
    kind = kernel_type(op)
    return {"communication": "gpu_communication_bound", "memory": "gpu_memory_bound"}.get(kind, "gpu_compute_bound")


def critical_path(activity: Activity) -> list[Segment]:
    """The critical path's segments, in time order (see the module docstring)."""
    walk = _Walk(activity)
    items: list[Item] = [p for ps in walk.pieces.values() for p in ps] + walk.ops
    if not items:
        return []
    current: Item = max(items, key=lambda i: (i.end, isinstance(i, GpuOp)))
    until = current.end
    segments: list[Segment] = []
    for _ in range(10 * len(items) + 10):  # each step moves strictly back in time or to an earlier item
        if isinstance(current, GpuOp):
            where = f"{current.device} queue {current.queue}"
            segments.append(Segment(_gpu_bound(current), display_name(current), where, current.start, until))
            ready: list[tuple[int, int, str, Item]] = []  # (time, preference, bound, item)
            at = walk.position[id(current)]
            if at > 0:
                previous = walk.queues[(current.device, current.queue)][at - 1]
                ready.append((min(previous.end, current.start), 2, "gpu_kernel_kernel_overhead", previous))
            call = activity.launch_of(current)
            if call is not None:
                piece = walk.piece_at(call.tid, min(call.end, current.start))
                if piece is not None:
                    ready.append((min(call.end, current.start), 1, "gpu_kernel_launch_overhead", piece))
            for time, queue in walk.waits.get((current.device, current.queue), []):
                if time <= current.start:
                    waited = walk.last_op_before(current.device, queue, current.start)
                    if waited is not None:
                        ready.append((waited.end, 0, "gpu_wait", waited))
            if not ready:
                break
            time, _, bound, nxt = max(ready, key=lambda r: (r[0], r[1]))
            if current.start > time:
                segments.append(walk.gap(bound, where, time, current.start))
            current, until = nxt, time
            continue
        where = f"thread {current.tid}"
        awaited = walk.awaited_op(current.call) if current.call is not None else None
        if awaited is not None and awaited.end <= until and awaited.end > current.start:
            segments.append(Segment("cpu_bound", current.name, where, min(awaited.end, until), until))
            current, until = awaited, min(awaited.end, until)
            continue
        segments.append(Segment("cpu_bound", current.name, where, current.start, until))
        before = walk.previous_piece(current)
        if before is None:
            break
        if before.end < current.start:
            segments.append(walk.gap("cpu_idle", where, before.end, current.start))
        current, until = before, before.end
    segments = [s for s in segments if s.end > s.start]
    return sorted(segments, key=lambda s: (s.start, s.end))


def run(inputs: Inputs, options: Options) -> Result:
    """The GPU-aware critical path of the analysis window; the ``options["top"]`` intervals with most
    time on it are listed."""
    activity = inputs.activity
    if not len(activity.gpu):
        raise AnalysisUnavailable(f"{inputs.path}: no GPU operations in {inputs.scope.window}: the GPU-aware critical "
                                  "path needs kernels and their launches (`dfcompass parallelism` plans CPU graphs)")
    segments = critical_path(activity)
    bound = {b: 0 for b in BOUNDS}
    by_name: dict[tuple[str, str], int] = defaultdict(int)
    for s in segments:
        bound[s.bound] += s.duration
        by_name[(s.bound, s.name)] += s.duration
    start, end = segments[0].start, segments[-1].end
    top = tuple((b, n, t) for (b, n), t in sorted(by_name.items(), key=lambda kv: -kv[1])[:int(options["top"])])
    findings = tuple(_findings(bound, end - start, top, framework_of(inputs.trace)))
    data = CriticalPath(str(inputs.path), inputs.scope.text(), start, end, tuple(segments), bound, top, findings)
    return Result("critical-path", data.trace, data, findings)


def _findings(bound: dict[str, int], length: int, top: tuple[tuple[str, str, int], ...],
              framework: str = PYTORCH) -> list[Finding]:
    if not length:
        return []
    worst = max(bound, key=lambda b: bound[b])
    share = 100.0 * bound[worst] / length
    what = {
        "cpu_bound": f"the host sets the pace: cut Python and framework overhead ({advice('fuse_and_capture', framework)}, "
                     "larger batches) or move the CPU work off the step",
        "cpu_idle": "the thread sits idle on the path: it waits for something not traced (I/O, another process, a lock)",
        "gpu_compute_bound": "GPU kernels set the pace: faster kernels or less work (see `dfcompass roofline`, "
                             "`dfcompass kernels`)",
        "gpu_communication_bound": "collectives set the pace: overlap them with compute or shrink them",
        "gpu_memory_bound": "copies set the pace: pin host memory, copy asynchronously, keep data on the GPU",
        "gpu_kernel_launch_overhead": f"launch delays set the pace: fuse kernels or use {advice('graph_captures', framework)}",
        "gpu_kernel_kernel_overhead": "gaps between kernels set the pace: fuse small kernels",
        "cpu_other_thread": "the thread waits while another thread of the process works (the autograd engine's "
                            "backward, a data loader, a pool): the work on that thread sets the pace",
        "gpu_other_queue": "the queue waits while another queue of its device works (an event or a collective's "
                           "stream): rebalance the work between streams or overlap them",
        "gpu_wait": "queues wait on each other: rebalance the work between streams",
    }[worst]
    named = ", ".join(n[:60] for b, n, _ in top[:3] if b == worst and n not in ("gap", "idle"))
    return [Finding("critical_path", bound[worst], f"{share:.0f}% of the critical path ({fmt_ns(length)}) is "
                    f"{worst.replace('_', ' ')}{f' (mostly {named})' if named else ''}: {what}")]
