"""A :class:`~tc_analyses.analyses.parallelism.StreamPlan` as text, JSON and a Gantt chart.

The Gantt chart (PNG and SVG, byte-for-byte deterministic like the roofline plot) has two panels
on one time axis: the baseline (every op on one lane, in recorded order) and the plan (one row per
lane). Ops on the critical path are red, the others blue; grey lines join the two ends of each sync
(at most :data:`MAX_SYNC_LINES`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tc_analyses.analyses.parallelism import StreamPlan
from tc_analyses.analyses.result import Result
from tc_analyses.analyses.units import fmt_ms
from tc_analyses.export.parallelism_plan import plan_json, plan_text
from tc_analyses.export.plotting import figure, lane_image, save

SIZE_IN = (10.0, 5.5)
MAX_SYNC_LINES = 300
ARTIFACTS = "plan, predicted trace and Trace Compass views"  # what -o writes besides the plots


RASTER_ABOVE = 2_000  # bars drawn as vectors up to this many


def write_parallelism_plot(plan: StreamPlan, out_dir: Path) -> list[Path]:
    """Write ``out_dir/parallelism.png`` and ``.svg``: baseline vs plan, one row per lane."""
    scale, unit = (1e6, "ms") if plan.baseline_ns >= 1e6 else (1e3, "us")
    rows = max(1, plan.streams)
    heights = [1, max(1.5, rows * 0.6)]
    ops = plan.ops
    critical = np.asarray(ops.column("on_critical_path"), dtype=bool)
    work = np.asarray(ops.column("work_ns"), dtype=np.float64) / scale
    stream = np.asarray(ops.column("stream"), dtype=np.int64)
    start = np.asarray(ops.column("start_ns"), dtype=np.float64) / scale
    x_max = max(plan.baseline_ns, plan.plan_ns, 1) / scale
    with figure(2, 1, figsize=SIZE_IN, sharex=True, gridspec_kw={"height_ratios": heights}) as (fig, (top, bottom)):
        baseline = np.asarray(ops.column("baseline_start_ns"), dtype=np.float64) / scale
        if len(ops) > RASTER_ABOVE:
            # Past a few thousand bars one vector path each makes the SVG huge (134 MB at 333 k ops)
            # and matplotlib slow (45 s): the bars are an image, the axes and text stay vectors.
            top.imshow(lane_image(baseline, work, np.zeros(len(ops)), critical, 1, x_max), extent=(0, x_max, 1, 0),
                       aspect="auto", interpolation="nearest")
            bottom.imshow(lane_image(start, work, stream, critical, rows, x_max), extent=(0, x_max, rows, 0),
                          aspect="auto", interpolation="nearest")
        else:
            colors = np.where(critical, "tab:red", "tab:blue").tolist()
            top.broken_barh(list(zip(baseline.tolist(), work.tolist())), (0.1, 0.8), facecolors=colors,
                            edgecolor="white", linewidth=0.2)
            for s in range(rows):
                mine = np.flatnonzero(stream == s)
                bottom.broken_barh(list(zip(start[mine].tolist(), work[mine].tolist())), (s + 0.1, 0.8),
                                   facecolors=[colors[i] for i in mine.tolist()], edgecolor="white", linewidth=0.2)
        top.set_yticks([0.5], [f"one {plan.lane}"])
        top.set_title(f"baseline {fmt_ms(plan.baseline_ns)} vs plan {fmt_ms(plan.plan_ns)}: {plan.speedup:.2f}x, "
                      f"modelled upper bound\n{plan.streams} {plan.lane}s, {plan.syncs} syncs of "
                      f"{plan.sync_ns} ns; red = critical path, grey = syncs", fontsize=9)
        row_of = {node: row for row, node in enumerate(ops.column("node"))}
        end = np.asarray(ops.column("end_ns"), dtype=np.float64) / scale
        for e in plan.sync_edges[:MAX_SYNC_LINES]:
            u, v = row_of[e.producer], row_of[e.consumer]
            bottom.plot([end[u], start[v]], [stream[u] + 0.5, stream[v] + 0.5], color="gray", lw=0.5, alpha=0.6)
        bottom.set_yticks([s + 0.5 for s in range(rows)], [lane.label for lane in plan.lanes] or [plan.lane])
        bottom.set_ylim(rows, 0)
        bottom.set_xlabel(f"time from the step's start ({unit})")
        bottom.set_xlim(0, x_max)
        return save(fig, out_dir, "parallelism")


def text(result: Result) -> str:
    """The stream plan as text, with the data loading beside it when the trace's job has workers, and
    a word when the recording was taken on a busy machine."""
    extra = [f"{f.text}\n" for f in result.findings if f.kind in ("data_loading", "busy_machine")]
    return plan_text(result.data) + "".join(extra)


def plots(result: Result, folder: Path) -> list[Path]:
    """parallelism.png/.svg."""
    return write_parallelism_plot(result.data, folder)


def artifacts(result: Result, folder: Path) -> list[Path]:
    """The plots, plus plan.json, report.txt, the graph and the predicted trace with its Trace Compass views."""
    from tc_analyses.export.parallelism_views import write_plan_view  # lazily: networkx and the views

    write_plan_view(result.data, result.trace, folder)
    return plots(result, folder)
