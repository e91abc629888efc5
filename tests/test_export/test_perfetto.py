"""dfcompass export-perfetto: the JSON read back with a JSON reader, its slices, counters and arrows counted."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.analyses.breakdown import gpu_events
from tc_analyses.export import perfetto
from tc_analyses.inputs import TraceInputs
from tc_analyses.reader.job import job_traces
from tracer.builder import TraceBuilder

JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "jobs" / "ddp-2rank"


def _gpu_trace(tmp_path: Path) -> Path:
    """One op on thread 1 launching a kernel and a copy on queue 7; a second op consuming its output;
    two allocations; the kernel's launch took [100, 200), it ran [300, 900)."""
    out = tmp_path / "t"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, g = b.device("cpu", ts=0), b.device("cuda:0", ts=0)
        b.add("node_begin", "1", 50, 1, "aten::mm", "mm", cpu, 1, 0)
        b.add("api_enter", "1", 100, 1, "cudaLaunchKernel", 11)
        b.add("api_exit", "1", 200, 1, "cudaLaunchKernel", 11)
        b.add("api_enter", "1", 210, 1, "cudaMemcpyAsync", 12)
        b.add("api_exit", "1", 250, 1, "cudaMemcpyAsync", 12)
        b.add("node_end", "1", 260, 1, cpu, 1)
        b.add("kernel_begin", "g7", 300, g, 7, 11, "gemm<float>", 1, 1, 1, 1, 1, 1)
        b.add("kernel_end", "g7", 900, g, 7, 11)
        b.add("memcpy_begin", "g7", 950, g, 7, 12, 4096, "DtoH pinned", g, cpu)
        b.add("memcpy_end", "g7", 990, g, 7, 12)
        b.add("node_begin", "1", 1000, 2, "aten::relu", "relu", cpu, 1, 0)
        b.add("tensor_edge", "1", 1000, 1, 2, 5, 4096, cpu, cpu)
        b.add("node_end", "1", 1100, 2, cpu, 1)
        b.add("mem_alloc", "1", 60, g, 0x1000, 4096, 4096)
        b.add("mem_free", "1", 1200, g, 0x1000, 4096, 0)
    return out


def _read(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return data


def _flows(events: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert set(starts) == set(ends) and len(starts) == sum(1 for e in events if e["ph"] == "s")
    pairs: dict[str, list[Any]] = {}
    for flow_id, start in starts.items():
        pairs.setdefault(start["cat"], []).append((start, ends[flow_id]))
    return pairs


def test_gpu_trace_slices_counters_and_arrows(tmp_path: Path, cli: Any) -> None:
    trace = _gpu_trace(tmp_path)
    done = cli("export-perfetto", trace, "-o", tmp_path / "out.json.gz")
    assert done.exit_code == 0 and "6 slices, 3 arrows, 8 counter values" in done.stdout
    events = _read(tmp_path / "out.json.gz")["traceEvents"]
    slices = Counter(e["cat"] for e in events if e["ph"] == "X")
    assert slices == {"op": 2, "runtime": 2, "kernel": 1, "memcpy": 1}
    gemm = next(e for e in events if e.get("cat") == "kernel")
    assert (gemm["ts"], gemm["dur"], gemm["tid"], gemm["args"]["correlation"]) == (0.3, 0.6, 7, 11)
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {"t: host", "t: cuda:0"}
    flows = _flows(events)
    assert len(flows["launch"]) == 2 and len(flows["tensor"]) == 1
    for start, end in flows["launch"]:  # from the call on the host's thread to the operation on its queue
        assert start["pid"] != end["pid"] and end["tid"] == 7 and end["ts"] >= start["ts"] and end["bp"] == "e"
    [(producer, consumer)] = flows["tensor"]
    assert (producer["ts"], consumer["ts"]) == (0.05, 1.0)
    memory = [e for e in events if e["ph"] == "C" and e["name"].startswith("memory")]
    assert [e["args"]["bytes"] for e in memory] == [4096, 0]
    queue = [e["args"]["length"] for e in events if e["ph"] == "C" and e["name"].startswith("queue")]
    assert queue == [1, 2, 1, 0]  # two launches, then the kernel and the copy start
    bandwidth = [(e["ts"], e["args"]["GB/s"]) for e in events if e["ph"] == "C" and e["name"] == "copy bandwidth: DtoH"]
    assert bandwidth == [(0.95, pytest.approx(4096 / 40)), (0.99, 0.0)]  # 4 KiB in 40 ns


def test_a_job_folder_is_one_file_with_a_process_per_rank(tmp_path: Path) -> None:
    counts = perfetto.write(JOB, tmp_path / "job.json")
    data = _read(tmp_path / "job.json")
    events = data["traceEvents"]
    processes = job_traces(JOB)
    # Four processes (the launcher, a helper and the two ranks, which alone ran ops), each under its own pids.
    assert len(processes) == 4 and set(data["otherData"]["clock_offset_ns"]) == {p.label for p in processes}
    ops = [e for e in events if e.get("cat") == "op"]
    nodes = [len(TraceInputs(p.path).whole_activity.nodes) for p in processes]
    assert len(ops) == sum(nodes) == counts["X"] - sum(1 for e in events if e["ph"] == "X" and e["cat"] != "op")
    assert len({e["pid"] // perfetto.PIDS_PER_PROCESS for e in ops}) == sum(1 for n in nodes if n)
    edges = sum(len(TraceInputs(p.path).trace.table("tensor_edge")) for p in processes)
    assert 0 < len(_flows(events)["tensor"]) <= edges


@pytest.mark.slow
def test_imported_kineto_trace_keeps_every_gpu_operation(shared_dir: Path, tmp_path: Path) -> None:
    from tracer.importers import import_kineto

    trace = tmp_path / "nccl"
    import_kineto(shared_dir / "traces" / "kineto" / "hta-nccl-rank0" / "nccl_data.json.gz", trace)
    perfetto.write(trace, tmp_path / "nccl.json")
    events = _read(tmp_path / "nccl.json")["traceEvents"]
    activity = TraceInputs(trace).whole_activity
    slices = Counter(e["cat"] for e in events if e["ph"] == "X")
    assert slices["kernel"] == 2700 and slices["memcpy"] == 960 and slices["memset"] == 114
    assert slices["runtime"] == len(activity.api) and slices["op"] == len(activity.nodes)
    flows = _flows(events)
    launched = sum(1 for o in gpu_events(activity) if activity.call_with_correlation(o.correlation_id))
    assert len(flows["launch"]) == launched and len(flows["fwdbwd"]) == 543


def test_a_missing_trace_is_one_line(tmp_path: Path, cli: Any) -> None:
    done = cli("export-perfetto", tmp_path / "nope", "-o", tmp_path / "x.json")
    assert done.exit_code in (1, 2) and "nope" in done.stderr and "Traceback" not in done.stderr


def test_a_device_wide_sync_keeps_its_track(tmp_path: Path) -> None:
    """A context sync (queue -1: the whole device) is no GPU time for the breakdown, but the export
    shows it, on a 'device-wide' track."""
    from tracer.builder import TraceBuilder

    out = tmp_path / "sync"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        g = b.device("cuda:0", ts=0)
        b.add("kernel_begin", "g", 100, g, 7, 1, "k", 1, 1, 1, 1, 1, 1)
        b.add("kernel_end", "g", 200, g, 7, 1)
        b.add("sync_begin", "s", 300, g, 0xFFFFFFFF, 2, "Context Sync", 0xFFFFFFFF, 0)
        b.add("sync_end", "s", 900, g, 0xFFFFFFFF, 2)
    perfetto.write(out, tmp_path / "sync.json")
    events = _read(tmp_path / "sync.json")["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e.get("name") == "thread_name"}
    assert "device-wide" in names and "stream 7" in names
