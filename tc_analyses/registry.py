"""Every analysis dfcompass runs on a trace, in one table.

An entry names the module that computes the analysis (``run(inputs, options) -> Result``), the
module that renders it (``text(result)``, ``plots(result, folder)`` and optionally
``artifacts(result, folder)``), the events it reads
and its options. The command line makes one command per entry (``dfcompass <key>``), ``analyze``
and ``report`` make one section per entry, and ``docs/analyses-seed/README.md``'s event table is
generated from it; ``tests/test_registry.py`` checks that each entry has its command, section and
docs page. Modules are named, not imported, so that reading this table costs nothing.

Adding an analysis: write ``tc_analyses/analyses/<key>.py`` with ``run``, add one
:class:`Entry` to :data:`ANALYSES`, and write ``docs/analyses-seed/<key>.md``. A ``report``
module is optional: without one, the text report lists the findings.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tc_analyses.errors import ConfigurationError

if TYPE_CHECKING:
    from tc_analyses.analyses.result import Inputs, Job, Result

NEEDED, USED = "needed", "used"  # an event class an analysis cannot run without, or reads when present
# what the analyses of launch calls and the GPU work they queue read (launches, queues)
LAUNCHED_WORK = {"api_enter": NEEDED, "api_exit": NEEDED, "kernel_begin": NEEDED, "kernel_end": NEEDED,
                 "memcpy_begin": USED, "memcpy_end": USED, "memset_begin": USED, "memset_end": USED,
                 "step_begin": USED, "step_end": USED, "device_info": NEEDED}


@dataclass(frozen=True)
class Param:
    """An option of an analysis: ``--<name with dashes>`` on its command.

    kind: ``flag``, ``int``, ``float``, ``str``, or ``peaks-device`` (a CPU or a model of the
    device table, checked when parsed); ``minimum`` bounds numbers.
    """

    name: str
    default: Any
    help: str
    kind: str = "str"
    minimum: float | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Entry:
    """One analysis. `trajectory`: several traces (labelled runs of one program) give a trajectory,
    through the module's ``trajectory(runs, axis, options) -> Result``; `axis`: the trajectory is
    drawn along a named setting (``--axis batch|threads``); `job`: its input is a job folder, the
    traces of a run's processes (on one trace, as in ``analyze``, it says it is not available)."""

    key: str
    title: str
    summary: str  # the command's help, first line
    module: str
    events: Mapping[str, str]  # event class short name -> NEEDED or USED
    params: tuple[Param, ...] = ()
    report: str | None = None
    trajectory: bool = False
    trajectory_module: str | None = None  # where ``trajectory`` is, when not in `module`
    axis: bool = False
    job: bool = False  # it reads a whole job folder (tc_analyses.inputs.JobInputs), not one trace

    @property
    def doc(self) -> str:
        """Its page, relative to ``docs/``."""
        return f"analyses-seed/{self.key}.md"

    def options(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every option of the analysis: the defaults, overridden by `given` (None = default)."""
        given = dict(given or {})
        unknown = sorted(set(given) - {p.name for p in self.params})
        if unknown:
            raise ConfigurationError(f"{self.key}: no option {', '.join(unknown)}")
        return {p.name: p.default if given.get(p.name) is None else given[p.name] for p in self.params}

    def analysis(self) -> ModuleType:
        return importlib.import_module(self.module)

    def run(self, inputs: Inputs | Job, options: Mapping[str, Any] | None = None) -> Result:
        """The analysis of `inputs`; a trace's result says what part of it was analysed (its scope)."""
        result: Result = self.analysis().run(inputs, self.options(options))
        scope = getattr(inputs, "scope", None)
        return dataclasses.replace(result, scope=scope.text()) if scope is not None else result

    def run_trajectory(self, runs: Sequence[tuple[str, Result]], axis: str,
                       options: Mapping[str, Any] | None = None) -> Result:
        """The trajectory of labelled runs along `axis` (batch, threads...)."""
        module = importlib.import_module(self.trajectory_module) if self.trajectory_module else self.analysis()
        result: Result = module.trajectory(list(runs), axis, self.options(options))
        return result

    def _report(self) -> ModuleType | None:
        return importlib.import_module(self.report) if self.report is not None else None

    def text(self, result: Result) -> str:
        """The text report of `result` (without a report module: its findings)."""
        report = self._report()
        if report is None:
            lines = [f"trace: {result.trace}", "", "findings:"]
            text = "\n".join(lines + ([f"  - {f.text}" for f in result.findings] or ["  none"])) + "\n"
        else:
            text = str(report.text(result))
        return f"{result.scope}\n{text}" if result.scope else text

    def plots(self, result: Result, folder: Path) -> list[Path]:
        """Write the plots of `result` (PNG and SVG) into `folder`; their paths."""
        report = self._report()
        return list(report.plots(result, folder)) if report is not None else []

    @property
    def artifacts_note(self) -> str:
        """What ``-o`` writes besides the plots (the report module's ARTIFACTS), "" when nothing."""
        return str(getattr(self._report(), "ARTIFACTS", ""))

    def artifacts(self, result: Result, folder: Path) -> list[Path]:
        """Write what the command's ``-o`` gives into `folder`: the plots, and the other files of
        analyses that have some (a plan, a predicted trace); the plots' paths."""
        report = self._report()
        if report is not None and hasattr(report, "artifacts"):
            return list(report.artifacts(result, folder))
        return self.plots(result, folder)


ANALYSES: tuple[Entry, ...] = (
    Entry("roofline", "Roofline (compute- or memory-bound ops)",
          "Place every op with input shapes on the roofline of a device: FLOP/s, intensity, bound, efficiency.",
          "tc_analyses.analyses.roofline",
          {"node_begin": NEEDED, "node_end": NEEDED, "node_args": NEEDED, "tensor_edge": USED, "device_info": NEEDED},
          (Param("device", "cpu", "Peaks from the device table: cpu (generic CPU, this machine's cores), "
                 "CPU-<cores> or a GPU model (A100, H100...).", "peaks-device"),
           Param("measure_peaks", False, "Use this machine's measured peaks (numpy microbenchmark, cached).", "flag")),
          "tc_analyses.export.roofline_report", trajectory=True, axis=True,
          trajectory_module="tc_analyses.analyses.roofline_trajectory"),
    Entry("overhead", "Runtime overhead (host dispatch and launch against GPU time)",
          "Runtime overhead: per op host dispatch, launch, queue delay and device time; per step "
          "the overhead-hiding ratio and exposed host time.",
          "tc_analyses.analyses.overhead",
          {"node_begin": NEEDED, "node_end": NEEDED, "step_begin": USED, "step_end": USED, "api_enter": NEEDED,
           "api_exit": NEEDED, "kernel_begin": NEEDED, "kernel_end": NEEDED, "memcpy_begin": NEEDED,
           "memcpy_end": NEEDED, "memset_begin": NEEDED, "memset_end": NEEDED, "device_info": NEEDED},
          report="tc_analyses.export.overhead_report", trajectory=True),
    Entry("breakdown", "Temporal and idle-time breakdown (HTA-compatible)",
          "HTA-compatible temporal breakdown (idle / compute / non-compute GPU time) and idle-time breakdown "
          "per queue (host wait / kernel wait / other).",
          "tc_analyses.analyses.breakdown",
          {"step_begin": USED, "step_end": USED, "api_enter": USED, "api_exit": USED, "kernel_begin": NEEDED,
           "kernel_end": NEEDED, "memcpy_begin": NEEDED, "memcpy_end": NEEDED, "memset_begin": NEEDED,
           "memset_end": NEEDED, "device_info": NEEDED},
          (Param("kernel_delay_us", 30.0, "Gaps shorter than this between back-to-back GPU ops are kernel wait "
                 "(HTA's consecutive_kernel_delay).", "float", 0),),
          "tc_analyses.export.breakdown_report"),
    Entry("memory", "Memory (peaks, churn, transfers)",
          "Memory: peaks per device, allocation churn, redundant host-to-device transfers, pageable "
          "against pinned copies, each finding with advice.",
          "tc_analyses.analyses.memory",
          {"node_begin": USED, "node_end": USED, "tensor_edge": USED, "step_begin": USED, "step_end": USED,
           "api_enter": USED, "api_exit": USED, "memcpy_begin": NEEDED, "memcpy_end": NEEDED, "mem_alloc": NEEDED,
           "mem_free": NEEDED, "device_info": NEEDED},
          report="tc_analyses.export.memory_report"),
    Entry("parallelism", "Inter-operator parallelism (ops spread over streams or threads)",
          "Inter-operator parallelism: assign independent ops to streams (GPU) or threads (CPU) by "
          "Nimble-style chain decomposition, with the speedup the simulator predicts.",
          "tc_analyses.analyses.parallelism",
          {"node_begin": NEEDED, "node_end": NEEDED, "tensor_edge": NEEDED, "api_enter": USED, "api_exit": USED,
           "kernel_begin": USED, "kernel_end": USED, "memcpy_begin": USED, "memcpy_end": USED, "memset_begin": USED,
           "memset_end": USED, "device_info": NEEDED},
          (Param("device", None, "Plan this device's ops (default: the GPU work if any, else the busiest device)."),
           Param("max_streams", None, "At most this many streams/threads (default: 4 on a GPU; on a CPU the free "
                 "cores, this machine's cores over the intra-op threads per op, which also cap it).", "int", 1),
           Param("sync_ns", None, "Cost of one cross-stream synchronisation (default: 2000 GPU, 5000 CPU).", "int", 0)),
          "tc_analyses.export.parallelism_report"),
    Entry("kernels", "Kernel breakdown and communication/computation overlap (HTA-compatible)",
          "GPU time per kernel type, with the time types overlap (compute overlapping communication...), the top "
          "kernels of each type by name, how much of the communication time overlaps compute, and the GPU time and "
          "kernels of each GPU user annotation.",
          "tc_analyses.analyses.kernels",
          {"kernel_begin": NEEDED, "kernel_end": NEEDED, "memcpy_begin": USED, "memcpy_end": USED,
           "memset_begin": USED, "memset_end": USED, "sync_begin": USED, "sync_end": USED, "api_enter": USED,
           "api_exit": USED, "step_begin": USED, "step_end": USED, "annotation_begin": USED, "annotation_end": USED,
           "device_info": NEEDED},
          (Param("top", 10, "Kernel names shown per type; the rest is one 'others' row (HTA's num_kernels).", "int", 1),
           Param("duration_ratio", 0.8, "Also fold names past this quantile of the cumulative time (HTA's "
                 "duration_ratio).", "float", 0)),
          "tc_analyses.export.kernels_report"),
    Entry("launches", "Launch statistics (HTA-compatible)",
          "Per launch call: its CPU time, its GPU operation's time and the delay between them; the launch-delay "
          "percentiles, kernels shorter than their launch, and the outliers.",
          "tc_analyses.analyses.launches",
          LAUNCHED_WORK,
          (Param("runtime_cutoff_us", 50.0, "Launch calls longer than this are runtime outliers (HTA's runtime_cutoff).",
                 "float", 0),
           Param("launch_delay_cutoff_us", 100.0, "Launch delays longer than this are delay outliers (HTA's "
                 "launch_delay_cutoff).", "float", 0),
           Param("kernels_only", False, "Leave out cudaMemcpyAsync/cudaMemsetAsync (HTA's include_memory_events=False).",
                 "flag")),
          "tc_analyses.export.launches_report"),
    Entry("queues", "Queue length per GPU stream (HTA-compatible)",
          "Launched work not yet started on each GPU queue, over time: its summary, the time-weighted mean, and the "
          "time the host spent blocked on a full queue.",
          "tc_analyses.analyses.queues",
          LAUNCHED_WORK,
          (Param("max_queue_length", 1024, "A queue this long is full: the launch call blocks (CUDA's limit per stream).",
                 "int", 1),),
          "tc_analyses.export.queues_report"),
    Entry("bandwidth", "Copy and memset bandwidth per kind (HTA-compatible)",
          "Bandwidth of copies and memsets per kind (HtoD, DtoH, DtoD, PtoP, memset; pageable and pinned apart): "
          "bytes, busy time, achieved and peak GB/s, over time.",
          "tc_analyses.analyses.bandwidth",
          {"memcpy_begin": NEEDED, "memcpy_end": NEEDED, "memset_begin": USED, "memset_end": USED,
           "api_enter": USED, "api_exit": USED, "step_begin": USED, "step_end": USED, "device_info": NEEDED},
          report="tc_analyses.export.bandwidth_report"),
    Entry("eager-overhead", "Eager runtime overhead (framework against kernel time, on the host)",
          "Framework time against kernel time of each eager op (TensorFlow eager): hiding ratio per step, "
          "the shortest kernel that hides the framework per op type, and the share of short ops.",
          "tc_analyses.analyses.eager_overhead",
          {"annotation_begin": NEEDED, "annotation_end": NEEDED, "node_begin": NEEDED, "node_end": NEEDED,
           "step_begin": USED, "step_end": USED},
          report="tc_analyses.export.eager_overhead_report"),
    Entry("sequences", "Frequent kernel sequences (HTA-compatible): fusion candidates",
          "Ops that launch the same sequence of GPU kernels again and again, most frequent first, with their GPU and "
          "CPU time: candidates for fusion.",
          "tc_analyses.analyses.sequences",
          {"node_begin": NEEDED, "node_end": NEEDED, "api_enter": NEEDED, "api_exit": NEEDED, "kernel_begin": NEEDED,
           "kernel_end": NEEDED, "memcpy_begin": USED, "memcpy_end": USED, "memset_begin": USED, "memset_end": USED,
           "annotation_begin": USED, "annotation_end": USED, "sync_begin": USED, "sync_end": USED, "device_info": NEEDED},
          (Param("operator", "", "Roots: ops whose name contains this (HTA's operator_name); empty: every op."),
           Param("min_length", 3, "Roots must launch at least this many GPU operations (HTA's min_pattern_len).", "int", 1),
           Param("top", 10, "How many patterns to show (HTA's top_k).", "int", 1)),
          "tc_analyses.export.sequences_report"),
    Entry("critical-path", "GPU-aware critical path (compared with HTA)",
          "The chain of CPU work, launches, GPU operations and synchronisations that sets the window's end, and what "
          "bounds it: CPU, GPU compute, communication, copies, launch delays, gaps between kernels, waits.",
          "tc_analyses.analyses.critical_path",
          {"node_begin": USED, "node_end": USED, "api_enter": NEEDED, "api_exit": NEEDED, "kernel_begin": NEEDED,
           "kernel_end": NEEDED, "memcpy_begin": USED, "memcpy_end": USED, "memset_begin": USED, "memset_end": USED,
           "sync_begin": USED, "sync_end": USED, "annotation_begin": USED, "annotation_end": USED,
           "step_begin": USED, "step_end": USED, "device_info": NEEDED},
          (Param("top", 10, "How many intervals with the most time on the path to list.", "int", 1),),
          "tc_analyses.export.critical_path_report"),
    Entry("ranks", "Ranks of a job: stragglers, collective wait, overlap",
          "Ranks of a multi-process job side by side: per-rank compute and communication, which rank arrives last "
          "at each collective and by how much, the time the others wait, and communication/compute overlap.",
          "tc_analyses.analyses.ranks",
          {"node_begin": NEEDED, "node_end": NEEDED, "collective": NEEDED, "process_rank": USED},
          report="tc_analyses.export.ranks_report", job=True),
)

BY_KEY: dict[str, Entry] = {entry.key: entry for entry in ANALYSES}
KEYS: tuple[str, ...] = tuple(BY_KEY)
# The analyses of one trace: the sections of `analyze` and `report` (a job analysis needs a job).
TRACE_KEYS: tuple[str, ...] = tuple(entry.key for entry in ANALYSES if not entry.job)


def entry(key: str) -> Entry:
    """The entry of analysis `key`; ConfigurationError naming the known ones otherwise."""
    if key not in BY_KEY:
        raise ConfigurationError(f"no analysis {key!r} (known: {', '.join(KEYS)})")
    return BY_KEY[key]
