"""Text and plot of a trace diff (:mod:`tc_analyses.analyses.trace_diff`)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.result import Result
from tc_analyses.analyses.trace_diff import TraceDiff
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table


def _us(ns: float) -> str:
    return f"{ns / 1e3:+,.1f}" if ns else "0"


def text(result: Result, top: int = 20) -> str:
    data: TraceDiff = result.data
    lines = [f"Trace diff: control {data.control}", f"            test    {data.test}", f"  {data.scope}",
             f"  GPU operation time: {data.control_gpu_ns / 1e3:,.1f} µs -> {data.test_gpu_ns / 1e3:,.1f} µs"]
    if data.control_unlaunched or data.test_unlaunched:
        lines.append(f"  left out, no launch call recorded (as HTA): {data.control_unlaunched:,} GPU operations in the "
                     f"control, {data.test_unlaunched:,} in the test")
    lines.append("")
    for side in ("gpu", "cpu"):
        rows = [r for r in data.rows if r.side == side][:top]
        if not rows:
            continue
        lines += [f"  {side.upper()}: the {len(rows)} largest changes in time (µs)"]
        lines += table(("name", "control n", "test n", "Δn", "control µs", "test µs", "Δ µs"),
                       [(r.name[:70], r.control_count, r.test_count, r.count_change, f"{r.control_ns / 1e3:,.1f}",
                         f"{r.test_ns / 1e3:,.1f}", _us(r.time_change_ns)) for r in rows], "    ")
        lines.append("")
    lines += ["findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path, top: int = 15) -> list[Path]:
    """``diff.png`` / ``.svg``: the largest time changes, GPU and CPU."""
    data: TraceDiff = result.data
    rows = [r for r in data.rows if r.time_change_ns][:top]
    with figure(1, 1, figsize=(10.0, 0.35 * max(len(rows), 4) + 1.0)) as (fig, ax):
        ax.barh(range(len(rows)), [r.time_change_ns / 1e3 for r in rows],
                color=["tab:red" if r.time_change_ns > 0 else "tab:green" for r in rows])
        ax.set_yticks(range(len(rows)), [f"{r.side}: {r.name[:50]}" for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.6)
        ax.set_xlabel("test - control (µs)")
        ax.set_title("Largest time changes")
        return save(fig, folder, "diff")
