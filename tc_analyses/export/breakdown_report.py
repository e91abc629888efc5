"""Text and plot of the GPU temporal and idle-time breakdowns (:mod:`tc_analyses.analyses.breakdown`).

The plot has two panels of 100% stacked bars: idle / compute / non-compute share of the kernel
time per device (and all devices), and host wait / kernel wait / other share of the idle time
per (device, queue). PNG and SVG are byte-for-byte deterministic, as in ``roofline_report``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tc_analyses.analyses.breakdown import IdleBreakdown, TemporalBreakdown, breakdown_findings
from tc_analyses.analyses.result import Result
from tc_analyses.export.plotting import figure, save

SIZE_IN = (10.0, 5.0)
TEMPORAL_COLORS = {"idle": "#bbbbbb", "compute": "tab:green", "non-compute": "tab:orange"}
IDLE_COLORS = {"host wait": "tab:red", "kernel wait": "tab:blue", "other": "#bbbbbb"}


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"


def breakdown_text(temporal: TemporalBreakdown, idle: IdleBreakdown) -> str:
    """Both breakdowns as plain-text tables (µs and %)."""
    lines = [f"GPU time breakdown of {temporal.trace}"]
    if temporal.filtered:
        lines.append(f"  {temporal.kept_ops} GPU operations launched before the last of {temporal.steps} steps "
                     f"({temporal.dropped_ops} left out)")
    else:
        lines.append(f"  all {temporal.kept_ops} GPU operations")
    lines += ["", "Temporal breakdown (µs, % of kernel time)",
              f"  {'device':<10}{'kernel time':>14}{'idle':>14}{'%':>8}{'compute':>14}{'%':>8}"
              f"{'non-compute':>14}{'%':>8}{'comm':>12}{'memory':>12}{'other':>12}"]
    rows = list(temporal.devices) + ([temporal.total] if len(temporal.devices) > 1 else [])
    for d in rows:
        lines.append(f"  {d.device:<10}{_us(d.kernel_time_ns):>14}{_us(d.idle_ns):>14}{d.idle_pct:>8.2f}"
                     f"{_us(d.compute_ns):>14}{d.compute_pct:>8.2f}{_us(d.non_compute_ns):>14}"
                     f"{d.non_compute_pct:>8.2f}{_us(d.communication_ns):>12}{_us(d.memory_ns):>12}"
                     f"{_us(d.other_ns):>12}")
    lines += ["", f"Idle time breakdown per queue (µs, % of the queue's idle time; kernel wait: gap < "
                  f"{idle.consecutive_kernel_delay_ns / 1e3:g} µs)",
              f"  {'device':<10}{'queue':>7}{'ops':>7}{'idle':>14}{'host wait':>14}{'%':>8}"
              f"{'kernel wait':>14}{'%':>8}{'other':>14}{'%':>8}"]
    for q in idle.queues:
        lines.append(f"  {q.device:<10}{q.queue:>7}{q.ops:>7}{_us(q.idle_ns):>14}{_us(q.host_wait_ns):>14}"
                     f"{100 * q.host_wait_ratio:>8.2f}{_us(q.kernel_wait_ns):>14}{100 * q.kernel_wait_ratio:>8.2f}"
                     f"{_us(q.other_ns):>14}{100 * q.other_ratio:>8.2f}")
    if idle.ops_without_launch:
        lines.append(f"  {idle.ops_without_launch} operations have no recorded launch: their gaps are never host wait")
    lines += ["", "findings:"] + [f"  - {f.text}" for f in breakdown_findings(temporal, idle)]
    return "\n".join(lines) + "\n"


def write_breakdown_plot(temporal: TemporalBreakdown, idle: IdleBreakdown, out_dir: Path) -> list[Path]:
    """Write ``out_dir/breakdown.png`` and ``out_dir/breakdown.svg``; returns their paths."""
    rows = list(temporal.devices) + ([temporal.total] if len(temporal.devices) > 1 else [])
    shares = {"idle": [d.idle_pct for d in rows], "compute": [d.compute_pct for d in rows],
              "non-compute": [d.non_compute_pct for d in rows]}
    queues = list(idle.queues)
    waits = {"host wait": [100 * q.host_wait_ratio for q in queues],
             "kernel wait": [100 * q.kernel_wait_ratio for q in queues],
             "other": [100 * q.other_ratio for q in queues]}
    ratios = [max(len(rows), 2), max(len(queues), 3)]
    with figure(1, 2, figsize=SIZE_IN, gridspec_kw={"width_ratios": ratios}) as (fig, (left, right)):
        _stacked(left, [d.device for d in rows], shares, TEMPORAL_COLORS)
        left.set_title("Temporal breakdown (% of kernel time)")
        _stacked(right, [f"{q.device}\nq{q.queue}" for q in queues], waits, IDLE_COLORS)
        right.set_title("Idle time per queue (% of its idle time)")
        return save(fig, out_dir, "breakdown")


def _stacked(ax: Any, labels: list[str], parts: dict[str, list[float]], colors: dict[str, str]) -> None:
    xs = list(range(len(labels)))
    bottom = [0.0] * len(labels)
    for name, values in parts.items():
        ax.bar(xs, values, bottom=bottom, color=colors[name], label=name, width=0.6,
               edgecolor="black", linewidth=0.4)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(xs, labels, fontsize=7)
    ax.set_xlim(-0.75, max(len(labels), 3) - 0.25)  # a lone bar stays bar-sized
    ax.set_ylim(0, 100)
    ax.set_ylabel("%")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=7, frameon=False)


def text(result: Result) -> str:
    """Both breakdowns as text."""
    return breakdown_text(result.data.temporal, result.data.idle)


def plots(result: Result, folder: Path) -> list[Path]:
    """breakdown.png/.svg."""
    return write_breakdown_plot(result.data.temporal, result.data.idle, folder)
