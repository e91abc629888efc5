"""Queue length per GPU stream: launched work not started yet, over time, and time blocked on a full queue.

HTA's ``get_queue_length_time_series``, ``get_queue_length_summary`` and
``get_time_spent_blocked_on_full_queue`` (HolisticTraceAnalysis 0.6.1) on the analysis window.
The length of a queue (device, stream) goes up by one when a launch call (:data:`QUEUE_LAUNCHES`)
that launched an operation on it starts, and down by one when that operation starts. A launch
call that launched nothing (``cudaMemsetAsync`` of 0 bytes, say) does not count: this is the fix
of issue 15's queue-depth curve that never came back to 0. At equal times a start comes before a
launch (that time's starts free the queue); HTA leaves the order of equal times to an unstable sort.

Per queue: the summary HTA gives (count, mean, percentiles and max over the change points of the
series), the time-weighted mean (what the queue held on average over time), and the time spent
at or above ``max_queue_length`` (1024 by default, CUDA's launch queue per stream; HTA's blocked
time). HTA keeps only one stream per rank in its blocked-time table; this analysis gives every queue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity
from tc_analyses.model.launch_calls import KERNEL_LAUNCHES, MEMORY_LAUNCHES

QUEUE_LAUNCHES = KERNEL_LAUNCHES | MEMORY_LAUNCHES
CUDA_MAX_LAUNCH_QUEUE = 1024


@dataclass(frozen=True)
class QueueSeries:
    device: str
    queue: int
    times: tuple[int, ...]  # each change of the length, ns
    lengths: tuple[int, ...]  # the length from that time on

    @property
    def span_ns(self) -> int:
        return self.times[-1] - self.times[0] if self.times else 0


@dataclass(frozen=True)
class QueueSummary:
    device: str
    queue: int
    launches: int
    count: int  # change points (HTA's count)
    mean: float  # over change points (HTA's mean)
    p25: float
    p50: float
    p75: float
    max: int
    time_weighted_mean: float
    blocked_ns: int  # time at or above max_queue_length
    blocked_pct: float  # of the window


@dataclass(frozen=True)
class Queues:
    trace: str
    scope: str
    max_queue_length: int
    queues: tuple[QueueSummary, ...]
    series: tuple[QueueSeries, ...]
    findings: tuple[Finding, ...]

    def json_data(self) -> dict[str, object]:
        """The summaries (the time series are in ``-o DIR``'s queues.csv and plot)."""
        return {"trace": self.trace, "scope": self.scope, "max_queue_length": self.max_queue_length,
                "queues": [q.__dict__ for q in self.queues]}


def queue_series(activity: Activity, launches_first: bool = False,
                 launch_names: frozenset[str] = QUEUE_LAUNCHES) -> list[QueueSeries]:
    """The length of each (device, queue) over time, from the launches and starts of its operations;
    `launches_first`: at equal times, launches before starts, and `launch_names`: the calls that
    count as launches (both what cross-checks try against another tool's choices)."""
    changes: dict[tuple[str, int], list[tuple[int, int]]] = {}
    launch, start = (0, 1) if launches_first else (1, 0)  # the order of equal times: the smaller first
    for op in activity.gpu:
        call = activity.launch_of(op)
        if call is None or call.name not in launch_names:
            continue
        # A launch (+1) and the operation's start (-1, first at a tie: that time's starts free the queue).
        changes.setdefault((op.device, op.queue), []).extend([(call.start, launch), (op.start, start)])
    series = []
    for (device, queue), points in sorted(changes.items()):
        points.sort()
        lengths = np.cumsum([1 if kind == launch else -1 for _, kind in points])
        series.append(QueueSeries(device, queue, tuple(t for t, _ in points), tuple(int(x) for x in lengths)))
    return series


def summarize(series: QueueSeries, max_queue_length: int, window_ns: int) -> QueueSummary:
    lengths = np.asarray(series.lengths, dtype=np.float64)
    times = np.asarray(series.times, dtype=np.int64)
    held = np.diff(times)  # how long each value holds (the last one: 0)
    weighted = float((lengths[:-1] * held).sum() / held.sum()) if held.sum() else float(lengths.mean())
    blocked = int(held[lengths[:-1] >= max_queue_length].sum())
    return QueueSummary(series.device, series.queue, len(series.lengths) // 2, len(lengths), float(lengths.mean()),
                        float(np.percentile(lengths, 25)), float(np.percentile(lengths, 50)),
                        float(np.percentile(lengths, 75)), int(lengths.max()), weighted, blocked,
                        100.0 * blocked / window_ns if window_ns else 0.0)


def _findings(queues: list[QueueSummary], max_queue_length: int) -> list[Finding]:
    out = []
    for q in queues:
        if q.blocked_ns:
            out.append(Finding("full_queue", q.blocked_ns, f"{q.device} queue {q.queue} held {max_queue_length} or more "
                               f"launches for {fmt_ns(q.blocked_ns)} ({q.blocked_pct:.1f}% of the window): the host "
                               "blocks in the launch call until the GPU drains it; the GPU is the bottleneck there, "
                               "so cut GPU time (faster kernels, less work) rather than host overhead"))
    shallow = [q for q in queues if q.max <= 1 and q.launches >= 10]
    for q in shallow:
        out.append(Finding("starved_queue", 0, f"{q.device} queue {q.queue} never holds more than {q.max} launch "
                           f"({q.launches} launches): the GPU starts each operation as soon as it is launched, so the "
                           "host sets the pace; see `dfcompass breakdown` (host wait) and `dfcompass launches`"))
    return sorted(out, key=lambda f: -f.impact_ns)


def run(inputs: Inputs, options: Options) -> Result:
    """Queue length per GPU queue on the analysis window; blocked time at ``options["max_queue_length"]``."""
    series = queue_series(inputs.activity)
    if not series:
        raise AnalysisUnavailable(f"{inputs.path}: no launch call with its GPU operation in {inputs.scope.window}")
    limit = int(options["max_queue_length"])
    window_ns = inputs.activity.span[1] - inputs.activity.span[0]
    summaries = [summarize(s, limit, window_ns) for s in series]
    findings = tuple(_findings(summaries, limit))
    data = Queues(str(inputs.path), inputs.scope.text(), limit, tuple(summaries), tuple(series), findings)
    return Result("queues", data.trace, data, findings)
