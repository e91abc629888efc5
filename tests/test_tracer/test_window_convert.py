"""The op observer's windows converted in C++ equal the Python conversion, record for record.

One recording under the op observer keeps its drained windows; each is then converted again, into
two fresh traces, by tracer/observed_convert.py (C++) and by the Python walk and writer. Same input,
so the traces must be equal in every table and column: nodes, arguments, edges (sparse, lift_fresh,
in-place and backward ones), memory, annotations open across a window cut, ops of another thread,
steps and collectives. Times are compared from each trace's first node (each trace has its own origin).
"""

from __future__ import annotations

import gc
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tc_analyses.reader.fast import read_trace  # noqa: E402
from tests.helpers import BABELTRACE2, check_packets, transformer_training_step  # noqa: E402
from tracer import native  # noqa: E402
from tracer.session import Session  # noqa: E402
from tracer.torch_observer import ObservedCut  # noqa: E402
from tracer.torch_source import TorchRecorder  # noqa: E402


_SESSION_TABLES = ("dfc:process_info", "dfc:thread_info", "dfc:device_info")


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    if native.op_observer(torch) is None or native.window_converter() is None:
        pytest.skip(f"the op observer or the window converter is not built in {native.native_dir()} "
                    "(python -m tracer.native build; make setup does it)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _workload() -> Callable[[int], None]:
    """Steps that reach every rule: the transformer step (backward, Adam, a sparse gradient,
    to_sparse), compiled graphs' calls (forward and backward) and a compilation, a storage given by
    set_, torch.tensor of numpy data (lift_fresh), an in-place op with out=, an op on another
    thread, a record_function that spans a window cut, and a collective."""
    step = transformer_training_step(torch, sparse=True)
    scope = torch.profiler.record_function("spans the cut")
    buffer = torch.zeros(16)
    weight = torch.randn(16, 4, requires_grad=True)
    compiled = torch.compile(lambda x, w: (x @ w).relu().sum())
    compiled(buffer.view(1, 16), weight).backward()  # compiled before: its graph calls are recorded
    compiled_in_window = torch.compile(lambda x: (x * 2).sigmoid())  # compiled in the first window

    def run(index: int) -> None:
        if index == 1:  # open across the cut, around the optimizer's own record_function, which ends before it
            scope.__enter__()
        step()
        compiled(buffer.view(1, 16), weight).backward()
        compiled_in_window(buffer)
        holder = torch.empty(0)  # given a storage made outside any op: set_ wrote it
        holder.set_(torch.UntypedStorage(64), 0, (16,), (1,))
        holder.sum()
        fresh = torch.tensor(np.arange(16, dtype=np.float32))
        torch.add(fresh, 1.0, out=buffer)
        helper = threading.Thread(target=lambda: torch.mul(buffer, 2.0).sum())
        helper.start()
        helper.join()
        torch.distributed.all_reduce(buffer)
        if index == 2:
            scope.__exit__(None, None, None)

    return run


def _recorded_cuts(path: Path) -> list[ObservedCut]:
    """A recording under the op observer, converted in C++ as it runs; its drained windows."""
    run = _workload()
    cuts: list[ObservedCut] = []
    recorder = TorchRecorder(str(path), engine="observer")
    converting = recorder._convert

    def keep(cut: ObservedCut) -> None:
        cuts.append(cut)
        converting(cut)

    recorder._convert = keep  # type: ignore[method-assign]
    gc.collect()
    gc.disable()
    try:
        with recorder:
            for index in range(4):
                run(index)
                recorder.step()
    finally:
        gc.enable()
    assert recorder.windows_lost == 0 and len(cuts) >= 5
    return cuts


def _convert_again(cuts: list[ObservedCut], path: Path, in_cpp: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    recorder = TorchRecorder(str(path), engine="observer")
    if not in_cpp:
        recorder._native_windows = None
    assert (recorder._native_windows is not None) == in_cpp
    session = Session(str(path)).start()
    session.device("cpu")
    recorder.session, recorder._user_steps = session, True
    first = cuts[0].steps[0][0]
    assert session.trace is not None
    origin = session.trace.origin_ts
    monkeypatch.setattr(recorder, "_observer_offset", lambda _session: first - origin - 1000)
    for cut in cuts:
        recorder._convert(cut)
    assert recorder.windows_written == len(cuts) and recorder.windows_lost == 0
    session.stop()
    return read_trace(path)


def _columns(trace: Any, name: str, zero: int) -> dict[str, list[Any]]:
    """A table's columns, times from `zero`. What the session wrote itself (the process, its threads
    and devices, and their names) is dated by the clock when it wrote it: those times are left out."""
    table = trace.tables[name]
    times = np.asarray(table["timestamp"]).astype(np.int64) - zero
    kept = np.ones(len(times), dtype=bool)
    if name == "dfc:string_def":  # not the strings the session wrote itself (dated by its clock, which
        # may come before or after the converted windows' first node): those its own tables name
        own = {int(v) for t in _SESSION_TABLES if t in trace.tables for f in trace.tables[t].cls.fields
               if f.type == "sid" for v in np.asarray(trace.tables[t][f.name])}
        kept = (times >= -1) & ~np.isin(np.asarray(table["sid"]).astype(np.int64), sorted(own))
    out = {} if name in _SESSION_TABLES else {"timestamp": times[kept].tolist()}
    for column in table.columns:
        if column != "timestamp":
            out[column] = np.asarray(table[column])[kept].tolist()
    return out


def test_the_cpp_conversion_writes_what_the_python_one_does(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        cuts = _recorded_cuts(tmp_path / "live")
    finally:
        torch.distributed.destroy_process_group()
    in_cpp = _convert_again(cuts, tmp_path / "cpp", True, monkeypatch)
    in_python = _convert_again(cuts, tmp_path / "python", False, monkeypatch)
    assert sorted(in_cpp.tables) == sorted(in_python.tables)
    zeros = [int(np.asarray(trace.table("node_begin")["timestamp"]).min()) for trace in (in_cpp, in_python)]
    differ = [name for name in in_python.tables
              if _columns(in_cpp, name, zeros[0]) != _columns(in_python, name, zeros[1])]
    assert not differ
    # What the comparison covered.
    nodes = in_cpp.table("node_begin")
    ops = set(np.asarray(nodes.text("op")).tolist())
    assert {"aten::lift_fresh", "aten::to_sparse", "aten::embedding_backward", "c10d::allreduce_", "aten::set_",
            "inductor::compiled_graph"} <= ops, ops
    assert len(set(np.asarray(nodes["tid"]).tolist())) >= 2  # the helper thread's too
    assert len(in_cpp.table("tensor_edge")) > 1000 and len(in_cpp.table("mem_free")) > 1000
    assert len(in_cpp.table("collective")) == 4
    op_of = dict(zip(np.asarray(nodes["node_id"]).tolist(), np.asarray(nodes.text("op")).tolist()))
    edges = in_cpp.table("tensor_edge")
    producers = {op_of[p] for p in np.asarray(edges["producer"]).tolist()}
    assert {"aten::set_", "aten::lift_fresh", "inductor::compiled_graph", "aten::to_sparse"} <= producers
    names = set(np.asarray(in_cpp.table("annotation_begin").text("name")).tolist())
    assert "spans the cut" in names


def test_what_is_open_at_a_cut_keeps_every_stream_in_time_order(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A record_function open across a cut, around the optimizer's own that ends before the cut:
    its begin is written in the window where it begins, as are the strings of ops still running at
    a cut, so no stream goes back in time (babeltrace2's muxer refuses a trace that does)."""
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        cuts = _recorded_cuts(tmp_path / "live")
    finally:
        torch.distributed.destroy_process_group()
    for in_cpp in (True, False):
        _convert_again(cuts, tmp_path / f"again-{in_cpp}", in_cpp, monkeypatch)
    for name in ("live", "again-True", "again-False"):
        check_packets(tmp_path / name)
        if BABELTRACE2 is not None:
            done = subprocess.run([BABELTRACE2, str(tmp_path / name)], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (name, done.stderr[-1500:])
