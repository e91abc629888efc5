"""Our traces through babeltrace2 (CLI and bt2) agree with the fast reader, event for event.

One module-scoped trace covers: 8 threads recording at once, dozens of packets per stream
(packet_size=1024), every event class of the catalogue, and hostile strings in names.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracer
from tc_analyses.errors import TraceError
from tc_analyses.reader.fast import read_trace
from tests.helpers import (
    HOSTILE,
    CountingClock,
    canonical_bt2,
    canonical_fast,
    check_packets,
    check_string_defs,
    requires_babeltrace2,
    requires_bt2,
    run_babeltrace2,
    run_in_threads,
    subprocess_env,
)
from tracer import schema
from tracer.session import Session

THREADS = 8
NODES_PER_THREAD = 700
PACKET = 1024


def _record_everything(session: Session) -> None:
    s = session
    # the classes the dataflow API does not produce, through Session.emit
    gpu = s.device("cuda:0", model=HOSTILE[0])
    for i in range(3):
        kname = s.intern(HOSTILE[i % len(HOSTILE)] + " kernel")
        s.emit("api_enter", 1, s.intern("cudaLaunchKernel"), i)
        s.emit("launch", 1, i)
        s.emit("node_link", i, i + 1, s.intern("fwdbwd"))
        s.emit("kernel_info", gpu, 7, i, 96, 41744, 148, 2963, 0xFFFFFFFF)
        s.emit("sync_begin", gpu, 7, i, s.intern("Stream Wait Event"), 9, 2**63 + i)
        s.emit("sync_end", gpu, 7, i)
        s.emit("annotation_begin", gpu, 7, i, s.intern(HOSTILE[i % len(HOSTILE)]))
        s.emit("annotation_end", gpu, 7, i)
        s.emit("api_exit", 1, s.intern("cudaLaunchKernel"), i)
        s.emit("kernel_begin", gpu, 7, i, kname, 1, 2, 3, 4, 5, 6)
        s.emit("kernel_end", gpu, 7, i)
        s.emit("memcpy_begin", gpu, 7, 100 + i, 4096, s.intern("HtoD"), 0, gpu)
        s.emit("memcpy_end", gpu, 7, 100 + i)
        s.emit("memset_begin", gpu, 7, 200 + i, 2**63)
        s.emit("memset_end", gpu, 7, 200 + i)
        s.emit("mem_alloc", gpu, 2**64 - 1, 512, 1024)
        s.emit("mem_free", gpu, 2**64 - 1, 512, 512)
        s.emit("node_args", i, s.intern(HOSTILE[i % len(HOSTILE)]), s.intern("float32,int64"))
        s.emit("collective", i, 0, s.intern("all_reduce"), s.intern(HOSTILE[i % len(HOSTILE)]), 2, i, 2**40)
    s.emit("process_rank", 0, 0, 2, s.intern("gloo"))

    def work(k: int) -> None:
        previous = None
        for i in range(NODES_PER_THREAD):
            name = HOSTILE[(i + k) % len(HOSTILE)]
            with tracer.step(i) if k == 0 and i % 100 == 0 else _nullcontext():
                with tracer.node(name, op=HOSTILE[i % 3], device="cuda:0" if i % 2 else "cpu",
                                 inputs=[previous] if previous is not None else []) as n:
                    previous = np.zeros(4, dtype=np.int32)
                    n.output(previous)

    names = [f"{HOSTILE[k % len(HOSTILE)][:40]} #{k}" for k in range(THREADS)]
    run_in_threads(THREADS, work, names=names)


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bt2") / "trace"
    # max_pending: 8 threads filling 1 KiB packets outrun one flusher; this trace must lose nothing
    session = Session(path, clock=CountingClock(), packet_size=PACKET, flush_interval=3600, max_pending=1_000_000,
                      handle_signals=False)
    session.start()
    try:
        _record_everything(session)
    finally:
        session.stop()
    return path


@pytest.fixture(scope="module")
def fast_trace(big_trace: Path) -> Any:
    return read_trace(big_trace)


def test_trace_shape(big_trace: Path, fast_trace: Any) -> None:
    assert set(fast_trace.tables) == {c.name for c in schema.CATALOGUE}
    assert len(fast_trace.table("node_begin")) == THREADS * NODES_PER_THREAD
    assert len(set(fast_trace.table("node_begin")["tid"].tolist())) == THREADS
    assert len(fast_trace.table("thread_info")) == THREADS + 1
    assert fast_trace.discarded == 0
    per_file = check_packets(big_trace)
    node_files = {name: n for name, n in per_file.items() if name.startswith(("node_begin-", "node_end-"))}
    assert len(node_files) == 2 * THREADS
    assert min(packets for packets, _ in node_files.values()) >= 12
    assert max(packets for packets, _ in node_files.values()) >= 24
    check_string_defs(fast_trace)
    # every hostile string made it into the string table and back, exactly
    assert set(HOSTILE) <= set(fast_trace.strings.tolist())
    assert len(fast_trace.table("tensor_edge")) == THREADS * (NODES_PER_THREAD - 1)


@requires_babeltrace2
def test_babeltrace2_text_prints_one_line_per_event(big_trace: Path, fast_trace: Any) -> None:
    done = run_babeltrace2(big_trace)
    assert done.returncode == 0, done.stderr[-2000:]
    total = sum(len(t) for t in fast_trace.tables.values())
    assert len(done.stdout.splitlines()) == total
    per_class: dict[str, int] = {}
    for line in done.stdout.splitlines():
        name = line.split(" dfc:", 1)[1].split(":", 1)[0]
        per_class["dfc:" + name] = per_class.get("dfc:" + name, 0) + 1
    assert per_class == {name: len(t) for name, t in fast_trace.tables.items()}


@requires_babeltrace2
def test_babeltrace2_dummy_output_accepts_the_trace(big_trace: Path) -> None:
    done = run_babeltrace2("--output-format=dummy", big_trace)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""


@pytest.mark.slow
@requires_bt2
def test_bt2_yields_the_same_events_as_the_fast_reader(big_trace: Path, fast_trace: Any) -> None:
    fast_events = canonical_fast(fast_trace)
    bt2_events, lost = canonical_bt2(big_trace)
    assert lost == []
    assert len(bt2_events) == len(fast_events)
    # babeltrace2 2.0.4 may show the previous event's value for an empty string field: compare
    # every field of every event strictly, except the value of string_defs whose value is empty.
    empty = {(ts, dict(f)["sid"]) for ts, name, f in fast_events if name == "dfc:string_def" and dict(f)["value"] == ""}
    assert len(empty) == 1  # "" is interned once

    def without_empty_values(events: list[Any]) -> list[Any]:
        out = []
        for ts, name, fields in events:
            if name == "dfc:string_def" and (ts, dict(fields)["sid"]) in empty:
                fields = tuple(item for item in fields if item[0] != "value")
            out.append((ts, name, fields))
        return out

    assert without_empty_values(bt2_events) == without_empty_values(fast_events)
    nonempty_values = sum(1 for _, name, f in bt2_events if name == "dfc:string_def" and dict(f)["value"])
    assert nonempty_values == len(fast_trace.table("string_def")) - 1


@requires_bt2
def test_bt2_timestamps_include_the_clock_offset(big_trace: Path, fast_trace: Any) -> None:
    from tc_analyses.reader import bt2_source

    offset = fast_trace.metadata.clock_offset_ns
    first = next(e for e in bt2_source.iter_trace(big_trace, with_fields=False) if isinstance(e, bt2_source.Event))
    assert first.ns_from_origin == first.timestamp + offset
    assert first.fields == {} and first.context == {}
    assert first.timestamp == min(int(t["timestamp"].min()) for t in fast_trace.tables.values())
    assert Path(first.stream).parent == big_trace


@requires_bt2
def test_bt2_refuses_a_non_directory(tmp_path: Path) -> None:
    from tc_analyses.reader import bt2_source

    (tmp_path / "file").write_text("x")
    with pytest.raises(TraceError, match="not a directory"):
        list(bt2_source.iter_trace(tmp_path / "file"))


BAD_TSDL = "/* CTF 1.8 */\ntrace { this is not TSDL\n"


@requires_bt2
def test_bt2_errors_on_bad_tsdl_are_trace_errors(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(BAD_TSDL)
    code = (
        "import sys\n"
        "from tc_analyses.errors import TraceError\n"
        "from tc_analyses.reader import bt2_source\n"
        "try:\n"
        "    list(bt2_source.iter_trace(sys.argv[1]))\n"
        "except TraceError as exc:\n"
        "    print('TraceError:', exc)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          env=subprocess_env(), timeout=60)
    assert done.returncode == 3, f"exit {done.returncode}: {done.stderr[-500:]}"
    assert str(tmp_path) in done.stdout
