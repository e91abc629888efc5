"""Live recording sessions: lifecycle, metadata, packet and string-table invariants."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import tracer
from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.metadata import read_metadata
from tests.helpers import (
    HOSTILE,
    WALL_OFFSET,
    CountingClock,
    check_packets,
    check_string_defs,
    record_nodes,
    requires_babeltrace2,
    rows,
    run_babeltrace2,
    run_in_threads,
    subprocess_env,
)
from tracer import schema
from tracer.ctf import TraceExistsError
from tracer.session import Session, active_session


def _session(path: Path, **options: Any) -> Session:
    options.setdefault("clock", CountingClock())
    options.setdefault("flush_interval", 3600.0)
    options.setdefault("handle_signals", False)
    return Session(path, **options)


# ---------------------------------------------------------------- metadata
def test_metadata_is_complete_before_any_stream_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    session = _session(path).start()
    try:
        assert sorted(os.listdir(path)) == ["metadata"]
        meta = read_metadata(path)
        assert meta.is_dfcompass and len(meta.events) == len(schema.CATALOGUE)
        with tracer.node("buffered"):
            pass
        assert sorted(os.listdir(path)) == ["metadata"]  # events wait in buffers
    finally:
        session.stop()
    assert len(os.listdir(path)) > 1


def test_metadata_follows_trace_compass_rules(make_trace: Any) -> None:
    path = make_trace(record_nodes(3), env={"note": "x"})
    text = (path / "metadata").read_bytes().decode("ascii")  # ASCII only
    assert text.splitlines()[0] == "/* CTF 1.8 */"
    assert len(re.findall(r"\bclock\s*\{", text)) == 1
    clock = re.search(r"\bclock\s*\{(.*?)\};", text, re.S).group(1)  # type: ignore[union-attr]
    assert 0 <= clock.index("freq") < clock.index("offset_s")
    items = dict(re.findall(r"(\w+)\s*=\s*([^;]*);", clock))
    for key in ("freq", "precision", "offset_s", "offset"):
        assert re.fullmatch(r"\d+", items[key].strip()), f"clock {key} = {items[key]!r} is not a decimal literal"
    assert int(items["freq"]) == 1_000_000_000
    assert int(items["offset_s"]) * 1_000_000_000 + int(items["offset"]) == WALL_OFFSET
    assert int(items["offset"]) < 1_000_000_000
    # decimal literals everywhere, no floating point types
    for value in re.findall(r"=\s*(-?\w+)\s*;", text):
        if value[0].isdigit() or value[0] == "-":
            assert re.fullmatch(r"\d+", value), f"{value!r} is not a non-negative decimal literal"
    assert "float" not in text and "floating_point" not in text
    env = re.search(r"\benv\s*\{(.*?)\};", text, re.S).group(1)  # type: ignore[union-attr]
    env_keys = re.findall(r"^\s*(\w+)\s*=", env, re.M)
    assert "domain" not in env_keys and "note" in env_keys and "tracer_name" in env_keys
    # every event header carries a 64-bit timestamp mapped to the one clock
    assert re.search(r"typealias integer \{ size = 64; align = 8; signed = false; map = clock\.monotonic\.value; \} "
                     r":= uint64_clock_t;", text)
    headers = re.findall(r"event\.header := struct \{(.*?)\};", text, re.S)
    assert headers and all(re.search(r"\buint64_clock_t timestamp;", h) for h in headers)
    assert len(re.findall(r"\bstream\s*\{", text)) == 1  # so every event class shares that header


def test_real_clock_offset_is_not_negative(tmp_path: Path) -> None:
    session = Session(tmp_path / "t", handle_signals=False).start()
    session.stop()
    meta = read_metadata(tmp_path / "t")
    assert meta.clock_offset_ns > 0
    assert meta.env["pid"] == os.getpid() and meta.env["hostname"] == socket.gethostname()


# ---------------------------------------------------------------- packets and strings
@requires_babeltrace2
def test_threads_with_real_clock_and_periodic_flushes_keep_packet_rules(tmp_path: Path) -> None:
    """Real CLOCK_MONOTONIC, full and partial (periodic) packets mixed, 6 threads."""
    path = tmp_path / "t"
    # max_pending: 6 GIL-bound threads outrun the flusher with 512-byte packets; this test is about
    # packet rules, not losses (see test_losses_under_pressure_are_all_accounted_for)
    session = Session(path, packet_size=512, flush_interval=0.005, max_pending=1_000_000, handle_signals=False).start()
    try:
        def work(i: int) -> None:
            for j in range(400):
                with tracer.node(f"w{i}.{j % 7}", op=HOSTILE[j % len(HOSTILE)][:50], device=f"cuda:{i % 2}"):
                    pass

        run_in_threads(6, work)
    finally:
        session.stop()
    per_file = check_packets(path)
    trace = read_trace(path)
    check_string_defs(trace)
    assert len(trace.table("node_begin")) == len(trace.table("node_end")) == 2400
    assert sum(packets for packets, _ in per_file.values()) > 6 * 2 * 10
    assert trace.discarded == 0
    assert run_babeltrace2("--output-format=dummy", path).returncode == 0


def test_losses_under_pressure_are_all_accounted_for(tmp_path: Path) -> None:
    """Default max_pending, 8 threads, tiny packets: whatever is lost is counted, per stream."""
    path = tmp_path / "t"
    per_thread = 600
    session = Session(path, packet_size=256, flush_interval=0.01, handle_signals=False).start()
    try:
        def work(i: int) -> None:
            for _ in range(per_thread):
                with tracer.node("pressure"):
                    pass

        run_in_threads(8, work)
    finally:
        session.stop()
    trace = read_trace(path)
    node_streams = [s for s in trace.streams if s.event_class in ("dfc:node_begin", "dfc:node_end")]
    assert len(node_streams) == 16
    for stream in node_streams:
        assert stream.events + stream.discarded == per_thread, stream
    assert trace.discarded == 2 * 8 * per_thread - len(trace.table("node_begin")) - len(trace.table("node_end"))
    check_packets(path)


def test_every_sid_is_defined_before_first_use_across_threads(make_trace: Any) -> None:
    def body(session: Session) -> None:
        def work(i: int) -> None:
            # every thread races to intern the same new strings
            for j in range(200):
                with tracer.node(f"shared-{j % 50}", op=f"op-{j % 13}", device=f"cuda:{j % 3}"):
                    pass

        run_in_threads(8, work)

    path = make_trace(body, packet_size=1024)
    trace = read_trace(path)
    check_string_defs(trace)
    check_packets(path)
    names = set(trace.table("node_begin").text("name").tolist())
    assert names == {f"shared-{k}" for k in range(50)}
    assert len(trace.table("string_def")) == len(set(trace.strings.tolist()))  # each text interned once


def test_thread_and_process_descriptions(make_trace: Any) -> None:
    names = ["MainThread-ish <&>", "\U0001F600 thread", ".*+?"]

    def body(session: Session) -> None:
        run_in_threads(3, lambda i: tracer.node("n").__enter__().__exit__(None, None, None), names=names)

    trace = read_trace(make_trace(body))
    threads = trace.table("thread_info")
    assert set(threads.text("name").tolist()) == set(names) | {threading.current_thread().name}
    assert set(threads["pid"].tolist()) == {os.getpid()}
    assert len(set(threads["tid"].tolist())) == 4
    begins = trace.table("node_begin")
    assert set(begins["tid"].tolist()) <= set(threads["tid"].tolist())
    process = trace.table("process_info")
    assert len(process) == 1
    assert process["pid"].tolist() == [os.getpid()]
    assert process.text("hostname").tolist() == [socket.gethostname()]
    assert process.text("name").tolist() == [sys.argv[0]]


def test_emit_records_every_class_with_its_values(make_trace: Any) -> None:
    def body(s: Session) -> None:
        gpu = s.device("cuda:1", model="H100 <&>")
        s.emit("api_enter", 11, s.intern("cudaLaunchKernel"), 2**64 - 1)
        s.emit("launch", 11, 2**64 - 1)
        s.emit("node_link", 3, 4, s.intern("fwdbwd"))
        s.emit("kernel_info", gpu, 7, 2**64 - 1, 255, 2**31, 1, 2, 100)
        s.emit("sync_begin", gpu, 0xFFFFFFFF, 6, s.intern("Context Sync"), 0xFFFFFFFF, 0)
        s.emit("sync_end", gpu, 0xFFFFFFFF, 6)
        s.emit("annotation_begin", gpu, 8, 5, s.intern("backward"))
        s.emit("annotation_end", gpu, 8, 5)
        s.emit("api_exit", 11, s.intern("cudaLaunchKernel"), 2**64 - 1)
        s.emit("kernel_begin", gpu, 7, 2**64 - 1, s.intern("k<float>"), 1, 2, 3, 4, 5, 6)
        s.emit("kernel_end", gpu, 7, 2**64 - 1)
        s.emit("memcpy_begin", gpu, 7, 5, 4096, s.intern("HtoD"), 0, gpu)
        s.emit("memcpy_end", gpu, 7, 5)
        s.emit("memset_begin", gpu, 8, 6, 2**40)
        s.emit("memset_end", gpu, 8, 6)
        s.emit("mem_alloc", gpu, 0xDEADBEEF, 512, 1024)
        s.emit("mem_free", gpu, 0xDEADBEEF, 512, 512)
        s.emit("node_args", 77, s.intern("[[2, 3]]"), s.intern("float32"))
        s.emit("process_rank", 3, 1, 4, s.intern("nccl"))
        s.emit("collective", 77, 3, s.intern("all_gather"), s.intern("tp"), 2, 2**40, 2**50)
        s.step_begin(3)
        s.step_end()

    trace = read_trace(make_trace(body))
    ints = lambda name: rows(trace.table(name), *trace.table(name).cls.field_names)  # noqa: E731
    devices = trace.table("device_info")
    assert devices.text("name").tolist() == ["cuda:1"]
    assert devices.text("kind").tolist() == ["cuda"] and devices["ordinal"].tolist() == [1]
    assert devices.text("model").tolist() == ["H100 <&>"]
    gpu = devices["device"].tolist()[0]
    assert trace.table("kernel_begin").text("name").tolist() == ["k<float>"]
    assert ints("kernel_end") == [(gpu, 7, 2**64 - 1)]
    assert [r[:4] + r[5:] for r in ints("memcpy_begin")] == [(gpu, 7, 5, 4096, 0, gpu)]
    assert ints("memset_begin") == [(gpu, 8, 6, 2**40)]
    assert ints("mem_alloc") == [(gpu, 0xDEADBEEF, 512, 1024)]
    assert ints("mem_free") == [(gpu, 0xDEADBEEF, 512, 512)]
    assert [r[0] for r in ints("step_begin")] == [3] and [r[0] for r in ints("step_end")] == [3]
    assert trace.table("api_exit").text("name").tolist() == ["cudaLaunchKernel"]
    args = trace.table("node_args")
    assert args["node_id"].tolist() == [77] and args.text("shapes").tolist() == ["[[2, 3]]"]
    assert ints("launch") == [(11, 2**64 - 1)]
    assert [r[:2] for r in ints("node_link")] == [(3, 4)] and trace.table("node_link").text("kind").tolist() == ["fwdbwd"]
    assert ints("kernel_info") == [(gpu, 7, 2**64 - 1, 255, 2**31, 1, 2, 100)]
    assert [r[:3] + r[4:] for r in ints("sync_begin")] == [(gpu, 0xFFFFFFFF, 6, 0xFFFFFFFF, 0)]
    assert trace.table("sync_begin").text("kind").tolist() == ["Context Sync"]
    assert [r[:3] for r in ints("annotation_begin")] == [(gpu, 8, 5)] and ints("annotation_end") == [(gpu, 8, 5)]
    assert trace.table("annotation_begin").text("name").tolist() == ["backward"]
    rank = trace.table("process_rank")
    assert [r[:3] for r in ints("process_rank")] == [(3, 1, 4)] and rank.text("backend").tolist() == ["nccl"]
    comm = trace.table("collective")
    assert [r[0:2] + r[4:] for r in ints("collective")] == [(77, 3, 2, 2**40, 2**50)]
    assert comm.text("kind").tolist() == ["all_gather"] and comm.text("group").tolist() == ["tp"]
    assert {c.name for c in schema.CATALOGUE} - set(trace.tables) == {"dfc:node_begin", "dfc:node_end",
                                                                       "dfc:tensor_edge"}


def test_emit_checks_arity() -> None:
    session = Session("/nonexistent-never-started")
    with pytest.raises(TypeError, match="takes 3 values"):
        session.emit("node_end", 1, 2)


def test_emit_after_stop_records_nothing(make_trace: Any) -> None:
    kept: list[Session] = []
    path = make_trace(lambda s: kept.append(s))
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    kept[0].emit("kernel_end", 0, 0, 0)
    with tracer.node("late"):
        pass
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before


# ---------------------------------------------------------------- lifecycle
def test_existing_trace_raises_unless_overwrite(make_trace: Any, tmp_path: Path) -> None:
    path = make_trace(record_nodes(2), name="t")
    with pytest.raises(TraceExistsError):
        _session(path).start()
    assert active_session() is None
    assert len(read_trace(path).table("node_begin")) == 2
    session = _session(path, overwrite=True).start()
    session.stop()
    assert len(read_trace(path).table("node_begin")) == 0


def test_two_sessions_at_once_are_refused(tmp_path: Path) -> None:
    first = _session(tmp_path / "a").start()
    try:
        with pytest.raises(RuntimeError, match="another dfcompass session"):
            _session(tmp_path / "b").start()
        assert active_session() is first
        with tracer.node("still-recording"):
            pass
    finally:
        first.stop()
    assert read_trace(tmp_path / "a").table("node_begin").text("name").tolist() == ["still-recording"]


def test_stop_twice_and_stop_before_start(tmp_path: Path) -> None:
    Session(tmp_path / "never").stop()
    session = _session(tmp_path / "t").start()
    session.stop()
    files = {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()}
    session.stop()
    assert {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()} == files
    assert active_session() is None


def test_context_manager_and_module_functions(tmp_path: Path) -> None:
    with _session(tmp_path / "a") as session:
        assert active_session() is session and session.active
    assert active_session() is None and not session.active
    started = tracer.start(tmp_path / "b", clock=CountingClock(), handle_signals=False)
    assert active_session() is started
    tracer.stop()
    tracer.stop()  # no session: nothing to do
    assert active_session() is None
    assert (tmp_path / "b" / "metadata").is_file()


def test_sigterm_handler_is_installed_and_restored(tmp_path: Path) -> None:
    assert threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM)
    session = Session(tmp_path / "t", clock=CountingClock()).start()
    try:
        assert signal.getsignal(signal.SIGTERM) == session._on_sigterm
    finally:
        session.stop()
    assert signal.getsignal(signal.SIGTERM) == before


FORK_SCRIPT = """
import os, sys, tracer
session = tracer.Session(sys.argv[1], flush_interval=0.02)
session.start()
with tracer.node("parent_before"):
    pass
pid = os.fork()
if pid == 0:
    for i in range(300):
        with tracer.node("child_node"):
            pass
    session.emit("kernel_end", 0, 0, 0)
    sys.exit(0)  # a normal exit: atexit handlers run in the child too
_, status = os.waitpid(pid, 0)
with tracer.node("parent_after"):
    pass
session.stop()
print(pid, os.waitstatus_to_exitcode(status))
"""


def test_forked_child_does_not_write_into_the_parent_trace(tmp_path: Path) -> None:
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "t")], capture_output=True, text=True,
                          env=subprocess_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    child_pid, child_status = map(int, done.stdout.split())
    assert child_status == 0
    trace = read_trace(tmp_path / "t")
    assert trace.table("node_begin").text("name").tolist() == ["parent_before", "parent_after"]
    assert len(trace.table("node_end")) == 2
    assert "child_node" not in trace.strings.tolist()
    assert "dfc:kernel_end" not in trace.tables
    assert child_pid not in trace.table("thread_info")["tid"].tolist()
    assert not [p for p in (tmp_path / "t").iterdir() if p.name.endswith(f"-{child_pid}")]
    check_packets(tmp_path / "t")


# ---------------------------------------------------------------- known bugs
class _GatedClock(CountingClock):
    """A counting clock that parks one chosen thread at its next reading until released."""

    def __init__(self) -> None:
        super().__init__()
        self._tick = self.now
        self.now = self._gated_now
        self.gate: threading.Thread | None = None
        self.parked = threading.Event()
        self.release = threading.Event()

    def _gated_now(self) -> int:
        if self.gate is not None and threading.current_thread() is self.gate:
            self.gate = None
            self.parked.set()
            self.release.wait(3)
        return self._tick()


def test_device_info_precedes_every_use_of_the_device(tmp_path: Path) -> None:
    clock = _GatedClock()
    session = _session(tmp_path / "t", clock=clock).start()
    try:
        session.intern("x")  # so the main thread's node needs no new string

        def describe_gpu() -> None:
            session.intern("worker ready")  # the worker's thread state exists before the gate
            clock.gate = threading.current_thread()
            session.device("cuda:0")

        worker = threading.Thread(target=describe_gpu)
        worker.start()
        assert clock.parked.wait(5)
        # the worker is inside Session.device(): the index is visible, dfc:device_info not yet recorded
        if "cuda:0" in session._devices:
            with tracer.node("x", device="cuda:0"):
                pass
        clock.release.set()
        worker.join(10)
    finally:
        clock.release.set()
        session.stop()
    trace = read_trace(tmp_path / "t")
    devices = trace.table("device_info")
    described_at = dict(zip(devices.text("name").tolist(), devices["timestamp"].tolist()))
    index = dict(zip(devices.text("name").tolist(), devices["device"].tolist()))
    begins = trace.table("node_begin")
    for ts, device in zip(begins["timestamp"].tolist(), begins["device"].tolist()):
        if device == index["cuda:0"]:
            assert described_at["cuda:0"] <= ts, "cuda:0 used before its dfc:device_info"


@requires_babeltrace2
@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"bad key": 1}, id="not-an-identifier"),
        pytest.param({"domain": "kernel"}, id="domain"),
        pytest.param({"tracer_name": "other"}, id="tracer_name"),
    ],
)
def test_user_env_cannot_break_the_metadata(tmp_path: Path, env: dict[str, Any]) -> None:
    path = tmp_path / "t"
    try:
        _session(path, env=env).start().stop()
    except ValueError:
        return  # refusing the key is a fine answer
    assert run_babeltrace2("--output-format=dummy", path).returncode == 0
    meta = read_metadata(path)
    assert "domain" not in meta.env
    assert meta.is_dfcompass
