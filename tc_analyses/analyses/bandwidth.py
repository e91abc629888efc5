"""Memory bandwidth of copies and memsets, per copy kind: HtoD, DtoH, DtoD, PtoP, HtoH and memset.

HTA's ``get_memory_bw_summary`` / ``get_memory_bw_time_series`` (HolisticTraceAnalysis 0.6.1) on the
analysis window. Each copy or memset moves ``bytes`` in ``duration``: its bandwidth is
bytes / ns = GB/s. Per kind (the copy direction; ``Memset`` for memsets):

* count, bytes, busy time (the union of its operations), the achieved bandwidth (bytes / busy
  time), and the per-operation bandwidth's median and max;
* the time series HTA draws: the sum of the bandwidths of the operations of that kind running at
  each moment (a step function, +bw at a start, −bw at an end), and its maximum. A zero-length
  operation counts for 1 µs, as in HTA.

Host memory matters for HtoD/DtoH: pageable copies go through a staging buffer and reach a
fraction of pinned copies' bandwidth; the per-kind rows keep ``pageable``/``pinned`` apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_bytes, fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import GpuOp
from tc_analyses.model.intervals import union_ns
from tracer.copy_kinds import direction_of, host_memory_of

ZERO_LENGTH_NS = 1_000  # HTA gives a 0 µs copy 1 µs


@dataclass(frozen=True)
class KindBandwidth:
    kind: str  # "HtoD", "DtoH", "DtoD", "PtoP", "HtoH", "Memset"
    host_memory: str  # "pageable", "pinned", "mixed" or "" (no host end, or not recorded)
    count: int
    bytes: int
    busy_ns: int
    achieved_gbps: float  # bytes / busy time
    median_gbps: float  # per operation
    max_gbps: float
    peak_concurrent_gbps: float  # the time series' maximum
    series: tuple[tuple[int, float], ...]  # (time, concurrent GB/s from then on)


@dataclass(frozen=True)
class Bandwidth:
    trace: str
    scope: str
    kinds: tuple[KindBandwidth, ...]  # by bytes, most first
    findings: tuple[Finding, ...]

    def json_data(self) -> dict[str, object]:
        """The per-kind rows without their time series (in ``-o DIR``'s plot)."""
        return {"trace": self.trace, "scope": self.scope,
                "kinds": [{k: v for k, v in row.__dict__.items() if k != "series"} for row in self.kinds]}


def kind_of(op: GpuOp) -> str:
    return "Memset" if op.kind == "memset" else (direction_of(op.name) or "Unknown")


def gbps(op: GpuOp) -> float:
    """Bytes per ns (= GB/s); a zero-length operation counts for 1 µs, as in HTA."""
    return op.bytes / (op.duration or ZERO_LENGTH_NS)


def concurrent_series(ops: list[GpuOp]) -> list[tuple[int, float]]:
    """The summed bandwidth of `ops` over time: (time, GB/s from then on), at every start and end."""
    points = sorted([(o.start, gbps(o)) for o in ops] + [(o.start + (o.duration or ZERO_LENGTH_NS), -gbps(o))
                                                          for o in ops])
    values = np.cumsum([bw for _, bw in points])
    return [(t, max(0.0, float(v))) for (t, _), v in zip(points, values)]


def _row(kind: str, ops: list[GpuOp]) -> KindBandwidth:
    memories = {host_memory_of(o.name) for o in ops if o.kind == "memcpy"} - {""}
    memory = "mixed" if len(memories) > 1 else next(iter(memories), "")
    total = sum(o.bytes for o in ops)
    busy = union_ns([o.start for o in ops], [o.start + (o.duration or ZERO_LENGTH_NS) for o in ops])
    rates = [gbps(o) for o in ops]
    series = concurrent_series(ops)
    return KindBandwidth(kind, memory, len(ops), total, busy, total / busy if busy else 0.0,
                         float(np.median(rates)), max(rates), max(v for _, v in series), tuple(series))


def _findings(kinds: list[KindBandwidth], ops: list[GpuOp]) -> list[Finding]:
    out = []
    pageable = [o for o in ops if o.kind == "memcpy" and host_memory_of(o.name) == "pageable"]
    if pageable:
        pinned = [o for o in ops if o.kind == "memcpy" and host_memory_of(o.name) == "pinned"]
        spent = sum(o.duration for o in pageable)
        versus = ""
        if pinned:
            rate = np.median([gbps(o) for o in pinned]) / max(np.median([gbps(o) for o in pageable]), 1e-12)
            versus = f"; here pinned copies reach {rate:.1f}x their median bandwidth"
        out.append(Finding("pageable_copies", spent, f"{len(pageable)} copies use pageable host memory "
                           f"({fmt_bytes(sum(o.bytes for o in pageable))} in {fmt_ns(spent)}){versus}: pin the host "
                           "buffers (DataLoader pin_memory=True, tensor.pin_memory()) and copy with non_blocking=True"))
    for row in kinds:
        if row.kind in ("HtoD", "DtoH") and row.busy_ns and row.count >= 10 and row.bytes / row.count < 64 * 1024:
            out.append(Finding("small_copies", row.busy_ns, f"{row.count} {row.kind} copies average "
                               f"{fmt_bytes(row.bytes / row.count)}: per-copy overhead dominates such small copies; "
                               "batch them into one buffer"))
    return sorted(out, key=lambda f: -f.impact_ns)


def run(inputs: Inputs, options: Options) -> Result:
    """Bandwidth per copy kind on the analysis window."""
    ops = [o for o in inputs.activity.gpu if o.kind in ("memcpy", "memset")]
    if not ops:
        raise AnalysisUnavailable(f"{inputs.path}: no copies or memsets (dfc:memcpy/memset events) in "
                                  f"{inputs.scope.window}")
    by_kind: dict[str, list[GpuOp]] = defaultdict(list)
    for op in ops:
        by_kind[kind_of(op)].append(op)
    kinds = sorted((_row(k, v) for k, v in by_kind.items()), key=lambda r: (-r.bytes, r.kind))
    findings = tuple(_findings(kinds, ops))
    data = Bandwidth(str(inputs.path), inputs.scope.text(), tuple(kinds), findings)
    return Result("bandwidth", data.trace, data, findings)
