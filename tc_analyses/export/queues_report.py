"""Text, CSV and plot of the queue lengths (:mod:`tc_analyses.analyses.queues`)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.queues import Queues
from tc_analyses.analyses.result import Result
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table, write_csv

ARTIFACTS = "the time series (queues.csv)"


def text(result: Result) -> str:
    data: Queues = result.data
    lines = [f"Queue length per GPU queue of {data.trace}", "",
             "  summary over the change points (HTA's), the time-weighted mean, and the time at or above "
             f"{data.max_queue_length} (blocked)"]
    lines += table(("device", "queue", "launches", "mean", "p50", "p75", "max", "mean over time", "blocked µs", "%"),
                   [(q.device, q.queue, q.launches, f"{q.mean:.2f}", f"{q.p50:g}", f"{q.p75:g}", q.max,
                     f"{q.time_weighted_mean:.2f}", f"{q.blocked_ns / 1e3:,.1f}", f"{q.blocked_pct:.2f}")
                    for q in data.queues], "  ")
    lines += ["", "findings:"] + ([f"  - {f.text}" for f in data.findings] or ["  none"])
    return "\n".join(lines) + "\n"


def plots(result: Result, folder: Path) -> list[Path]:
    """``queues.png`` / ``.svg``: each queue's length over time (a step line per queue)."""
    data: Queues = result.data
    origin = min(s.times[0] for s in data.series)
    with figure(1, 1, figsize=(10.0, 4.0)) as (fig, ax):
        for s in data.series:
            ax.step([(t - origin) / 1e6 for t in s.times], s.lengths, where="post", linewidth=0.8,
                    label=f"{s.device} q{s.queue}")
        ax.set_xlabel("ms from the first launch")
        ax.set_ylabel("launched, not started")
        ax.set_title("Queue length per GPU queue")
        ax.legend(loc="upper right", fontsize=7)
        return save(fig, folder, "queues")


def artifacts(result: Result, folder: Path) -> list[Path]:
    """The plots, and ``queues.csv``: device, queue, time, length at every change."""
    data: Queues = result.data
    write_csv(folder, "queues.csv", ("device", "queue", "time_ns", "length"),
              ((s.device, s.queue, t, n) for s in data.series for t, n in zip(s.times, s.lengths)))
    return plots(result, folder)
