"""The GPU kernel-time model against real kernels: each op's predicted kernel time from its shapes,
against the kernels it launched in a Kineto trace.

Join: a kernel belongs to the innermost CPU op open on the launching thread when its launch call
started (the launch call and the kernel share a correlation id); the op's measured kernel time is
the sum of its kernels. Ops with input shapes (Kineto's "Input Dims", imported as dfc:node_args)
are kept.

Prediction: the roofline of :mod:`tc_analyses.perf.cost` on the device's datasheet peaks,
``max(FLOPs / peak, bytes / bandwidth)``, without the host-side launch constant. Nothing is fitted
to the kernels. :func:`calibrate` fits, per op type, the factor between the roofline and the
measured time on one trace (one rank), so that it can be checked on another (the other rank).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass

from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.perf.cost import OPS, estimate_op, is_view, op_key
from tc_analyses.perf.devices import spec
from tc_analyses.reader.fast import DfcTrace


@dataclass(frozen=True)
class JoinedOp:
    op: str
    shapes: str
    dtypes: str
    kernels: int
    kernel_ns: int  # measured: the sum of its kernels' durations
    roofline_ns: float  # predicted from its shapes on the device's peaks
    modelled: bool  # the op type has a FLOP model (else bytes only)


@dataclass(frozen=True)
class ErrorRow:
    op: str
    count: int
    median_error: float  # median of predicted / measured - 1
    median_abs_error: float
    p10_error: float
    p90_error: float
    modelled: bool


def _innermost(runs_by_tid: dict[int, tuple[list[int], list[NodeRun]]], tid: int, ts: int) -> NodeRun | None:
    """The run of thread `tid` open at `ts` that started last."""
    found = runs_by_tid.get(tid)
    if found is None:
        return None
    starts, runs = found
    i = bisect_right(starts, ts) - 1
    while i >= 0:
        if runs[i].end >= ts:
            return runs[i]
        i -= 1
    return None


def join_kernels(trace: DfcTrace, activity: Activity, device_model: str = "A100") -> list[JoinedOp]:
    """Every op with input shapes that launched kernels, with its measured and predicted kernel time."""
    table = trace.table("node_args")
    args = {nid: (s or "", d or "") for nid, s, d in zip(table["node_id"].tolist(), table.text("shapes").tolist(),
                                                          table.text("dtypes").tolist())}
    per_tid: dict[int, list[NodeRun]] = defaultdict(list)
    for run in activity.nodes:
        per_tid[run.tid].append(run)
    runs_by_tid = {tid: ([r.start for r in rs], rs) for tid, rs in
                   ((tid, sorted(rs, key=lambda r: (r.start, -r.end))) for tid, rs in per_tid.items())}
    launches = {call.correlation_id: call for call in activity.api if call.correlation_id}
    kernels: dict[int, list[int]] = defaultdict(list)  # node_id -> kernel durations
    owner_run: dict[int, NodeRun] = {}
    for op in activity.gpu:
        call = launches.get(op.correlation_id) if op.kind == "kernel" and op.correlation_id else None
        owner = _innermost(runs_by_tid, call.tid, call.start) if call is not None else None
        if owner is not None and owner.node_id in args:
            kernels[owner.node_id].append(op.duration)
            owner_run[owner.node_id] = owner
    device = spec(device_model)
    out = []
    for node_id, durations in kernels.items():
        run, (shapes, dtypes) = owner_run[node_id], args[node_id]
        est = estimate_op(run.op, shapes, dtypes)
        roofline = max(est.flops / device.peak_flops(est.dtype), est.bytes / device.mem_bandwidth) * 1e9
        out.append(JoinedOp(run.op, shapes, dtypes, len(durations), sum(durations), roofline,
                            op_key(run.op) in OPS or is_view(run.op)))
    return out


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclass(frozen=True)
class Calibration:
    """Fitted on one trace, per op type: a floor (what its kernels take when they are too small to
    matter: launch, tail, a wave of blocks) and the factor between the roofline and its time above
    that floor; op types the fit did not see use the roofline alone, with the overall floor."""

    floor_ns: float
    floors: dict[str, float]
    factors: dict[str, float]
    add_ns: float = 0.0  # a constant added to every op

    def predict(self, j: JoinedOp) -> float:
        return max(self.floors.get(j.op, self.floor_ns), j.roofline_ns * self.factors.get(j.op, 1.0)) + self.add_ns


DATASHEET = Calibration(0.0, {}, {})  # the roofline alone: nothing fitted


def as_used(device_model: str = "A100") -> Calibration:
    """What the placement cost model charges: the roofline plus the device's launch constant."""
    return Calibration(0.0, {}, {}, float(spec(device_model).launch_ns))


def errors(ops: list[JoinedOp], model: Calibration = DATASHEET, min_count: int = 1) -> list[ErrorRow]:
    """Per op type (most ops first), the relative error of `model`'s prediction against the
    measured kernel time."""
    by_op: dict[str, list[float]] = defaultdict(list)
    modelled: dict[str, bool] = {}
    for j in ops:
        if j.kernel_ns <= 0:
            continue
        by_op[j.op].append(model.predict(j) / j.kernel_ns - 1)
        modelled[j.op] = j.modelled
    rows = [ErrorRow(op, len(e), statistics.median(e), statistics.median(abs(x) for x in e), quantile(e, 0.1),
                     quantile(e, 0.9), modelled[op]) for op, e in by_op.items() if len(e) >= min_count]
    return sorted(rows, key=lambda r: (-r.count, r.op))


def overall_median_abs_error(ops: list[JoinedOp], model: Calibration = DATASHEET) -> float:
    values = [abs(model.predict(j) / j.kernel_ns - 1) for j in ops if j.kernel_ns > 0]
    return statistics.median(values) if values else math.nan


def calibrate(ops: list[JoinedOp]) -> Calibration:
    """Fit on these ops only. An op is launch-bound when its roofline is under a tenth of its kernel
    time: an op type's floor is the median kernel time of its launch-bound ops (the overall floor,
    of all of them, for the others); its factor makes the median log-ratio of its other ops zero."""
    measured = [j for j in ops if j.kernel_ns > 0]
    small: dict[str, list[int]] = defaultdict(list)
    logs: dict[str, list[float]] = defaultdict(list)
    for j in measured:
        if j.roofline_ns < 0.1 * j.kernel_ns:
            small[j.op].append(j.kernel_ns)
        else:
            logs[j.op].append(math.log(j.kernel_ns / j.roofline_ns))
    every = [ns for values in small.values() for ns in values]
    return Calibration(statistics.median(every) if every else 0.0,
                       {op: statistics.median(v) for op, v in small.items()},
                       {op: math.exp(statistics.median(v)) for op, v in logs.items()})
