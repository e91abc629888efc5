"""Text and plot of the copy and memset bandwidth (:mod:`tc_analyses.analyses.bandwidth`)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.bandwidth import Bandwidth
from tc_analyses.analyses.result import Result
from tc_analyses.analyses.units import fmt_bytes
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table


def text(result: Result) -> str:
    data: Bandwidth = result.data
    lines = [f"Copy and memset bandwidth of {data.trace}", ""]
    lines += table(("kind", "host memory", "count", "bytes", "busy µs", "achieved GB/s", "median GB/s", "max GB/s",
                    "peak concurrent GB/s"),
                   [(k.kind, k.host_memory or "-", k.count, fmt_bytes(k.bytes), f"{k.busy_ns / 1e3:,.1f}",
                     f"{k.achieved_gbps:.2f}", f"{k.median_gbps:.2f}", f"{k.max_gbps:.2f}",
                     f"{k.peak_concurrent_gbps:.2f}") for k in data.kinds], "  ")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``bandwidth.png`` / ``.svg``: the concurrent bandwidth of each kind over time (HTA's time series)."""
    data: Bandwidth = result.data
    origin = min(k.series[0][0] for k in data.kinds)
    with figure(1, 1, figsize=(10.0, 4.0)) as (fig, ax):
        for k in data.kinds:
            ax.step([(t - origin) / 1e6 for t, _ in k.series], [v for _, v in k.series], where="post",
                    linewidth=0.8, label=k.kind)
        ax.set_xlabel("ms from the first copy")
        ax.set_ylabel("GB/s")
        ax.set_title("Copy and memset bandwidth")
        ax.legend(loc="upper right", fontsize=7)
        return save(fig, folder, "bandwidth")
