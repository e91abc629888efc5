"""Launch statistics: how long each launch call takes, how long its GPU work waits, and the outliers.

HTA's ``get_cuda_kernel_launch_stats`` (HolisticTraceAnalysis 0.6.1) on the analysis window: every
launch call (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, and with ``memory`` the
``cudaMemcpyAsync`` / ``cudaMemsetAsync`` calls; their HIP, driver-API and MTIA twins too,
:mod:`tc_analyses.model.launch_calls`) paired by correlation id with the GPU operation it launched
gives

* ``cpu_duration``: the call's duration,
* ``gpu_duration``: the operation's duration,
* ``launch_delay``: operation start − call end, 0 when negative.

From them: the launch-delay distribution (percentiles), *short kernels* (GPU duration below the
CPU duration: launching costs more than running), *runtime outliers* (CPU duration above
``runtime_cutoff_us``) and *delay outliers* (launch delay above ``launch_delay_cutoff_us``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.kernels import display_name
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity
from tc_analyses.model.launch_calls import KERNEL_LAUNCHES, MEMORY_LAUNCHES

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Launch:
    correlation_id: int
    call: str
    kernel: str
    call_start_ns: int
    cpu_ns: int
    gpu_ns: int
    delay_ns: int


@dataclass(frozen=True)
class LaunchStats:
    trace: str
    scope: str
    launches: tuple[Launch, ...]  # by call start
    delay_percentiles_ns: dict[str, float]  # "p50", "p90", "p99", "mean", "max"
    cpu_percentiles_ns: dict[str, float]
    short: int  # GPU duration < CPU duration
    runtime_outliers: int  # CPU duration > runtime cutoff
    delay_outliers: int  # launch delay > delay cutoff
    runtime_cutoff_ns: int
    delay_cutoff_ns: int
    top_short: tuple[tuple[str, int], ...]  # kernel name -> how many of its launches are short, most first
    findings: tuple[Finding, ...]

    def json_data(self) -> dict[str, object]:
        """Everything but the per-launch rows (in ``-o DIR``'s launches.csv)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("launches", "findings")} | {
            "count": len(self.launches)}


def launches(activity: Activity, memory: bool = True) -> list[Launch]:
    """Every launch call of `activity` with the GPU operation it launched, by call start."""
    names = KERNEL_LAUNCHES | (MEMORY_LAUNCHES if memory else frozenset())
    out = []
    for op in activity.gpu:
        call = activity.launch_of(op)
        if call is None or call.name not in names:
            continue
        out.append(Launch(op.correlation_id, call.name, display_name(op), call.start, call.duration, op.duration,
                          max(0, op.start - call.end)))
    return sorted(out, key=lambda x: (x.call_start_ns, x.correlation_id))


def _percentiles(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    array = np.asarray(values, dtype=np.float64)
    return {**{f"p{p}": float(np.percentile(array, p)) for p in PERCENTILES}, "mean": float(array.mean()),
            "max": float(array.max())}


def _findings(stats: LaunchStats, framework: str = PYTORCH) -> list[Finding]:
    n = len(stats.launches)
    out = []
    if stats.short:
        wasted = sum(x.cpu_ns - x.gpu_ns for x in stats.launches if x.gpu_ns < x.cpu_ns)
        names = ", ".join(name[:60] for name, _ in stats.top_short[:3])
        out.append(Finding("short_kernels", wasted, f"{stats.short} of {n} launches ({100 * stats.short / n:.0f}%) "
                           f"run shorter on the GPU than their launch takes on the CPU (mostly {names}): fuse them "
                           f"({advice('fuse', framework)}, {advice('fused_optimizers', framework)}) or capture "
                           f"the loop in {advice('graph_capture', framework)}"))
    if stats.delay_outliers:
        delayed = sum(x.delay_ns for x in stats.launches if x.delay_ns > stats.delay_cutoff_ns)
        out.append(Finding("delayed_launches", delayed, f"{stats.delay_outliers} launches waited more than "
                           f"{fmt_ns(stats.delay_cutoff_ns)} to start (p99 {fmt_ns(stats.delay_percentiles_ns['p99'])}): "
                           "the queue runs ahead of the GPU, which is fine unless the host then blocks on a sync; "
                           "see `dfcompass queues`"))
    if stats.runtime_outliers:
        slow = sum(x.cpu_ns for x in stats.launches if x.cpu_ns > stats.runtime_cutoff_ns)
        out.append(Finding("slow_launch_calls", slow, f"{stats.runtime_outliers} launch calls took more than "
                           f"{fmt_ns(stats.runtime_cutoff_ns)} on the CPU: a full launch queue, a lazy module load or "
                           "allocator work inside the call"))
    return sorted(out, key=lambda f: -f.impact_ns)


def run(inputs: Inputs, options: Options) -> Result:
    """Launch statistics of the analysis window; outliers past ``options["runtime_cutoff_us"]`` and
    ``options["launch_delay_cutoff_us"]``, copies and memsets unless ``options["kernels_only"]``."""
    found = launches(inputs.activity, memory=not options["kernels_only"])
    if not found:
        raise AnalysisUnavailable(f"{inputs.path}: no launch call with its GPU operation in {inputs.scope.window} "
                                  "(dfc:api_enter/exit and kernel events sharing a correlation id)")
    runtime_cut, delay_cut = round(options["runtime_cutoff_us"] * 1000), round(options["launch_delay_cutoff_us"] * 1000)
    short = Counter(x.kernel for x in found if x.gpu_ns < x.cpu_ns)
    stats = LaunchStats(str(inputs.path), inputs.scope.text(), tuple(found), _percentiles([x.delay_ns for x in found]),
                        _percentiles([x.cpu_ns for x in found]), sum(short.values()),
                        sum(1 for x in found if x.cpu_ns > runtime_cut), sum(1 for x in found if x.delay_ns > delay_cut),
                        runtime_cut, delay_cut, tuple(short.most_common(10)), ())
    findings = tuple(_findings(stats, framework_of(inputs.trace)))
    stats = LaunchStats(**{**stats.__dict__, "findings": findings})
    return Result("launches", stats.trace, stats, findings)
