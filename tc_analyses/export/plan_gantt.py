"""The plans' Gantt charts beside what was recorded, zoomable (:mod:`tc_analyses.export.interactive_lanes`).

* The stream plan (parallelism analysis): its ops on one lane in recorded order against the plan's
  lanes, both modelled with each op's mean cost, as the static chart draws them; the critical path
  stands out.
* A recommended placement: the recorded typical step (the one the step timeline shows), its nodes on
  their device and thread as measured, against the plan's predicted schedule on each device, both
  coloured by op type, so that a moved op is the same colour in both panels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tc_analyses.analyses.parallelism.result import StreamPlan
from tc_analyses.analyses.placement.recommend import Recommendation
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.export.interactive_lanes import Bars, Panel, lanes_figure, longest_index, nesting_depth, shown_text
from tc_analyses.export.step_timeline import Window, timeline_window
from tc_analyses.model.activity import Activity

CRITICAL, OFF_CRITICAL = "on the critical path", "off the critical path"
CRITICAL_COLORS = {CRITICAL: "#d62728", OFF_CRITICAL: "#1f77b4"}  # as the static chart draws them
ZOOM = "Drag to zoom, double-click to reset, hover a bar for its op."


def stream_plan_figure(plan: StreamPlan) -> str:
    """The stream plan's Gantt chart as an HTML fragment; "" for a plan without ops."""
    ops = plan.ops
    if not len(ops):
        return ""
    work = np.asarray(ops.column("work_ns"), dtype=np.int64)
    keep = longest_index(work)
    critical = np.asarray(ops.column("on_critical_path"), dtype=bool)[keep]
    group = np.where(critical, CRITICAL, OFF_CRITICAL).astype(object)
    labels = [lane.label for lane in plan.lanes] or [plan.lane]
    names, op_types = ops.column("name"), ops.column("op")
    stream = np.asarray(ops.column("stream"), dtype=np.int64)[keep]
    hover = np.array([f"{op_types[i]}\n{names[i]}\n{fmt_ns(work[i])} (its mean)" + ("\non the critical path" if c else "")
                      for i, c in zip(keep.tolist(), critical.tolist())], dtype=object)
    one = f"one {plan.lane}"
    baseline = Bars(np.full(len(keep), one, dtype=object), np.asarray(ops.column("baseline_start_ns"))[keep],
                    work[keep], group, hover, np.zeros(len(keep), dtype=np.int64))
    planned = Bars(np.array([labels[s] for s in stream.tolist()], dtype=object), np.asarray(ops.column("start_ns"))[keep],
                   work[keep], group, hover, np.zeros(len(keep), dtype=np.int64))
    caption = (f"The stream plan on {plan.device}: {fmt_ns(plan.baseline_ns)} on one {plan.lane} against "
               f"{fmt_ns(plan.plan_ns)} on {plan.streams} ({plan.speedup:.2f}x), both modelled with each op's mean "
               f"cost (an upper bound). {ZOOM}")
    shown = shown_text(len(ops))
    return lanes_figure(caption, [Panel(f"recorded order, one {plan.lane}{shown}", baseline, [one]),
                                  Panel(f"plan, {plan.streams} {plan.lane}(s), {plan.syncs} syncs{shown}", planned,
                                        labels)], CRITICAL_COLORS)


def placement_figure(result: Recommendation, activity: Activity, window: Window | None = None) -> str:
    """The recorded step against the recommended placement's schedule as an HTML fragment; "" when
    the plan has no schedule. `window`: the step timeline's, when the caller has it already."""
    rows = result.schedule
    if not rows:
        return ""
    panels = []
    if window is None and len(activity.nodes):
        window = timeline_window(activity)
    if window is not None:
        recorded, lanes, total = _recorded_nodes(activity, window)
        panels.append(Panel(f"recorded {window.why.split(',')[0]}, {fmt_ns(window.end - window.start)} measured"
                            f"{shown_text(total)}", recorded, lanes))
    moved = {m.task: m.from_device for m in result.moved}
    start = np.array([r["start_ns"] for r in rows], dtype=np.int64)
    end = np.array([r["end_ns"] for r in rows], dtype=np.int64)
    device = np.array([r["device"] for r in rows], dtype=object)
    keep = longest_index(end - start)
    hover = np.array([_slot_hover(rows[i], moved.get(rows[i]["task"])) for i in keep.tolist()], dtype=object)
    depth = nesting_depth(device, start, end)[keep]
    planned = Bars(device[keep], start[keep] - int(start.min()), (end - start)[keep],
                   np.array([rows[i]["op"] for i in keep.tolist()], dtype=object), hover, depth)
    devices = [d["name"] for d in result.devices]
    panels.append(Panel(f"plan: {len(result.moved)} node(s) moved, {fmt_ns(result.predicted_makespan_ns)} predicted"
                        f"{shown_text(len(rows))}", planned, devices))
    speedup = f" ({result.speedup:.2f}x by the model)" if result.speedup else ""
    which = f" ({window.why})" if window is not None else ""
    caption = (f"The recorded step{which} against the placement recommended on {', '.join(devices)}{speedup}: recorded "
               f"times are measured, the plan's are predicted by the cost model. Same colour, same op type. {ZOOM}")
    return lanes_figure(caption, panels)


def _recorded_nodes(activity: Activity, window: Window) -> tuple[Bars, list[str], int]:
    """The nodes that ran in the window, on their device and thread (the longest, with hover texts
    made for those alone)."""
    nodes = activity.nodes
    start, end = nodes.column("start"), nodes.column("end")
    at = np.flatnonzero((start >= window.start) & (end <= window.end))
    pairs = np.stack([nodes.column("device")[at].astype(np.int64), nodes.column("tid")[at]], axis=1)
    keys, lane_of = np.unique(pairs, axis=0, return_inverse=True)
    lane_of = lane_of.reshape(-1)
    depth = nesting_depth(lane_of, start[at], end[at])
    devices = nodes.labels("device")
    names = [f"{devices[d]} · thread {t}" for d, t in keys.tolist()]
    first = np.unique(lane_of, return_index=True)[1]
    lanes = [names[k] for k in np.argsort(first, kind="stable").tolist()]  # in the order they start
    keep = longest_index(end[at] - start[at])
    chosen, rows = nodes.take(at[keep]), at[keep]
    hover = np.array([f"{op}\n{name}\n{fmt_ns(e - s)}" for op, name, s, e in
                      zip(chosen.text("op").tolist(), chosen.text("name").tolist(), start[rows].tolist(), end[rows].tolist())],
                     dtype=object)
    lane = np.array(names, dtype=object)[lane_of[keep]] if len(keep) else np.zeros(0, dtype=object)
    return Bars(lane, start[rows] - window.start, end[rows] - start[rows], chosen.text("op").astype(object), hover,
                depth[keep]), lanes, len(at)


def _slot_hover(row: dict[str, Any], moved_from: str | None) -> str:
    where = f"moved here from {moved_from}" if moved_from else "kept where it ran"
    return f"{row['op']}\n{row['node']}\non {row['device']}, {where}\n{fmt_ns(row['end_ns'] - row['start_ns'])} predicted"
