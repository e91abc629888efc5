"""The generated Trace Compass analyses, run by the headless engine on the committed all-classes
trace, give the intervals the trace was built to produce (tests/data/make_traces.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tc_analyses.engine.events import iter_events
from tc_analyses.engine.state_system import StateSystem
from tc_analyses.engine.xml_provider import load_providers
from tc_analyses.export.tracecompass import render_xml
from tc_analyses.reader import read_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
STEP = 10_000  # make_traces.all_classes: step k starts at 10_000 * (k + 1)
# The engine works in Trace Compass's time base: the trace clock plus its offset. The expected
# times below are the clock values the trace was built with; OFFSET turns them into that base.
OFFSET = read_trace(TRACE).metadata.clock_offset_ns


@pytest.fixture(scope="module")
def systems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StateSystem]:
    out = tmp_path_factory.mktemp("xml")
    trace = read_trace(TRACE)
    result = {}
    for name, data in render_xml().items():
        (out / name).write_bytes(data)
        for provider in load_providers(out / name):
            result[provider.id] = provider.run(iter_events(trace))
    return result


def states(ss: StateSystem, path: str) -> list[tuple[int, int, object]]:
    """The non-null intervals of `path`, times as clock values (OFFSET taken off)."""
    return [(i.start - OFFSET, i.end - OFFSET, i.value.value) for i in ss.intervals(tuple(path.split("/")))
            if i.value is not None]


def test_times_are_in_trace_compass_time_base(systems: dict[str, StateSystem]) -> None:
    # Trace Compass (and babeltrace2) add the CTF clock offset: the state system starts at the
    # first event's clock value plus the offset, 998 ns + offset_s * 10^9 + offset for this trace.
    first = min(s.first_ts for s in read_trace(TRACE).streams if s.first_ts is not None)
    assert OFFSET > 10**18 and all(ss.start == first + OFFSET for ss in systems.values())


def test_dataflow_nodes_by_device_and_thread(systems: dict[str, StateSystem]) -> None:
    ss = systems["org.dfcompass.dataflow"]
    gpu_nodes = [(s, e, v) for k in range(3) for s, e, v in (
        (STEP * (k + 1) + 1_000, STEP * (k + 1) + 1_059, "aten::to"),
        (STEP * (k + 1) + 1_100, STEP * (k + 1) + 1_169, "aten::relu"))]
    assert states(ss, "Devices/1/Threads/100/Node/1") == gpu_nodes
    assert states(ss, "Devices/0/Threads/101/Node/1") == [(STEP * (k + 1) + 100, STEP * (k + 1) + 899, "read")
                                                          for k in range(3)]
    assert states(ss, "Steps/100") == [(STEP * (k + 1), STEP * (k + 1) + 2_999, str(k)) for k in range(3)]
    assert states(ss, "Steps/100/name")[0][2] == "MainThread"
    assert states(ss, "Devices/1/name")[0][2] == "cuda:0"
    # names keep the trace's escaped ASCII, as Trace Compass shows them
    assert states(ss, "Devices/0/Threads/101/name")[0][2] == "loader <&\"'> \\u2603"


def test_gpu_queue_runs_each_activity_then_idles(systems: dict[str, StateSystem]) -> None:
    ss = systems["org.dfcompass.gpu"]
    base = STEP
    assert states(ss, "GPU/1/Queues/7")[:6] == [
        (base + 1_100, base + 1_399, "memcpy"), (base + 1_400, base + 1_449, "idle"),
        (base + 1_450, base + 1_499, "memset"), (base + 1_500, base + 1_599, "idle"),
        (base + 1_600, base + 2_599, "relu_kernel<float>"), (base + 2_600, 2 * base + 1_099, "idle")]
    assert states(ss, "GPU/1/busy")[:2] == [(base + 1_100, base + 1_399, 1), (base + 1_400, base + 1_449, 0)]
    # queue depth, counted from each launch call's start: the memcpy launched at +1010 starts at
    # +1100; the memset launched at +1110 and the kernel at +1130 wait until +1450 and +1600
    assert states(ss, "Launches/pending")[:5] == [
        (base + 1_010, base + 1_099, 1), (base + 1_100, base + 1_109, 0), (base + 1_110, base + 1_129, 1),
        (base + 1_130, base + 1_449, 2), (base + 1_450, base + 1_599, 1)]
    assert states(ss, "Launches/pending")[-1][2] == 0  # every launch started: no drift


def test_api_calls_as_a_stack_per_thread(systems: dict[str, StateSystem]) -> None:
    ss = systems["org.dfcompass.api"]
    assert states(ss, "Threads/100/API/1")[:3] == [
        (STEP + 1_010, STEP + 1_049, "cudaMemcpyAsync"), (STEP + 1_110, STEP + 1_119, "cudaMemsetAsync"),
        (STEP + 1_130, STEP + 1_159, "cudaLaunchKernel")]


def test_memory_in_use_per_device(systems: dict[str, StateSystem]) -> None:
    ss = systems["org.dfcompass.memory"]
    assert states(ss, "Memory/0/bytes_in_use")[:3] == [
        (STEP + 150, STEP + 2_699, 4096), (STEP + 2_700, 2 * STEP + 149, 0), (2 * STEP + 150, 2 * STEP + 2_699, 8192)]


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    from tc_analyses.engine.xml_pattern import load_patterns

    out = tmp_path_factory.mktemp("latency") / "latency.xml"
    out.write_bytes(render_xml()["latency.xml"])
    trace = read_trace(TRACE)
    return {p.id: p.run(iter_events(trace))[0] for p in load_patterns(out)}


def summary(segs: list) -> list[tuple[int, int, str, dict]]:
    return [(s.start - OFFSET, s.duration, s.name, s.content) for s in segs]


def test_node_duration_pattern(segments: dict[str, list]) -> None:
    segs = segments["org.dfcompass.latency.node"]
    assert len(segs) == 9
    assert summary(segs)[:3] == [(STEP + 100, 800, "read", {"node_id": 0}), (STEP + 1_000, 60, "aten::to", {"node_id": 1}),
                                 (STEP + 1_100, 70, "aten::relu", {"node_id": 2})]


def test_kernel_and_transfer_durations(segments: dict[str, list]) -> None:
    assert summary(segments["org.dfcompass.latency.kernel"]) == [
        (STEP * (k + 1) + 1_600, 1_000, "relu_kernel<float>", {"correlation_id": 3 * k + 2}) for k in range(3)]
    assert summary(segments["org.dfcompass.latency.transfer"]) == [
        (STEP * (k + 1) + 1_100, 300, "HtoD", {"correlation_id": 3 * k}) for k in range(3)]


def test_launch_to_start_joins_by_correlation_id(segments: dict[str, list]) -> None:
    assert summary(segments["org.dfcompass.latency.launch"])[:3] == [
        (STEP + 1_010, 90, "cudaMemcpyAsync", {"correlation_id": 0}),
        (STEP + 1_110, 340, "cudaMemsetAsync", {"correlation_id": 1}),
        (STEP + 1_130, 470, "cudaLaunchKernel", {"correlation_id": 2})]


def test_experiment_analysis_puts_nodes_beside_os_scheduling(tmp_path: Path) -> None:
    """Our trace merged with an LTTng kernel trace (as a Trace Compass experiment does)."""
    out = tmp_path / "experiment.xml"
    out.write_bytes(render_xml()["experiment.xml"])
    provider = load_providers(out)[0]
    events: list[tuple[str, int, dict[str, Any]]] = [("dfc:string_def", 1, {"sid": 0, "value": "worker"}), ("dfc:string_def", 1, {"sid": 1, "value": "matmul"}),
              ("dfc:thread_info", 2, {"pid": 1, "tid": 42, "name": 0}),
              ("dfc:node_begin", 10, {"node_id": 0, "op": 1, "name": 1, "device": 0, "tid": 42, "step": 0}),
              ("sched_switch", 15, {"prev_tid": 42, "next_tid": 7, "cpu": 3}),  # the kernel trace's events
              ("sched_switch", 20, {"prev_tid": 7, "next_tid": 42, "cpu": 1}),
              ("dfc:node_end", 30, {"node_id": 0, "device": 0, "tid": 42})]
    ss = provider.run(iter((name, ts + OFFSET, fields) for name, ts, fields in events))  # in Trace Compass's time base
    assert states(ss, "Threads/42/node") == [(10, 29, "matmul")]
    assert states(ss, "Threads/42/cpu") == [(15, 19, "off CPU"), (20, 30, "1")]
    assert states(ss, "Threads/42/name") == [(10, 30, "worker")]
    assert ("Threads", "7", "cpu") not in set(ss.paths())  # a thread our trace does not know gets no row
