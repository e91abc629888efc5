"""The memory analysis: peaks, churn, redundant transfers, pageable copies, findings, text and plot.

The synthetic trace (times in ns, two steps on thread 1):

    step 0 [1000, 2000]: node 1 aten::to "load_mask" [1100, 1200], node 2 aten::mm "layer.mm" [1300, 1600]
    step 1 [2000, 3000]: node 3 aten::to "load_mask" [2100, 2200], node 4 aten::mm "layer.mm" [2300, 2600]
    thread 2: node 5 aten::add "other" [1390, 1410] (overlaps node 2: two nodes open)

Copies on cuda:0 (launching call inside the node named):
    corr 10 HtoD pageable 4096 B [1150, 1250]  load_mask, step 0
    corr 20 HtoD pageable 4096 B [2150, 2250]  load_mask, step 1   -> the same upload in every step
    corr 30 HtoD pinned   8192 B [1450, 1490]  layer.mm, step 0 only
    corr 40 DtoH pinned   1000 B [2450, 2460]  layer.mm, step 1
    corr 50 DtoD          2048 B [2500, 2520]  (not a host copy)
    corr 0  HtoD (kind not recorded) 500 B [2700, 2705], no launch: step of its start, 1

cuda:0 memory (bytes_in_use recorded):
    1150 alloc A 0x100 1000 -> 1000     1360 free A -> 3000 (lived 210: short)
    1350 alloc B 0x200 3000 -> 4000     1400 alloc C 0x300 500 -> 3500 (two nodes open: unknown)
    1500 alloc D 0x400 2000 -> 5500 PEAK (step 0, layer.mm)   1700 free D -> 3500 (short)
    2350 alloc E 0x500 2000 -> 5500 (equal, not first)        2360 free E -> 3500 (short)
    2900 alloc F 0x600 100 -> 3600 (never freed)
    1_001_350 free B -> 600 (lived exactly 1_000_000: not short, the limit is strict)
cpu memory (bytes_in_use 0 everywhere, so the running sum is used): 5 x (alloc 100 B at 0x10, free
5 ns later) from 1210 and from 2610, when no node runs.

Tensor edges: tensor 7 (1024 B) cpu -> cuda:0 twice, tensor 8 cpu -> cpu, tensor 9 cuda:0 -> cpu once.
The trace spans [1000, 1_001_350] (step_begin at 1000; device_info at 1001, its strings at 1000): 1.00035 ms.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tc_analyses.analyses.memory import (
    SHORT_LIVED_NS,
    CopyKindStats,
    LiveBlock,
    RepeatedTensor,
    RepeatedUpload,
    analyze_memory,
    direction_of,
    host_memory_of,
)
from tc_analyses.errors import AnalysisUnavailable, DfcompassError
from tc_analyses.export.memory_report import memory_text, write_memory_plot
from tc_analyses.reader import read_trace
from tracer.builder import TraceBuilder
from tracer.copy_kinds import copy_kind_of
from tracer.importers.kineto_source import copy_kind

SPAN_MS = (1_001_350 - 1_000) / 1e6


def _trace(tmp_path: Path, env: dict[str, str | int] | None = None) -> Path:
    out = tmp_path / "mem"
    with TraceBuilder(out, clock_offset_ns=0, env=env) as b:
        cpu, gpu = b.device("cpu", ts=1002), b.device("cuda:0", ts=1002)
        for step, (lo, hi) in enumerate(((1000, 2000), (2000, 3000))):
            b.add("step_begin", "1", lo, step, 1)
            b.add("step_end", "1", hi, step, 1)
        for nid, op, name, start, end, step, tid in (
                (1, "aten::to", "load_mask", 1100, 1200, 0, 1), (2, "aten::mm", "layer.mm", 1300, 1600, 0, 1),
                (3, "aten::to", "load_mask", 2100, 2200, 1, 1), (4, "aten::mm", "layer.mm", 2300, 2600, 1, 1),
                (5, "aten::add", "other", 1390, 1410, 0, 2)):
            b.add("node_begin", str(tid), start, nid, op, name, cpu, tid, step)
            b.add("node_end", str(tid), end, nid, cpu, tid)
        for corr, at in ((10, 1110), (20, 2110), (30, 1400), (40, 2400), (50, 2480)):
            b.add("api_enter", "1", at, 1, "cudaMemcpyAsync", corr)
            b.add("api_exit", "1", at + 10, 1, "cudaMemcpyAsync", corr)
        for corr, start, end, nbytes, kind, src, dst in (
                (10, 1150, 1250, 4096, "HtoD pageable", cpu, gpu), (20, 2150, 2250, 4096, "HtoD pageable", cpu, gpu),
                (30, 1450, 1490, 8192, "HtoD pinned", cpu, gpu), (40, 2450, 2460, 1000, "DtoH pinned", gpu, cpu),
                (50, 2500, 2520, 2048, "DtoD", gpu, gpu), (0, 2700, 2705, 500, "HtoD", cpu, gpu)):
            b.add("memcpy_begin", "g", start, gpu, 7, corr, nbytes, kind, src, dst)
            b.add("memcpy_end", "g", end, gpu, 7, corr)
        for ts, kind, addr, nbytes, in_use in (
                (1150, "mem_alloc", 0x100, 1000, 1000), (1350, "mem_alloc", 0x200, 3000, 4000),
                (1360, "mem_free", 0x100, 1000, 3000), (1400, "mem_alloc", 0x300, 500, 3500),
                (1500, "mem_alloc", 0x400, 2000, 5500), (1700, "mem_free", 0x400, 2000, 3500),
                (2350, "mem_alloc", 0x500, 2000, 5500), (2360, "mem_free", 0x500, 2000, 3500),
                (2900, "mem_alloc", 0x600, 100, 3600), (1_001_350, "mem_free", 0x200, 3000, 600)):
            b.add(kind, "m", ts, gpu, addr, nbytes, in_use)
        for first in (1210, 2610):
            for k in range(5):
                b.add("mem_alloc", "c", first + 10 * k, cpu, 0x10, 100, 0)
                b.add("mem_free", "c", first + 10 * k + 5, cpu, 0x10, 100, 0)
        for at, producer, consumer, tensor, src, dst in (
                (1300, 1, 2, 7, cpu, gpu), (2300, 3, 4, 7, cpu, gpu), (1300, 1, 2, 8, cpu, cpu),
                (2300, 4, 3, 9, gpu, cpu)):
            b.add("tensor_edge", "1", at, producer, consumer, tensor, 1024, src, dst)
    return out


@pytest.fixture()
def result(tmp_path: Path):  # type: ignore[no-untyped-def]
    return analyze_memory(_trace(tmp_path))


def test_peak_per_device(result) -> None:  # type: ignore[no-untyped-def]
    cpu, gpu = result.peaks
    assert (gpu.device, gpu.peak_bytes, gpu.time_ns, gpu.step, gpu.node, gpu.in_use_recorded) == (
        "cuda:0", 5500, 1500, 0, "layer.mm (aten::mm)", True)
    # live at 1500: B, C, D (A was freed at 1360); 3000 + 500 + 2000 = 5500, largest first
    assert (gpu.live_blocks, gpu.live_bytes) == (3, 5500)
    assert gpu.largest == (LiveBlock(0x200, 3000, 1350, "layer.mm (aten::mm)"),
                           LiveBlock(0x400, 2000, 1500, "layer.mm (aten::mm)"),
                           LiveBlock(0x300, 500, 1400, "unknown"))  # 1400: nodes 2 and 5 open
    assert gpu.series[:3] == ((1150, 1000), (1350, 4000), (1360, 3000)) and len(gpu.series) == 10
    # cpu: running sum 100, 0, 100, ... -> 100 first reached at 1210, between nodes 1 and 2
    assert (cpu.device, cpu.peak_bytes, cpu.time_ns, cpu.step, cpu.node, cpu.in_use_recorded) == (
        "cpu", 100, 1210, 0, "unknown", False)
    assert cpu.largest == (LiveBlock(0x10, 100, 1210, "unknown"),)


def test_churn(result) -> None:  # type: ignore[no-untyped-def]
    cpu, gpu = result.churn
    # cuda:0: 6 allocations, 4 frees, 1000+3000+500+2000+2000+100 = 8600 B, all inside the 2 steps
    assert (gpu.allocations, gpu.frees, gpu.bytes_allocated) == (6, 4, 8600)
    assert gpu.allocations_per_step == 3.0 and gpu.bytes_per_step == 4300.0
    assert gpu.allocations_per_ms == pytest.approx(6 / SPAN_MS)
    assert gpu.short_lived == 3  # A (210 ns), D (200), E (10); B lived exactly SHORT_LIVED_NS
    assert SHORT_LIVED_NS == 1_000_000
    assert gpu.short_lived_share == pytest.approx(3 / 6)
    assert gpu.turnover == pytest.approx(4300 / 5500)
    # cpu: 10 x 100 B, 5 per step, all freed after 5 ns; turnover 500 / 100 = 5
    assert (cpu.allocations, cpu.frees, cpu.bytes_allocated, cpu.short_lived) == (10, 10, 1000, 10)
    assert (cpu.allocations_per_step, cpu.bytes_per_step, cpu.short_lived_share) == (5.0, 500.0, 1.0)
    assert cpu.allocations_per_ms == pytest.approx(10 / SPAN_MS)
    assert cpu.turnover == pytest.approx(5.0)


def test_redundant_transfers(result) -> None:  # type: ignore[no-untyped-def]
    assert result.steps == 2
    # tensor 7 went cpu -> cuda:0 twice: one move of 1024 B too many, 512 B per step
    assert result.repeated_tensors == (RepeatedTensor(7, "cpu", "cuda:0", 2, 1024, 1024),)
    assert result.tensor_wasted_bytes_per_step == 512.0
    # at the trace's HtoD rate: (4096 + 4096 + 8192 + 500) B in (100 + 100 + 40 + 5) ns
    assert result.tensor_wasted_ns_per_step == pytest.approx(1024 * 245 / 16884 / 2)
    # the 4096 B upload of load_mask is in both steps; layer.mm's 8192 B only in step 0; the
    # unlaunched 500 B copy only in step 1
    assert result.repeated_uploads == (RepeatedUpload("cuda:0", "aten::to", "load_mask", 4096, 2, 1.0, 4096.0, 100.0),)
    assert (result.upload_wasted_bytes_per_step, result.upload_wasted_ns_per_step) == (4096.0, 100.0)


def test_copies_by_host_memory(result) -> None:  # type: ignore[no-untyped-def]
    assert result.copy_kinds == (
        CopyKindStats("HtoD", "pageable", 2, 8192, 200, 8192 / 200),
        CopyKindStats("HtoD", "pinned", 1, 8192, 40, 8192 / 40),
        CopyKindStats("HtoD", "unknown", 1, 500, 5, 500 / 5),
        CopyKindStats("DtoH", "pinned", 1, 1000, 10, 1000 / 10),
    )


def test_findings_most_important_first(result) -> None:  # type: ignore[no-untyped-def]
    # impact: upload 100 ns/step x 2 = 200, pageable 200 ns, tensor round(1024 * 245 / 16884) = 15;
    # churn and peaks 0. Ties keep the order upload, pageable, tensor, churn, peak.
    assert [(f.kind, f.impact_ns) for f in result.findings] == [
        ("repeated_upload", 200), ("pageable", 200), ("redundant_tensor", 15), ("churn", 0), ("peak", 0),
        ("peak", 0)]
    upload, pageable, tensor, churn, cpu_peak, gpu_peak = (f.text for f in result.findings)
    assert "aten::to in load_mask, 1 x 4.0 KiB to cuda:0 per step" in upload and "outside the step loop" in upload
    # pinned: (8192 + 1000) B / (40 + 10) ns = 183.84 GB/s
    assert "2 copies (2 HtoD) use pageable host memory: 8.0 KiB in 200 ns at 40.96 GB/s" in pageable
    assert "(pinned copies here: 183.84 GB/s)" in pageable
    assert "pin_memory=True" in pageable and "non_blocking=True" in pageable
    assert "512 B moved again per step" in tensor and "tensor 7, 1.0 KiB cpu -> cuda:0 2 times" in tensor
    assert churn.startswith("cpu: 5 allocations and 500 B per step, 5.0x its peak, 100% freed within 1.00 ms")
    assert "jemalloc" in churn
    assert "cuda:0 peaks at 5.4 KiB at 500 ns in step 0 while layer.mm (aten::mm) runs" in gpu_peak
    assert "2.9 KiB from layer.mm (aten::mm)" in gpu_peak and "cpu peaks at 100 B at 210 ns in step 0 (no single node running)" in cpu_peak


def test_text_and_plot(result, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = memory_text(result)
    assert "cuda:0 live at peak: 2.9 KiB at 0x200, allocated at 350 ns by layer.mm (aten::mm)" in text
    assert "HtoD       pageable          2  8.0 KiB  200 ns  40.96" in text
    assert "findings:\n  1. 1 host-to-device upload(s)" in text and "\n  6. cuda:0 peaks" in text
    first = write_memory_plot(result, tmp_path / "a")
    second = write_memory_plot(result, tmp_path / "b")
    assert [p.name for p in first] == ["memory.png", "memory.svg"]
    assert first[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]  # deterministic


def test_only_tensor_edges_without_copies_or_steps(tmp_path: Path) -> None:
    out = tmp_path / "edges"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, gpu = b.device("cpu", ts=10), b.device("cuda:0", ts=10)
        for at in (10, 20, 30):
            b.add("tensor_edge", "1", at, 1, 2, 3, 100, cpu, gpu)
    r = analyze_memory(out)
    # 3 moves of tensor 3: 2 x 100 B too many, no steps (the whole trace), no copy to time them
    assert r.repeated_tensors == (RepeatedTensor(3, "cpu", "cuda:0", 3, 100, 200),)
    assert (r.steps, r.tensor_wasted_bytes_per_step, r.tensor_wasted_ns_per_step) == (0, 200.0, None)
    assert (r.peaks, r.churn, r.copy_kinds, r.repeated_uploads) == ((), (), (), ())
    assert [f.kind for f in r.findings] == ["redundant_tensor"]
    assert "200 B moved again in the trace" in r.findings[0].text
    assert "no dfc:mem_alloc" in memory_text(r)
    assert [p.name for p in write_memory_plot(r, tmp_path / "p")] == ["memory.png", "memory.svg"]


def test_no_memory_events_and_no_copies_is_an_error(tmp_path: Path) -> None:
    out = tmp_path / "bare"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu = b.device("cpu", ts=10)
        b.add("node_begin", "1", 10, 1, "relu", "relu", cpu, 1, 0)
        b.add("node_end", "1", 20, 1, cpu, 1)
    with pytest.raises(AnalysisUnavailable, match=r"^.*bare: no memory events") as caught:
        analyze_memory(out)
    assert isinstance(caught.value, DfcompassError) and "\n" not in str(caught.value)
    assert not issubclass(AnalysisUnavailable, MemoryError)


@pytest.mark.parametrize("name,value", [
    ("Memcpy HtoD (Pageable -> Device)", "HtoD pageable"),
    ("Memcpy HtoD (Pinned -> Device)", "HtoD pinned"),
    ("Memcpy DtoH (Device -> Pageable)", "DtoH pageable"),
    ("Memcpy DtoH (Device -> Pinned)", "DtoH pinned"),
    ("Memcpy DtoD (Device -> Device)", "DtoD"),
    ("Memcpy HtoH (Pinned -> Pageable)", "HtoH pageable"),  # either end pageable: the slow kind
    ("Memcpy HtoH (Pinned -> Pinned)", "HtoH pinned"),
    ("Memcpy PtoP (Device -> Device)", "PtoP"),
    ("Memcpy HtoA (Pinned -> Array)", "HtoD pinned"),  # a CUDA array is device memory
    ("Memcpy AtoH (Array -> Pageable)", "DtoH pageable"),
    ("Memcpy HtoD (Managed -> Device)", "HtoD"),  # neither pageable nor pinned: not recorded
    ("Memcpy HtoD", "HtoD"),
    ("Memcpy DtoH (Device -> Unknown)", "DtoH"),
    ("Something else", "Unknown"),
    ("", "Unknown"),
])
def test_copy_kind_names(name: str, value: str) -> None:
    # The Kineto importer and the PyTorch source (torch_gpu.write_gpu) share this parser.
    assert copy_kind_of(name) == copy_kind(name) == value


@pytest.mark.parametrize("value,direction,host", [
    ("HtoD pageable", "HtoD", "pageable"), ("DtoH pinned", "DtoH", "pinned"), ("HtoD", "HtoD", "unknown"),
    ("DtoD", "DtoD", "unknown"), ("", "", "unknown"),
])
def test_direction_is_the_first_word(value: str, direction: str, host: str) -> None:
    assert (direction_of(value), host_memory_of(value)) == (direction, host)


def test_kineto_trace_pageable_and_pinned(shared_dir: Path, tmp_path: Path) -> None:
    from tracer.importers import import_kineto

    src = shared_dir / "traces" / "kineto" / "hta-sampled-2rank" / "sampled_rank-0.json.gz"
    if not src.exists():
        pytest.skip(f"{src} not present")
    import_kineto(src, tmp_path / "k")
    kinds = collections.Counter(read_trace(tmp_path / "k").table("memcpy_begin").text("copy_kind").tolist())
    assert kinds == {"HtoD pageable": 16, "DtoH pageable": 8, "HtoD pinned": 8, "DtoD": 8}
    r = analyze_memory(tmp_path / "k")
    assert [(k.direction, k.host_memory, k.copies) for k in r.copy_kinds] == [
        ("HtoD", "pageable", 16), ("HtoD", "pinned", 8), ("DtoH", "pageable", 8)]
    assert "pageable" in [f.kind for f in r.findings]
    assert r.peaks == ()  # the file has no [memory] events


def test_plot_series_keep_the_peaks() -> None:
    from tc_analyses.analyses import memory

    # 5000 points, one spike at index 3001: bins of ceil(5000 / 2000) = 3 points, the largest of each
    points = [(t, 10) for t in range(5000)]
    points[3001] = (3001, 99)
    kept = memory._envelope(points)
    assert len(kept) == 1667 and (3001, 99) in kept and kept[0] == (0, 10)


def test_advice_is_in_the_words_of_the_traces_framework(tmp_path: Path) -> None:
    """No torch.utils.checkpoint on a TensorFlow trace (its metadata notes TF's thread settings); a
    trace of neither framework gets the generic words."""
    for env, present, absent in (
            ({"tf_intra_op_threads": 2}, ("tf.recompute_grad", "prefetch_to_device", "tf.device"),
             ("torch", "pin_memory", "PYTORCH_")),
            ({"torch_num_threads": 2}, ("torch.utils.checkpoint", "pin_memory=True", "x.to(device)"), ("tf.",))):
        folder = tmp_path / next(iter(env))
        folder.mkdir()
        text = " ".join(f.text for f in analyze_memory(_trace(folder, env)).findings)
        assert all(word in text for word in present), (env, text)
        assert not any(word in text for word in absent), (env, text)
