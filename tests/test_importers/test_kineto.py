"""`dfcompass import-kineto`: each mapping rule on small hand-written files, bad input, real traces."""

from __future__ import annotations

import gzip
import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.reader.fast import DfcTrace, read_trace
from tests.helpers import (
    check_packets,
    check_string_defs,
    requires_babeltrace2,
    rows,
    run_babeltrace2,
    subprocess_env,
)
from tracer import schema
from tracer.ctf import TraceExistsError
from tracer.importers import ImportSummary, KinetoImportError, import_kineto
from tracer.importers.kineto import MARGIN_NS

PID, TID = 4242, 77


def ev(cat: str, name: str, ts: Any, dur: Any = None, *, pid: Any = PID, tid: Any = TID, ph: str = "X",
       **args: Any) -> dict[str, Any]:
    event = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "args": args}
    if dur is not None:
        event["dur"] = dur
    return event


def meta(kind: str, name: str, pid: Any = PID, tid: Any = 0) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "ts": 0, "args": {"name": name}}


def flow(ph: str, flow_id: int, ts: Any, pid: Any = PID, tid: Any = TID) -> dict[str, Any]:
    event = {"ph": ph, "id": flow_id, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"}
    if ph == "f":
        event["bp"] = "e"
    return event


def kernel(ts: Any, dur: Any, corr: int | None, device: int = 0, stream: int = 7, **args: Any) -> dict[str, Any]:
    extra = {"correlation": corr} if corr is not None else {}
    return ev("kernel", "k", ts, dur, pid=device, tid=stream, device=device, stream=stream, **extra, **args)


@pytest.fixture
def kineto(tmp_path: Path) -> Callable[..., tuple[ImportSummary, DfcTrace]]:
    """kineto(events, **top_level) -> (summary, trace read back with the fast reader)."""
    counter = iter(range(1000))

    def convert(events: list[dict[str, Any]], *, gz: bool = False, **top: Any) -> tuple[ImportSummary, DfcTrace]:
        n = next(counter)
        text = json.dumps({"schemaVersion": 1, **top, "traceEvents": events})
        src = tmp_path / (f"t{n}.json.gz" if gz else f"t{n}.json")
        src.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        summary = import_kineto(src, tmp_path / f"out{n}")
        check_packets(summary.output)
        trace = read_trace(summary.output)
        check_string_defs(trace)
        return summary, trace

    return convert


def devices(trace: DfcTrace) -> dict[int, str]:
    table = trace.table("device_info")
    return dict(zip(table["device"].tolist(), table.text("name").tolist()))


def wall(trace: DfcTrace, table: str) -> list[int]:
    return [trace.metadata.clock_offset_ns + t for t in trace.table(table)["timestamp"].tolist()]


# ---------------------------------------------------------------- mapping rules
def test_cpu_ops_become_nodes_with_process_and_thread_info(kineto: Callable[..., Any]) -> None:
    summary, trace = kineto([
        meta("process_name", "python3.11"),
        meta("thread_name", "thread 77 (old name)", tid=TID),
        meta("thread_name", "thread 77 (main)", tid=TID),
        ev("cpu_op", "aten::linear", 10, 50),
        ev("cpu_op", "aten::addmm", 20, 30, **{"Module Hierarchy": "model.fc1"}),
        ev("cpu_op", "aten::relu", 15, 5, tid=78),
    ])
    begins = trace.table("node_begin")
    got = sorted(zip(begins["node_id"].tolist(), begins.text("op").tolist(), begins.text("name").tolist(),
                     [devices(trace)[d] for d in begins["device"].tolist()], begins["tid"].tolist(),
                     begins["step"].tolist(), wall(trace, "node_begin")))
    assert got == [
        (0, "aten::linear", "aten::linear", "cpu", TID, schema.NO_STEP, 10_000),
        (1, "aten::relu", "aten::relu", "cpu", 78, schema.NO_STEP, 15_000),
        (2, "aten::addmm", "model.fc1", "cpu", TID, schema.NO_STEP, 20_000),
    ]
    ends = trace.table("node_end")
    assert sorted(zip(ends["node_id"].tolist(), wall(trace, "node_end"))) == [(0, 60_000), (1, 20_000), (2, 50_000)]
    procs = trace.table("process_info")
    assert rows(procs, "pid") == [(PID,)] and procs.text("name").tolist() == ["python3.11"]
    threads = trace.table("thread_info")
    names = dict(zip(threads["tid"].tolist(), threads.text("name").tolist()))
    assert names == {TID: "thread 77 (main)", 78: ""}  # the last thread_name wins
    assert summary.threads == 2 and summary.devices == {"cpu": ""}
    assert summary.events_per_class["dfc:node_begin"] == 3
    assert "dfc:tensor_edge" not in trace.tables and "no dfc:tensor_edge" in summary.notes[0]


@pytest.mark.parametrize("cat", ["user_annotation", "cpu_op"])
def test_profiler_steps(kineto: Callable[..., Any], cat: str) -> None:
    summary, trace = kineto([
        ev(cat, "ProfilerStep#3", 100, 100),
        ev("cpu_op", "inside", 110, 10),
        ev("cpu_op", "autograd thread, inside", 150, 10, tid=TID + 1),
        ev("cpu_op", "after", 200, 10),
        ev(cat, "ProfilerStep#4", 300, 50),
        ev("cpu_op", "next", 300, 1),
        ev("cpu_op", "other process", 310, 1, pid=PID + 1),
    ])
    begins = trace.table("node_begin")
    steps = dict(zip(begins.text("op").tolist(), begins["step"].tolist()))
    assert steps["inside"] == steps["autograd thread, inside"] == 3
    assert steps["after"] == steps["other process"] == schema.NO_STEP
    assert steps["next"] == 4
    assert ("ProfilerStep#3" in steps) == (cat == "cpu_op")  # a cpu_op step is a node too
    assert rows(trace.table("step_begin"), "step", "tid") == [(3, TID), (4, TID)]
    assert wall(trace, "step_end") == [200_000, 350_000]
    assert summary.steps == [3, 4]
    assert summary.skipped == {}


def test_runtime_calls_and_kernels(kineto: Callable[..., Any]) -> None:
    summary, trace = kineto([
        ev("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=501, cbid=211),
        ev("cuda_driver", "cuLaunchKernel", 20, 2, correlation=502),
        kernel(16, 4, 501, grid=[512, 2, 1], block=[256, 1, 1]),
        kernel(30, 1, 502, device=1, stream=40),
    ], deviceProperties=[{"id": 0, "name": "NVIDIA A100"}, {"id": 1, "name": "NVIDIA H100"}])
    assert rows(trace.table("api_enter"), "tid", "correlation_id") == [(TID, 501), (TID, 502)]
    assert trace.table("api_enter").text("name").tolist() == ["cudaLaunchKernel", "cuLaunchKernel"]
    assert wall(trace, "api_exit") == [15_000, 22_000]
    names = devices(trace)
    kb = trace.table("kernel_begin")
    assert [(names[d], q, c) for d, q, c in rows(kb, "device", "queue", "correlation_id")] == [
        ("cuda:0", 7, 501), ("cuda:1", 40, 502)]
    assert rows(kb, "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z") == [
        (512, 2, 1, 256, 1, 1), (0, 0, 0, 0, 0, 0)]
    assert wall(trace, "kernel_end") == [20_000, 31_000]
    info = trace.table("device_info")
    assert dict(zip(info.text("name").tolist(), info.text("model").tolist())) == {
        "cuda:0": "NVIDIA A100", "cuda:1": "NVIDIA H100"}  # no op ran on the CPU: no cpu device
    assert summary.gpu_streams == {"cuda:0": [7], "cuda:1": [40]}
    assert summary.correlation["gpu_with_launch"] == 2 and summary.correlation["gpu_without_launch"] == 0


def test_ac2g_flows_join_calls_and_activities_without_correlation(kineto: Callable[..., Any]) -> None:
    summary, trace = kineto([
        ev("cuda_runtime", "cudaLaunchKernel", 10, 5),  # no args.correlation
        flow("s", 900, 10),
        kernel(16, 4, None),
        flow("f", 900, 16, pid=0, tid=7),
        ev("cuda_runtime", "cudaMemsetAsync", 30, 5, correlation=901),
        ev("gpu_memset", "Memset (Device)", 40, 1, pid=0, tid=7, device=0, stream=7, bytes=64),
        flow("f", 901, 40, pid=0, tid=7),
        kernel(50, 1, None),  # no correlation, no flow
    ])
    assert rows(trace.table("api_enter"), "correlation_id") == [(900,), (901,)]
    assert rows(trace.table("kernel_begin"), "correlation_id") == [(900,), (0,)]
    assert rows(trace.table("memset_begin"), "correlation_id", "bytes") == [(901, 64)]
    assert summary.correlation == {"gpu_with_launch": 2, "gpu_without_launch": 1, "api_joined_by_flow": 1,
                                   "gpu_joined_by_flow": 2, "ac2g_flow_events": 3}


def test_microseconds_become_exact_nanoseconds(kineto: Callable[..., Any], tmp_path: Path) -> None:
    _, trace = kineto([ev("cpu_op", "a", 1.001, 0.002), ev("cpu_op", "b", 2, 1.0005)])
    assert wall(trace, "node_begin") == [1001, 2000]
    assert wall(trace, "node_end") == [1003, 3000]  # 1.0005 us: half-even to 1000 ns
    # 19 significant digits: a double would be off by a nanosecond here.
    text = ('{"baseTimeNanoseconds": 1711964646000000000, "traceEvents": ['
            '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 4458676388068.751, "dur": 0.001},'
            '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 4458676388069.349, "dur": 1.999}]}')
    (tmp_path / "big.json").write_text(text)
    summary = import_kineto(tmp_path / "big.json", tmp_path / "big")
    big = read_trace(tmp_path / "big")
    base = 1711964646000000000
    assert wall(big, "node_begin") == [base + 4458676388068751, base + 4458676388069349]
    assert wall(big, "node_end") == [base + 4458676388068752, base + 4458676388071348]
    assert summary.clock_origin == "baseTimeNanoseconds"
    assert big.table("node_begin")["timestamp"].tolist()[0] == MARGIN_NS  # rebased, the rest in the offset
    assert summary.first_ns == base + 4458676388068751


@pytest.mark.parametrize("ts,origin,offset", [
    (1_694_039_968_933_321, "unix epoch", 1_694_039_968_933_321_000 - MARGIN_NS),
    (5, "unknown", 5_000 - MARGIN_NS),
    (0.5, "unknown", 0),
    (-3, "unknown", 0),
])
def test_clock_origin_and_offset(kineto: Callable[..., Any], ts: Any, origin: str, offset: int) -> None:
    summary, trace = kineto([ev("cpu_op", "a", ts, 1)])
    assert summary.clock_origin == origin
    assert trace.metadata.clock_offset_ns == summary.clock_offset_ns == offset >= 0
    first = trace.table("node_begin")["timestamp"].tolist()[0]
    if ts >= 0:
        assert offset + first == round(ts * 1000)  # ns_from_origin is the time the file gives
    else:
        assert first == MARGIN_NS  # before 1970: shifted, never negative


@pytest.mark.parametrize("name,kind,src,dst", [
    ("Memcpy HtoD (Pageable -> Device)", "HtoD pageable", "cpu", "cuda:0"),
    ("Memcpy DtoH (Device -> Pinned)", "DtoH pinned", "cuda:0", "cpu"),
    ("Memcpy DtoD (Device -> Device)", "DtoD", "cuda:0", "cuda:0"),
    ("Memcpy HtoH (Pinned -> Pageable)", "HtoH pageable", "cpu", "cpu"),
    ("Memcpy PtoP (Device -> Device)", "PtoP", "cuda:0", "cuda:3"),
    ("Memcpy HtoA (Pinned -> Array)", "HtoD pinned", "cpu", "cuda:0"),
    ("Something else", "Unknown", "cuda:0", "cuda:0"),
])
def test_memcpy_kinds(kineto: Callable[..., Any], name: str, kind: str, src: str, dst: str) -> None:
    args = {"device": 0, "stream": 7, "correlation": 5, "bytes": 4096, "fromDevice": 0, "toDevice": 3}
    summary, trace = kineto([ev("gpu_memcpy", name, 10, 2, pid=0, tid=7, **args)])
    table = trace.table("memcpy_begin")
    names = devices(trace)
    assert table.text("copy_kind").tolist() == [kind]
    assert [(names[s], names[d]) for s, d in rows(table, "src_device", "dst_device")] == [(src, dst)]
    assert rows(table, "queue", "correlation_id", "bytes") == [(7, 5, 4096)]
    assert wall(trace, "memcpy_end") == [12_000]
    assert summary.correlation["gpu_without_launch"] == 1  # no runtime call in this file


def test_memory_events(kineto: Callable[..., Any]) -> None:
    def mem(ts: int, nbytes: int, total: int, dtype: int, dev: int, addr: int) -> dict[str, Any]:
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": PID, "tid": TID,
                "ts": ts, "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": nbytes, "Addr": addr,
                                   "Device Type": dtype, "Device Id": dev}}

    summary, trace = kineto([
        mem(10, 512, 512, 0, -1, 0x1000),
        mem(20, 2048, 2048, 1, 0, 0x7F00),
        mem(30, -2048, 0, 1, 0, 0x7F00),
        mem(40, 0, 0, 1, 0, 0),
        mem(50, 8, 8, 1, 0, -16),  # a signed print of an address
    ])
    names = devices(trace)
    alloc = trace.table("mem_alloc")
    assert [(names[d], *r) for d, *r in rows(alloc, "device", "addr", "bytes", "bytes_in_use")] == [
        ("cpu", 0x1000, 512, 512), ("cuda:0", 0x7F00, 2048, 2048), ("cuda:0", 2**64 - 16, 8, 8)]
    free = trace.table("mem_free")
    assert [(names[d], *r) for d, *r in rows(free, "device", "addr", "bytes", "bytes_in_use")] == [
        ("cuda:0", 0x7F00, 2048, 0)]
    assert wall(trace, "mem_free") == [30_000]
    assert summary.skipped == {"[memory] of 0 bytes": 1}


def test_gzip_input_and_gzip_recognised_by_content(kineto: Callable[..., Any], tmp_path: Path) -> None:
    events = [ev("cpu_op", "a", 1, 1), ev("cuda_runtime", "cudaMalloc", 3, 1, correlation=1)]
    summary, _ = kineto(events, gz=True)
    assert summary.events_per_class["dfc:node_begin"] == 1 and summary.events_per_class["dfc:api_enter"] == 1
    renamed = tmp_path / "really-gzip.json"
    renamed.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    assert import_kineto(renamed, tmp_path / "renamed").events_per_class == summary.events_per_class


def test_odd_ids_are_remapped_stably(kineto: Callable[..., Any]) -> None:
    events = [ev("cpu_op", "a", 1, 1, tid="worker"), ev("cpu_op", "b", 2, 1, tid=-549452224),
              ev("cpu_op", "c", 3, 1, tid=1), ev("cpu_op", "d", 4, 1, tid=2**40),
              kernel(5, 1, None, stream=-1)]
    summary, trace = kineto(events)
    # Free small ints from 1 up (1 is taken by a real tid), in sorted order of the ids' text.
    assert summary.remapped_ids == {"tid": {"-549452224": 2, "1099511627776": 3, "worker": 4}, "stream": {"-1": 1}}
    assert dict(zip(trace.table("node_begin").text("op").tolist(), trace.table("node_begin")["tid"].tolist())) == {
        "a": 4, "b": 2, "c": 1, "d": 3}
    again, _ = kineto(list(reversed(events)))
    assert again.remapped_ids == summary.remapped_ids


def test_unmapped_categories_are_counted_as_skipped(kineto: Callable[..., Any]) -> None:
    summary, trace = kineto([
        ev("cpu_op", "a", 1, 10),
        ev("user_annotation", "## forward ##", 1, 10),
        ev("gpu_user_annotation", "## forward ##", 2, 10, pid=0, tid=7),
        ev("python_function", "torch/nn/modules/module.py(1501): _call_impl", 1, 5),
        ev("cuda_sync", "Stream Sync", 3, 1, pid=0, tid=7, stream=7, device=0),  # kept: dfc:sync_begin
        ev("Trace", "PyTorch Profiler (0)", 0, 20, pid="Spans", tid="PyTorch Profiler"),
        {"ph": "s", "id": 1, "pid": PID, "tid": TID, "ts": 1, "cat": "fwdbwd", "name": "fwdbwd"},
        {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 30},
    ])
    assert summary.skipped == {"Trace": 1, "fwdbwd": 1, "instant": 1, "python_function": 1}  # a flow with one end
    # the two annotations are kept: one on the CPU thread, one on GPU 0's queue 7
    assert summary.events_per_class["dfc:annotation_begin"] == 2
    assert set(summary.devices) == {"cpu", "cuda:0"}
    assert summary.events_per_class["dfc:node_begin"] == 1 and summary.source_events == 8


def test_bare_event_array_is_accepted(tmp_path: Path) -> None:
    src = tmp_path / "array.json"
    src.write_text(json.dumps([ev("cpu_op", "a", 1, 1)]))
    assert import_kineto(src, tmp_path / "out").events_per_class["dfc:node_begin"] == 1


def test_existing_trace_needs_overwrite(tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": [ev("cpu_op", "a", 1, 1)]}))
    import_kineto(src, tmp_path / "out")
    with pytest.raises(TraceExistsError):
        import_kineto(src, tmp_path / "out")
    assert import_kineto(src, tmp_path / "out", overwrite=True).events_per_class["dfc:node_begin"] == 1


# ---------------------------------------------------------------- command line
def test_cli_text_and_json(cli: Callable[..., Any], tmp_path: Path) -> None:
    src = tmp_path / "t.json.gz"
    events = [ev("cpu_op", "a", 1, 1), ev("cuda_runtime", "cudaLaunchKernel", 2, 1, correlation=3),
              kernel(4, 1, 3), ev("user_annotation", "x", 1, 1)]
    src.write_bytes(gzip.compress(json.dumps({"traceEvents": events,
                                              "deviceProperties": [{"id": 0, "name": "GPU-X"}]}).encode()))
    result = cli("import-kineto", src, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "devices:     cpu, cuda:0 (GPU-X)" in out and "GPU streams: cuda:0: 7" in out
    assert "1 of 1 GPU activities matched a runtime call" in out
    assert any(line.split() == ["dfc:kernel_begin", "1"] for line in out.splitlines())
    assert any(line.split() == ["dfc:annotation_begin", "1"] for line in out.splitlines())
    assert "no dfc:tensor_edge" in out
    again = cli("import-kineto", src, "-o", tmp_path / "out")
    assert again.exit_code == 2 and again.stderr.startswith("dfcompass: error: ") and "--overwrite" in again.stderr
    as_json = cli("import-kineto", src, "-o", tmp_path / "out", "--overwrite", "--format", "json")
    assert as_json.exit_code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["events_per_class"]["dfc:kernel_begin"] == 1 and data["skipped"] == {}
    assert data["events_per_class"]["dfc:annotation_begin"] == 1
    assert data["gpu_streams"] == {"cuda:0": [7]} and data["events"] == sum(data["events_per_class"].values())
    info = cli("info", tmp_path / "out", "--format", "json")
    assert json.loads(info.stdout)["env"]["import_format"] == "kineto"


def _truncated_gzip(path: Path) -> None:
    data = gzip.compress(json.dumps({"traceEvents": [ev("cpu_op", "a", 1, 1)] * 50}).encode())
    path.write_bytes(data[: len(data) // 2])


BAD_INPUTS: list[tuple[str, Callable[[Path], Any], str]] = [
    ("not-json", lambda p: p.write_text("this is not json"), "not JSON"),
    ("truncated-gzip", _truncated_gzip, "bad gzip data"),
    ("no-trace-events", lambda p: p.write_text('{"schemaVersion": 1}'), "no 'traceEvents' list"),
    ("events-not-a-list", lambda p: p.write_text('{"traceEvents": {}}'), "'traceEvents' is a JSON dict"),
    ("top-level-number", lambda p: p.write_text("42"), "the top level is a JSON int"),
    ("event-not-an-object", lambda p: p.write_text('{"traceEvents": [1]}'), "traceEvents[0] is a JSON int"),
    ("missing-ts", lambda p: p.write_text(json.dumps({"traceEvents": [
        ev("cpu_op", "a", 1, 1), {"ph": "X", "cat": "cpu_op", "name": "aten::add", "dur": 1}]})),
     "traceEvents[1] (cpu_op 'aten::add'): missing 'ts'"),
    ("missing-dur", lambda p: p.write_text(json.dumps({"traceEvents": [ev("kernel", "k", 1, device=0, stream=7)]})),
     "missing 'dur'"),
    ("negative-dur", lambda p: p.write_text(json.dumps({"traceEvents": [ev("cpu_op", "a", 1, -2)]})),
     "'dur' is not a duration"),
    ("string-ts", lambda p: p.write_text(json.dumps({"traceEvents": [ev("cpu_op", "a", "soon", 1)]})),
     "'ts' is not a number"),
    ("nothing-importable", lambda p: p.write_text(json.dumps({"traceEvents": [ev("python_function", "a", 1, 1)]})),
     "nothing to import"),
    ("not-utf8", lambda p: p.write_bytes(b'{"traceEvents": ["\xff"]}'), "not UTF-8"),
    ("missing-file", lambda p: None, "does not exist"),
]


@pytest.mark.parametrize("make,problem", [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_1(cli: Callable[..., Any], tmp_path: Path, make: Callable[[Path], Any],
                                          problem: str) -> None:
    src = tmp_path / "prof.json.gz"
    make(src)
    result = cli("import-kineto", src, "-o", tmp_path / "out")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"dfcompass: error: {src}: "), lines[0]
    assert problem in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "out").exists()  # nothing written for a bad file
    if src.exists():
        with pytest.raises(KinetoImportError) as caught:
            import_kineto(src, tmp_path / "out")
        assert caught.value.path == str(src) and problem in caught.value.problem


def test_bad_input_as_a_subprocess(dfcompass_exe: list[str], tmp_path: Path) -> None:
    src = tmp_path / "prof.json.gz"
    _truncated_gzip(src)
    done = subprocess.run([*dfcompass_exe, "import-kineto", str(src), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"dfcompass: error: {src}: bad gzip data: Compressed file ended before the end-of-stream marker was reached"]


# ---------------------------------------------------------------- real Kineto traces
REAL = [
    pytest.param("hta-simple-add/benchmark_result_493459_1694039959_trace.json.gz", id="simple-add"),
    pytest.param("hta-sampled-2rank/sampled_rank-0.json.gz", id="sampled-rank0"),
    pytest.param("hta-sampled-2rank/sampled_rank-1.json.gz", id="sampled-rank1"),
    pytest.param("hta-nccl-rank0/nccl_data.json.gz", id="nccl-rank0"),
]
_IMPORTED: dict[str, tuple[dict[str, Any], ImportSummary, DfcTrace]] = {}


@pytest.fixture(scope="module")
def kineto_dir(shared_dir: Path) -> Path:
    return shared_dir / "traces" / "kineto"


@pytest.fixture
def real(kineto_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    """(source JSON, summary, trace read back) per file, imported once per test session."""

    def load(rel: str) -> tuple[dict[str, Any], ImportSummary, DfcTrace]:
        if rel not in _IMPORTED:
            src = kineto_dir / rel
            doc = json.loads(gzip.decompress(src.read_bytes()), parse_float=Decimal)  # exact ts
            summary = import_kineto(src, tmp_path_factory.mktemp("kineto") / "trace")
            _IMPORTED[rel] = (doc, summary, read_trace(summary.output))
        return _IMPORTED[rel]

    return load


def _source_count(doc: dict[str, Any], *cats: str) -> int:
    return sum(1 for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in cats)


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL)
def test_real_trace_counts(real: Callable[[str], Any], rel: str) -> None:
    doc, summary, trace = real(rel)
    expected = {"kernel_begin": ("kernel",), "memcpy_begin": ("gpu_memcpy",), "memset_begin": ("gpu_memset",),
                "api_enter": ("cuda_runtime", "cuda_driver"), "node_begin": ("cpu_op",)}
    for table, cats in expected.items():
        assert len(trace.table(table)) == _source_count(doc, *cats) > 0, table
        assert summary.events_per_class[schema.BY_SHORT[table].name] == len(trace.table(table))
    for begin in expected:
        end = begin.replace("_begin", "_end").replace("_enter", "_exit")
        assert len(trace.table(end)) == len(trace.table(begin))
    assert summary.events == sum(len(t) for t in trace.tables.values())
    assert "dfc:tensor_edge" not in trace.tables


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL)
def test_real_trace_correlation_and_streams(real: Callable[[str], Any], rel: str) -> None:
    doc, summary, trace = real(rel)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    api_ids = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
               and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    launched = sorted(e["args"]["correlation"] for e in gpu if e["args"].get("correlation") in api_ids)
    kernels_launched = sorted(e["args"]["correlation"] for e in gpu
                              if e["cat"] == "kernel" and e["args"].get("correlation") in api_ids)
    imported_api = set(trace.table("api_enter")["correlation_id"].tolist())
    imported_kernels = trace.table("kernel_begin")["correlation_id"].tolist()
    assert sorted(c for c in imported_kernels if c in imported_api) == kernels_launched
    assert summary.correlation["gpu_with_launch"] == len(launched)
    source_streams = {(f"cuda:{e['args']['device']}", e["args"]["stream"]) for e in gpu}
    names = devices(trace)
    found = set()
    for table in ("kernel_begin", "memcpy_begin", "memset_begin"):
        found |= {(names[d], q) for d, q in rows(trace.table(table), "device", "queue")}
    assert found == source_streams
    assert {(d, s) for d, streams in summary.gpu_streams.items() for s in streams} == source_streams


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL)
def test_real_trace_times_are_wall_time(real: Callable[[str], Any], rel: str) -> None:
    doc, summary, trace = real(rel)
    base = doc.get("baseTimeNanoseconds", 0)
    first_op = min((e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    expected = base + int(first_op["ts"] * 1000)
    assert min(wall(trace, "node_begin")) == expected
    assert summary.clock_origin == ("baseTimeNanoseconds" if base else "unix epoch")
    assert summary.first_ns >= 1_600_000_000 * 10**9  # 2020 or later: real dates


@pytest.mark.shared
@requires_babeltrace2
@pytest.mark.parametrize("rel", REAL)
def test_real_trace_reads_in_babeltrace2(real: Callable[[str], Any], rel: str) -> None:
    _, summary, trace = real(rel)
    done = run_babeltrace2(summary.output, "-c", "sink.utils.counter")
    assert done.returncode == 0, done.stderr
    counts = [int(line.split()[0]) for line in done.stdout.splitlines() if line.strip().endswith("Event messages")]
    assert counts and counts[-1] == sum(len(t) for t in trace.tables.values()) == summary.events
    check_packets(summary.output)
    check_string_defs(trace)


def test_input_dims_and_types_become_node_args(kineto: Callable[..., Any]) -> None:
    _, trace = kineto([
        ev("cpu_op", "aten::mm", 10, 5, **{"Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"]}),
        ev("cpu_op", "aten::add", 20, 5, **{"Input Dims": [[8], [], []], "Input type": ["c10::BFloat16", "Scalar", "long int"]}),
        ev("cpu_op", "aten::cat", 30, 5, **{"Input Dims": [[[2, 3], [2, 3]], []], "Input type": ["TensorList", "long int"]}),
        ev("cpu_op", "aten::empty", 40, 5),  # no dims: no node_args
    ])
    args = trace.table("node_args")
    assert args.text("shapes").tolist() == ["[[64, 32], [32, 16]]", "[[8], [], []]", "[[], []]"]
    assert args.text("dtypes").tolist() == ["float32,float32", "bfloat16,,", ","]
    begins = dict(zip(trace.table("node_begin")["node_id"].tolist(), trace.table("node_begin").text("op").tolist()))
    assert [begins[n] for n in args["node_id"].tolist()] == ["aten::mm", "aten::add", "aten::cat"]


def test_kernels_join_the_innermost_op_with_shapes(kineto: Callable[..., Any]) -> None:
    """aten::linear encloses aten::mm, which launches two kernels: they are mm's, summed."""
    from tc_analyses.model.activity import read_activity
    from tc_analyses.perf.kernel_check import join_kernels

    dims = {"Input Dims": [[256, 256], [256, 256]], "Input type": ["float", "float"]}
    _, trace = kineto([
        ev("cpu_op", "aten::linear", 10, 40, **{"Input Dims": [[256, 256], [256, 256], []]}),
        ev("cpu_op", "aten::mm", 12, 30, **dims),
        ev("cuda_runtime", "cudaLaunchKernel", 14, 3, correlation=7),
        ev("cuda_runtime", "cudaLaunchKernel", 20, 3, correlation=8),
        kernel(50, 6, 7),
        kernel(60, 4, 8),
    ])
    joined = join_kernels(trace, read_activity(trace))
    assert [(j.op, j.kernels, j.kernel_ns) for j in joined] == [("aten::mm", 2, 10_000)]
    assert joined[0].roofline_ns == pytest.approx(2 * 256**3 / 19.5e12 * 1e9)  # A100 fp32 peak, compute bound


@pytest.mark.parametrize("text, message", [
    # a few bytes of JSON that used to hang (a billion-digit int) or fail inside the converter
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 2, "ts": 1e999999999, "dur": 5}]}',
     "'ts' is out of range: 1E+999999999"),
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 2, "ts": 1e308, "dur": 5}]}',
     "'ts' is out of range: 1E+308"),
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 2, "ts": 10, "dur": 1e30}]}',
     "'dur' is not a duration: 1E+30"),
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 2, "ts": ' + "9" * 5000 + ', "dur": 5}]}',
     "a number the importer cannot hold"),
    ('{"traceEvents": [{"ph": "X", "cat": ["cpu_op"], "name": "mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5}]}',
     "nothing to import"),
    # a peer copy's device past the 16-bit device field (once a ValueError from the trace writer)
    ('{"traceEvents": [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, '
     '"tid": 7, "ts": 10, "dur": 5, "args": {"correlation": 1, "device": 0, "stream": 7, "fromDevice": 70000, '
     '"toDevice": 1}}]}', "copy device out of range: fromDevice 70000, toDevice 1"),
])
def test_hostile_numbers_and_types_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(text)
    with pytest.raises(KinetoImportError) as info:
        import_kineto(src, tmp_path / "out")
    assert str(src) in str(info.value) and message in str(info.value) and "\n" not in str(info.value)


def test_a_tid_of_absurd_magnitude_is_remapped_not_expanded(tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": -1e999999999, '
                   '"ts": 10, "dur": 5}]}')
    summary = import_kineto(src, tmp_path / "out")
    assert rows(read_trace(summary.output).table("node_begin"), "tid") == [(1,)]


def test_the_same_file_gives_the_same_uuid_and_an_absolute_clock(tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": [ev("cpu_op", "a", 1_694_039_968_933_321, 1)]}))
    first, second = import_kineto(src, tmp_path / "a"), import_kineto(src, tmp_path / "b")
    metadata = [(Path(s.output) / "metadata").read_text() for s in (first, second)]
    assert read_trace(first.output).metadata.uuid == read_trace(second.output).metadata.uuid != ""
    assert all("absolute = true;" in m for m in metadata)
    src.write_text(json.dumps({"traceEvents": [ev("cpu_op", "b", 1_694_039_968_933_321, 1)]}))
    assert read_trace(import_kineto(src, tmp_path / "c").output).metadata.uuid != read_trace(first.output).metadata.uuid


def test_a_file_without_a_wall_clock_is_not_absolute(kineto: Callable[..., Any]) -> None:
    summary, trace = kineto([ev("cpu_op", "a", 5, 1)])
    assert summary.clock_origin == "unknown" and "absolute = false;" in trace.metadata.text


@pytest.mark.shared
@requires_babeltrace2
def test_two_ranks_import_as_one_job(kineto_dir: Path, cli: Callable[..., Any], tmp_path: Path) -> None:
    files = sorted((kineto_dir / "hta-sampled-2rank").glob("*.json.gz"))
    result = cli("import-kineto", *files, "-o", tmp_path / "job", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [Path(t["output"]).name for t in document["traces"]] == ["sampled_rank-0", "sampled_rank-1"]
    counts = [sum(len(t) for t in read_trace(tmp_path / "job" / name).tables.values())
              for name in ("sampled_rank-0", "sampled_rank-1")]
    done = run_babeltrace2(tmp_path / "job")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == sum(counts)  # the ranks open together, merged


def test_c10d_ops_become_collectives_sized_by_record_param_comms(kineto: Callable[..., Any]) -> None:
    params = {"Collective name": "allreduce", "In msg nelems": 1000, "dtype": "Half", "Group size": 4,
              "Process Group Name": "7"}
    events = [ev("cpu_op", "c10d::allreduce_", 100, 50),
              {**ev("cpu_op", "record_param_comms", 110, 20), "args": params},
              ev("cpu_op", "c10d::_allgather_base_", 200, 10),
              ev("cpu_op", "aten::add", 300, 5)]
    _, trace = kineto(events, distributedInfo={"rank": 3, "world_size": 4})
    comms = trace.table("collective")
    assert comms.text("kind").tolist() == ["all_reduce", "all_gather"]
    assert comms["seq"].tolist() == [0, 1] and comms["rank"].tolist() == [3, 3]
    assert comms["bytes"].tolist() == [2000, 0]  # 1000 halves; the all-gather has no parameters
    assert comms.text("group").tolist() == ["7", ""] and comms["group_size"].tolist() == [4, 0]
    names = dict(zip(trace.table("node_begin")["node_id"].tolist(), trace.table("node_begin").text("op").tolist()))
    assert [names[n] for n in comms["node_id"].tolist()] == ["c10d::allreduce_", "c10d::_allgather_base_"]


@pytest.mark.shared
def test_real_collectives_one_per_c10d_op(real: Callable[[str], Any]) -> None:
    doc, _, trace = real("hta-nccl-rank0/nccl_data.json.gz")
    c10d = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and str(e.get("name")).startswith("c10d::")]
    comms = trace.table("collective")
    assert len(comms) == len(c10d) > 0
    assert set(comms.text("kind").tolist()) == {"all_reduce", "broadcast"}
    assert (comms["bytes"] > 0).all() and set(comms["rank"].tolist()) == {0}


@pytest.mark.shared
def test_two_imported_ranks_join_until_their_files_disagree(kineto_dir: Path, tmp_path: Path) -> None:
    from tc_analyses.analyses import ranks
    from tc_analyses.app.imports import import_kineto_job
    from tc_analyses.inputs import JobInputs

    files = sorted((kineto_dir / "hta-sampled-2rank").glob("*.json.gz"))
    import_kineto_job(files, tmp_path / "job", False)
    result = ranks.run(JobInputs(tmp_path / "job"), {}).data
    # what the files say, read without dfcompass: each rank's c10d ops in start order
    issued = []
    for f in files:
        events = json.loads(gzip.decompress(f.read_bytes()))["traceEvents"]
        issued.append([e["name"] for e in sorted((e for e in events if e.get("cat") == "cpu_op"
                                                  and str(e.get("name")).startswith("c10d::")), key=lambda e: e["ts"])])
    agree = next((i for i, (a, b) in enumerate(zip(*issued)) if a != b), min(map(len, issued)))
    assert len(result.collectives) == agree
    assert (f"at seq {agree} " in result.mismatch) == (agree < min(map(len, issued)))
    assert [p.rank for p in result.ranks] == [0, 1]


def _pending_from_json(doc: dict[str, Any]) -> tuple[int, int]:
    """(maximum, final) count of launches whose GPU work has not started, read from the raw file:
    a runtime call counts from its start when an activity with its correlation id exists."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    gpu = {e["args"]["correlation"]: Decimal(str(e["ts"])) for e in events
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "correlation" in e.get("args", {})}
    changes = []
    for e in events:
        corr = e.get("args", {}).get("correlation")
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and corr in gpu:
            changes += [(Decimal(str(e["ts"])), 1), (gpu[corr], -1)]
    depth = peak = 0
    for _, step in sorted(changes, key=lambda c: (c[0], -c[1])):  # a launch before a start at the same time
        depth += step
        peak = max(peak, depth)
    return peak, depth


@pytest.mark.shared
@pytest.mark.parametrize("rel", ["hta-simple-add/benchmark_result_493459_1694039959_trace.json.gz",
                                 "hta-nccl-rank0/nccl_data.json.gz"])
def test_queue_depth_returns_to_zero_and_peaks_as_the_file_says(real: Callable[[str], Any], rel: str,
                                                                  tmp_path: Path) -> None:
    from tc_analyses.engine import build, layout
    from tc_analyses.export.tracecompass import write_output
    from tc_analyses.inputs import TraceInputs

    doc, summary, _ = real(rel)
    write_output(tmp_path / "out", TraceInputs(summary.output).facts)
    system = build(summary.output, [tmp_path / "out" / "xml" / "gpu.xml"]).systems[layout.GPU_ID]
    values = [i.value.value for i in dict(system.items())[(layout.LAUNCHES, layout.LAUNCHES_PENDING)]
              if i.value is not None]
    assert (max(values), values[-1]) == _pending_from_json(doc)


@pytest.mark.shared
def test_cuda_syncs_are_kept_with_their_kind_and_waited_queue(real: Callable[[str], Any]) -> None:
    doc, _, trace = real("hta-simple-add/benchmark_result_493459_1694039959_trace.json.gz")
    source = sorted((Decimal(str(e["ts"])), e["args"]["cuda_sync_kind"], e["args"].get("wait_on_stream", 0xFFFFFFFF))
                    for e in doc["traceEvents"] if e.get("cat") == "cuda_sync")
    syncs = trace.table("sync_begin")
    offset = trace.metadata.clock_offset_ns
    ours = sorted(zip([Decimal(t + offset) / 1000 for t in syncs["timestamp"].tolist()], syncs.text("kind").tolist(),
                      syncs["wait_queue"].tolist()))
    assert len(ours) == len(source) == 41
    assert [(k, w) for _, k, w in ours] == [(k, w) for _, k, w in source]
    assert [t for t, _, _ in ours] == [t for t, _, _ in source]  # the file's wall-clock microseconds, exactly
    assert len(trace.table("sync_end")) == 41


@pytest.mark.shared
def test_kernel_launch_configuration_is_kept(real: Callable[[str], Any]) -> None:
    doc, _, trace = real("hta-nccl-rank0/nccl_data.json.gz")
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    info = trace.table("kernel_info")
    assert len(info) == len(kernels)
    by_corr = {e["args"]["correlation"]: e["args"] for e in kernels}
    for corr, regs, smem, blocks, occupancy in zip(info["correlation_id"].tolist(), info["registers"].tolist(),
                                                   info["shared_memory"].tolist(),
                                                   info["blocks_per_sm_milli"].tolist(), info["occupancy_pct"].tolist()):
        args = by_corr[corr]
        assert (regs, smem, occupancy) == (args["registers per thread"], args["shared memory"],
                                           args["est. achieved occupancy %"])
        assert blocks == round(float(args["blocks per SM"]) * 1000)


@pytest.mark.shared
def test_fwdbwd_flows_link_each_forward_op_to_its_backward_op(real: Callable[[str], Any]) -> None:
    doc, _, trace = real("hta-nccl-rank0/nccl_data.json.gz")
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "fwdbwd"]
    links = trace.table("node_link")
    assert len(links) == len(flows) // 2 > 0 and set(links.text("kind").tolist()) == {"fwdbwd"}
    begins = trace.table("node_begin")
    op = dict(zip(begins["node_id"].tolist(), begins.text("op").tolist()))
    start = dict(zip(begins["node_id"].tolist(), begins["timestamp"].tolist()))
    for source, target in zip(links["source"].tolist(), links["target"].tolist()):
        assert start[source] < start[target]
        assert "Backward" in op[target] and "Backward" not in op[source]
