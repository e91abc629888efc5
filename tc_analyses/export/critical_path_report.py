"""Text, CSV and plot of the GPU-aware critical path (:mod:`tc_analyses.analyses.critical_path`)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.critical_path import BOUNDS, CriticalPath
from tc_analyses.analyses.result import Result
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table, write_csv

ARTIFACTS = "the path's segments (critical_path.csv)"
COLORS = {"cpu_bound": "tab:blue", "cpu_idle": "#bbbbbb", "gpu_compute_bound": "tab:green",
          "gpu_communication_bound": "tab:purple", "gpu_memory_bound": "tab:brown",
          "gpu_kernel_launch_overhead": "tab:red", "gpu_kernel_kernel_overhead": "tab:orange", "gpu_wait": "tab:pink",
          "cpu_other_thread": "tab:cyan", "gpu_other_queue": "tab:olive"}


def text(result: Result) -> str:
    data: CriticalPath = result.data
    length = data.length_ns or 1
    lines = [f"GPU-aware critical path of {data.trace}",
             f"  {len(data.segments)} segments over {data.length_ns / 1e3:,.1f} µs", ""]
    lines += table(("bound by", "µs", "%"), [(b, f"{data.bound_ns[b] / 1e3:,.1f}", f"{100 * data.bound_ns[b] / length:.2f}")
                                            for b in BOUNDS if data.bound_ns[b]], "  ")
    lines += ["", "  intervals with the most time on the path"]
    lines += table(("bound by", "interval", "µs"), [(b, n[:80], f"{t / 1e3:,.1f}") for b, n, t in data.top], "  ")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``critical_path.png`` / ``.svg``: the path over time, one lane per thread or queue, coloured by bound."""
    data: CriticalPath = result.data
    lanes = sorted({s.where for s in data.segments})
    with figure(1, 1, figsize=(11.0, 1.0 + 0.4 * len(lanes))) as (fig, ax):
        for bound in BOUNDS:
            spans = [s for s in data.segments if s.bound == bound]
            for lane in lanes:
                mine = [((s.start - data.start) / 1e6, s.duration / 1e6) for s in spans if s.where == lane]
                if mine:
                    ax.broken_barh(mine, (lanes.index(lane) - 0.4, 0.8), color=COLORS[bound],
                                   label=bound if lane == next(s.where for s in spans) else None)
        ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
        ax.set_xlabel("ms from the path's start")
        ax.set_title("Critical path")
        ax.legend(loc="upper right", fontsize=7)
        return save(fig, folder, "critical_path")


def artifacts(result: Result, folder: Path) -> list[Path]:
    """The plots, and ``critical_path.csv``: every segment in time order."""
    data: CriticalPath = result.data
    write_csv(folder, "critical_path.csv", ("start_ns", "end_ns", "bound", "where", "name"),
              ((s.start, s.end, s.bound, s.where, s.name) for s in data.segments))
    return plots(result, folder)
