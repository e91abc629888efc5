"""Text, CSV and plot of the launch statistics (:mod:`tc_analyses.analyses.launches`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tc_analyses.analyses.launches import LaunchStats
from tc_analyses.analyses.result import Result
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table, write_csv

ARTIFACTS = "every launch (launches.csv)"


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"


def text(result: Result) -> str:
    data: LaunchStats = result.data
    n = len(data.launches)
    lines = [f"Launch statistics of {data.trace}", f"  {n} launches with their GPU operation", ""]
    rows = [("launch delay", *(_us(data.delay_percentiles_ns[k]) for k in ("p50", "p90", "p99", "mean", "max"))),
            ("launch call (CPU)", *(_us(data.cpu_percentiles_ns[k]) for k in ("p50", "p90", "p99", "mean", "max")))]
    lines += table(("µs", "p50", "p90", "p99", "mean", "max"), rows, "  ")
    lines += ["", f"  kernels shorter on the GPU than their launch call: {data.short} ({100 * data.short / n:.1f}%)",
              f"  launch calls over {_us(data.runtime_cutoff_ns)} µs: {data.runtime_outliers}",
              f"  launch delays over {_us(data.delay_cutoff_ns)} µs: {data.delay_outliers}"]
    if data.top_short:
        lines += ["", "  most often shorter than their launch:"]
        lines += table(("kernel", "launches"), [(name[:80], count) for name, count in data.top_short], "    ")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``launches.png`` / ``.svg``: the launch-delay distribution (CDF) and CPU against GPU time."""
    data: LaunchStats = result.data
    delays = np.sort([x.delay_ns / 1e3 for x in data.launches])
    with figure(1, 2, figsize=(10.0, 4.0)) as (fig, (left, right)):
        left.plot(delays, np.arange(1, len(delays) + 1) / len(delays), color="tab:blue")
        left.axvline(data.delay_cutoff_ns / 1e3, color="tab:red", linestyle="--", linewidth=0.8)
        left.set_xscale("symlog", linthresh=1.0)
        left.set_xlabel("launch delay (µs)")
        left.set_ylabel("share of launches")
        left.set_title("Launch delay (CDF)")
        right.scatter([x.cpu_ns / 1e3 for x in data.launches], [x.gpu_ns / 1e3 for x in data.launches], s=4,
                      color="tab:green")
        top = max(max(x.cpu_ns for x in data.launches), max(x.gpu_ns for x in data.launches)) / 1e3
        right.plot([0, top], [0, top], color="gray", linewidth=0.8, linestyle=":")
        right.set_xscale("symlog", linthresh=1.0)
        right.set_yscale("symlog", linthresh=1.0)
        right.set_xlabel("launch call (µs)")
        right.set_ylabel("GPU operation (µs)")
        right.set_title("Below the line: shorter than its launch")
        return save(fig, folder, "launches")


def artifacts(result: Result, folder: Path) -> list[Path]:
    """The plots, and ``launches.csv`` with every launch."""
    data: LaunchStats = result.data
    write_csv(folder, "launches.csv", ("correlation_id", "call", "kernel", "call_start_ns", "cpu_ns", "gpu_ns", "delay_ns"),
              ((x.correlation_id, x.call, x.kernel, x.call_start_ns, x.cpu_ns, x.gpu_ns, x.delay_ns) for x in data.launches))
    return plots(result, folder)
