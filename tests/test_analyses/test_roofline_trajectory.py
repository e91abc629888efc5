"""Roofline trajectories across runs (Javed, Ibrahim and Lu, CCF THPC 2019): points, ordering, findings, plot and CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.analyses.labels import default_labels, order_runs
from tc_analyses.analyses.roofline import Peaks, RooflineResult, roofline
from tc_analyses.analyses.roofline_trajectory import roofline_trajectory
from tc_analyses.errors import ConfigurationError
from tc_analyses.export.roofline_report import write_trajectory_plot
from tc_analyses.model.graph import build_graph
from tc_analyses.reader import read_trace
from tracer.builder import TraceBuilder

PEAKS = Peaks("test", "device table", 1000e9, None, 100e9)  # ridge 10 FLOP/byte; every run below its roof


def _mm_trace(path: Path, m: int, k: int, n: int, ns: int) -> Path:
    """One aten::mm of (m, k) x (k, n) float32 that takes `ns`."""
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True) as b:
        cpu = b.device("cpu", 10)
        b.add("node_begin", "1", 100, 0, "aten::mm", "mm", cpu, 1, 0)
        b.add("node_args", "1", 101, 0, f"[[{m}, {k}], [{k}, {n}]]", "float32,float32")
        b.add("node_end", "1", 100 + ns, 0, cpu, 1)
    return path


def _run(tmp_path: Path, name: str, m: int, ns: int) -> RooflineResult:
    return roofline(build_graph(read_trace(_mm_trace(tmp_path / name, m, 64, 64, ns))), PEAKS, name)


def test_points_follow_the_numeric_label_order(tmp_path: Path) -> None:
    # batch m: FLOPs 2*m*64*64, bytes 4*(m*64 + 64*64 + m*64).
    # m=16: 131072 FLOP, 4*(1024+4096+1024)=24576 B -> 5.333 FLOP/B; 131072 FLOP in 1000 ns = 131.072 GFLOP/s
    # m=64: 524288 FLOP, 4*(4096*3)=49152 B -> 10.667 FLOP/B; in 2000 ns = 262.144 GFLOP/s
    # m=4: 32768 FLOP, 4*(256+4096+256)=18432 B -> 1.778 FLOP/B; in 800 ns = 40.96 GFLOP/s
    runs = [("16", _run(tmp_path, "b16", 16, 1000)), ("64", _run(tmp_path, "b64", 64, 2000)),
            ("4", _run(tmp_path, "b4", 4, 800))]
    t = roofline_trajectory(runs, "batch")
    assert t.labels == ("4", "16", "64")
    mm = t.ops[0]
    assert mm.op == "aten::mm" and [p.label for p in mm.points] == ["4", "16", "64"]
    assert [round(p.intensity, 3) for p in mm.points] == [1.778, 5.333, 10.667]
    assert [round(p.achieved_flops / 1e9, 3) for p in mm.points] == [40.96, 131.072, 262.144]
    assert [round(p.intensity, 3) for p in t.overall.points] == [1.778, 5.333, 10.667]
    assert "from batch 4 to 64" in t.findings[0].text and "(6.40x)" in t.findings[0].text  # 262.144 / 40.96
    assert not any("gains less than" in f.text for f in t.findings)  # every step gains far more than 10%


def test_plateau_and_thread_advice(tmp_path: Path) -> None:
    # Same op, same size; times 1000, 550, 540 ns: 1 -> 2 threads gains 1.82x, 2 -> 4 only 1.02x.
    runs = [(str(threads), _run(tmp_path, f"t{threads}", 16, ns)) for threads, ns in ((1, 1000), (2, 550), (4, 540))]
    t = roofline_trajectory(runs, "threads")
    plateau = [f.text for f in t.findings if "gains less than 10%" in f.text]
    assert plateau and plateau[0].startswith("beyond threads 2") and "torch.set_num_threads" in plateau[0]


def test_slower_op_is_flagged(tmp_path: Path) -> None:
    runs = [("1", _run(tmp_path, "a", 16, 1000)), ("2", _run(tmp_path, "b", 16, 2000))]
    t = roofline_trajectory(runs, "threads")
    assert any(f.text.startswith("aten::mm: slower at threads 2") for f in t.findings)


def test_needs_two_runs_and_one_roof(tmp_path: Path) -> None:
    one = _run(tmp_path, "a", 16, 1000)
    with pytest.raises(ConfigurationError, match="at least two"):
        roofline_trajectory([("1", one)])
    other = roofline(build_graph(read_trace(tmp_path / "a")), Peaks("x", "device table", 1e9, None, 1e9), "a")
    with pytest.raises(ConfigurationError, match="same roofline"):
        roofline_trajectory([("1", one), ("2", other)])


def test_labels() -> None:
    assert [label for label, _ in order_runs([("10", 0), ("9", 1), ("1e1", 2)])] == ["9", "10", "1e1"]
    assert [label for label, _ in order_runs([("b", 0), ("a", 1)])] == ["b", "a"]  # not numbers: as given
    assert default_labels(["/x/bs8", "/x/bs16"], None) == ["bs8", "bs16"]
    assert default_labels(["a", "b"], "8, 16") == ["8", "16"]
    with pytest.raises(ConfigurationError, match="1 label"):
        default_labels(["a", "b"], "8")


def test_plot_is_deterministic(tmp_path: Path) -> None:
    t = roofline_trajectory([("1", _run(tmp_path, "a", 16, 1000)), ("2", _run(tmp_path, "b", 32, 1000))])
    first = [p.read_bytes() for p in write_trajectory_plot(t, tmp_path / "p1")]
    second = [p.read_bytes() for p in write_trajectory_plot(t, tmp_path / "p2")]
    assert first == second and first[0].startswith(b"\x89PNG") and b"<svg" in first[1]


@pytest.mark.slow
def test_cli_trajectory(tmp_path: Path, cli: Callable[..., Any]) -> None:
    a, b = _mm_trace(tmp_path / "bs4", 4, 64, 64, 800), _mm_trace(tmp_path / "bs16", 16, 64, 64, 1000)
    result = cli("roofline", str(b), str(a), "--labels", "16,4", "--format", "json", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["trace"] for r in data["runs"]] == [str(b), str(a)]
    assert data["trajectory"]["result"]["labels"] == ["4", "16"]
    assert (tmp_path / "out" / "roofline-trajectory.svg").is_file() and (tmp_path / "out" / "4" / "roofline.png").is_file()
    bad = cli("roofline", str(a), str(b), "--labels", "1")
    assert bad.exit_code == 2 and "--labels has 1 label(s) for 2 trace(s)" in bad.stderr


def test_thread_setting_finding(tmp_path: Path) -> None:
    from tc_analyses.analyses.roofline import device_peaks

    graph = build_graph(read_trace(_mm_trace(tmp_path / "mm", 64, 64, 64, 10_000)))  # 52 GFLOP/s: under the roof
    cpu2 = device_peaks("CPU-2")  # ridge 3.8 FLOP/byte: the 10.67 FLOP/byte mm is compute-bound
    assert "used 1 of 2 cores" in roofline(graph, cpu2, "t", threads=1).findings[-1].text
    assert "torch.set_num_threads(2)" in roofline(graph, cpu2, "t", threads=1).findings[-1].text
    assert "does not say how many" in roofline(graph, cpu2, "t").findings[-1].text
    slow_memory = Peaks("CPU-2", "device table", 1e15, None, 1e9)  # ridge 1e6: everything is memory-bound
    # 49,152 bytes at 1 GB/s take 49 µs: the op must take longer, or it would beat its roof
    graph = build_graph(read_trace(_mm_trace(tmp_path / "slow", 64, 64, 64, 100_000)))
    assert "try fewer threads (e.g. 2)" in roofline(graph, slow_memory, "t", threads=4).findings[-1].text


def _ops_trace(path: Path, ops: list[tuple[str, str, str, int]]) -> Path:
    """One node per (op, shapes, dtypes, ns), one after another."""
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True) as b:
        cpu = b.device("cpu", 10)
        at = 100
        for node, (op, shapes, dtypes, ns) in enumerate(ops):
            b.add("node_begin", "1", at, node, op, op, cpu, 1, 0)
            b.add("node_args", "1", at + 1, node, shapes, dtypes)
            b.add("node_end", "1", at + ns, node, cpu, 1)
            at += ns + 10
    return path


def test_no_op_is_shown_above_its_roof_and_what_is_left_out_is_said(tmp_path: Path) -> None:
    trace = _ops_trace(tmp_path / "t", [
        ("aten::mm", "[[64, 64], [64, 64]]", "float32,float32", 10_000),  # 52 GFLOP/s: below the roof
        ("aten::to", "[[1024, 1024]]", "float32", 50),  # 8 MB in 50 ns: a call that returned its input
        ("aten::lstm", "[[8, 4, 16]]", "float32", 40_000),  # no FLOP model
        ("aten::t", "[[64, 64]]", "float32", 20),  # a view: nothing to plot
    ])
    result = roofline(build_graph(read_trace(trace)), PEAKS, "t")
    assert [p.op for p in result.points] == ["aten::mm"] and all(p.efficiency <= 1 for p in result.points)
    assert {(o.op, o.reason) for o in result.left_out} == {("aten::to", "above its roof"), ("aten::lstm", "no FLOP model")}
    texts = " ".join(f.text for f in result.findings)
    assert "aten::lstm (0.040 ms)" in texts and "have no FLOP model" in texts
    assert "aten::to" in texts and "faster than their roof" in texts
    assert "aten::t" not in texts.replace("aten::to", "")


def test_a_fused_kernel_is_not_told_to_fuse(tmp_path: Path) -> None:
    trace = _ops_trace(tmp_path / "t", [("aten::_scaled_dot_product_flash_attention_for_cpu",
                                         "[[1, 4, 128, 32], [1, 4, 128, 32], [1, 4, 128, 32]]",
                                         "float32,float32,float32", 10_000_000)])
    result = roofline(build_graph(read_trace(trace)), PEAKS, "t")
    slow = [f.text for f in result.findings if f.kind == "low_efficiency"]
    assert slow and "already one fused kernel" in slow[0] and "fuse it" not in slow[0]
