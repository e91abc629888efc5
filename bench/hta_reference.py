"""HTA's numbers for every analysis dfcompass cross-checks, as JSON (run it with a Python that has HTA).

HolisticTraceAnalysis is published as ``traceinsight`` (0.6.1); it is never a dependency of
dfcompass. Install it in a scratch venv and run this file with that venv's Python::

    python3 -m venv /tmp/tivenv && /tmp/tivenv/bin/pip install traceinsight==0.6.1
    /tmp/tivenv/bin/python bench/hta_reference.py ../shared/traces/kineto/hta-* \
        > tests/data/hta/traceinsight-0.6.1.json

For each Kineto trace directory and rank it prints what the dfcompass tests compare with
(``tests/test_analyses/test_hta_analyses.py`` reads that file): the kernel breakdown by type and by name, communication/computation overlap, launch
statistics, queue length, time blocked on a full queue, memory bandwidth, frequent kernel
sequences and the temporal and idle-time breakdowns. Times are HTA's µs.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any


def _describe(frame: Any, column: str) -> dict[str, float]:
    d = frame[column].describe()
    return {k: float(d[k]) for k in ("count", "mean", "std", "min", "25%", "50%", "75%", "max")}


def rank_numbers(analysis: Any, rank: int) -> dict[str, Any]:
    out: dict[str, Any] = {"file": Path(str(analysis.t.trace_files[rank])).name}
    launches = analysis.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
    out["launches"] = {
        "count": int(len(launches)),
        "short_gpu": int((launches["gpu_duration"] < launches["cpu_duration"]).sum()),
        "runtime_outliers": int((launches["cpu_duration"] > 50).sum()),
        "delay_outliers": int((launches["launch_delay"] > 100).sum()),
        "delay": _describe(launches, "launch_delay"),
        "delay_sum": float(launches["launch_delay"].sum()),
    }
    series = analysis.get_queue_length_time_series(ranks=[rank])
    queues: dict[str, Any] = {}
    frame = series.get(rank)
    if frame is not None:
        for stream, part in frame.groupby("stream"):
            queues[str(int(stream))] = _describe(part, "queue_length")
    out["queue_length"] = queues
    blocked = analysis.get_time_spent_blocked_on_full_queue(series, max_queue_length=2)
    out["blocked_at_2"] = ([] if blocked is None else
                           [[int(r["stream"]), float(r["duration_at_max_queue_length"])] for _, r in blocked.iterrows()])
    bw = analysis.get_memory_bw_time_series(ranks=[rank]).get(rank)
    out["memory_bw"] = {} if bw is None else {str(n): _describe(p, "memory_bw_gbps") for n, p in bw.groupby("name")}
    return out


# The sequence roots: an op name with patterns in the shared traces (simple-add: aten::conv2d;
# sampled: autograd::engine); HTA's call graph rejects hta-nccl-rank0.
SEQUENCE_ROOT = "aten::conv2d"


def trace_numbers(trace_dir: str) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=trace_dir)
    types, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, num_kernels=10, duration_ratio=0.8,
                                                       include_memory_kernels=True)
    result: dict[str, Any] = {
        "kernel_types": {str(r["kernel_type"]): float(r["sum"]) for _, r in types.iterrows()},
        "kernels": [[int(r["rank"]), str(r["kernel_type"]), str(r["name"]), float(r["sum (us)"]),
                     float(r["max (us)"]), float(r["min (us)"]), float(r["mean (us)"])]
                    for _, r in kernels.iterrows()],
        "comm_comp_overlap": {str(int(r["rank"])): float(r["comp_comm_overlap_pctg"])
                              for _, r in analysis.get_comm_comp_overlap(visualize=False).iterrows()},
        "ranks": {str(rank): rank_numbers(analysis, rank) for rank in sorted(analysis.t.traces)},
    }
    annotations = analysis.get_gpu_user_annotation_breakdown(visualize=False)
    if annotations is not None:  # only hta-nccl-rank0 has GPU user annotations
        result["gpu_user_annotations"] = {str(r["name"]): [float(r["sum (us)"]), float(r["max (us)"]), float(r["min (us)"]),
                                                           float(r["mean (us)"])] for _, r in annotations.iterrows()}
        symbols = analysis.t.symbol_table.get_sym_table()
        attributed = analysis.get_gpu_kernels_with_user_annotations(rank=0).groupby("user_annotation").dur.agg(
            ["count", "sum"])
        result["kernels_with_user_annotations"] = {
            (symbols[int(a)] if int(a) >= 0 else "none"): [int(r["count"]), float(r["sum"])]
            for a, r in attributed.iterrows()}
    with tempfile.TemporaryDirectory() as out:
        for rank in sorted(analysis.t.traces):
            try:  # HTA's call graph rejects some traces (zero-duration events it cannot order)
                found = analysis.get_frequent_cuda_kernel_sequences(SEQUENCE_ROOT, out, min_pattern_len=3,
                                                                    rank=rank, top_k=5, visualize=False)
            except ValueError as error:
                result["ranks"][str(rank)]["sequences"] = f"HTA failed: {error}"
                continue
            result["ranks"][str(rank)]["sequences"] = [
                [str(r["pattern"]), int(r["count"]), float(r["GPU kernel duration (us)"]),
                 float(r["CPU op duration (us)"])] for _, r in found.iterrows()]
    return result


# HTA's critical path per trace: (annotation, instance); HTA recommends a step, not the first.
CRITICAL_PATH = {"hta-simple-add": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 0),
                 "hta-sampled-2rank": ("ProfilerStep", 0), "hta-nccl-rank0": ("ProfilerStep", 0)}


def critical_path_numbers(trace_dir: str) -> dict[str, Any]:
    """HTA's critical path of rank 0: µs per bound_by and per edge type, and the number of edges."""
    from hta.trace_analysis import TraceAnalysis

    annotation, instance = CRITICAL_PATH[Path(trace_dir).name]
    graph, ok = TraceAnalysis(trace_dir=trace_dir).critical_path_analysis(rank=0, annotation=annotation,
                                                                          instance_id=instance)
    edges = graph.get_critical_path_breakdown()
    return {"annotation": annotation, "instance": instance, "ok": bool(ok), "edges": int(len(edges)),
            "bound_by": {str(k or "dependency"): float(v) for k, v in edges.groupby("bound_by").duration.sum().items()},
            "length": float(edges.duration.sum())}


def diff_numbers(trace_dir: str) -> dict[str, Any]:
    """HTA's TraceDiff of rank 0 (control) against rank 1 (test), first iteration, GPU and CPU apart."""
    from hta.trace_diff import DeviceType, TraceDiff

    out: dict[str, Any] = {}
    for label, device in (("gpu", DeviceType.GPU), ("cpu", DeviceType.CPU)):
        table = TraceDiff.compare_traces(trace_dir, trace_dir, control_rank=0, test_rank=1, device_type=device)
        out[label] = {str(name): [float(r["Control_counts"]), float(r["Control_total_duration"]),
                                  float(r["Test_counts"]), float(r["Test_total_duration"])]
                      for name, r in table.iterrows() if r["Control_counts"] or r["Test_counts"]}
    return out


def main() -> None:
    global SEQUENCE_ROOT
    logging.disable(logging.CRITICAL)
    out = {}
    for trace_dir in sys.argv[1:]:
        SEQUENCE_ROOT = "autograd::engine" if "sampled" in trace_dir else "aten::conv2d"
        out[Path(trace_dir).name] = trace_numbers(trace_dir)
        out[Path(trace_dir).name]["critical_path"] = critical_path_numbers(trace_dir)
        if "sampled" in trace_dir:
            out[Path(trace_dir).name]["diff_rank0_rank1"] = diff_numbers(trace_dir)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
