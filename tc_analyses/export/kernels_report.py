"""Text and plot of the kernel breakdown (:mod:`tc_analyses.analyses.kernels`).

The plot: the time per type combination (a horizontal bar each) and, per type, the share of
its top kernels.
"""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.kernels import KernelBreakdown
from tc_analyses.analyses.result import Result
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table

NAME_WIDTH = 70


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"


def _short(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def text(result: Result) -> str:
    data: KernelBreakdown = result.data
    lines = [f"Kernel breakdown of {data.trace}", "", "Time per kernel type (µs)"]
    lines += table(("type", "time", "%"), [(t.label, _us(t.time_ns), f"{t.share_pct:.1f}") for t in data.types], "  ")
    if data.comm_comp_overlap_pct is not None:
        lines += ["", f"Communication/computation overlap: {data.comm_comp_overlap_pct:.2f}% of the communication "
                      "time runs alongside compute"]
    lines += ["", "Kernels by total time (µs; % of their type)"]
    lines += table(("type", "kernel", "count", "total", "mean", "min", "max", "std", "%"),
                   [(k.type, _short(k.name), k.count, _us(k.total_ns), _us(k.mean_ns), _us(k.min_ns), _us(k.max_ns),
                     _us(k.std_ns), f"{k.share_pct:.1f}") for k in data.kernels], "  ")
    if data.annotations:
        lines += ["", "GPU user annotations (µs): their time on the GPU, and the kernels attributed to them"]
        lines += table(("annotation", "count", "total", "mean", "min", "max", "kernels", "kernel time"),
                       [(a.name[:60], a.count, _us(a.total_ns), _us(a.mean_ns), _us(a.min_ns), _us(a.max_ns), a.kernels,
                         _us(a.kernel_ns)) for a in data.annotations], "  ")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``kernels.png`` / ``kernels.svg``: time per type combination, and each type's top kernels."""
    data: KernelBreakdown = result.data
    types = sorted({k.type for k in data.kernels})
    with figure(1, 1 + len(types), figsize=(4.0 + 4.0 * len(types), 4.5)) as (fig, axes):
        axes = list(axes) if len(types) else [axes]
        left = axes[0]
        labels = [t.label.replace(" overlapping ", " +\n") for t in data.types]
        left.barh(range(len(labels)), [t.time_ns / 1e6 for t in data.types], color="tab:blue")
        left.set_yticks(range(len(labels)), labels)
        left.invert_yaxis()
        left.set_xlabel("ms")
        left.set_title("GPU time per kernel type")
        for ax, kind in zip(axes[1:], types):
            rows = [k for k in data.kernels if k.type == kind]
            ax.barh(range(len(rows)), [k.share_pct for k in rows], color="tab:green")
            ax.set_yticks(range(len(rows)), [k.name[:30] for k in rows], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(f"% of {kind} time")
            ax.set_title(f"Top {kind} kernels")
        return save(fig, folder, "kernels")
