"""Pairing begin/end events into intervals and joining API calls to nodes and GPU ops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tc_analyses.model.activity import Device, read_activity
from tc_analyses.model.intervals import clipped_union_ns, merge_intervals, union_ns
from tc_analyses.reader import read_trace
from tracer.builder import TraceBuilder


def _trace(tmp_path: Path) -> Path:
    out = tmp_path / "t"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, gpu = b.device("cpu", ts=10), b.device("cuda:0", ts=10)
        b.add("step_begin", "1", 100, 0, 1)
        b.add("node_begin", "1", 100, 1, "aten::mm", "mm", cpu, 1, 0)
        b.add("node_begin", "1", 110, 2, "aten::inner", "inner", cpu, 1, 0)  # nested: not outermost
        b.add("api_enter", "1", 120, 1, "cudaLaunchKernel", 7)
        b.add("api_exit", "1", 130, 1, "cudaLaunchKernel", 7)
        b.add("api_enter", "1", 140, 1, "cudaGetDevice", 0)  # zero-duration call
        b.add("api_exit", "1", 140, 1, "cudaGetDevice", 0)
        b.add("node_end", "1", 150, 2, cpu, 1)
        b.add("node_end", "1", 160, 1, cpu, 1)
        b.add("kernel_begin", "g", 170, gpu, 7, 7, "gemm", 1, 1, 1, 1, 1, 1)
        b.add("kernel_end", "g", 260, gpu, 7, 7)
        b.add("memcpy_begin", "g", 300, gpu, 7, 0, 4096, "HtoD", cpu, gpu)
        b.add("kernel_end", "g", 310, gpu, 9, 9)  # an end without its begin
        b.add("memcpy_end", "g", 350, gpu, 7, 0)
        b.add("api_enter", "1", 400, 1, "cudaMalloc", 0)  # no exit: cut short
        b.add("step_end", "1", 400, 0, 1)
    return out


def test_pairs_and_joins(tmp_path: Path) -> None:
    activity = read_activity(read_trace(_trace(tmp_path)))
    assert [(n.name, n.start, n.end, n.outermost) for n in activity.nodes] == [
        ("mm", 100, 160, True), ("inner", 110, 150, False)]
    assert [(c.name, c.start, c.end, activity.nodes[c.owner].name) for c in activity.api] == [
        ("cudaLaunchKernel", 120, 130, "mm"), ("cudaGetDevice", 140, 140, "mm")]
    assert [(g.kind, g.device, g.queue, g.start, g.end, g.name, g.bytes) for g in activity.gpu] == [
        ("kernel", "cuda:0", 7, 170, 260, "gemm", 0), ("memcpy", "cuda:0", 7, 300, 350, "HtoD", 4096)]
    assert activity.launch_of(activity.gpu[0]) == activity.api[0]
    assert activity.launch_of(activity.gpu[1]) is None  # correlation id 0 joins nothing
    assert [(s.step, s.start, s.end) for s in activity.steps] == [(0, 100, 400)]
    assert activity.unpaired == 2  # the orphan kernel end and the unfinished cudaMalloc


def test_union_of_intervals() -> None:
    starts, ends = np.array([5, 0, 20, 10]), np.array([12, 4, 30, 15])
    merged = merge_intervals(starts, ends)
    assert merged[0].tolist() == [0, 5, 20] and merged[1].tolist() == [4, 15, 30]
    assert union_ns(starts, ends) == 4 + 10 + 10
    assert clipped_union_ns(starts, ends, 3, 25) == 1 + 10 + 5
    assert union_ns([], []) == 0


def test_vectorised_pairing_agrees_with_event_by_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """Complete traces take the numpy path; it must give exactly what pairing event by event gives."""
    from tc_analyses.model import activity as module

    trace = read_trace(Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes")
    fast = read_activity(trace)
    assert fast.api and fast.gpu
    monkeypatch.setattr(module, "pair_in_order", lambda *args: None)
    slow = read_activity(trace)
    assert (fast.api, fast.gpu, fast.unpaired) == (slow.api, slow.gpu, slow.unpaired)


def test_pairing_in_order_refuses_what_it_cannot_pair() -> None:
    from tc_analyses.model.pairing import pair_in_order

    key = [np.array([1, 1])]
    pairs = pair_in_order(key, np.array([10, 20]), key, np.array([25, 15]))
    assert pairs is not None and [p.tolist() for p in pairs] == [[0, 1], [1, 0]]  # ends sorted: 15 pairs 10
    assert pair_in_order(key, np.array([10, 20]), key, np.array([5, 25])) is None  # an end before its begin
    assert pair_in_order(key, np.array([10, 20]), [np.array([1, 2])], np.array([15, 25])) is None  # other keys
    assert pair_in_order(key, np.array([10, 20]), [np.array([1])], np.array([15])) is None  # counts differ


def test_devices_carry_the_recorded_kind(tmp_path: Path) -> None:
    activity = read_activity(read_trace(_trace(tmp_path)))
    cpu, gpu = activity.devices.values()
    assert (cpu.name, cpu.kind, cpu.is_gpu) == ("cpu", "cpu", False)
    assert (gpu.name, gpu.kind, gpu.is_gpu) == ("cuda:0", "cuda", True)
    assert activity.device(gpu.index) is gpu and activity.device_named("cuda:0") is gpu
    assert activity.device(9) == Device(9, "device9", "", "")  # used but never described
    assert Device(0, "accel", "cpu").is_gpu is False  # the recorded kind decides
    assert Device.named("cpu:1").is_gpu is False and Device.named("mps").is_gpu  # no kind: the name does


def _three_steps(tmp_path: Path) -> Path:
    """Three steps on one thread, each with an op that launches a kernel."""
    out = tmp_path / "steps"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, gpu = b.device("cpu", ts=10), b.device("cuda:0", ts=10)
        for step in range(3):
            t = 100 + 1000 * step
            b.add("step_begin", "1", t, step, 1)
            b.add("node_begin", "1", t + 10, step + 1, f"aten::op{step}", f"op{step}", cpu, 1, step)
            b.add("api_enter", "1", t + 20, 1, "cudaLaunchKernel", step + 1)
            b.add("api_exit", "1", t + 30, 1, "cudaLaunchKernel", step + 1)
            b.add("node_end", "1", t + 40, step + 1, cpu, 1)
            b.add("kernel_begin", "g", t + 50, gpu, 7, step + 1, f"k{step}", 1, 1, 1, 1, 1, 1)
            b.add("kernel_end", "g", t + 90, gpu, 7, step + 1)
            b.add("step_end", "1", t + 999, step, 1)
    return out


def test_a_window_keeps_each_call_owned_by_its_own_node(tmp_path: Path) -> None:
    """Owners are node indexes: a window that drops the first nodes must renumber them."""
    from tc_analyses.model.window import Window, restrict

    activity = read_activity(read_trace(_three_steps(tmp_path)))
    for spec in ("1", "1-2", "2", "0-1"):
        kept, _ = restrict(activity, Window(spec=spec))
        owners = [kept.nodes[c.owner].name for c in kept.api]
        assert owners == [f"op{int(c.correlation_id) - 1}" for c in kept.api], spec
        assert [g.name for g in kept.gpu] == [f"k{int(c.correlation_id) - 1}" for c in kept.api], spec


def test_tables_read_back_the_rows_they_hold(tmp_path: Path) -> None:
    """Columns and objects agree: a row read, a column, a selection, a concatenation."""
    from tc_analyses.model.activity import GpuTable

    activity = read_activity(read_trace(_three_steps(tmp_path)))
    gpu = activity.gpu
    assert gpu.column("start").tolist() == [g.start for g in gpu] == [150, 1150, 2150]
    assert gpu.text("name").tolist() == [g.name for g in gpu] and gpu[-1] == list(gpu)[-1]
    assert list(gpu.take(np.array([2, 0]))) == [gpu[2], gpu[0]]
    assert list(GpuTable.concat([gpu.take([2]), gpu.take([0])])) == [gpu[2], gpu[0]]
    assert GpuTable.from_rows(list(gpu)) == gpu and [n.outermost for n in activity.nodes] == [True] * 3
    launches = activity.launch_indexes().tolist()
    assert launches == [activity.launch_index(g) for g in gpu] == [0, 1, 2]


def test_a_node_id_begun_twice_pairs_its_first_begin_with_its_last_end(tmp_path: Path) -> None:
    out = tmp_path / "dup"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu = b.device("cpu", ts=10)
        b.add("node_begin", "1", 100, 5, "aten::a", "a", cpu, 1, 0)
        b.add("node_begin", "1", 110, 5, "aten::b", "b", cpu, 1, 0)
        b.add("node_end", "1", 120, 5, cpu, 1)
        b.add("node_end", "1", 130, 5, cpu, 1)
    activity = read_activity(read_trace(out))
    assert [(n.name, n.start, n.end) for n in activity.nodes] == [("a", 100, 130)]
    assert activity.unpaired == 1  # the second begin; the two ends are one id


def _outermost_one_by_one(tids: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The loop _outermost replaced: a node is outermost when it starts at or after the end of its
    thread's last outermost node."""
    out = np.zeros(len(tids), dtype=np.int64)
    open_until: dict[int, int] = {}
    for i, (tid, start, end) in enumerate(zip(tids.tolist(), starts.tolist(), ends.tolist())):
        if start >= open_until.get(tid, -1):
            open_until[tid] = end
            out[i] = 1
    return out


def test_outermost_nodes_walk_the_chain_as_the_loop_did() -> None:
    """Random threads of nested, overlapping (not nested) and zero-length nodes, ordered by start,
    enclosing first, as read_activity orders them."""
    from tc_analyses.model.activity import _outermost

    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(0, 300))
        tids, starts = rng.integers(0, 4, n), rng.integers(0, 1000, n)
        ends = starts + rng.integers(0, 200, n)
        order = np.lexsort((rng.permutation(n), -ends, starts))
        tids, starts, ends = tids[order], starts[order], ends[order]
        assert np.array_equal(_outermost(tids, starts, ends), _outermost_one_by_one(tids, starts, ends))
