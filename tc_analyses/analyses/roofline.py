"""Roofline analysis: how far each op's measured speed is from what the machine allows.

For every graph node with recorded input shapes (``dfc:node_args``) the analytic cost model of
:mod:`tc_analyses.perf.cost` gives the FLOPs and bytes of one execution. Then

* arithmetic intensity ``I = flops / bytes`` (FLOP/byte),
* achieved FLOP/s ``flops / mean_ns``,
* the roof at that intensity ``min(peak_flops, I * bandwidth)``,
* efficiency ``roof time / measured time`` with roof time ``max(flops / peak, bytes / bandwidth)``;
  for ops with FLOPs this equals ``achieved / roof``, and for ops without FLOPs (copies,
  unknown ops modelled from bytes only) it is the achieved share of the memory bandwidth,
* ``bound``: ``"memory"`` when ``I`` is below the ridge point ``peak / bandwidth``, else ``"compute"``.

The peak FLOP/s depends on the dtype (:meth:`DeviceSpec.peak_flops`: the half-precision peak for
float16/bfloat16 when the spec has one). Per op type, times, FLOPs and bytes are summed (so the
achieved FLOP/s is the time-weighted mean) and the efficiency is the time-weighted mean of the
nodes' efficiencies.

The peaks come from the device table (:func:`~tc_analyses.perf.devices.spec`),
``cpu`` meaning the generic CPU of this machine's core count, or from :func:`measure_peaks`, a
short numpy microbenchmark of this machine cached in ``$XDG_CACHE_HOME/dfcompass/peaks.json``.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tc_analyses.analyses.frameworks import PYTORCH, advice, framework_of
from tc_analyses.analyses.result import Finding, Inputs, Options, Result
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model import graph_keys as K
from tc_analyses.perf.cost import ATTENTION, estimate_op, is_view, op_key, task_memory
from tc_analyses.perf.devices import DEFAULT_CPU_CORES, DeviceSpec, generic_cpu, spec
from tc_analyses.reader.fast import DfcTrace
from tracer.schema import ENV_CORES

if TYPE_CHECKING:  # networkx loads when a graph is built: a trace without shapes never builds one
    import networkx as nx


LOW_EFFICIENCY = 0.10  # ops below 10% of their roof are findings
MAX_FINDINGS = 5
NO_SHAPES = "this trace has no input shapes (dfc:node_args): record it with the PyTorch source"
NO_MODEL, ABOVE_ROOF = "no FLOP model", "above its roof"
# Ops that are already one fused kernel: "fuse it" is no advice for them.
FUSED_OPS = frozenset({*ATTENTION, "_fused_adam", "_fused_adamw", "_fused_sgd", "native_layer_norm",
                       "_native_multi_head_attention", "lstm", "gru"})



@dataclass(frozen=True)
class Peaks:
    """The machine limits the roofline is drawn with."""

    model: str
    source: str  # "device table" or "measured"
    fp32_flops: float  # FLOP/s
    half_flops: float | None  # FLOP/s for float16/bfloat16, None = the fp32 peak
    bandwidth: float  # bytes/s

    def peak(self, dtype: str) -> float:
        half = dtype in ("float16", "bfloat16", "half")
        return self.half_flops if half and self.half_flops else self.fp32_flops

    def ridge(self, dtype: str = "float32") -> float:
        """The intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.peak(dtype) / self.bandwidth


@dataclass(frozen=True)
class RooflinePoint:
    """One graph node (all its executions)."""

    node: int
    name: str
    op: str
    device: str
    dtype: str
    executions: int
    mean_ns: int
    total_ns: int
    flops: float  # per execution
    bytes: int  # per execution
    intensity: float  # FLOP/byte
    achieved_flops: float  # FLOP/s
    roof_flops: float  # FLOP/s at this intensity
    efficiency: float  # roof time / measured time, 0..1 (above 1: the cost model undercounts)
    bound: str  # "memory" or "compute"


@dataclass(frozen=True)
class RooflineOp:
    """All nodes of one op type."""

    op: str
    count: int  # executions
    total_ns: int
    flops: float  # total
    bytes: int  # total
    intensity: float
    achieved_flops: float  # total flops / total time
    roof_flops: float
    efficiency: float  # time-weighted mean of the nodes' efficiencies
    bound: str


@dataclass(frozen=True)
class LeftOut:
    """An op type left out of the roofline, with why: its time still counts somewhere."""

    op: str
    executions: int
    total_ns: int
    reason: str  # "no FLOP model" or "above its roof"


@dataclass(frozen=True)
class RooflineResult:
    trace: str
    peaks: Peaks
    ridge_point: float  # FLOP/byte, fp32
    points: tuple[RooflinePoint, ...]
    ops: tuple[RooflineOp, ...]  # by total time, longest first
    skipped_nodes: int  # nodes without shapes or without a measured time
    memory_bound_share: float  # of the analysed time
    compute_bound_share: float
    findings: tuple[Finding, ...]
    left_out: tuple[LeftOut, ...] = ()  # by total time, longest first


def peaks_from_spec(s: DeviceSpec) -> Peaks:
    return Peaks(s.model, "device table", s.fp32_flops, s.half_flops, s.mem_bandwidth)


def device_peaks(device: str) -> Peaks:
    """``cpu`` (the generic CPU with this machine's cores) or a model of the device table."""
    s = generic_cpu(DEFAULT_CPU_CORES) if device.strip().lower() == "cpu" else spec(device)
    return peaks_from_spec(s)


def _roof_time(flops: float, nbytes: float, peak: float, bandwidth: float) -> float:
    return max(flops / peak, nbytes / bandwidth)


def roofline(graph: nx.DiGraph, device_spec: DeviceSpec | Peaks, trace: str = "", threads: int | None = None,
             framework: str = PYTORCH) -> RooflineResult:
    """The roofline of every node of `graph` with input shapes, against `device_spec`'s peaks.

    `threads` is the intra-op thread count the run used (``torch_num_threads`` in the trace's
    metadata), when known: it makes the thread-setting finding concrete; `framework` names the
    thread setting in that framework's words (:mod:`~tc_analyses.analyses.frameworks`).
    """
    peaks = device_spec if isinstance(device_spec, Peaks) else peaks_from_spec(device_spec)
    points: list[RooflinePoint] = []
    left_out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (op, reason) -> [executions, ns]
    skipped = 0
    for node in sorted(graph.nodes):
        attrs = graph.nodes[node]
        shapes, dtypes = attrs.get(K.INPUT_SHAPES, ""), attrs.get(K.INPUT_DTYPES, "")
        durations = list(attrs.get(K.DURATIONS_NS, []))
        mean_ns = int(attrs.get(K.MEAN_NS, 0))
        if not shapes or mean_ns <= 0:
            skipped += 1
            continue
        op = attrs.get(K.OP, "")
        executions = len(durations) or int(attrs.get(K.EXECUTIONS, 1))
        total_ns = int(sum(durations)) if durations else mean_ns * executions
        if is_view(op):  # metadata only: nothing to put on a roofline
            skipped += 1
            continue
        est = estimate_op(op, shapes, dtypes, task_memory(graph, node) or None)
        if not est.known or est.flops <= 0 and est.bytes <= 0:
            _count(left_out[(op, NO_MODEL)], executions, total_ns)
            continue
        peak = peaks.peak(est.dtype)
        intensity = est.flops / est.bytes if est.bytes else float("inf")
        roof = min(peak, intensity * peaks.bandwidth)
        efficiency = _roof_time(est.flops, est.bytes, peak, peaks.bandwidth) / (mean_ns * 1e-9)
        if efficiency > 1.0:  # faster than the roof allows: a no-op call, or the model overcounts its work
            _count(left_out[(op, ABOVE_ROOF)], executions, total_ns)
            continue
        points.append(RooflinePoint(
            node, attrs.get(K.NAME, ""), op, attrs.get(K.DEVICE, ""), est.dtype, executions, mean_ns,
            total_ns, est.flops, est.bytes, intensity,
            est.flops / (mean_ns * 1e-9), roof, efficiency, "memory" if intensity < peaks.ridge(est.dtype) else "compute"))
    if not points and not left_out:
        raise AnalysisUnavailable(f"{trace}: {NO_SHAPES}" if trace else NO_SHAPES)
    ops = _per_op(points, peaks)
    total = sum(p.total_ns for p in points)
    memory = sum(p.total_ns for p in points if p.bound == "memory") / total if total else 0.0
    out = tuple(sorted((LeftOut(op, n, ns, reason) for (op, reason), (n, ns) in left_out.items()),
                       key=lambda o: (-o.total_ns, o.op)))
    findings = _findings(ops, memory, peaks, skipped) + _left_out_findings(out, total) + (
        [_thread_finding(memory, peaks, threads, framework)] if points else [])  # no bound mix to advise on
    return RooflineResult(trace, peaks, peaks.ridge(), tuple(points), ops, skipped, memory,
                          1.0 - memory if total else 0.0, tuple(findings), out)


def _count(entry: list[int], executions: int, total_ns: int) -> None:
    entry[0] += executions
    entry[1] += total_ns


def _left_out_findings(left_out: tuple[LeftOut, ...], plotted_ns: int) -> list[Finding]:
    """Say which op types the roofline does not show, and how much time they take."""
    out = []
    for reason, what in ((NO_MODEL, "have no FLOP model, so no roofline point (time spent, not analysed)"),
                         (ABOVE_ROOF, "ran faster than their roof allows (a call that returned its input, or "
                                      "work the model counts that the op did not do): left out, not counted as efficient")):
        rows = [o for o in left_out if o.reason == reason]
        if rows:
            ns = sum(o.total_ns for o in rows)
            share = ns / (ns + plotted_ns) if ns + plotted_ns else 0.0
            names = ", ".join(f"{o.op} ({o.total_ns / 1e6:.3f} ms)" for o in rows[:5])
            more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
            kind = "unmodelled_ops" if reason == NO_MODEL else "above_roof"
            out.append(Finding(kind, ns if reason == NO_MODEL else 0,
                               f"{len(rows)} op type(s), {share:.0%} of the op time, {what}: {names}{more}"))
    return out


def recorded_threads(trace: DfcTrace) -> int | None:
    """The intra-op thread count the run used, if recorded: PyTorch's ``torch_num_threads``, or
    TensorFlow's ``tf_intra_op_threads``, where 0 is TensorFlow's default of one thread per core
    (the trace's ``cores``)."""
    env = trace.metadata.env
    torch_threads = str(env.get("torch_num_threads", ""))
    if torch_threads.isdigit():
        return int(torch_threads)
    tf_threads = str(env.get("tf_intra_op_threads", ""))
    if not tf_threads.isdigit():
        return None
    if int(tf_threads) > 0:
        return int(tf_threads)
    cores = str(env.get(ENV_CORES, ""))
    return int(cores) if cores.isdigit() else None


def roofline_of_trace(path: str | Path | DfcTrace, peaks: Peaks, graph: nx.DiGraph | None = None) -> RooflineResult:
    """Read the trace at `path` (unless already read), build its graph (unless given) and put it on
    `peaks`' roofline."""
    from tc_analyses.model.graph import build_graph
    from tc_analyses.reader import read_trace

    trace = path if isinstance(path, DfcTrace) else read_trace(path)
    graph = graph if graph is not None else build_graph(trace)
    return roofline(graph, peaks, str(trace.path), recorded_threads(trace), framework_of(trace))


# ------------------------------------------------------------------------------ registry entry
def run(inputs: Inputs, options: Options) -> Result:
    """The roofline of the trace's ops, on the peaks of ``options["device"]`` (or this machine's,
    measured, with ``options["measure_peaks"]``)."""
    if not len(inputs.trace.table("node_args")):  # told by the trace's counts, before the graph is built
        raise AnalysisUnavailable(f"{inputs.path}: {NO_SHAPES}")
    peaks = measure_peaks() if options["measure_peaks"] else device_peaks(options["device"])
    data = roofline(inputs.graph, peaks, str(inputs.path), recorded_threads(inputs.trace), framework_of(inputs.trace))
    return Result("roofline", data.trace, data, data.findings)


def _per_op(points: list[RooflinePoint], peaks: Peaks) -> tuple[RooflineOp, ...]:
    groups: dict[str, list[RooflinePoint]] = defaultdict(list)
    for p in points:
        groups[p.op].append(p)
    ops = []
    for op, pts in groups.items():
        total_ns = sum(p.total_ns for p in pts)
        flops = sum(p.flops * p.executions for p in pts)
        nbytes = sum(p.bytes * p.executions for p in pts)
        dtype = pts[0].dtype
        intensity = flops / nbytes if nbytes else 0.0
        eff = sum(p.efficiency * p.total_ns for p in pts) / total_ns if total_ns else 0.0
        ops.append(RooflineOp(op, sum(p.executions for p in pts), total_ns, flops, nbytes, intensity,
                              flops / (total_ns * 1e-9) if total_ns else 0.0,
                              min(peaks.peak(dtype), intensity * peaks.bandwidth), eff,
                              "memory" if intensity < peaks.ridge(dtype) else "compute"))
    return tuple(sorted(ops, key=lambda o: (-o.total_ns, o.op)))


def _findings(ops: tuple[RooflineOp, ...], memory_share: float, peaks: Peaks, skipped: int) -> list[Finding]:
    if not ops:  # every op was left out: the left-out findings say why
        return [Finding("skipped_nodes", 0, f"{skipped} node(s) without input shapes or measured time were left out")] \
            if skipped else []
    out = [Finding("bound_mix", 0, f"memory-bound ops take {memory_share:.0%} of the analysed op time, compute-bound ops "
           f"{1 - memory_share:.0%} (ridge point {peaks.ridge():.1f} FLOP/byte on {peaks.model}, "
           f"peaks from the {peaks.source})")]
    slow = [o for o in ops if o.efficiency < LOW_EFFICIENCY][:MAX_FINDINGS]
    for o in slow:
        if op_key(o.op) in FUSED_OPS:
            advice = ("it is already one fused kernel: a larger batch or sequence, or a lower precision, raises "
                      "its intensity")
        elif o.bound == "memory":
            advice = "fuse it with its neighbours or avoid the copy: it moves bytes far slower than the bandwidth"
        else:
            advice = "use larger batches or a faster kernel/dtype: it runs far below the compute peak"
        # The time at stake: what the op takes beyond its roofline time.
        out.append(Finding("low_efficiency", round(o.total_ns * (1 - o.efficiency)),
                           f"{o.op}: {o.total_ns / 1e6:.3f} ms at {o.efficiency:.1%} of its roof "
                           f"({o.bound}-bound, {o.intensity:.2f} FLOP/byte): {advice}"))
    if not slow:
        out.append(Finding("efficient", 0, f"no op type runs below {LOW_EFFICIENCY:.0%} of its roof"))
    if skipped:
        out.append(Finding("skipped_nodes", 0, f"{skipped} node(s) without input shapes or measured time were left out"))
    return out


def _cores(peaks: Peaks) -> int | None:
    model = peaks.model
    return int(model[4:]) if model.startswith("CPU-") and model[4:].isdigit() else None


def _thread_finding(memory_share: float, peaks: Peaks, threads: int | None, framework: str) -> Finding:
    return Finding("threads", 0, _thread_advice(memory_share, peaks, threads, framework))


def _thread_advice(memory_share: float, peaks: Peaks, threads: int | None, framework: str) -> str:
    """Which intra-op thread setting is worth trying, from the bound mix (check it with a thread trajectory)."""
    cores = _cores(peaks)
    check = (f"; check it with a thread trajectory: record with {advice('thread_counts', framework)} and run "
             "dfcompass roofline --axis threads")
    if threads is None:
        return "the trace does not say how many intra-op threads ran" + check
    if memory_share > 0.5:
        return (f"the run used {threads} intra-op thread(s) and memory-bound ops dominate ({memory_share:.0%}): once the memory "
                f"bandwidth is saturated more threads only contend, so try fewer threads (e.g. {max(1, threads // 2)})" + check)
    if cores is not None and threads < cores:
        return (f"the run used {threads} of {cores} cores and compute-bound ops dominate ({1 - memory_share:.0%}): "
                f"try {advice('set_intra_op_threads', framework).format(n=cores)}" + check)
    return f"the run used {threads} intra-op thread(s); compute-bound ops dominate ({1 - memory_share:.0%})" + check


# ---------------------------------------------------------------------------------------------
# Measured peaks of this machine.

def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dfcompass" / "peaks.json"


def _bench_gemm() -> float:
    best = 0.0
    rng = np.random.default_rng(0)
    for n in (256, 512, 1024):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        a @ b  # warm up
        start = time.perf_counter()
        reps = 3
        for _ in range(reps):
            a @ b
        elapsed = time.perf_counter() - start
        best = max(best, 2.0 * n**3 * reps / elapsed)
    return best


def _bench_copy() -> float:
    src = np.ones(16 * 1024 * 1024, dtype=np.float32)  # 64 MiB
    dst = np.empty_like(src)
    np.copyto(dst, src)  # warm up, fault the pages in
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2.0 * src.nbytes / best  # read + write


def measure_peaks(refresh: bool = False) -> Peaks:
    """FLOP/s (fp32 GEMM, best of 256/512/1024) and bandwidth (64 MiB copy) of this machine.

    The result is cached in ``$XDG_CACHE_HOME/dfcompass/peaks.json`` (``~/.cache`` by default);
    `refresh` measures again. Takes well under two seconds.
    """
    path = _cache_file()
    if not refresh and path.is_file():
        try:
            data: dict[str, Any] = json.loads(path.read_text())
            return Peaks("this machine", "measured", float(data["fp32_flops"]), None, float(data["bandwidth"]))
        except (ValueError, KeyError, TypeError, OSError):
            pass
    flops, bandwidth = _bench_gemm(), _bench_copy()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"fp32_flops": flops, "bandwidth": bandwidth}, indent=2) + "\n")
    except OSError:
        pass  # a read-only home: measure again next time
    return Peaks("this machine", "measured", flops, None, bandwidth)
