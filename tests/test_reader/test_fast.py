"""The fast numpy reader: tables, strings, streams and its refusals."""

from __future__ import annotations

import uuid
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracer
from tc_analyses import read_trace as exported_read_trace
from tc_analyses.errors import TraceError
from tc_analyses.reader.fast import read_trace, stream_files
from tests.helpers import record_nodes
from tracer import schema
from tracer.ctf import TraceDirectory
from tracer.session import Session


@pytest.fixture
def small(make_trace: Any) -> Path:
    def body(s: Session) -> None:
        with tracer.step(0):
            with tracer.node("load", op="read") as n:
                x = np.arange(10)
                n.output(x)
            with tracer.node("sum", op="reduce", inputs=[x]):
                pass

    return make_trace(body)


def test_tables_and_columns(small: Path) -> None:
    trace = read_trace(small)
    assert exported_read_trace is read_trace
    begins = trace.table("dfc:node_begin")
    assert trace.table("node_begin") is begins
    assert begins.columns == ("timestamp",) + schema.BY_SHORT["node_begin"].field_names
    assert len(begins) == 2
    assert begins.text("name").tolist() == ["load", "sum"]
    assert begins.text("op").tolist() == ["read", "reduce"]
    assert begins["step"].tolist() == [0, 0]
    assert begins["timestamp"].dtype == np.dtype("<u8")
    assert trace.strings.dtype == object
    assert trace.metadata.clock_offset_ns == 1_700_000_000_000_000_000


def test_absent_class_gives_an_empty_table(small: Path) -> None:
    trace = read_trace(small)
    kernels = trace.table("kernel_begin")
    assert len(kernels) == 0
    assert kernels.columns[0] == "timestamp"
    assert kernels["grid_x"].tolist() == []
    assert kernels.text("name").tolist() == []
    with pytest.raises(KeyError):
        trace.table("no_such_class")


def test_text_of_an_undefined_sid_is_none(tmp_path: Path) -> None:
    out = TraceDirectory(tmp_path / "t", clock_offset_ns=0, trace_uuid=uuid.UUID(int=5))
    out.write_events(schema.STRING_DEF, "s", [(1, 0, "zero")])
    out.write_events(schema.BY_SHORT["api_enter"], "1", [(2, 1, 0, 9), (3, 1, 7, 9)])
    out.close()
    trace = read_trace(tmp_path / "t")
    assert trace.table("api_enter").text("name").tolist() == ["zero", None]


def test_events_are_in_time_order_with_raw_fields(small: Path) -> None:
    trace = read_trace(small)
    events = list(trace.events())
    assert len(events) == sum(len(t) for t in trace.tables.values())
    stamps = [ts for ts, _, _ in events]
    assert stamps == sorted(stamps)
    edge = [e for e in events if e[1] == "dfc:tensor_edge"]
    assert len(edge) == 1
    assert edge[0][2] == {"producer": 0, "consumer": 1, "tensor_id": 0, "bytes": 80, "src_device": 0, "dst_device": 0}
    strings = [f["value"] for _, name, f in events if name == "dfc:string_def"]
    assert "load" in strings and "reduce" in strings


def test_stream_infos(small: Path) -> None:
    trace = read_trace(small)
    files = stream_files(small)
    assert sorted(s.path for s in trace.streams) == files
    assert all(s.packets == 1 and s.discarded == 0 for s in trace.streams)
    by_class = {s.event_class: s for s in trace.streams}
    begin = by_class["dfc:node_begin"]
    assert begin.events == 2
    assert (begin.first_ts, begin.last_ts) == tuple(trace.table("node_begin")["timestamp"].tolist())
    assert sum(s.events for s in trace.streams) == sum(len(t) for t in trace.tables.values())


def test_progress_reports_bytes(small: Path) -> None:
    seen: list[int] = []
    read_trace(small, progress=seen.append)
    assert sum(seen) == sum(p.stat().st_size for p in stream_files(small))


def test_stream_files_skip_metadata_and_hidden_files(small: Path) -> None:
    (small / ".metadata.tmp").write_text("x")
    names = [p.name for p in stream_files(small)]
    assert "metadata" not in names and ".metadata.tmp" not in names
    read_trace(small)


def test_empty_stream_files_are_ignored(small: Path) -> None:
    (small / "node_end-999").write_bytes(b"")
    trace = read_trace(small)
    assert len(trace.table("node_end")) == 2


def test_tables_merge_streams_in_time_order(make_trace: Any) -> None:
    import threading

    def body(s: Session) -> None:
        def work() -> None:
            for _ in range(50):
                with tracer.node("t"):
                    pass

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    trace = read_trace(make_trace(body, packet_size=256))
    stamps = trace.table("node_begin")["timestamp"].tolist()
    assert len(stamps) == 150 and stamps == sorted(stamps)
    assert sorted(trace.table("node_begin")["node_id"].tolist()) == list(range(150))


def test_refuses_a_non_dfcompass_ctf_trace(small: Path) -> None:
    meta = small / "metadata"
    meta.write_text(meta.read_text().replace('tracer_name = "dfcompass";', 'tracer_name = "lttng-ust";'))
    with pytest.raises(TraceError, match="not a dfcompass trace"):
        read_trace(small)


def test_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not a directory") as caught:
        read_trace(tmp_path / "nope")
    assert caught.value.path == str(tmp_path / "nope")


@pytest.mark.parametrize("name, content", [("prof.json", b'{"traceEvents": []}'), ("prof.pt.trace.json.gz", b"\x1f\x8b"),
                                           ("trace", b'[{"ph": "X"}]')])
def test_a_json_file_is_told_how_to_become_a_trace(tmp_path: Path, name: str, content: bytes) -> None:
    """A Kineto file given where a trace directory belongs: the error names import-kineto."""
    src = tmp_path / name
    src.write_bytes(content)
    with pytest.raises(TraceError, match=f"import-kineto {re.escape(str(src))} -o DIR") as caught:
        read_trace(src)
    assert caught.value.path == str(src) and "\n" not in str(caught.value)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(TraceError, match="not a directory"):
        read_trace(other)


def test_empty_trace_reads_empty(tmp_path: Path) -> None:
    TraceDirectory(tmp_path / "t", clock_offset_ns=0).close()
    trace = read_trace(tmp_path / "t")
    assert trace.tables == {} and trace.streams == [] and trace.discarded == 0
    assert list(trace.events()) == []


def test_nodes_of_a_session(make_trace: Any) -> None:
    trace = read_trace(make_trace(record_nodes(100), packet_size=512))
    assert trace.table("node_begin")["node_id"].tolist() == list(range(100))
    assert {s.event_class: s.packets for s in trace.streams}["dfc:node_begin"] == -(-100 // ((512 - 64) // 32))
