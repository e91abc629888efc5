"""The report's zoomable lane charts (issue 39): the step timeline and the plans' Gantt charts.

The figures are read back from the Plotly JSON they embed and compared with what the trace and
the plans hold, worked out here row by row (another path than the columns the figures use)."""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tc_analyses.export.interactive_lanes import longest_index, nesting_depth, shown_text
from tc_analyses.export.plan_gantt import CRITICAL, CRITICAL_COLORS, placement_figure, stream_plan_figure
from tc_analyses.export.step_timeline import RUNTIME, step_timeline_figure, timeline_window
from tc_analyses.inputs import TraceInputs
from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.model.step_kinds import typical_step
from tc_analyses.registry import entry

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
MLP = DATA / "cuda" / "h200-mlp" / "trace"
KERAS = DATA / "tf" / "keras-cnn"
ENCODER = DATA / "cuda" / "h200-eager" / "encoder-cuda" / "trace"  # its step's last kernel ends after the step


def figure_of(fragment: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """(caption, traces, layout) of a fragment made by lanes_figure."""
    caption = re.match(r'<p class="caption">(.*?)</p>', fragment)
    assert caption is not None
    at = re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*', fragment)
    assert at is not None
    decoder = json.JSONDecoder()
    traces, end = decoder.raw_decode(fragment, at.end())
    layout, _ = decoder.raw_decode(fragment, fragment.index("{", end))
    return caption.group(1), traces, layout


def bars_of(traces: list[dict[str, Any]], axis: str = "y") -> list[tuple[str, float, float, str]]:
    """Every bar of the panel on y axis `axis`: (lane, start, length, group), in the figure's unit."""
    found = []
    for trace in traces:
        if trace.get("yaxis", "y") != axis:
            continue
        for lane, base, length in zip(trace["y"], trace["base"], trace["x"]):
            found.append((lane, base, length, trace["legendgroup"]))
    return found


def test_nesting_depth_counts_the_enclosing_intervals_of_the_same_lane() -> None:
    lane = np.array(["a", "a", "b", "a", "a", "a"], dtype=object)
    start = np.array([0, 0, 1, 2, 6, 8])
    end = np.array([10, 5, 4, 3, 8, 9])  # (8, 9) starts where (6, 8) ends: a sibling, not a child
    assert nesting_depth(lane, start, end).tolist() == [0, 1, 0, 2, 1, 1]
    # an instant is inside what encloses it, even one that starts with it
    assert nesting_depth(np.array(["a"] * 3, dtype=object), np.array([0, 5, 5]), np.array([10, 8, 5])).tolist() == [0, 1, 2]
    assert nesting_depth(np.zeros(0, dtype=object), np.zeros(0), np.zeros(0)).tolist() == []


def _nested(rng: random.Random, low: int, high: int, depth: int) -> list[tuple[int, int]]:
    """Intervals that nest inside [low, high], instants among them."""
    found: list[tuple[int, int]] = []
    at = low
    while at < high and rng.random() < 0.8:
        start = rng.randint(at, high)
        end = start if rng.random() < 0.25 else rng.randint(start, high)
        found.append((start, end))
        if depth and end > start:
            found += _nested(rng, start, end, depth - 1)
        at = end if end > start else start + 1
    return found


def test_nesting_depth_equals_a_count_of_the_enclosing_intervals() -> None:
    rng = random.Random(39)
    for _ in range(300):
        rows = [(lane, s, e) for lane in "ab" for s, e in _nested(rng, 0, 40, 3)]
        if not rows:
            continue
        ranked = sorted(range(len(rows)), key=lambda i: (rows[i][1], -rows[i][2], i))  # by start, enclosing first
        # j encloses i: before it on its lane and not ended by its start (an instant ends just after it starts)
        expected = {i: sum(1 for j in ranked[:ranked.index(i)] if rows[j][0] == rows[i][0] and
                           (rows[j][2] > rows[i][1] or rows[j][1] == rows[j][2] == rows[i][1])) for i in range(len(rows))}
        shuffled = rng.sample(range(len(rows)), len(rows))  # any order in: each depth stays with its interval
        lane, start, end = (np.array([rows[i][k] for i in shuffled]) for k in range(3))
        depth = nesting_depth(lane.astype(object), start, end).tolist()
        # equal intervals (two instants at one time) may swap which is inside the other
        got: dict[tuple[str, int, int], list[int]] = {}
        want: dict[tuple[str, int, int], list[int]] = {}
        for at, i in enumerate(shuffled):
            got.setdefault(rows[i], []).append(depth[at])
            want.setdefault(rows[i], []).append(expected[i])
        assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}, rows


def test_longest_index_keeps_the_longest_in_their_order() -> None:
    lengths = np.array([5, 1, 9, 5, 2, 7])
    assert longest_index(lengths, 3).tolist() == [0, 2, 5]
    assert longest_index(lengths, 4).tolist() == [0, 2, 3, 5]  # a tie kept in its order
    assert longest_index(lengths, 10).tolist() == list(range(6))
    assert shown_text(10, 4) == "; the longest 4 of 10 shown" and shown_text(4, 4) == ""


def _run(i: int, step: int, start: int, length: int, op: str = "a") -> NodeRun:
    return NodeRun(i, op, op, "cpu", 1, step, start, start + length, True)


def test_the_typical_step_is_the_median_kept_step_of_the_steady_kind() -> None:
    spans = [50, 9, 3, 7, 1]  # step 0 is the warm-up: left out though it is the longest
    runs = [_run(s, s, 100 * s, span) for s, span in enumerate(spans)] + [_run(9, 5, 900, 2, op="b")]
    typical = typical_step(Activity("t", runs, [], [], [], {}))
    assert typical is not None
    # kept steps 1-4 by span: 1 (step 4), 3 (step 2), 7 (step 3), 9 (step 1): the lower middle one
    assert (typical.step, typical.start, typical.end) == (2, 200, 203)
    assert typical.why == "step 2, the median of the 4 kept steps of the commonest of 2 step kinds"
    assert typical_step(Activity("t", [_run(0, 0xFFFFFFFF, 0, 5)], [], [], [], {})) is None


@pytest.mark.parametrize("path", [MLP, ENCODER], ids=["mlp", "encoder"])
def test_the_step_timeline_draws_the_step_and_all_the_gpu_work_it_launched(path: Path) -> None:
    inputs = TraceInputs(path)
    activity = inputs.activity
    window = timeline_window(activity)
    assert window is not None
    caption, traces, layout = figure_of(step_timeline_figure(activity, inputs.trace.metadata.clock_offset_ns))
    assert caption.startswith(window.why[0].upper() + window.why[1:] + ": ")
    at = window.start + inputs.trace.metadata.clock_offset_ns  # the step's start in Trace Compass's time base
    utc = datetime.fromtimestamp(at // 10**9, tz=timezone.utc)
    assert f"from {utc:%Y-%m-%dT%H:%M:%S}.{at % 10**9:09d}Z in Trace Compass" in caption
    # what the step launched, worked out call by call and op by op
    launched = {c.correlation_id for c in activity.api if c.start < window.end and c.end > window.start} - {0}
    expected = sorted((f"{op.device} queue {op.queue}", op.start - window.start, op.duration) for op in activity.gpu
                      if op.correlation_id in launched)
    late = [op for op in expected if op[1] + op[2] > window.end - window.start]
    assert expected and (late or path != ENCODER)
    drawn = sorted((lane, round(base * 1e6), round(length * 1e6)) for lane, base, length, group in bars_of(traces, "y2"))
    assert set(expected) <= set(drawn)  # whole, however late it ran
    queues = [tuple(lane.split(" queue ")) for lane in layout["yaxis2"]["categoryarray"]]
    assert queues == sorted(queues, key=lambda q: (q[0], int(q[1])))  # queue 7 before queue 17
    ran_during = sum(1 for op in activity.gpu if op.correlation_id not in launched
                     and op.start < window.end and op.end > window.start)
    assert len(drawn) == len(expected) + ran_during
    cpu = bars_of(traces, "y")
    nodes = [n for n in activity.nodes if n.start < window.end and n.end > window.start]
    calls = [c for c in activity.api if c.start < window.end and c.end > window.start]
    assert len(cpu) == len(nodes) + len(calls)
    assert sum(1 for bar in cpu if bar[3] == RUNTIME) == len(calls)
    assert all(0 <= base and base + length <= (window.end - window.start) / 1e6 + 1e-9 for _, base, length, _ in cpu)


def test_a_cpu_trace_has_a_timeline_of_threads_alone() -> None:
    inputs = TraceInputs(KERAS)
    caption, traces, layout = figure_of(step_timeline_figure(inputs.activity))
    assert "yaxis2" not in layout and {t.get("yaxis", "y") for t in traces} == {"y"}
    lanes = layout["yaxis"]["categoryarray"]
    assert lanes and all(lane.startswith("thread ") for lane in lanes)


def test_a_trace_without_steps_shows_its_whole_time(make_trace: Any) -> None:
    def body(session: Any) -> None:
        import tracer

        for name in ("load", "parse", "emit"):  # one of each: nothing repeats, so no step is found
            with tracer.node(name):
                pass

    trace = make_trace(body)
    activity = TraceInputs(trace).activity
    window = timeline_window(activity)
    assert window is not None and window.why == "the whole trace (no steps marked or found)"
    assert (window.start, window.end) == (activity.nodes.column("start").min(), activity.nodes.column("end").max())
    _, traces, _ = figure_of(step_timeline_figure(activity))
    assert len(bars_of(traces)) == 3


def test_the_stream_plan_gantt_holds_every_op_on_its_lane() -> None:
    inputs = TraceInputs(MLP)
    plan = entry("parallelism").run(inputs, {"device": None, "max_streams": None, "sync_ns": 0}).data
    caption, traces, layout = figure_of(stream_plan_figure(plan))
    assert f"{plan.speedup:.2f}x" in caption and "modelled" in caption
    baseline, planned = bars_of(traces, "y"), bars_of(traces, "y2")
    assert len(baseline) == len(planned) == len(plan.ops)
    for lane in plan.lanes:  # each lane's work, summed from the plan's own summary
        assert sum(length for name, _, length, _ in planned if name == lane.label) == pytest.approx(lane.work_ns / 1e6)
    critical = sum(1 for op in plan.ops if op.on_critical_path)
    assert sum(1 for bar in planned if bar[3] == CRITICAL) == critical
    colors = {t["legendgroup"]: t["marker"]["color"] for t in traces}
    assert all(colors[g] == CRITICAL_COLORS[g] for g in colors)


def test_the_placement_gantt_sets_the_recorded_step_beside_the_schedule(tmp_path: Path) -> None:
    from tc_analyses.app.place import place

    inputs = TraceInputs(MLP)
    result, _ = place(MLP, "cpu,cuda:0=H200", tmp_path / "placement", inputs)
    caption, traces, layout = figure_of(placement_figure(result, inputs.activity))
    assert "measured" in caption and "predicted" in caption
    window = timeline_window(inputs.activity)
    assert window is not None
    recorded = bars_of(traces, "y")
    assert len(recorded) == sum(1 for n in inputs.activity.nodes if n.start >= window.start and n.end <= window.end)
    planned = bars_of(traces, "y2")
    first = min(r["start_ns"] for r in result.schedule)
    assert sorted((lane, round(base * 1e6), round(length * 1e6)) for lane, base, length, _ in planned) == sorted(
        (r["device"], r["start_ns"] - first, r["end_ns"] - r["start_ns"]) for r in result.schedule)
    assert layout["yaxis2"]["categoryarray"] == [d["name"] for d in result.devices]


def test_names_reach_plotly_with_their_markup_as_entities_and_their_quotes_as_they_are() -> None:
    from tc_analyses.export.interactive_lanes import Bars, Panel, lanes_figure

    odd = 'op "q" <b>&</b> \u00e9 </script>'
    texts = np.array([odd], dtype=object)
    bars = Bars(np.array([f"dev {odd}"], dtype=object), np.array([0]), np.array([5]), texts, texts, np.array([0]))
    fragment = lanes_figure(f"caption {odd}", [Panel(f"panel {odd}", bars, [f"dev {odd}"])])
    assert "</script>" not in fragment.split("<script", 1)[1].rsplit("</script>", 1)[0]  # nothing ends the script early
    caption, traces, layout = figure_of(fragment)
    shown = 'op "q" &lt;b&gt;&amp;&lt;/b&gt; \u00e9 &lt;/script&gt;'  # Plotly decodes these, not &quot;
    assert caption == "caption op &quot;q&quot; &lt;b&gt;&amp;&lt;/b&gt; \u00e9 &lt;/script&gt;"  # HTML: the page decodes it
    assert traces[0]["name"] == shown and traces[0]["hovertext"] == [shown] and traces[0]["y"] == [f"dev {shown}"]
    assert layout["yaxis"]["categoryarray"] == [f"dev {shown}"]
    assert layout["annotations"][0]["text"] == f"panel {shown}"
