"""Traces of the shapes on which HTA 0.6.1 (traceinsight) is wrong, made here: dfcompass reads them
right (docs/hta.md, "HTA's bugs that dfcompass does not copy"). The shapes come from public Kineto
traces HTA was run on (issue 36); the files stay out of the tests, these are their shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tc_analyses.inputs import TraceInputs
from tc_analyses.model.window import Window
from tc_analyses.registry import entry
from tracer.importers import import_kineto

T0 = 1_700_000_000_000_000  # µs


def _imported(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    src = tmp_path / "trace.json"
    src.write_text(json.dumps({"traceEvents": events}))
    import_kineto(src, tmp_path / "trace")
    return tmp_path / "trace"


def _gpu(cat: str, name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": T0 + ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, **args}}


def _launch(name: str, ts: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": T0 + ts, "dur": 2,
            "args": {"correlation": corr}}


def _run(key: str, trace: Path, **options: Any) -> Any:
    defaults = {"kernels": {"top": 10, "duration_ratio": 0.8}, "bandwidth": {}}[key]
    return entry(key).run(TraceInputs(trace, window=Window(include_last_step=True)), {**defaults, **options}).data


def test_a_cpu_op_with_a_stream_arg_is_no_kernel(tmp_path: Path) -> None:
    """A Triton trace's cpu_op carries args.stream; HTA counted it as a 94 µs kernel of the name the
    1.76 µs kernel has. It is the host op that launched it: the kernel is 1.76 µs."""
    name = "triton_poi_fused_add_0"
    trace = _imported(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": T0, "dur": 94,
         "args": {"stream": 7, "device": 0, "External id": 5}},
        _launch("cuLaunchKernel", 10, 40),
        _gpu("kernel", name, 100, 1.76, 40)])
    kernels = _run("kernels", trace).kernels
    assert [(k.name, k.count, k.total_ns) for k in kernels] == [(name, 1, 1760)]


def test_a_20_ns_kernel_keeps_its_20_ns(tmp_path: Path) -> None:
    """Kineto's ns-resolution files give a 20 ns kernel as dur 0.02; HTA rounds its start up and its
    end down to whole µs, which makes it -1 µs long (its temporal breakdown then fails an assertion)."""
    trace = _imported(tmp_path, [_launch("cudaLaunchKernel", 0, 1), _gpu("kernel", "tiny", 10.49, 0.02, 1),
                                 _launch("cudaLaunchKernel", 20, 2), _gpu("kernel", "next", 30, 1.0, 2)])
    kernels = {k.name: k for k in _run("kernels", trace).kernels}
    assert (kernels["tiny"].count, kernels["tiny"].total_ns) == (1, 20)


def test_back_to_back_copies_are_not_summed_into_a_peak(tmp_path: Path) -> None:
    """Two 1 MB copies of 10 µs each, the second starting as the first ends: each runs at 100 GB/s
    and so does the pair; HTA's time series adds both at the shared instant (a 671 GB/s peak on the
    trace where it was seen)."""
    trace = _imported(tmp_path, [
        _launch("cudaMemcpyAsync", 0, 1), _gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 10, 10, 1, bytes=1_000_000),
        _launch("cudaMemcpyAsync", 3, 2), _gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 20, 10, 2, bytes=1_000_000)])
    [row] = _run("bandwidth", trace).kinds
    assert (row.kind, row.count, row.max_gbps, row.peak_concurrent_gbps) == ("HtoD", 2, 100.0, 100.0)


def test_short_copies_keep_their_ns_where_hta_rounds_them_away(tmp_path: Path) -> None:
    """On a ns-stamped file, HTA rounds each slice inward to whole µs: a 1.4 µs copy keeps 0 or 1 µs.
    On a 1M-event file (hta-nccl-rank0 repeated) its memory time was 31,402 µs against our 56,361;
    ours is the file's: the sum of the copies' durations (checked here on 10 copies, and read the
    way HTA reads, the same copies give HTA's smaller figure)."""
    from tc_analyses.analyses.breakdown import read_like_hta
    from tc_analyses.analyses.kernels import type_times
    from tc_analyses.reader import read_trace

    events = []
    for k in range(10):
        events += [_launch("cudaMemcpyAsync", 10 * k, k + 1),
                   _gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 10 * k + 5.8, 1.4, k + 1, bytes=4096)]
    trace = _imported(tmp_path, events)
    memory = {t.label: t.time_ns for t in _run("kernels", trace).types}["memory"]
    assert memory == sum(1400 for _ in range(10))  # the file's durations, to the ns
    inputs = TraceInputs(trace, window=Window(include_last_step=True))
    rounded = read_like_hta(inputs.activity, read_trace(trace))
    as_hta = {t.label: t.time_ns for t in type_times(rounded.gpu)}.get("memory", 0)
    assert as_hta == 10 * 1000  # [5.8, 7.2) µs read as [6, 7): 1 µs of each 1.4, 29 % lost


def test_a_slice_read_as_ending_before_it_starts_takes_no_time(tmp_path: Path) -> None:
    """Read the way HTA reads, a 20 ns copy alone ends before it starts ([31, 30) µs). On an H100
    trace of TraceLens's test data this gave a second "memory" row of 12 µs beside the real 3,498
    µs; HTA's row is the 3,498 alone. Such a slice takes no time, and the type rows stay one each."""
    from tc_analyses.analyses.breakdown import read_like_hta
    from tc_analyses.analyses.kernels import type_times
    from tc_analyses.reader import read_trace

    trace = _imported(tmp_path, [
        _launch("cudaMemcpyAsync", 0, 1), _gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 10, 10, 1, bytes=4096),
        _launch("cudaMemcpyAsync", 22, 2), _gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 30.49, 0.02, 2,
                                                bytes=8)])
    inputs = TraceInputs(trace, window=Window(include_last_step=True))
    rounded = read_like_hta(inputs.activity, read_trace(trace))
    assert [(t.label, t.time_ns) for t in type_times(rounded.gpu)] == [("memory", 10_000)]
    assert [(t.label, t.time_ns) for t in type_times(inputs.activity.gpu)] == [("memory", 10_020)]


def test_hta_adds_start_and_duration_in_float64() -> None:
    """HTA reads a slice's end as floor(ts + dur) in float64. At today's epoch, float64 µs are
    0.25 µs apart: ts 1712195495505583.0 + dur 4.928 is 1712195495505588.0 there, so the slice ends
    at ...588 µs, not ...587 (its exact end is ...587.928). On a file with such stamps HTA counted
    about 1.2 ms more busy GPU time than inward rounding of the exact times gives; read_like_hta
    reads the same way, and then dfcompass's breakdown equals HTA's (bench/hta_crosscheck.py)."""
    from tc_analyses.analyses.breakdown import hta_reading

    start_ns = 1712195495505583 * 1000
    starts, ends = hta_reading([start_ns], [start_ns + 4928], 0)
    assert (int(starts[0]), int(ends[0])) == (start_ns, start_ns + 5000)  # exact inward rounding: + 4000
    relative = 4458676522690655  # a file with baseTimeNanoseconds: small ts, float64 keeps 1 ns
    starts, ends = hta_reading([relative], [relative + 4928], 0)
    assert (int(starts[0]), int(ends[0])) == (4458676522691000, 4458676522695000)
