"""Kineto files of other vintages: the TensorBoard plugin's era (PyTorch 1.8-1.9) names its
categories Operator, Runtime, Kernel, Memcpy and Memset; an import reads them as today's, and never
succeeds empty on the GPU side when it skipped GPU work it does not know (issue 36, item 1).

The files are made here, in the shape of that era's traces (string thread ids, "stream N" GPU
threads, correlation ids on calls and activities, "async" launch flows)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from tc_analyses.reader import read_trace
from tracer.importers import KinetoImportError, import_kineto

MODERN = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
          "Memset": "gpu_memset"}


def _tb_plugin_events(steps: int = 3) -> list[dict[str, Any]]:
    pid, t0, events = 4242, 1_620_000_000_000_000, []
    events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Traces",
                   "tid": "PyTorch Profiler", "ts": t0, "dur": 3000 * steps})
    for step in range(steps):
        s0, ext, corr = t0 + step * 3000, 100 + step * 10, 500 + step * 10
        events += [
            {"ph": "X", "cat": "Operator", "name": f"ProfilerStep#{step + 1}", "pid": pid, "tid": f"{pid}",
             "ts": s0, "dur": 2500, "args": {"External id": ext}},
            {"ph": "X", "cat": "Operator", "name": "aten::mul", "pid": pid, "tid": f"{pid}", "ts": s0 + 10, "dur": 60,
             "args": {"External id": ext + 1}},
            {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": f"{pid}", "ts": s0 + 20,
             "dur": 9, "args": {"correlation": corr, "external id": ext + 1, "cbid": 211}},
            {"ph": "X", "cat": "Kernel", "name": "void mul_kernel<float>(float*, float)", "pid": 0,
             "tid": "stream 7", "ts": s0 + 45, "dur": 14 + step,
             "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": corr,
                      "external id": ext + 1, "registers per thread": 16, "shared memory": 0,
                      "blocks per SM": 0.5, "warps per SM": 2.0, "grid": [4, 1, 1], "block": [128, 1, 1]}},
            {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": pid, "tid": f"{pid}", "ts": s0 + 80,
             "dur": 7, "args": {"correlation": corr + 1, "external id": ext + 1, "cbid": 51}},
            {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": s0 + 95,
             "dur": 2, "args": {"device": 0, "context": 1, "stream": 7, "correlation": corr + 1,
                                "external id": ext + 1, "bytes": 512}},
            {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": pid, "tid": f"{pid}", "ts": s0 + 120,
             "dur": 11, "args": {"correlation": corr + 2, "external id": ext + 1, "cbid": 41}},
            {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": "stream 7",
             "ts": s0 + 140, "dur": 3, "args": {"device": 0, "context": 1, "stream": 7, "correlation": corr + 2,
                                                "external id": ext + 1, "bytes": 1024,
                                                "memory bandwidth (GB/s)": 0.34}},
            {"ph": "s", "id": corr, "pid": pid, "tid": pid, "ts": s0 + 20, "cat": "async", "name": "launch"},
            {"ph": "f", "id": corr, "pid": 0, "tid": "stream 7", "ts": s0 + 45, "cat": "async", "name": "launch",
             "bp": "e"},
        ]
    events.append({"name": "process_name", "ph": "M", "ts": t0, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}})
    return events


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _renamed(events: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    return [dict(e, cat=names.get(e.get("cat"), e.get("cat"))) for e in events]


def _tables(trace: Path) -> dict[str, dict[str, list[Any]]]:
    t = read_trace(trace)
    out = {}
    for name in ("node_begin", "step_begin", "kernel_begin", "memcpy_begin", "memset_begin", "launch", "api_enter"):
        table = t.table(name)
        out[name] = {c: np.asarray(table[c]).tolist() for c in table.columns if c != "name"}
    return out


@pytest.mark.parametrize("checked", [False, True])
def test_a_tb_plugin_era_file_imports_as_its_modern_twin(tmp_path: Path, checked: bool) -> None:
    """Every call, op, step and GPU activity of the old file is imported, launches joined, and the
    trace equals the one from the same events under today's category names (both import paths)."""
    old = import_kineto(_write(tmp_path / "old.json", _tb_plugin_events()), tmp_path / "old", checked=checked)
    new = import_kineto(_write(tmp_path / "new.json", _renamed(_tb_plugin_events(), MODERN)), tmp_path / "new",
                        checked=checked)
    per_class = old.events_per_class
    assert (per_class["dfc:node_begin"], per_class["dfc:kernel_begin"], per_class["dfc:memcpy_begin"],
            per_class["dfc:memset_begin"], per_class["dfc:api_enter"]) == (6, 3, 3, 3, 9)
    assert old.steps == [1, 2, 3]
    assert old.correlation["gpu_with_launch"] == 9 and old.devices.keys() == {"cpu", "cuda:0"}
    assert set(old.skipped) == {"Trace", "async"}
    assert dataclasses.replace(old, source="", output="") == dataclasses.replace(new, source="", output="")
    assert _tables(tmp_path / "old") == _tables(tmp_path / "new")


@pytest.mark.parametrize("checked", [False, True])
def test_an_import_never_succeeds_without_the_gpu_work_it_skipped(tmp_path: Path, checked: bool) -> None:
    """GPU slices (a device and a stream) of a category no class takes: with no GPU activity
    imported the import fails, in one line naming them, and writes nothing; beside imported GPU
    activity the summary says the GPU side is incomplete."""
    events = _tb_plugin_events()
    unknown = _renamed([e for e in events if e.get("cat") in ("Kernel", "Memcpy")], {"Kernel": "gpu_op_v0",
                                                                                    "Memcpy": "gpu_op_v0"})
    cpu_only = [e for e in events if e.get("cat") in ("Operator", "Runtime")]
    with pytest.raises(KinetoImportError) as failed:
        import_kineto(_write(tmp_path / "only.json", cpu_only + unknown), tmp_path / "only", checked=checked)
    assert "6 GPU slices were not imported (no dfcompass class takes their category): 6 'gpu_op_v0'" in str(failed.value)
    assert "no GPU side" in str(failed.value) and "\n" not in str(failed.value)
    assert not (tmp_path / "only").exists()
    mixed = import_kineto(_write(tmp_path / "mixed.json", events + unknown), tmp_path / "mixed", checked=checked)
    assert mixed.events_per_class["dfc:kernel_begin"] == 3
    assert mixed.notes[0] == ("6 GPU slices were not imported (no dfcompass class takes their category): 6 'gpu_op_v0': "
                              "the GPU side is incomplete")


def test_the_cli_says_it_in_one_line_and_exits_1(tmp_path: Path, cli: Callable[..., Any]) -> None:
    events = _tb_plugin_events()
    cpu_only = [e for e in events if e.get("cat") in ("Operator", "Runtime")]
    unknown = _renamed([e for e in events if e.get("cat") == "Kernel"], {"Kernel": "gpu_op_v0"})
    src = _write(tmp_path / "only.json", cpu_only + unknown)
    done = cli("import-kineto", str(src), "-o", str(tmp_path / "out"))
    assert done.exit_code == 1
    assert done.stdout == "" and done.stderr.strip().splitlines() == [
        f"dfcompass: error: {src}: 3 GPU slices were not imported (no dfcompass class takes their category): 3 'gpu_op_v0', "
        "and no GPU activity of a kind it reads: the import would have no GPU side"]


@pytest.mark.parametrize("checked", [False, True])
def test_mtia_device_work_is_imported_on_an_mtia_device(tmp_path: Path, checked: bool) -> None:
    """MTIA's files (HTA's test data has two): runtime calls in `mtia_runtime`, the device's work in
    `mtia_ccp_events` slices on the device the pid names, with no device arg. A kernel carries the
    correlation id of its runFunction call; a DMA request (args.direction, args.size) runs while its
    kernel runs, and goes on a queue of its own (the tid when it gives no stream)."""
    from tc_analyses.model.activity import read_activity

    t0 = 3_605_054_881_000
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 31, "tid": 31, "ts": t0, "dur": 400,
               "args": {"External id": 1}},
              {"ph": "X", "cat": "mtia_runtime", "name": "runFunction - job_prep_and_submit_for_execution",
               "pid": 31, "tid": 31, "ts": t0 + 10, "dur": 300, "args": {"correlation": 7}},
              {"ph": "X", "cat": "mtia_ccp_events", "name": "fc-dtype_Float", "pid": 9, "tid": 801, "ts": t0 + 320,
               "dur": 40, "args": {"stream": 1, "correlation": 7, "row": "0", "column": "0", "packet_ptr": 3}},
              {"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 9, "tid": 801, "ts": t0 + 330,
               "dur": 8.136, "args": {"direction": "DEVICE_TO_HOST", "size": 163840, "sqid": 0, "stream": 1}},
              {"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 9, "tid": 802, "ts": t0 + 345,
               "dur": 2.5, "args": {"direction": "HOST_TO_DEVICE", "size": 16, "sqid": 1}},
              {"ph": "X", "cat": "mtia_ccp_events", "name": "event_wait", "pid": 9, "tid": 803, "ts": t0 + 350,
               "dur": 20, "args": {"stream": 2, "wait_on_stream": 1, "seq_num": 5, "sqid": 11}}]
    src = _write(tmp_path / "mtia.json", events)
    summary = import_kineto(src, tmp_path / "mtia", checked=checked)
    assert "mtia_ccp_events" not in summary.skipped
    from tc_analyses.export.reports import kineto_import_text

    report = kineto_import_text(summary)  # the DMA queues are named for what they are, not as odd ids
    assert "MTIA DMA queues (a stream's DMA requests, on a queue of their own): dma 1 -> " in report
    assert "not 32-bit unsigned" not in report
    if not checked:  # the columns path hands MTIA files to the checked one, which reads them
        from tests.test_importers.test_kineto_columns import _takes

        assert not _takes(src) and _takes(_write(tmp_path / "cuda.json", events[:2]))
    activity = read_activity(read_trace(tmp_path / "mtia"))
    ops = sorted(activity.gpu, key=lambda op: op.start)
    assert [(op.device, op.kind, op.name, op.bytes, op.duration) for op in ops] == [
        ("mtia:9", "kernel", "fc-dtype_Float", 0, 40_000), ("mtia:9", "memcpy", "DtoH", 163_840, 8_136),
        ("mtia:9", "memcpy", "HtoD", 16, 2_500)]
    assert len({op.queue for op in ops}) == 3  # the kernel's stream, its DMA queue, tid 802's DMA queue
    call = activity.launch_of(ops[0])
    assert call is not None and call.name == "runFunction - job_prep_and_submit_for_execution"
    assert activity.device_named("mtia:9").kind == "mtia"
    [wait] = activity.syncs  # event_wait: queue 2 waits for queue 1, no GPU time
    assert (wait.kind, wait.queue, wait.wait_queue, wait.end - wait.start) == ("event_wait", 2, 1, 20_000)


@pytest.mark.parametrize("checked", [False, True])
def test_whole_us_copies_keep_the_duration_kineto_measured(tmp_path: Path, checked: bool) -> None:
    """Files in whole µs floor each duration; Kineto computed each copy's and memset's GB/s on the
    exact ns, so bytes / GB/s gives them back: a 1.6 µs copy written as 1 µs is 1.6 µs long, and its
    bandwidth is Kineto's, not 1.6x it. A figure that does not floor to the written duration, or a
    ns-stamped file, keeps the file's end. Read HTA's way, the end is the file's again."""
    from tc_analyses.analyses.bandwidth import gbps
    from tc_analyses.analyses.breakdown import read_like_hta
    from tc_analyses.model.activity import read_activity

    t0 = 1_700_000_000_000_000

    def copy(ts: float, dur: float, corr: int, nbytes: int, rate: float) -> dict[str, Any]:
        return {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
                "ts": ts, "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": nbytes,
                                               "memory bandwidth (GB/s)": rate}}

    events = [copy(t0 + 10, 1, 1, 16_000, 10.0),  # 1.6 µs exactly: 16,000 B at 10 GB/s
              copy(t0 + 20, 0, 2, 640, 1.0),  # 640 ns, written as 0
              copy(t0 + 30, 2, 3, 16_000, 10.0),  # 1.6 µs does not floor to 2: the file's 2 µs stay
              {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": t0 + 40,
               "dur": 3, "args": {"device": 0, "stream": 7, "correlation": 4, "bytes": 4_000_000,
                                  "memory bandwidth (GB/s)": 1000.0}}]  # 4 µs does not floor to 3 either
    import_kineto(_write(tmp_path / "whole.json", events), tmp_path / "whole", checked=checked)
    trace = read_trace(tmp_path / "whole")
    ops = sorted(read_activity(trace).gpu, key=lambda op: op.start)
    assert [op.duration for op in ops] == [1_600, 640, 2_000, 3_000]
    assert gbps(ops[0]) == pytest.approx(10.0) and gbps(ops[1]) == pytest.approx(1.0)
    as_hta = sorted(read_like_hta(read_activity(trace), trace).gpu, key=lambda op: op.start)
    assert [op.duration for op in as_hta] == [1_000, 0, 2_000, 3_000]

    ns_file = [copy(t0 + 10.25, 1.0, 1, 16_000, 10.0),  # ns stamps: the file's duration is the measure
               copy(t0 + 20, 1.5, 2, 16_000, 10.0)]  # a whole-µs start, a fractional duration: the same
    import_kineto(_write(tmp_path / "ns.json", ns_file), tmp_path / "ns", checked=checked)
    assert [op.duration for op in read_activity(read_trace(tmp_path / "ns")).gpu] == [1_000, 1_500]


def test_a_measured_copy_end_stops_at_the_next_work_of_its_queue(tmp_path: Path) -> None:
    """The next kernel's start is floored too: a 1.6 µs copy at 10 µs and a kernel written at 11 µs
    (it started in [11, 12) µs, after the copy) would overlap by 0.6 µs, and a queue runs one thing
    at a time: the copy ends at 11 µs there. A rate so small its duration is infinite (1e-320 GB/s)
    keeps the file's. Both paths write the same trace, byte for byte."""
    from tests.test_importers.test_kineto_columns import _both, _takes

    from tc_analyses.model.activity import read_activity

    t0 = 1_700_000_000_000_000

    def gpu(cat: str, ts: int, dur: int, corr: int, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": "Memcpy HtoD (Pinned -> Device)" if cat == "gpu_memcpy" else "k",
                "pid": 0, "tid": 7, "ts": t0 + ts, "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr,
                                                                      **args}}

    rate = "memory bandwidth (GB/s)"
    src = _write(tmp_path / "next.json", [
        gpu("gpu_memcpy", 10, 1, 1, bytes=16_000, **{rate: 10.0}), gpu("kernel", 11, 3, 2),
        gpu("gpu_memcpy", 20, 1, 3, bytes=16_000, **{rate: 10.0}), gpu("kernel", 30, 3, 4),  # room: 1.6 µs
        gpu("gpu_memcpy", 40, 1, 5, bytes=16_000, **{rate: 1e-320})])
    assert _takes(src)
    fast, checked = _both(src, tmp_path)
    assert fast == checked and not isinstance(fast, str)
    import_kineto(src, tmp_path / "out")
    ops = sorted(read_activity(read_trace(tmp_path / "out")).gpu, key=lambda op: op.start)
    assert [(op.kind, op.duration) for op in ops] == [("memcpy", 1_000), ("kernel", 3_000), ("memcpy", 1_600),
                                                      ("kernel", 3_000), ("memcpy", 1_000)]
