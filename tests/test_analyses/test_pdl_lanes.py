"""Kernels that legitimately overlap on one queue (programmatic dependent launch) are kept, each in a lane."""

from __future__ import annotations

import json
from typing import Any
from pathlib import Path

from tc_analyses.engine import layout
from tc_analyses.export import perfetto
from tc_analyses.inputs import TraceInputs
from tc_analyses.model.lanes import lanes
from tracer.builder import TraceBuilder


def _pdl_trace(tmp_path: Path) -> Path:
    """Queue 7: producer [1000, 3000); consumer, launched with PDL, [2000, 4000); epilogue [3500, 3800)
    overlaps the consumer too (the producer's lane is free again by then); tail [4000, 4500) alone."""
    out = tmp_path / "pdl"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        b.device("cpu", ts=0)
        g = b.device("cuda:0", ts=0)
        for corr, (name, start, end) in enumerate([("producer", 1000, 3000), ("consumer", 2000, 4000),
                                                    ("epilogue", 3500, 3800), ("tail", 4000, 4500)], 1):
            b.add("api_enter", "1", 100 * corr, 1, "cudaLaunchKernelExC", corr)
            b.add("api_exit", "1", 100 * corr + 50, 1, "cudaLaunchKernelExC", corr)
            b.add("kernel_begin", "g7", start, g, 7, corr, name, 1, 1, 1, 1, 1, 1)
            b.add("kernel_end", "g7", end, g, 7, corr)
    return out


def _runs(intervals: list[Any]) -> list[tuple[int, int, str]]:
    return [(i.start, i.end, i.value.value) for i in intervals if i.value is not None and i.value.value != layout.IDLE]


def test_overlapping_kernels_get_lanes_in_the_state_system(tmp_path: Path) -> None:
    inputs = TraceInputs(_pdl_trace(tmp_path))
    gpu = inputs.built().systems[layout.GPU_ID]
    queue = ("GPU", "1", layout.QUEUES, "7")
    # Closed state intervals end one ns before the next change.
    assert _runs(gpu.intervals(queue)) == [(1000, 2999, "producer"), (3500, 3799, "epilogue"), (4000, 4499, "tail")]
    assert _runs(gpu.intervals(queue + (f"{layout.LANE} 1",))) == [(2000, 3999, "consumer")]
    # Every lane record is cleared when its kernel ends.
    records = [path for path, _ in gpu.items() if path[2:3] == (layout.LANES,) and len(path) == 5]
    assert records and all(gpu.intervals(path)[-1].value is None for path in records)
    # The summary's busy time of the queue is the union of its lanes: [1000, 4500).
    busy = next(b for b in inputs.summary().busy if b.queue == "7")
    assert busy.busy_ns == 3500


def test_lanes_match_the_state_system_and_perfetto_keeps_every_kernel(tmp_path: Path) -> None:
    trace = _pdl_trace(tmp_path)
    ops = TraceInputs(trace).whole_activity.gpu
    assert lanes(ops) == [0, 1, 0, 0]
    perfetto.write(trace, tmp_path / "pdl.json")
    events = json.loads((tmp_path / "pdl.json").read_text())["traceEvents"]
    kernels = {e["name"]: e["tid"] for e in events if e.get("cat") == "kernel"}
    assert kernels == {"producer": 7, "consumer": 7 + perfetto.LANE_TRACK, "epilogue": 7, "tail": 7}
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == 1}
    assert names[7 + perfetto.LANE_TRACK] == "stream 7 (overlap lane 1)"
