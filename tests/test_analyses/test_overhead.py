"""Runtime-overhead analysis, its trajectory, text and plots, checked against numbers computed by hand."""

from __future__ import annotations

import bisect
import gzip
import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tc_analyses.analyses.overhead import (
    NO_GPU,
    NO_OWNER,
    WHOLE_TRACE,
    OverheadResult,
    analyze_overhead,
    overhead_trajectory,
)
from tc_analyses.errors import AnalysisUnavailable, ConfigurationError, DfcompassError
from tc_analyses.export.overhead_report import (
    overhead_text,
    trajectory_text,
    write_overhead_plot,
    write_trajectory_plot,
)
from tc_analyses.model.activity import read_activity
from tc_analyses.reader import read_trace
from tracer.builder import TraceBuilder
from tracer.importers import import_kineto

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _trace(path: Path, *, steps: bool = True) -> Path:
    """Two steps, two op types (aten::add, aten::mm), GPU queues 7 and 8 of cuda:0.

    step 0 [100, 1100), host-bound:
      add1 [100, 300): cudaGetDevice [120, 125) launches nothing; cudaLaunchKernel #1 [150, 170) -> kernel
        q7 [200, 230); cudaMemcpyAsync #2 [180, 200) -> memcpy q7 [240, 250)
        H = 150-100 = 50, L = 20+20 = 40, K = 30+10 = 40, Q = 200-170 = 30 and 240-200 = 40 (mean 35)
      mm1 [300, 500) with a nested aten::inner [305, 335): #3 [310, 330) -> kernel q7 [340, 380)
        H = 10, L = 20, K = 40, Q = 10
      view [500, 520): no GPU work
      thread 2 (no op open): #4 [250, 260) -> kernel q8 [360, 420), overlapping mm1's kernel
    step 1 [1100, 2100), GPU-bound:
      add2 [1100, 1200): #5 [1120, 1130) -> kernel q7 [1150, 1250)     H = 20, L = 10, K = 100, Q = 20
      mm2 [1200, 1300): #6 [1210, 1230) -> kernel q7 [1260, 1860) (Q 30); cudaMemsetAsync #7 [1240, 1250)
        -> memset q8 [1300, 1400) (Q 50)                                H = 10, L = 30, K = 700, Q mean 40
      kernel #8 q8 [2050, 2200) has no launch and ends after the step
    """
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True) as b:
        cpu, gpu = b.device("cpu", 10), b.device("cuda:0", 10)

        def node(nid: int, op: str, name: str, start: int, end: int, step: int) -> None:
            b.add("node_begin", "1", start, nid, op, name, cpu, 1, step)
            b.add("node_end", "1", end, nid, cpu, 1)

        def api(tid: int, name: str, corr: int, start: int, end: int) -> None:
            b.add("api_enter", str(tid), start, tid, name, corr)
            b.add("api_exit", str(tid), end, tid, name, corr)

        def kernel(queue: int, corr: int, start: int, end: int) -> None:
            b.add("kernel_begin", "g", start, gpu, queue, corr, f"k{corr}", 1, 1, 1, 32, 1, 1)
            b.add("kernel_end", "g", end, gpu, queue, corr)

        if steps:
            for step, (lo, hi) in enumerate([(100, 1100), (1100, 2100)]):
                b.add("step_begin", "1", lo, step, 1)
                b.add("step_end", "1", hi, step, 1)
        node(1, "aten::add", "add1", 100, 300, 0)
        api(1, "cudaGetDevice", 0, 120, 125)
        api(1, "cudaLaunchKernel", 1, 150, 170)
        api(1, "cudaMemcpyAsync", 2, 180, 200)
        kernel(7, 1, 200, 230)
        b.add("memcpy_begin", "g", 240, gpu, 7, 2, 4096, "HtoD", cpu, gpu)
        b.add("memcpy_end", "g", 250, gpu, 7, 2)
        node(2, "aten::mm", "mm1", 300, 500, 0)
        node(3, "aten::inner", "inner", 305, 335, 0)
        api(1, "cudaLaunchKernel", 3, 310, 330)
        kernel(7, 3, 340, 380)
        node(4, "aten::view", "view", 500, 520, 0)
        api(2, "cudaLaunchKernel", 4, 250, 260)
        kernel(8, 4, 360, 420)
        node(5, "aten::add", "add2", 1100, 1200, 1)
        api(1, "cudaLaunchKernel", 5, 1120, 1130)
        kernel(7, 5, 1150, 1250)
        node(6, "aten::mm", "mm2", 1200, 1300, 1)
        api(1, "cudaLaunchKernel", 6, 1210, 1230)
        api(1, "cudaMemsetAsync", 7, 1240, 1250)
        kernel(7, 6, 1260, 1860)
        b.add("memset_begin", "g", 1300, gpu, 8, 7, 256)
        b.add("memset_end", "g", 1400, gpu, 8, 7)
        kernel(8, 8, 2050, 2200)
    return path


def _analyze(path: Path) -> OverheadResult:
    return analyze_overhead(read_activity(read_trace(path)), str(path))


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> OverheadResult:
    return _analyze(_trace(tmp_path_factory.mktemp("overhead") / "t"))


def test_per_op_components(result: OverheadResult) -> None:
    # (name, step, H, L, H+L, mean Q, first Q, K, launches, GPU ops, short); view has no GPU work, inner is nested.
    assert [(o.name, o.step, o.host_ns, o.launch_ns, o.overhead_ns, o.queue_ns, o.first_queue_ns, o.device_ns,
             o.launches, o.gpu_ops, o.short) for o in result.ops] == [
        ("add1", 0, 50, 40, 90, 35.0, 30, 40, 2, 2, True),
        ("mm1", 0, 10, 20, 30, 10.0, 10, 40, 1, 1, False),
        ("add2", 1, 20, 10, 30, 20.0, 20, 100, 1, 1, False),
        ("mm2", 1, 10, 30, 40, 40.0, 30, 700, 2, 2, False),
    ]
    assert (result.gpu_ops, result.gpu_ops_unowned, result.gpu_ops_unlaunched) == (8, 1, 1)


def test_steps_ratio_and_exposed_host_time(result: OverheadResult) -> None:
    s0, s1 = result.steps
    # step 0: sum K = 40+40 = 80, sum H = 50+10 = 60, sum L = 40+20 = 60 -> 80/120.
    # GPU busy = [200,230) + [240,250) + [340,380) u [360,420) = 30 + 10 + 80 = 120 -> exposed 1000-120.
    assert (s0.step, s0.duration_ns, s0.ops, s0.host_ns, s0.launch_ns, s0.device_ns) == (0, 1000, 2, 60, 60, 80)
    assert s0.hiding_ratio == pytest.approx(80 / 120) and s0.host_bound
    assert (s0.gpu_busy_ns, s0.exposed_host_ns) == (120, 880)
    assert s0.gpu_busy_share == pytest.approx(0.12) and s0.exposed_host_share == pytest.approx(0.88)
    assert s0.short_op_fraction == pytest.approx(0.5)
    # step 1: sum K = 100+700 = 800, H+L = 30+40 = 70. Busy = [1150,1250) + [1260,1860) (the memset
    # [1300,1400) lies inside) + [2050,2100) of the kernel clipped at the step end = 100+600+50 = 750.
    assert (s1.step, s1.ops, s1.device_ns, s1.host_ns + s1.launch_ns) == (1, 2, 800, 70)
    assert s1.hiding_ratio == pytest.approx(800 / 70) and not s1.host_bound
    assert (s1.gpu_busy_ns, s1.exposed_host_ns) == (750, 250)


def test_trace_totals(result: OverheadResult) -> None:
    assert not result.whole_trace and result.notes == ()
    assert result.hiding_ratio == pytest.approx((80 + 800) / (120 + 70))
    assert result.mean_step_ns == 1000.0
    assert result.gpu_busy_share == pytest.approx((120 + 750) / 2000)
    assert result.exposed_host_share == pytest.approx((880 + 250) / 2000)
    assert result.short_op_fraction == pytest.approx(1 / 4)  # add1 only
    # Kernels against their op type's median H+L (add: median(90, 30) = 60, mm: median(30, 40) = 35):
    # add1 30 < 60 short; mm1 40, add2 100, mm2 600 not. The memcpy and memset are not kernels.
    assert result.short_kernel_share == pytest.approx(1 / 4)
    assert result.mean_kernel_ns == pytest.approx((30 + 40 + 60 + 100 + 600 + 150) / 6)  # every kernel
    assert result.mean_queue_ns == pytest.approx((30 + 40 + 10 + 20 + 30 + 50) / 6)  # owned GPU ops


def test_op_types(result: OverheadResult) -> None:
    add, mm = result.op_types  # most exposed overhead first: add 90-40 = 50, mm 0
    assert (add.op, add.count, add.gpu_ops) == ("aten::add", 2, 3)
    assert (add.mean_host_ns, add.mean_launch_ns, add.mean_queue_ns, add.mean_device_ns) == (35, 25, 27.5, 70)
    assert (add.min_hiding_kernel_ns, add.short_share, add.exposed_overhead_ns) == (60.0, 0.5, 50)
    assert add.hiding_ratio == pytest.approx(140 / 120)
    assert (mm.op, mm.count, mm.mean_host_ns, mm.mean_launch_ns, mm.mean_queue_ns, mm.mean_device_ns) == (
        "aten::mm", 2, 10, 25, 25, 370)
    assert (mm.min_hiding_kernel_ns, mm.short_share, mm.exposed_overhead_ns) == (35.0, 0.0, 0)


def test_findings(result: OverheadResult) -> None:
    step, exposed, short, unattributed = (f.text for f in result.findings)  # mean Q 30 < mean H+L 47.5: no queue finding
    assert step.startswith("Host-bound in 1 of 2 steps: hiding ratio below 1 (step 0: 0.667, K 80 ns vs H+L 120 ns)")
    assert "idle 88% of that step" in step and "CUDA graphs" in step
    assert "aten::add 50 ns over 2 runs (H 35 ns + L 25 ns vs K 70 ns per run)" in exposed
    assert "aten::mm" not in exposed and "torch.compile" in exposed
    assert short.startswith("25% of the ops with GPU work are short (K < H+L); 25% of kernels")
    assert "aten::add: 60 ns" in short
    assert unattributed.startswith("2 GPU ops (210 ns)")  # the unowned 60 ns and the unlaunched 150 ns kernels


def test_no_steps_is_one_window(tmp_path: Path) -> None:
    r = _analyze(_trace(tmp_path / "t", steps=False))
    assert r.whole_trace and "no steps" in r.notes[0]
    (whole,) = r.steps
    # From the first node start (100) to the last GPU end (2200); busy = 30+10+80+100+600+150 = 970.
    assert (whole.step, whole.start, whole.end, whole.ops) == (WHOLE_TRACE, 100, 2200, 4)
    assert (whole.gpu_busy_ns, whole.exposed_host_ns) == (970, 2100 - 970)
    assert whole.hiding_ratio == pytest.approx(880 / 190) and not whole.host_bound
    assert {o.step for o in r.ops} == {WHOLE_TRACE}
    assert r.findings[0].text.startswith("GPU-bound: every step hides its host overhead (hiding ratio 4.63)")
    assert "whole trace" in overhead_text(r)


def test_errors(tmp_path: Path) -> None:
    with TraceBuilder(tmp_path / "cpu", clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        b.add("node_begin", "1", 100, 0, "aten::add", "add", cpu, 1, 0)
        b.add("node_end", "1", 200, 0, cpu, 1)
    with pytest.raises(AnalysisUnavailable, match="cpu: no GPU activity joined to API calls") as err:
        _analyze(tmp_path / "cpu")
    assert isinstance(err.value, DfcompassError) and str(err.value) == f"{tmp_path / 'cpu'}: {NO_GPU}"
    with TraceBuilder(tmp_path / "unjoined", clock_offset_ns=0) as b:  # kernels without correlation ids
        gpu = b.device("cuda:0", 10)
        b.add("kernel_begin", "g", 100, gpu, 7, 0, "k", 1, 1, 1, 1, 1, 1)
        b.add("kernel_end", "g", 200, gpu, 7, 0)
    with pytest.raises(AnalysisUnavailable, match="no GPU activity joined"):
        _analyze(tmp_path / "unjoined")
    with TraceBuilder(tmp_path / "ownerless", clock_offset_ns=0) as b:  # joined, but no node owns the launch
        gpu = b.device("cuda:0", 10)
        b.add("api_enter", "1", 50, 1, "cudaLaunchKernel", 3)
        b.add("api_exit", "1", 60, 1, "cudaLaunchKernel", 3)
        b.add("kernel_begin", "g", 100, gpu, 7, 3, "k", 1, 1, 1, 1, 1, 1)
        b.add("kernel_end", "g", 200, gpu, 7, 3)
    with pytest.raises(AnalysisUnavailable) as err:
        _analyze(tmp_path / "ownerless")
    assert str(err.value) == f"{tmp_path / 'ownerless'}: {NO_OWNER}"


def _at(r: OverheadResult, ratio: float | None, step_ns: float = 1000.0) -> OverheadResult:
    return replace(r, hiding_ratio=ratio, mean_step_ns=step_ns)


def test_trajectory_order_and_crossing(result: OverheadResult) -> None:
    traj = overhead_trajectory([("32", _at(result, 3.0, 3200)), ("8", _at(result, 0.5, 1600)),
                                ("16", _at(result, 1.5, 2000))])
    assert traj.numeric and [p.label for p in traj.points] == ["8", "16", "32"]  # numerically, not "16" < "32" < "8"
    assert [p.hiding_ratio for p in traj.points] == [0.5, 1.5, 3.0]
    assert traj.crossing == "16"
    assert traj.findings[0].text.startswith("the hiding ratio crosses 1 between 8 (0.5) and 16 (1.5): from 16 on")
    # Per label unit: 1600/8 = 200 ns, 3200/32 = 100 ns.
    assert traj.findings[2].text.endswith("200 ns at 8, 100 ns at 32")
    p = traj.points[0]
    assert (p.steps, p.exposed_host_share, p.short_op_fraction, p.mean_kernel_ns) == (
        2, result.exposed_host_share, 0.25, result.mean_kernel_ns)
    text = trajectory_text(traj)
    assert "crossing: 16" in text and text.index("\n8 ") < text.index("\n16 ") < text.index("\n32 ")


def test_trajectory_without_crossing(result: OverheadResult) -> None:
    words = overhead_trajectory([("small", _at(result, 2.0)), ("large", _at(result, 4.0))])
    assert not words.numeric and [p.label for p in words.points] == ["small", "large"]  # as given
    assert words.crossing is None and "every label" in words.findings[0].text
    low = overhead_trajectory([("1", _at(result, 0.2)), ("2", _at(result, 0.4))])
    assert low.crossing is None and "never reaches 1 (best 0.4 at 2)" in low.findings[0].text
    back = overhead_trajectory([("1", _at(result, 0.5)), ("2", _at(result, 1.5)), ("4", _at(result, 0.8))])
    assert back.crossing is None and "falls back to 0.8 at 4" in back.findings[0].text
    with pytest.raises(ConfigurationError, match="label '1' is given twice"):
        overhead_trajectory([("1", result), ("1", result)])
    with pytest.raises(ConfigurationError, match="no traces"):
        overhead_trajectory([])


def test_text_report(result: OverheadResult) -> None:
    lines = overhead_text(result).splitlines()
    assert lines[2] == "ops:      4 with GPU work; 8 GPU ops (1 without a recorded launch, 1 launched outside any op)"
    assert lines[3].startswith("overall:  hiding ratio 4.63 (GPU-bound:")  # 880/190 over both steps
    step0 = next(line for line in lines if line.startswith("0 "))
    assert step0.split()[-2:] == ["50.0%", "host-bound"] and "0.667" in step0 and "880 ns" in step0
    add = next(line for line in lines if line.startswith("aten::add"))
    assert add.split() == ["aten::add", "2", "35", "ns", "25", "ns", "28", "ns", "70", "ns", "60", "ns", "50.0%",
                           "50", "ns"]  # mean Q 27.5 ns shows as 28 ns
    assert lines.index("findings:") < len(lines) - 4


@pytest.mark.slow
def test_plots_are_written_and_deterministic(result: OverheadResult, tmp_path: Path) -> None:
    traj = overhead_trajectory([("8", _at(result, 0.5)), ("16", _at(result, 1.5))])
    for write, stem in ((lambda d: write_overhead_plot(result, d), "overhead"),
                        (lambda d: write_trajectory_plot(traj, d), "overhead-trajectory")):
        png, svg = write(tmp_path / "a")
        assert (png.name, svg.name) == (f"{stem}.png", f"{stem}.svg")
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert etree.parse(str(svg)).getroot().tag.endswith("svg")
        again = write(tmp_path / "b")
        assert again[0].read_bytes() == png.read_bytes() and again[1].read_bytes() == svg.read_bytes()


def test_result_serialises(result: OverheadResult) -> None:
    from dataclasses import asdict

    doc = json.loads(json.dumps(asdict(result), default=str))
    assert doc["steps"][0]["exposed_host_ns"] == 880 and doc["op_types"][0]["op"] == "aten::add"


# ----------------------------------------------------------------------------- a real Kineto trace
def _ns(us: Decimal) -> int:
    return int((us * 1000).to_integral_value())


@pytest.mark.shared
@pytest.mark.slow
def test_real_hta_nccl_trace(shared_dir: Path, tmp_path: Path) -> None:
    src = shared_dir / "traces" / "kineto" / "hta-nccl-rank0" / "nccl_data.json.gz"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    import_kineto(src, tmp_path / "nccl")
    r = _analyze(tmp_path / "nccl")
    # Independently, from the raw JSON: GPU activities, their launches and the outermost cpu_op per thread.
    events = json.loads(gzip.decompress(src.read_bytes()), parse_float=Decimal)["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X"]
    gpu = [e for e in slices if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    gpu_corr = {e["args"]["correlation"] for e in gpu}
    outer: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    for e in sorted((e for e in slices if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"])):
        runs = outer.setdefault((e["pid"], e["tid"]), [])
        start, end = _ns(e["ts"]), _ns(e["ts"] + e["dur"])
        if not runs or start >= runs[-1][1]:
            runs.append((start, end))
    owners = set()
    for e in slices:
        if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in gpu_corr:
            runs, ts = outer.get((e["pid"], e["tid"]), []), _ns(e["ts"])
            at = bisect.bisect_right(runs, (ts, 1 << 62)) - 1
            if at >= 0 and runs[at][0] <= ts <= runs[at][1]:
                owners.add((e["pid"], e["tid"], runs[at][0]))
    assert len(r.ops) == len(owners) == 2637
    assert r.gpu_ops == len(gpu) and r.gpu_ops_unowned == r.gpu_ops_unlaunched == 0
    assert sum(o.device_ns for o in r.ops) == sum(_ns(e["dur"]) for e in gpu)  # every GPU op is owned
    # Steps: the ProfilerStep#N annotations; GPU busy time is the union of the GPU slices clipped to each.
    marks = sorted((_ns(e["ts"]), _ns(e["ts"] + e["dur"]), int(e["name"].split("#")[1]))
                   for e in slices if str(e.get("name", "")).startswith("ProfilerStep#"))
    assert [(s.step, s.duration_ns) for s in r.steps] == [(n, hi - lo) for lo, hi, n in marks]
    intervals = sorted((_ns(e["ts"]), _ns(e["ts"] + e["dur"])) for e in gpu)
    for s, (lo, hi, _) in zip(r.steps, marks):
        busy, reach = 0, lo
        for a, b in intervals:
            a, b = max(a, reach), min(b, hi)
            if b > a:
                busy, reach = busy + b - a, b
        assert s.gpu_busy_ns == busy and s.exposed_host_ns == (hi - lo) - busy
        assert s.host_bound  # this DDP ResNet run on a small batch is host-bound in every step
    assert r.findings[0].text.startswith("Host-bound in all 3 steps")
