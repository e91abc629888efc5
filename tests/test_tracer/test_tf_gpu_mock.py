"""MOCK: the GPU path of the TensorFlow source with a hand-made XSpace.

No GPU is here, so these planes are stand-ins for what TF's profiler writes on one: plane
``/device:GPU:0`` with a stream line of kernels and copies carrying ``correlation_id``, plane
``/host:CUPTI`` with the driver calls, and the host plane's eager op. The objects mimic the
protobuf classes' attributes (``planes``, ``lines``, ``event_metadata``, ``WhichOneof``...), so
TensorFlow need not be installed. They check the mapping to dfcompass events and that paper (d)'s
``overhead`` analysis runs on a TensorFlow eager trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tc_analyses.reader import read_trace
from tracer.batch import Batch
from tracer.session import Session
from tracer.tf_xspace import GraphSet, NoSizes, XSpaceConverter


@dataclass
class FakeStat:  # MOCK of xplane_pb2.XStat
    metadata_id: int
    kind: str
    value: Any

    def WhichOneof(self, _: str) -> str:  # noqa: N802 (protobuf's name)
        return self.kind

    def __getattr__(self, name: str) -> Any:
        if name == self.__dict__.get("kind"):
            return self.__dict__["value"]
        raise AttributeError(name)


@dataclass
class FakeMeta:  # MOCK of XEventMetadata / XStatMetadata
    name: str
    display_name: str = ""
    stats: list[FakeStat] = field(default_factory=list)


@dataclass
class FakeEvent:  # MOCK of XEvent
    metadata_id: int
    offset_ps: int
    duration_ps: int
    stats: list[FakeStat] = field(default_factory=list)


@dataclass
class FakeLine:  # MOCK of XLine
    id: int
    name: str
    events: list[FakeEvent]
    timestamp_ns: int = 0
    display_name: str = ""


@dataclass
class FakePlane:  # MOCK of XPlane
    name: str
    lines: list[FakeLine] = field(default_factory=list)
    event_metadata: dict[int, FakeMeta] = field(default_factory=dict)
    stat_metadata: dict[int, FakeMeta] = field(default_factory=dict)
    stats: list[FakeStat] = field(default_factory=list)

    def event(self, name: str, start_us: int, duration_us: int, **stats: Any) -> FakeEvent:
        meta_id = next((i for i, m in self.event_metadata.items() if m.name == name), len(self.event_metadata) + 1)
        self.event_metadata[meta_id] = FakeMeta(name)
        return FakeEvent(meta_id, start_us * 1_000_000, duration_us * 1_000_000,
                         [self.stat(k, v) for k, v in stats.items()])

    def stat(self, name: str, value: Any) -> FakeStat:
        stat_id = next((i for i, m in self.stat_metadata.items() if m.name == name), len(self.stat_metadata) + 1)
        self.stat_metadata[stat_id] = FakeMeta(name)
        return FakeStat(stat_id, "str_value" if isinstance(value, str) else "int64_value", value)


def _space(start_ns: int) -> Any:
    task = FakePlane("Task Environment")
    task.stats = [task.stat("profile_start_time", start_ns)]
    host = FakePlane("/host:CPU")
    host.lines = [FakeLine(42, "python", [
        host.event("EagerExecute", 100, 60, eager_op="MatMul"),
        host.event("KernelAndDeviceFunc::Run", 110, 40),
    ])]
    cupti = FakePlane("/host:CUPTI")
    cupti.lines = [FakeLine(42, "python", [
        cupti.event("cuLaunchKernel", 120, 10, correlation_id=5),
        cupti.event("cuMemcpyHtoDAsync", 135, 5, correlation_id=6),
        cupti.event("cuCtxSynchronize", 150, 2),  # no correlation id: not an API call of ours
    ])]
    gpu = FakePlane("/device:GPU:0")
    gpu.lines = [FakeLine(7, "Stream #7(Compute)", [
        gpu.event("volta_sgemm_128x64_nn", 200, 300, correlation_id=5),
        gpu.event("MemcpyH2D", 520, 30, correlation_id=6,
                  memcpy_details="kind_src:pageable kind_dst:device size:4096 dest:0 async:1"),
    ]), FakeLine(1, "TensorFlow Ops", [gpu.event("MatMul", 200, 300)])]  # derived line: no correlation ids
    return type("FakeSpace", (), {"planes": [task, host, cupti, gpu]})()


def test_gpu_planes_map_to_queues_calls_and_the_overhead_analysis(tmp_path: Path,
                                                                  cli: Callable[..., Any]) -> None:
    session = Session(tmp_path / "trace", handle_signals=False).start()
    try:
        assert session.trace is not None
        offset = session.clock.offset_to_wall_ns()
        start = offset + session.trace.origin_ts + 1_000_000
        batch = Batch(session, session.trace.origin_ts, offset)
        converted = XSpaceConverter(batch, GraphSet([]), NoSizes(), session.new_node_id, session.new_tensor_id,
                                    pid=1).convert(_space(start))
        batch.flush()
    finally:
        session.stop()
    assert (converted.eager_ops, converted.gpu_ops) == (1, 2)
    trace = read_trace(tmp_path / "trace")
    kernels = trace.table("kernel_begin")
    assert kernels.text("name").tolist() == ["volta_sgemm_128x64_nn"]
    assert kernels["queue"].tolist() == [7] and kernels["correlation_id"].tolist() == [5]
    copies = trace.table("memcpy_begin")
    assert copies.text("copy_kind").tolist() == ["HtoD pageable"] and copies["bytes"].tolist() == [4096]
    api = trace.table("api_enter")
    assert sorted(api.text("name").tolist()) == ["cuLaunchKernel", "cuMemcpyHtoDAsync"]
    assert sorted(trace.table("launch")["correlation_id"].tolist()) == [5, 6]
    node = trace.table("node_begin")
    assert node.text("op").tolist() == ["MatMul"]
    # the kernel run, not the dispatch: 110 µs after the profile's start, for 40 µs
    assert int(node["timestamp"][0]) - (start - offset) == 110_000
    # paper (d) on TensorFlow eager: the MatMul node owns both launches
    result = cli("overhead", tmp_path / "trace", "--include-last-step", "--format", "json")
    assert result.exit_code == 0, result.output
    ops = json.loads(result.stdout)["result"]["ops"]
    assert len(ops) == 1 and ops[0]["op"] == "MatMul"
    assert ops[0]["host_ns"] == 10_000  # first launch call 120 µs - kernel-run node start 110 µs
    assert ops[0]["launch_ns"] == 15_000 and ops[0]["device_ns"] == 330_000
