"""Text and plot of the frequent kernel sequences (:mod:`tc_analyses.analyses.sequences`)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.result import Result
from tc_analyses.analyses.sequences import Sequences
from tc_analyses.export.plotting import figure, save


def text(result: Result) -> str:
    data: Sequences = result.data
    roots = f"ops named like {data.operator!r}" if data.operator else "ops"
    lines = [f"Frequent kernel sequences of {data.trace}",
             f"  {data.roots} {roots} launched {data.min_length}+ GPU operations; the most frequent patterns:", ""]
    for i, p in enumerate(data.patterns, 1):
        lines.append(f"  {i}. {p.count}x  GPU {p.gpu_ns / 1e3:,.1f} µs  CPU {p.cpu_ns / 1e3:,.1f} µs  {p.root}")
        lines += [f"       {k[:100]}" for k in p.kernels[:12]]
        if len(p.kernels) > 12:
            lines.append(f"       ... {len(p.kernels) - 12} more")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``sequences.png`` / ``.svg``: how often each top pattern occurs (HTA's histogram)."""
    data: Sequences = result.data
    with figure(1, 1, figsize=(8.0, 4.0)) as (fig, ax):
        ax.bar(range(1, len(data.patterns) + 1), [p.count for p in data.patterns], color="tab:purple")
        ax.set_xticks(range(1, len(data.patterns) + 1))
        ax.set_xlabel("pattern (see the text report)")
        ax.set_ylabel("occurrences")
        ax.set_title("Most frequent kernel sequences")
        return save(fig, folder, "sequences")
