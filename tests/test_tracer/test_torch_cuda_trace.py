"""The CUDA path of TorchRecorder on a real GPU run (no GPU needed to run these tests).

tests/data/traces/cuda/ holds traces our tracer made on an NVIDIA H200 (torch 2.11, CUDA 13.0)
with tests/gpu_programs/run_on_gpu.sh. Beside the trace, the same program wrote what the
recorder never reads: CUDA-event times of each step and of the side stream's matrix product
(timing.json), and torch's own Kineto export of the same steps re-run (kineto.json.gz).
h200-edges (tests/gpu_programs/cuda_edges.py) holds a trace and PyTorch's execution trace of the
same run, for the tensor edges on CUDA buffers.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.reader import read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces" / "cuda"
RUN = DATA / "h200-mlp"
TRACE = RUN / "trace"
JOB = DATA / "h200-dataloader-job"
EDGES = DATA / "h200-edges"
SIDE_GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8"


@pytest.fixture(scope="module")
def trace():  # type: ignore[no-untyped-def]
    return read_trace(TRACE)


@pytest.fixture(scope="module")
def kineto() -> list[dict]:
    with gzip.open(RUN / "kineto.json.gz", "rt") as handle:
        return json.load(handle)["traceEvents"]


def test_babeltrace2_reads_the_cuda_trace() -> None:
    if shutil.which("babeltrace2") is None:
        pytest.skip("babeltrace2 is not installed")
    out = subprocess.run(["babeltrace2", str(TRACE)], capture_output=True, text=True, check=True).stdout
    assert out.count("dfc:kernel_begin") == 108 and "dfc:sync_begin" in out


def test_gpu_work_equals_torchs_own_export(trace, kineto) -> None:  # type: ignore[no-untyped-def]
    """Same program, same steps: the kernels per name, the copies with their sizes and the
    syncs per kind equal those torch's export lists (stream numbers differ between the runs)."""
    ours = Counter(trace.table("kernel_begin").text("name").tolist())
    theirs = Counter(e["name"] for e in kineto if e.get("cat") == "kernel")
    assert ours == theirs and sum(ours.values()) == 108
    copies = trace.table("memcpy_begin")
    assert sorted(zip(copies.text("copy_kind").tolist(), copies["bytes"].tolist())) == sorted(
        (kind, e["args"]["bytes"]) for e in kineto if e.get("cat") == "gpu_memcpy"
        for kind in [{"Memcpy HtoD (Pinned -> Device)": "HtoD pinned",
                      "Memcpy DtoH (Device -> Pinned)": "DtoH pinned"}[e["name"]]])
    syncs = Counter(trace.table("sync_begin").text("kind").tolist())
    assert syncs == Counter(e["args"]["cuda_sync_kind"] for e in kineto if e.get("cat") == "cuda_sync")
    # Allocations and user annotations replayed on the GPU are not GPU work.
    assert not {"[memory]", "Optimizer.step#SGD.step"} & set(ours)


def test_every_gpu_operation_is_launched_before_it_runs(trace) -> None:  # type: ignore[no-untyped-def]
    launches = trace.table("launch")
    api = trace.table("api_enter")
    launch_at = dict(zip(launches["correlation_id"].tolist(), launches["timestamp"].tolist()))
    names = dict(zip(api["correlation_id"].tolist(), api.text("name").tolist()))
    for table in ("kernel_begin", "memcpy_begin", "memset_begin"):
        rows = trace.table(table)
        for corr, begin in zip(rows["correlation_id"].tolist(), rows["timestamp"].tolist()):
            assert corr in launch_at, f"{table} {corr} has no launch"
            assert launch_at[corr] < begin
    # Driver API launches (cuLaunchKernel, used by cuBLASLt) count too.
    assert {names[c] for c in launch_at} >= {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                             "cudaMemcpyAsync"}


def test_kernel_times_agree_with_cuda_events(trace) -> None:  # type: ignore[no-untyped-def]
    """The side stream's product, timed by CUDA events around it in the same run, against the
    kernel's recorded duration (CUPTI): the events bracket the kernel, so the kernel is at most
    the events' span. The span also holds the wait for the host to launch the kernel after the
    start event (0.3-0.5 ms in the first step, which pays the profiler's start), so the kernel
    is compared with the quickest span: within 5%."""
    timing = json.loads((RUN / "timing.json").read_text())["steps"]
    begins, ends = trace.table("kernel_begin"), trace.table("kernel_end")
    end_of = dict(zip(ends["correlation_id"].tolist(), ends["timestamp"].tolist()))
    side = sorted((t, end_of[c] - t) for t, c, n in zip(begins["timestamp"].tolist(), begins["correlation_id"].tolist(),
                                                        begins.text("name").tolist()) if n.startswith(SIDE_GEMM))
    assert len(side) == len(timing) == 4
    ratios = []
    for (_, duration_ns), step in zip(side, timing):
        event_ns = step["side_mm_ms"] * 1e6
        assert duration_ns <= event_ns + 2_000, (duration_ns, event_ns)
        ratios.append(duration_ns / event_ns)
    assert max(ratios) >= 0.95


def test_steps_gpu_busy_fits_in_cuda_event_step_time(trace) -> None:  # type: ignore[no-untyped-def]
    """Per recorded step, the union of GPU work on both streams lies within the step's
    CUDA-event time (taken around the step on the GPU) plus event resolution."""
    timing = json.loads((RUN / "timing.json").read_text())["steps"]
    steps = trace.table("step_begin")
    step_ends = trace.table("step_end")
    windows = list(zip(steps["timestamp"].tolist(), step_ends["timestamp"].tolist()))
    spans = []
    for begin_table, end_table in (("kernel_begin", "kernel_end"), ("memcpy_begin", "memcpy_end"),
                                   ("memset_begin", "memset_end")):
        b, e = trace.table(begin_table), trace.table(end_table)
        end_of = dict(zip(e["correlation_id"].tolist(), e["timestamp"].tolist()))
        spans += [(t, end_of[c]) for t, c in zip(b["timestamp"].tolist(), b["correlation_id"].tolist())]
    for (begin, end), step in zip(windows, timing):
        inside = sorted(s for s in spans if begin <= s[0] < end)
        busy, reach = 0, 0
        for s, f in inside:
            busy += max(0, f - max(s, reach))
            reach = max(reach, f)
        assert 0 < busy <= step["gpu_ms"] * 1e6 + 5_000, (busy, step["gpu_ms"])


def test_overhead_reads_the_real_launches() -> None:
    out = subprocess.run([sys.executable, "-m", "tc_analyses.cli", "overhead", str(TRACE), "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    steps = json.loads(out)["result"]["steps"]
    assert len(steps) == 3  # 4 recorded, the last left out by default
    for step in steps:
        assert step["device_ns"] > 0 and step["launch_ns"] > 0 and step["ops"] > 0
    # The first step pays the profiler's start: host-bound. The others run the 2.7 ms product.
    assert steps[0]["host_bound"] and not any(s["host_bound"] for s in steps[1:])


def test_backward_ops_carry_their_step_and_os_thread(trace) -> None:  # type: ignore[no-untyped-def]
    """With CUDA tensors, backward runs on autograd's device thread: its ops get the step whose
    window holds them (every step runs the same ops) and that thread's OS id, not torch's own
    thread number."""
    nodes = trace.table("node_begin")
    per_step = Counter(nodes["step"].tolist())
    assert sorted(per_step) == [0, 1, 2, 3] and len(set(per_step.values())) == 1
    pid = trace.table("process_info")["pid"].tolist()[0]
    tids = set(nodes["tid"].tolist())
    assert len(tids) == 2 and min(tids) >= pid  # Linux gives a process's threads ids from its pid up


def test_cuda_job_main_process_has_gpu_work_and_workers_are_readable() -> None:
    """A DataLoader with 2 fork workers beside CUDA in the main process: the main trace holds the
    GPU work; the workers (fork children of a CUDA process, where torch's profiler cannot start)
    hold their process and no ops."""
    processes = sorted(JOB.iterdir())
    assert len(processes) == 3
    with_gpu = []
    for folder in processes:
        t = read_trace(folder)
        assert len(t.table("process_info")) == 1
        if len(t.table("kernel_begin")):
            with_gpu.append(folder.name)
            assert len(t.table("launch")) >= len(t.table("kernel_begin"))
        else:
            assert len(t.table("node_begin")) == 0
    assert len(with_gpu) == 1


def test_cuda_trace_through_the_downstream_commands(cli: Any, tmp_path: Path, tc_xsd: Path) -> None:
    built = cli("build-analyses", TRACE, "-o", tmp_path / "xml", "--validate", "--xsd", tc_xsd)
    assert built.exit_code == 0, built.output
    analyzed = cli("analyze", TRACE, "--format", "json")
    assert analyzed.exit_code == 0, analyzed.output
    sections = json.loads(analyzed.stdout)["sections"]
    # Every GPU section reads the real trace (only the TensorFlow-only one has nothing to read).
    for key in ("overhead", "breakdown", "kernels", "launches", "queues", "bandwidth", "critical-path", "roofline"):
        assert sections[key]["available"], (key, sections[key])
    placed = cli("recommend-placement", TRACE, "--devices", "cpu,cuda:0=H200", "-o", tmp_path / "placement")
    assert placed.exit_code == 0, placed.output


def test_cuda_edges_equal_the_execution_trace(tmp_path: Path) -> None:
    """On the GPU, buffers come from the caching allocator, which reuses freed blocks at once;
    the edges must still be exactly the observer's (numpy images via as_tensor, batch norm,
    dropout, backward on autograd's device thread, AdamW's foreach updates)."""
    from tc_analyses.analyses.edge_check import check_edges

    et = tmp_path / "et.json"
    with gzip.open(EDGES / "et.json.gz", "rb") as packed:
        et.write_bytes(packed.read())
    check = check_edges(EDGES / "trace", et)
    assert check.ops_matched == check.ops_ours and check.unmatched_edges == 0
    assert check.edges > 300 and check.duplicates == 0
    assert check.false_edges == 0, check.false_examples
    assert check.found == check.last_writer_edges, check.missing_examples


def test_compiled_programs_triton_kernels_are_on_their_stream_inside_the_graph_call() -> None:
    """torch.compile on CUDA (tests/torch_programs/compiled.py through `dfcompass record` on the
    H200): inductor's Triton kernels are on the GPU queue, each launched from inside the
    ``inductor::compiled_graph`` node whose call ran it."""
    from tc_analyses.model.activity import read_activity
    from tc_analyses.reader.job import single_trace

    for name in ("cnn-default", "transformer-graph-break", "cnn-reduce-overhead"):
        job = DATA / "h200-compiled" / name / "job"
        assert [p.name for p in job.iterdir()] == [single_trace(job).name]  # inductor's compile workers: not recorded
        trace = read_trace(single_trace(job))
        activity = read_activity(trace)
        launches = {call.correlation_id: call for call in activity.api if call.correlation_id}
        triton = [op for op in activity.gpu if op.kind == "kernel" and op.name.startswith("triton_")]
        assert triton, name
        graphs = [run for run in activity.nodes if run.op == "inductor::compiled_graph"]
        for kernel in triton:
            launch = launches[kernel.correlation_id]
            assert kernel.start >= launch.start and kernel.device.startswith("cuda")
            assert any(g.tid == launch.tid and g.start <= launch.start <= g.end for g in graphs), (name, kernel.name)
        queues = {kernel.queue for kernel in triton}
        # eager-style calls launch on the default stream; reduce-overhead also replays CUDA graphs on its own
        assert len(queues) == (2 if name == "cnn-reduce-overhead" else 1), (name, queues)
