"""The report's step timeline: one typical step of the trace, zoomable, with its nodes and runtime
calls on their threads and its GPU work on its queues (:mod:`tc_analyses.export.interactive_lanes`).

The step is the median one of the steady kind (:func:`~tc_analyses.model.step_kinds.typical_step`),
steps being inferred when none is marked, else the whole trace. Its GPU work is what its runtime
calls launched, however late that ran, and whatever else ran on a queue while the step did. Times
on the axis are from the step's first node; the caption gives that start in Trace Compass's time
base (the clock offset applied), where the same step is found in its views.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tc_analyses.analyses.units import fmt_ns, fmt_utc
from tc_analyses.export.interactive_lanes import Bars, Panel, lanes_figure, longest_index, nesting_depth, shown_text
from tc_analyses.model.activity import Activity

RUNTIME = "runtime API"  # the group of the runtime calls (cudaLaunchKernel, cudaMemcpyAsync...)


@dataclass(frozen=True)
class Window:
    start: int
    end: int
    why: str  # which step, or the whole trace


def timeline_window(activity: Activity) -> Window | None:
    """The time the step timeline shows; None when the trace has no node and no GPU work."""
    from tc_analyses.model.step_inference import infer_steps, with_steps
    from tc_analyses.model.step_kinds import typical_step

    if not len(activity.nodes) and not len(activity.gpu):
        return None
    stepped, inferred = activity, ""
    if not activity.steps and len(activity.nodes) and (found := infer_steps(activity)) is not None:
        stepped, inferred = with_steps(activity, found), f" ({found.describe()})"
    typical = typical_step(stepped)
    if typical is not None:
        return Window(typical.start, typical.end, typical.why + inferred)
    starts = np.concatenate([activity.nodes.column("start"), activity.gpu.column("start")])
    ends = np.concatenate([activity.nodes.column("end"), activity.gpu.column("end")])
    return Window(int(starts.min()), int(ends.max()), "the whole trace (no steps marked or found)")


def step_timeline_figure(activity: Activity, clock_offset_ns: int = 0, window: Window | None = None) -> str:
    """The step timeline as an HTML fragment; "" when the trace has nothing to draw. `window`:
    :func:`timeline_window`'s, when the caller has it already."""
    window = window if window is not None else timeline_window(activity)
    if window is None:
        return ""
    cpu, cpu_lanes = _cpu_bars(activity, window)
    gpu, gpu_lanes = _gpu_bars(activity, window)
    span = max(window.end, int((gpu.start_ns + gpu.length_ns).max()) + window.start if len(gpu) else 0) - window.start
    caption = (f"{window.why[0].upper()}{window.why[1:]}: {fmt_ns(span)} from {fmt_utc(window.start + clock_offset_ns)} in "
               f"Trace Compass's time. Drag to zoom, double-click to reset, hover a bar for its name.")
    panels = []
    if len(cpu):
        panels.append(Panel(f"{len(cpu_lanes)} thread(s): nodes and runtime calls{shown_text(len(cpu))}", cpu, cpu_lanes))
    if len(gpu):
        panels.append(Panel(f"{len(gpu_lanes)} GPU queue(s): what the step launched{shown_text(len(gpu))}", gpu, gpu_lanes))
    return lanes_figure(caption, panels) if panels else ""


def _overlapping(start: np.ndarray[Any, Any], end: np.ndarray[Any, Any], window: Window) -> np.ndarray[Any, Any]:
    """The intervals that overlap the window, instants inside it included."""
    inside = (start < window.end) & (end > window.start)
    instant = (start == end) & (start >= window.start) & (start < window.end)
    return np.flatnonzero(inside | instant)


def _cpu_bars(activity: Activity, window: Window) -> tuple[Bars, list[str]]:
    """Nodes and runtime calls that overlap the window, clipped to it, on their threads."""
    nodes, api = activity.nodes, activity.api
    n_at = _overlapping(nodes.column("start"), nodes.column("end"), window)
    a_at = _overlapping(api.column("start"), api.column("end"), window)
    tid = np.concatenate([nodes.column("tid")[n_at], api.column("tid")[a_at]])
    start = np.maximum(np.concatenate([nodes.column("start")[n_at], api.column("start")[a_at]]), window.start)
    end = np.minimum(np.concatenate([nodes.column("end")[n_at], api.column("end")[a_at]]), window.end)
    is_node = np.arange(len(tid)) < len(n_at)
    depth = nesting_depth(tid, start, end)
    keep = longest_index(end - start)
    node_rows, api_rows = n_at[keep[is_node[keep]]], a_at[keep[~is_node[keep]] - len(n_at)]
    hover = [_node_hover(r, window) for r in nodes.take(node_rows)] + [_call_hover(c, window) for c in api.take(api_rows)]
    group = np.concatenate([nodes.text("op")[node_rows], np.full(len(api_rows), RUNTIME, dtype=object)])
    kept = np.concatenate([keep[is_node[keep]], keep[~is_node[keep]]])  # the order hover and group follow
    by_start = np.lexsort((tid, start))
    threads, first = np.unique(tid[by_start], return_index=True)
    lanes = [f"thread {t}" for t in threads[np.argsort(first, kind="stable")].tolist()]  # in the order they start
    labels = np.array([f"thread {t}" for t in tid[kept].tolist()], dtype=object)
    return Bars(labels, start[kept] - window.start, end[kept] - start[kept], group.astype(object),
                np.array(hover, dtype=object), depth[kept]), lanes


def _gpu_bars(activity: Activity, window: Window) -> tuple[Bars, list[str]]:
    """GPU work launched by the window's runtime calls, and any other that ran during the window
    (clipped to it), on its queue."""
    gpu, api = activity.gpu, activity.api
    if not len(gpu):
        return Bars.empty(), []
    calls = _overlapping(api.column("start"), api.column("end"), window)
    launched_ids = api.column("correlation_id")[calls]
    corr = gpu.column("correlation_id")
    launched = np.isin(corr, launched_ids[launched_ids != 0]) & (corr != 0)
    during = np.zeros(len(gpu), dtype=bool)
    during[_overlapping(gpu.column("start"), gpu.column("end"), window)] = True
    rows = np.flatnonzero(launched | during)
    start, end = gpu.column("start")[rows], gpu.column("end")[rows]
    start = np.where(launched[rows], start, np.maximum(start, window.start))
    end = np.where(launched[rows], end, np.minimum(end, window.end))
    keep = longest_index(end - start)
    chosen = gpu.take(rows[keep])
    lane = np.array([f"{d} queue {q}" for d, q in zip(chosen.text("device").tolist(), chosen.column("queue").tolist())],
                    dtype=object)
    pairs = sorted(set(zip(chosen.text("device").tolist(), chosen.column("queue").tolist())),
                   key=lambda p: (_natural(p[0]), p[1]))  # cuda:2 before cuda:10, queue 7 before queue 17
    lanes = [f"{d} queue {q}" for d, q in pairs]
    hover = np.array([_gpu_hover(op, window) for op in chosen], dtype=object)
    return Bars(lane, start[keep] - window.start, end[keep] - start[keep], chosen.text("kind").astype(object), hover,
                np.zeros(len(keep), dtype=np.int64)), lanes


def _natural(name: str) -> tuple[Any, ...]:
    """A device name's sort key, its numbers as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _at(start: int, end: int, window: Window) -> str:
    if start < window.start:
        return f"{fmt_ns(end - start)}, begun {fmt_ns(window.start - start)} before"
    return f"{fmt_ns(end - start)}, at +{fmt_ns(start - window.start)}"


def _node_hover(run: Any, window: Window) -> str:
    return f"{run.op}\n{run.name}\n{run.device}, thread {run.tid}\n{_at(run.start, run.end, window)}"


def _call_hover(call: Any, window: Window) -> str:
    return f"{call.name}\nthread {call.tid}, correlation {call.correlation_id}\n{_at(call.start, call.end, window)}"


def _gpu_hover(op: Any, window: Window) -> str:
    size = f", {op.bytes:,} bytes" if op.bytes else ""
    return (f"{op.name}\n{op.kind} on {op.device} queue {op.queue}{size}, correlation {op.correlation_id}\n"
            f"{_at(op.start, op.end, window)}")
