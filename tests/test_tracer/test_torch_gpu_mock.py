"""MOCK: the CUDA path of TorchRecorder with fake Kineto events.

This repository's CI has no GPU, so these events are hand-made stand-ins for torch's
``_KinetoEvent`` objects (same method names). They check the mapping to dfcompass GPU events;
the same event kinds from real GPU runs are covered by the Kineto importer's tests on the real
traces in ../shared/traces/kineto/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tc_analyses.reader import read_trace  # noqa: E402
from tracer.session import Session  # noqa: E402
from tracer.batch import Batch  # noqa: E402
from tracer.torch_events import _Collector  # noqa: E402
from tracer.torch_source import TorchRecorder  # noqa: E402

CUDA = torch.autograd.DeviceType.CUDA
CPU = torch.autograd.DeviceType.CPU


@dataclass
class FakeKinetoEvent:  # MOCK of torch._C._autograd._KinetoEvent
    _name: str
    _device: object
    _corr: int
    _start: int
    _end: int
    _index: int = 0
    _stream: int = 7
    _tid: int = 1

    def name(self) -> str: return self._name
    def device_type(self) -> object: return self._device
    def correlation_id(self) -> int: return self._corr
    def start_ns(self) -> int: return self._start
    def end_ns(self) -> int: return self._end
    def device_index(self) -> int: return self._index
    def device_resource_id(self) -> int: return self._stream
    def start_thread_id(self) -> int: return self._tid
    def nbytes(self) -> int: return 4096


def test_gpu_events_map_to_queues_with_correlation(tmp_path: Path) -> None:
    session = Session(tmp_path / "trace", handle_signals=False).start()
    try:
        base = session.clock.offset_to_wall_ns() + session.trace.origin_ts + 1_000_000  # type: ignore[union-attr]
        events = [
            FakeKinetoEvent("cudaLaunchKernel", CPU, 11, base, base + 500),
            FakeKinetoEvent("void relu_kernel<float>(float*)", CUDA, 11, base + 1_000, base + 3_000),
            FakeKinetoEvent("cudaMemcpyAsync", CPU, 12, base + 600, base + 900),
            FakeKinetoEvent("Memcpy HtoD (Pageable -> Device)", CUDA, 12, base + 3_500, base + 4_000, _stream=9),
            FakeKinetoEvent("Memset (Device)", CUDA, 13, base + 4_100, base + 4_200),
            FakeKinetoEvent("cudaMemsetAsync", CPU, 14, base + 950, base + 990),  # launched nothing
            FakeKinetoEvent("aten::relu", CPU, 0, base, base + 100),  # CPU op: not an API call
        ]
        recorder = TorchRecorder(session, cuda=False)
        collector = _Collector(torch)
        batch = Batch(session, session.trace.origin_ts, session.clock.offset_to_wall_ns())  # type: ignore[union-attr]
        recorder._write_gpu(batch, events, collector)
        batch.flush()
    finally:
        session.stop()
    trace = read_trace(tmp_path / "trace")
    kernels = trace.table("kernel_begin")
    assert kernels.text("name").tolist() == ["void relu_kernel<float>(float*)"]
    assert kernels["correlation_id"].tolist() == [11] and kernels["queue"].tolist() == [7]
    copies = trace.table("memcpy_begin")
    assert copies.text("copy_kind").tolist() == ["HtoD pageable"] and copies["queue"].tolist() == [9]
    assert trace.table("memset_begin")["correlation_id"].tolist() == [13]
    api = trace.table("api_enter")
    assert sorted(zip(api.text("name").tolist(), api["correlation_id"].tolist())) == [
        ("cudaLaunchKernel", 11), ("cudaMemcpyAsync", 12), ("cudaMemsetAsync", 14)]
    # dfc:launch only for the calls whose GPU work is here, at the call's start
    launches = trace.table("launch")
    assert launches["correlation_id"].tolist() == [11, 12]
    assert launches["timestamp"].tolist() == [t for t, c in zip(api["timestamp"].tolist(), api["correlation_id"].tolist())
                                              if c in (11, 12)]
    device_names = trace.table("device_info").text("name").tolist()
    assert "cuda:0" in device_names
