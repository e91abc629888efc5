"""import-kineto reads the file as a stream and builds the trace with bounded memory: chunk
boundaries, members after traceEvents, spilled records and failed conversions change nothing."""

from __future__ import annotations

import dataclasses
import gzip
import json
import resource
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.reader.fast import read_trace
from tests.helpers import check_packets, check_string_defs
from tracer import builder as builder_module
from tracer import schema
from tracer.builder import TraceBuilder
from tracer.importers import KinetoImportError, import_kineto, kineto_source

PID, TID = 31, 5


def _document() -> str:
    """Pretty-printed, as Kineto writes it: multi-line events, unicode names, long decimal times,
    top-level members before and after traceEvents, and a correlation only a flow gives."""
    base = 1_700_000_000_000_000_000
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "main ünï©ødé 日本"}},
        {"ph": "X", "cat": "kernel", "name": "gemm<float, 128>", "pid": 0, "tid": 7, "ts": 1234567.891, "dur": 3.5,
         "args": {"correlation": 12, "device": 0, "stream": 7, "grid": [1, 2, 3], "block": [32, 1, 1]}},
    ]
    for i in range(40):
        ts = 1234000 + i * 7.001
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op_{i % 3} \"q\" <&>", "pid": PID, "tid": TID,
                       "ts": ts, "dur": 5.125 if i % 4 else 0,
                       "args": {"Input Dims": [[i, 2], []], "Input type": ["float", "Scalar"], "External id": i}})
        events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": PID, "tid": TID, "ts": ts,
                       "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512 * (1 - 2 * (i % 2)),
                                          "Total Allocated": 4096, "Addr": 140000000000 + i}})
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                   "ts": 1234560.5, "dur": 1.25, "args": {}})
    events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 12, "pid": PID, "tid": TID, "ts": 1234560.5})
    # numbers standing alone at the top level: a read can end right after "1712345678." or "1e"
    head = json.dumps({"schemaVersion": 1, "traceStart": 1712345678.125, "scale": 1e-3,
                       "deviceProperties": [{"id": 0, "name": "NVIDIA H100 ✓"}]}, indent=2)
    body = json.dumps(events, indent=2, ensure_ascii=False)
    return head[:-2] + ',\n  "traceEvents": ' + body + f',\n  "baseTimeNanoseconds": {base}\n}}\n'


def _tables(path: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every class's events with strings resolved (string ids may be numbered differently)."""
    trace, out = read_trace(path), {}
    for cls in schema.CATALOGUE:
        table = trace.table(cls.short)
        if cls.short == "string_def" or not len(table):
            continue
        columns = [table["timestamp"].tolist()] + [
            table.text(f.name).tolist() if f.type == "sid" else table[f.name].tolist() for f in cls.fields]
        out[cls.short] = list(zip(*columns))
    return out


def _import(src: Path, out: Path) -> tuple[dict[str, Any], dict[str, list[tuple[Any, ...]]]]:
    summary = import_kineto(src, out)
    check_packets(out)
    check_string_defs(read_trace(out))
    return {k: v for k, v in dataclasses.asdict(summary).items() if k != "output"}, _tables(str(out))


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_chunk_boundaries_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    text = _document().encode()
    src = tmp_path / "t.json"
    src.write_bytes(gzip.compress(text) if gz else text)
    reference = _import(src, tmp_path / "whole")
    summary = reference[0]
    assert summary["clock_origin"] == "baseTimeNanoseconds"  # read after the events
    assert summary["devices"] == {"cpu": "", "cuda:0": "NVIDIA H100 ✓"}
    assert summary["correlation"]["api_joined_by_flow"] == 1 and summary["correlation"]["gpu_with_launch"] == 1
    assert len(reference[1]["node_begin"]) == 40 and len(reference[1]["mem_free"]) == 20
    # every byte boundary falls inside a number, a string or a multi-byte character for some chunk size
    for chunk in (1, 2, 3, 5, 64, 1000):
        monkeypatch.setattr(kineto_source, "_CHUNK", chunk)
        assert _import(src, tmp_path / f"chunk{chunk}") == reference, chunk


@pytest.mark.parametrize("text, problem", [
    ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "not JSON: Expecting ',' delimiter at character 29"),
    ('{"traceEvents": [{"ph": "X"},]}', "not JSON: Expecting value at character 29"),
    ('{"traceEvents": []} []', "not JSON: Extra data at character 20"),
    ('{"traceEvents": [], "traceEvents": []}', "two 'traceEvents' members"),
    ('{"traceEvents": [{"ph": "X", "ts": 12', "not JSON"),
    ('{"traceEvents": [], 5: 1}', "not JSON: Expecting property name enclosed in double quotes"),
    ("", "not JSON: Expecting value at character 0"),
])
def test_syntax_errors_name_the_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, problem: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(text)
    for chunk in (3, 1 << 20):
        monkeypatch.setattr(kineto_source, "_CHUNK", chunk)
        with pytest.raises(KinetoImportError) as caught:
            import_kineto(src, tmp_path / "out")
        assert problem in caught.value.problem and caught.value.path == str(src)
    assert not (tmp_path / "out").exists()


def test_a_conversion_error_leaves_no_trace_and_no_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder_module, "SPILL_BYTES", 1)  # every record goes to a scratch file at once
    events = [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 2, "ts": 10 + i, "dur": 1} for i in range(50)]
    events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 90, "args": {"Bytes": "many"}})
    src = tmp_path / "late-error.json"
    src.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(KinetoImportError, match=r"traceEvents\[50\].*without an integer 'args.Bytes'"):
        import_kineto(src, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late-error.json"]  # no output, no dfc-build-* folder


def _builder(path: Path, scratch: Path) -> TraceBuilder:
    return TraceBuilder(path, clock_offset_ns=5, trace_uuid=uuid.UUID(int=7), scratch_dir=scratch,
                        device_order=lambda name: (name != "cpu", name))


def _fill(b: TraceBuilder) -> None:
    gpu = b.device("cuda:1", ts=3)  # provisional index 0; "cpu" comes first in the trace
    cpu = b.device("cpu", ts=20)
    for i in range(300):
        ts = (i * 7919) % 1000 + 10  # out of order
        b.add("node_begin", f"t{i % 3}", ts, i, f"op{i % 5}", "n", cpu, i % 3, 0, order=-i)
        b.add("kernel_begin", "q", ts, gpu, 7, i, "k", 1, 1, 1, 1, 1, 1)


def _build(path: Path, scratch: Path) -> None:
    with _builder(path, scratch) as b:
        _fill(b)


def test_spilled_records_give_the_same_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _build(tmp_path / "memory", tmp_path)
    monkeypatch.setattr(builder_module, "SPILL_BYTES", 100)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _build(tmp_path / "spilled", scratch)
    assert list(scratch.iterdir()) == []  # the scratch folder is gone after close
    files = sorted(p.name for p in (tmp_path / "memory").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "spilled").iterdir())
    for name in files:
        assert (tmp_path / "memory" / name).read_bytes() == (tmp_path / "spilled" / name).read_bytes(), name
    trace = read_trace(tmp_path / "spilled")
    check_packets(tmp_path / "spilled")
    devices = trace.table("device_info")
    assert dict(zip(devices.text("name").tolist(), devices["device"].tolist())) == {"cpu": 0, "cuda:1": 1}
    assert set(trace.table("kernel_begin")["device"].tolist()) == {1}  # remapped from provisional 0
    assert set(trace.table("node_begin")["device"].tolist()) == {0}


def test_equal_times_keep_order_then_adding(tmp_path: Path) -> None:
    with TraceBuilder(tmp_path / "t", clock_offset_ns=0) as b:
        cpu = b.device("cpu", ts=1)
        for node_id, order in ((0, 2), (1, 1), (2, 1), (3, 0)):
            b.add("node_begin", "main", 100, node_id, "op", "n", cpu, 1, 0, order=order)
        b.add("node_begin", "main", 50, 4, "op", "n", cpu, 1, 0, order=9)
    assert read_trace(tmp_path / "t").table("node_begin")["node_id"].tolist() == [4, 3, 1, 2, 0]


def test_a_value_that_does_not_fit_is_a_clear_error(tmp_path: Path) -> None:
    b = TraceBuilder(tmp_path / "t", clock_offset_ns=0)
    with pytest.raises(ValueError, match="dfc:node_end at 5: a value does not fit"):
        b.add("node_end", "main", 5, 1, 70000, 1)  # device is 16 bits
    b.discard()
    assert not (tmp_path / "t").exists()


def test_no_room_for_scratch_files_keeps_the_records_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder_module, "SPILL_BYTES", 100)
    _build(tmp_path / "memory", tmp_path)
    _build(tmp_path / "nowhere", tmp_path / "missing-folder")  # mkdtemp fails: nothing is spilled
    for name in sorted(p.name for p in (tmp_path / "memory").iterdir()):
        assert (tmp_path / "memory" / name).read_bytes() == (tmp_path / "nowhere" / name).read_bytes(), name


def _same_files(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_disk_that_fills_during_a_spill_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _build(tmp_path / "memory", tmp_path)
    monkeypatch.setattr(builder_module, "SPILL_BYTES", 100)
    b = _builder(tmp_path / "full", tmp_path)
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, a write fails with EFBIG
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4001, hard))  # a scratch file fills in mid-record
        _fill(b)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, ignored)
    b.close()
    _same_files(tmp_path / "memory", tmp_path / "full")


def test_a_scratch_file_that_cannot_be_opened_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _build(tmp_path / "memory", tmp_path)
    monkeypatch.setattr(builder_module, "SPILL_BYTES", 100)
    blocked = tmp_path / "blocked"
    for index in range(5):
        (blocked / f"{index}.rec").mkdir(parents=True)  # a folder where each scratch file would go
    monkeypatch.setattr(builder_module.tempfile, "mkdtemp", lambda **_: str(blocked))
    _build(tmp_path / "unopened", tmp_path)
    _same_files(tmp_path / "memory", tmp_path / "unopened")
    assert not blocked.exists()  # removed at close


def test_processes_first_seen_at_one_time_are_described_by_pid(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": pid, "tid": 9, "ts": 10, "dur": 1} for pid in (7, 3)]
    events += [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"p{pid}"}} for pid in (7, 3)]
    src = tmp_path / "two.json"
    src.write_text(json.dumps({"traceEvents": events}))
    trace = read_trace(import_kineto(src, tmp_path / "out").output)
    assert trace.table("process_info")["pid"].tolist() == [3, 7]
    assert trace.table("process_info").text("name").tolist() == ["p3", "p7"]
    assert trace.table("thread_info")["pid"].tolist() == [3, 7]  # one tid in two processes: one stream


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_progress_counts_the_file_once_per_read(tmp_path: Path, gz: bool) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 2, "ts": 10 + i, "dur": 1} for i in range(50)]
    text = json.dumps({"traceEvents": events}).encode()
    src = tmp_path / "t.json"
    src.write_bytes(gzip.compress(text) if gz else text)
    counted: list[int] = []
    import_kineto(src, tmp_path / "two", advance=counted.append)
    assert sum(counted) == 2 * src.stat().st_size and all(n >= 0 for n in counted)
    # a call without args.correlation: a third read, for the ac2g flows
    src.write_text(json.dumps({"traceEvents": _document_events_needing_a_flow()}))
    counted.clear()
    import_kineto(src, tmp_path / "three", advance=counted.append)
    assert sum(counted) == 3 * src.stat().st_size


def _document_events_needing_a_flow() -> list[dict[str, Any]]:
    return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 5, "dur": 1,
             "args": {}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 4, "pid": 1, "tid": 2, "ts": 5}]
