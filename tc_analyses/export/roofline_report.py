"""The roofline report: text, and the plot of a :class:`~tc_analyses.analyses.roofline.RooflineResult`
as PNG and SVG (and of a trajectory across runs).

Log-log axes: arithmetic intensity (FLOP/byte) against FLOP/s. The roof is the memory slope
``intensity * bandwidth`` up to the ridge point, then the flat fp32 peak (and the dashed
half-precision peak when the device has one). One point per op type, its area proportional to
the op type's total time, labelled with the op. Op types without FLOPs (intensity 0) cannot sit
on log axes and are left out. The files are byte-for-byte deterministic: fixed size, fonts and
SVG ids, no dates or software names in the metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tc_analyses.analyses.result import Result
from tc_analyses.analyses.roofline import Peaks, RooflineResult
from tc_analyses.analyses.roofline_trajectory import RooflineTrajectory
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table

SIZE_IN = (8.0, 5.5)


def _draw_roof(ax: Any, peaks: Peaks, intensities: list[float]) -> None:
    """The memory slope and compute ceilings, with log axes wide enough for `intensities`."""
    ridge = peaks.ridge()
    lo = min(min(intensities + [ridge]) / 10, 0.01)
    hi = max(max(intensities + [ridge]) * 10, ridge * 100)
    xs = [lo, ridge, hi]
    ax.plot(xs, [min(peaks.fp32_flops, x * peaks.bandwidth) for x in xs], color="black", lw=1.5,
            label=f"roof: {peaks.bandwidth / 1e9:.1f} GB/s, {peaks.fp32_flops / 1e12:.2f} TFLOP/s fp32")
    if peaks.half_flops:
        half_ridge = peaks.half_flops / peaks.bandwidth
        hx = [ridge, half_ridge, max(hi, half_ridge * 10)]
        ax.plot(hx, [min(peaks.half_flops, x * peaks.bandwidth) for x in hx], color="gray", lw=1,
                ls="--", label=f"half-precision peak {peaks.half_flops / 1e12:.0f} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="major", ls=":", lw=0.5)


def write_roofline_plot(result: RooflineResult, output: Path) -> list[Path]:
    """Write ``output/roofline.png`` and ``output/roofline.svg``; returns their paths."""
    ops = [o for o in result.ops if o.flops > 0 and o.achieved_flops > 0]
    peaks = result.peaks
    with figure(figsize=SIZE_IN) as (fig, ax):
        _draw_roof(ax, peaks, [o.intensity for o in ops])
        total = sum(o.total_ns for o in ops) or 1
        for i, o in enumerate(ops):
            color = "tab:blue" if o.bound == "memory" else "tab:red"
            ax.scatter([o.intensity], [o.achieved_flops], s=30 + 600 * o.total_ns / total, color=color,
                       alpha=0.6, edgecolors="black", linewidths=0.5, zorder=3)
            ax.annotate(f"{o.op} ({o.efficiency:.0%})", (o.intensity, o.achieved_flops),
                        textcoords="offset points", xytext=(6, 4 + (i % 3) * 6), fontsize=7)
        ax.set_title(f"Roofline on {peaks.model} ({peaks.source}); point area = op time")
        ax.legend(loc="lower right", fontsize=7)
        return save(fig, output, "roofline")


def write_trajectory_plot(trajectory: RooflineTrajectory, output: Path) -> list[Path]:
    """Write ``output/roofline-trajectory.png`` and ``.svg``: each op type's path across the runs."""
    paths = [t for t in (trajectory.overall, *trajectory.ops)
             if all(p.intensity > 0 and p.achieved_flops > 0 for p in t.points)]
    with figure(figsize=SIZE_IN) as (fig, ax):
        _draw_roof(ax, trajectory.peaks, [p.intensity for t in paths for p in t.points])
        for i, t in enumerate(paths):
            xs, ys = [p.intensity for p in t.points], [p.achieved_flops for p in t.points]
            overall = t.op == trajectory.overall.op
            ax.plot(xs, ys, marker="o", ms=4, lw=2.2 if overall else 1.2, color="black" if overall else f"C{i % 10}",
                    label=t.op, zorder=3)
            for x0, y0, x1, y1 in zip(xs, ys, xs[1:], ys[1:]):
                ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->", "lw": 0.8,
                                                               "color": "black" if overall else f"C{i % 10}"})
            ax.annotate(t.points[0].label, (xs[0], ys[0]), textcoords="offset points", xytext=(-10, -10), fontsize=6)
            ax.annotate(t.points[-1].label, (xs[-1], ys[-1]), textcoords="offset points", xytext=(4, 4), fontsize=6)
        ax.set_title(f"Roofline trajectory over {trajectory.axis} ({', '.join(trajectory.labels)}) "
                     f"on {trajectory.peaks.model}")
        ax.legend(loc="lower right", fontsize=7)
        return save(fig, output, "roofline-trajectory")


def _rate(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.2f} {unit}"


def roofline_text(r: RooflineResult) -> str:
    """`dfcompass roofline` as text."""
    p = r.peaks
    lines = [f"trace:   {r.trace}",
             f"peaks:   {p.model} ({p.source}): {_rate(p.fp32_flops, 'FLOP/s')} fp32"
             + (f", {_rate(p.half_flops, 'FLOP/s')} fp16/bf16" if p.half_flops else "")
             + f", {_rate(p.bandwidth, 'B/s')}; ridge point {r.ridge_point:.2f} FLOP/byte",
             f"nodes:   {len(r.points)} analysed, {r.skipped_nodes} without shapes or time", ""]
    lines += table(("op", "count", "time ms", "FLOP/s", "FLOP/byte", "bound", "efficiency"), [
        (o.op, o.count, f"{o.total_ns / 1e6:.3f}", _rate(o.achieved_flops, "FLOP/s"), f"{o.intensity:.2f}",
         o.bound, f"{o.efficiency:.1%}") for o in r.ops])
    if r.left_out:
        lines += ["", "left out of the roofline:"] + table(("op", "count", "time ms", "why"), [
            (o.op, o.executions, f"{o.total_ns / 1e6:.3f}", o.reason) for o in r.left_out[:10]], "  ")
        if len(r.left_out) > 10:
            lines.append(f"  ... {len(r.left_out) - 10} more in --format json")
    lines += ["", "findings:"] + [f"  - {f.text}" for f in r.findings]
    return "\n".join(lines) + "\n"


def roofline_trajectory_text(t: RooflineTrajectory) -> str:
    """The trajectory part of `dfcompass roofline TRACE TRACE...` as text."""
    lines = [f"roofline trajectory over {t.axis}: " + ", ".join(f"{label} ({trace})" for label, trace in zip(t.labels, t.traces)), ""]
    rows = [(o.op, p.label, f"{p.total_ns / 1e6:.3f}", _rate(p.achieved_flops, "FLOP/s"), f"{p.intensity:.2f}",
             f"{p.efficiency:.1%}") for o in (t.overall, *t.ops) for p in o.points]
    lines += table(("op", t.axis, "time ms", "FLOP/s", "FLOP/byte", "efficiency"), rows)
    lines += ["", "trajectory findings:"] + [f"  - {f.text}" for f in t.findings]
    return "\n".join(lines) + "\n"


def text(result: Result) -> str:
    """A roofline or a roofline trajectory as text."""
    if isinstance(result.data, RooflineTrajectory):
        return roofline_trajectory_text(result.data)
    return roofline_text(result.data)


def plots(result: Result, folder: Path) -> list[Path]:
    """The roofline plot (roofline.png/.svg) or the trajectory plot (roofline-trajectory.png/.svg)."""
    if isinstance(result.data, RooflineTrajectory):
        return write_trajectory_plot(result.data, folder)
    return write_roofline_plot(result.data, folder)
