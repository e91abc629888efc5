"""Text and plot of the eager runtime overhead (:mod:`tc_analyses.analyses.eager_overhead`)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.eager_overhead import WHOLE_TRACE, EagerOverhead
from tc_analyses.analyses.result import Result
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table

MAX_ROWS = 15


def _us(ns: int) -> str:
    return f"{ns / 1e3:,.1f}"


def text(result: Result) -> str:
    data: EagerOverhead = result.data
    lines = [f"Eager runtime overhead of {data.trace}",
             f"{data.executions} eager op executions ({data.unmatched} dispatches without a kernel node left out); "
             f"framework {_us(data.host_ns)} µs, kernels {_us(data.kernel_ns)} µs, hiding ratio {data.ratio:.2f} "
             "(sum K / sum H; < 1: host-bound)", ""]
    lines += table(("step", "ops", "host µs", "kernel µs", "ratio"),
                   [("all" if s.step == WHOLE_TRACE else s.step, s.ops, _us(s.host_ns), _us(s.kernel_ns),
                     f"{s.ratio:.2f}") for s in data.steps], "  ")
    lines += [""] + table(("op", "count", "host µs", "kernel µs", "ratio", "median host µs (min hiding kernel)",
                           "short %"),
                          [(r.op, r.count, _us(r.host_ns), _us(r.kernel_ns), f"{r.ratio:.2f}", _us(r.median_host_ns),
                            f"{r.short_share:.0%}") for r in data.op_types[:MAX_ROWS]], "  ")
    if len(data.op_types) > MAX_ROWS:
        lines.append(f"  ... {len(data.op_types) - MAX_ROWS} more op types in --format json")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``eager_overhead.png`` / ``.svg``: framework and kernel time per op type, side by side."""
    data: EagerOverhead = result.data
    rows = data.op_types[:MAX_ROWS]
    with figure(1, 1, figsize=(10.0, 0.4 * len(rows) + 1.5)) as (fig, ax):
        y = list(range(len(rows)))
        ax.barh([v - 0.2 for v in y], [r.host_ns / 1e3 for r in rows], height=0.4, label="framework (H)")
        ax.barh([v + 0.2 for v in y], [r.kernel_ns / 1e3 for r in rows], height=0.4, label="kernel (K)")
        ax.set_yticks(y, [r.op for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("µs, summed over executions")
        ax.set_title("Eager ops: framework against kernel time")
        ax.legend(loc="lower right", fontsize=7)
        return save(fig, folder, "eager_overhead")
