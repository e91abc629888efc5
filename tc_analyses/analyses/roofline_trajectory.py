"""Roofline trajectories: how ops move on the roofline when one setting changes across runs.

After Ibrahim, Williams and Oliker, "Roofline Scaling Trajectories" (HPCS 2018) and Javed et al.
(Javed, Ibrahim and Lu, CCF THPC 2019): record the same program several times, changing one setting (the *axis*: batch size,
thread count...), put every run on the same roofline and join each op type's points in axis
order. How the path bends tells what limits the op:

* intensity grows and FLOP/s follows it under the memory roof: the op is bandwidth-bound and
  larger batches amortise its weights;
* FLOP/s flattens while the setting grows: a roof or contention (cores sharing bandwidth) is
  reached, so more of that setting buys nothing;
* intensity shrinks as the setting grows: locality is lost (working set out of cache).

The "all ops" path uses total FLOPs, bytes and time over every analysed op of a run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tc_analyses.analyses.labels import order_runs
from tc_analyses.analyses.result import Finding, Options, Result
from tc_analyses.analyses.roofline import Peaks, RooflineResult
from tc_analyses.errors import ConfigurationError

ALL_OPS = "all ops"
FLAT = 1.10  # FLOP/s gaining less than 10% over a doubling of the axis counts as flat
TOP_OPS = 6


@dataclass(frozen=True)
class TrajectoryPoint:
    label: str
    intensity: float  # FLOP/byte
    achieved_flops: float  # FLOP/s
    efficiency: float  # of the roof at that intensity
    total_ns: int
    executions: int


@dataclass(frozen=True)
class OpTrajectory:
    op: str
    points: tuple[TrajectoryPoint, ...]  # in axis order; runs without this op are missing


@dataclass(frozen=True)
class RooflineTrajectory:
    axis: str  # "batch", "threads", ... as the user named it
    labels: tuple[str, ...]  # in axis order
    traces: tuple[str, ...]  # in axis order
    peaks: Peaks
    overall: OpTrajectory
    ops: tuple[OpTrajectory, ...]  # the longest op types, present in at least two runs
    findings: tuple[Finding, ...]


def roofline_trajectory(runs: list[tuple[str, RooflineResult]], axis: str = "run", top: int = TOP_OPS) -> RooflineTrajectory:
    """The trajectory of `runs` ((label, result) pairs, all against the same peaks)."""
    if len(runs) < 2:
        raise ConfigurationError("a roofline trajectory needs at least two traces")
    runs = order_runs(runs)
    peaks = runs[0][1].peaks
    if any(r.peaks != peaks for _, r in runs):
        raise ConfigurationError("the traces of a trajectory must be put on the same roofline (same --device)")
    overall = OpTrajectory(ALL_OPS, tuple(_overall_point(label, r) for label, r in runs))
    per_op: dict[str, list[TrajectoryPoint]] = defaultdict(list)
    time_per_op: dict[str, int] = defaultdict(int)
    for label, result in runs:
        for o in result.ops:
            if o.flops > 0:
                per_op[o.op].append(TrajectoryPoint(label, o.intensity, o.achieved_flops, o.efficiency,
                                                    o.total_ns, o.count))
                time_per_op[o.op] += o.total_ns
    kept = sorted((op for op, pts in per_op.items() if len(pts) >= 2), key=lambda op: (-time_per_op[op], op))[:top]
    ops = tuple(OpTrajectory(op, tuple(per_op[op])) for op in kept)
    return RooflineTrajectory(axis, tuple(label for label, _ in runs), tuple(r.trace for _, r in runs), peaks,
                              overall, ops, tuple(_findings(axis, overall, ops)))


def _overall_point(label: str, result: RooflineResult) -> TrajectoryPoint:
    flops = sum(o.flops for o in result.ops)
    nbytes = sum(o.bytes for o in result.ops)
    total_ns = sum(o.total_ns for o in result.ops)
    efficiency = sum(o.efficiency * o.total_ns for o in result.ops) / total_ns if total_ns else 0.0
    return TrajectoryPoint(label, flops / nbytes if nbytes else 0.0, flops / (total_ns * 1e-9) if total_ns else 0.0,
                           efficiency, total_ns, sum(o.count for o in result.ops))


def _gain(points: tuple[TrajectoryPoint, ...]) -> float:
    first, last = points[0].achieved_flops, points[-1].achieved_flops
    return last / first if first > 0 else 0.0


def _findings(axis: str, overall: OpTrajectory, ops: tuple[OpTrajectory, ...]) -> list[Finding]:
    return [Finding("trajectory", 0, text) for text in _finding_texts(axis, overall, ops)]


def _finding_texts(axis: str, overall: OpTrajectory, ops: tuple[OpTrajectory, ...]) -> list[str]:
    pts = overall.points
    first, last = pts[0], pts[-1]
    best = max(pts, key=lambda p: p.achieved_flops)
    out = [f"from {axis} {first.label} to {last.label} the analysed ops go from {first.achieved_flops / 1e9:.2f} to "
           f"{last.achieved_flops / 1e9:.2f} GFLOP/s ({_gain(pts):.2f}x) and from {first.intensity:.2f} to "
           f"{last.intensity:.2f} FLOP/byte; the fastest run is {axis} {best.label}"]
    plateau = _plateau(pts)
    if plateau is not None:
        out.append(f"beyond {axis} {plateau} the achieved FLOP/s gains less than {FLAT - 1:.0%} per step: "
                   f"{'more threads only add contention; try ' + plateau + ' threads (torch.set_num_threads) and give the other cores to data loading or inter-op parallelism' if _is_threads(axis) else 'the ops reach a roof or contend for bandwidth, so a larger ' + axis + ' mostly adds latency'}")
    elif _is_threads(axis) and best is not last:
        out.append(f"{best.label} threads run faster than {last.label}: set torch.set_num_threads({best.label})")
    for trajectory in ops:
        p = trajectory.points
        if p[-1].intensity < p[0].intensity * 0.8:
            out.append(f"{trajectory.op}: intensity falls from {p[0].intensity:.2f} to {p[-1].intensity:.2f} FLOP/byte "
                       f"as {axis} grows: its working set outgrows the caches; tile or split the op")
        elif _gain(p) < 1.0 / FLAT:
            out.append(f"{trajectory.op}: slower at {axis} {p[-1].label} than at {p[0].label} "
                       f"({p[0].achieved_flops / 1e9:.2f} -> {p[-1].achieved_flops / 1e9:.2f} GFLOP/s): look at it first")
    return out


def _is_threads(axis: str) -> bool:
    return axis.lower() in ("threads", "thread", "num_threads", "cores")


def _plateau(points: tuple[TrajectoryPoint, ...]) -> str | None:
    """The first label after which no run gains FLAT over its predecessor (None if the last step still gains)."""
    flat_from = None
    for i in range(len(points) - 1, 0, -1):
        if points[i].achieved_flops >= points[i - 1].achieved_flops * FLAT:
            break
        flat_from = i - 1
    return None if flat_from is None else points[flat_from].label


def trajectory(runs: list[tuple[str, Result]], axis: str, options: Options) -> Result:
    """Each op type's path across labelled runs of one program (the registry's entry point)."""
    data = roofline_trajectory([(label, r.data) for label, r in runs], axis)
    return Result("roofline", ", ".join(data.traces), data, data.findings)
