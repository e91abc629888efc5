"""Zoomable lane charts for the HTML report (Plotly, drawn from columns): bars on lanes (threads,
GPU queues, devices, planned streams), one panel per schedule on a shared time axis.

A panel's bars are colours by group (an op type, a kind of GPU work), the same colour for the same
group in every panel, with the groups holding most time named in the legend and the rest grey.
Nested bars (a node inside another on its thread) are drawn narrower and on top, as Trace
Compass's time graph shows the innermost state. Past :data:`MOST_BARS` bars a panel keeps the
longest ones and its title says so: the page stays small and quick to zoom.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

MOST_BARS = 4_000  # per panel; Plotly stays smooth to zoom and the page grows by about 100 bytes a bar
NAMED_GROUPS = 10  # the groups with most time keep their colour; the others are "other"
DEEPEST = 4  # nesting drawn apart up to this depth; deeper bars are drawn as this depth
OTHER = "other"
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
            "#7f7f7f")
_OTHER_COLOR = "#c7c7c7"


@dataclass(frozen=True)
class Bars:
    """The bars of one panel as columns (one row a bar); times in ns from the panel's origin."""

    lane: np.ndarray[Any, Any]  # lane label (str objects)
    start_ns: np.ndarray[Any, Any]
    length_ns: np.ndarray[Any, Any]
    group: np.ndarray[Any, Any]  # colour and legend entry (str objects)
    hover: np.ndarray[Any, Any]  # what hovering a bar shows (plain text: escaped here)
    depth: np.ndarray[Any, Any]  # nesting in its lane, 0 = outermost

    def __len__(self) -> int:
        return len(self.start_ns)

    @classmethod
    def empty(cls) -> Bars:
        texts, times = np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
        return cls(texts, times, times, texts, texts, times)

    def take(self, which: np.ndarray[Any, Any]) -> Bars:
        return Bars(self.lane[which], self.start_ns[which], self.length_ns[which], self.group[which],
                    self.hover[which], self.depth[which])


@dataclass(frozen=True)
class Panel:
    title: str
    bars: Bars
    lanes: Sequence[str]  # top to bottom; lanes without bars stay as empty rows


def nesting_depth(lane: np.ndarray[Any, Any], start: np.ndarray[Any, Any], end: np.ndarray[Any, Any]
                  ) -> np.ndarray[Any, Any]:
    """The depth of each interval among those of its lane that enclose it, for intervals that nest,
    in any order: taken by start, enclosing ones first, the intervals of its lane begun before it
    less those ended by its start. An instant (start = end) counts as ending just after it starts,
    so that it is inside what encloses it, not beside it."""
    n = len(start)
    if not n:
        return np.zeros(0, dtype=np.int64)
    _, lane_code = np.unique(lane, return_inverse=True)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    order = np.lexsort((np.arange(n), -end, start, lane_code.reshape(-1)))  # by lane, start, enclosing first
    codes = lane_code.reshape(-1)[order]
    first_of_lane = np.searchsorted(codes, codes, side="left")
    begun = np.arange(n) - first_of_lane  # intervals of its lane before it, in that order
    origin = int(np.min(start))
    starts = 2 * (start[order] - origin)  # doubled: an instant ends half a unit on
    ends = 2 * (end[order] - origin) + (end[order] == start[order])
    ended = np.zeros(n, dtype=np.int64)
    bounds = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), n]
    for low, high in zip(bounds, bounds[1:]):  # one pass per lane (threads, queues), not per interval
        ended[low:high] = np.searchsorted(np.sort(ends[low:high]), starts[low:high], side="right")
    depth = np.empty(n, dtype=np.int64)
    depth[order] = np.maximum(begun - ended, 0)
    return depth


def longest(bars: Bars, most: int = MOST_BARS) -> Bars:
    """The `most` longest bars, in their given order (all of them when there are no more)."""
    return bars if len(bars) <= most else bars.take(longest_index(bars.length_ns, most))


def shown_text(total: int, most: int = MOST_BARS) -> str:
    """What a title says of the bars left out, "" when none was."""
    return f"; the longest {most:,} of {total:,} shown" if total > most else ""


def lanes_figure(caption: str, panels: Sequence[Panel], fixed_colors: Mapping[str, str] | None = None) -> str:
    """The panels as one HTML fragment (no plotly.js: the page carries it once), one row each on
    a shared, zoomable time axis, under `caption` (a paragraph of the page, which wraps where a
    plot's title would be cut). `fixed_colors`: the groups' colours, where a static chart has set them."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.subplots import make_subplots

    panels = [Panel(p.title, longest(p.bars), p.lanes) for p in panels]
    span = max((int((p.bars.start_ns + p.bars.length_ns).max()) for p in panels if len(p.bars)), default=1)
    scale, unit = (1e6, "ms") if span >= 1e6 else (1e3, "us")
    colors = dict(fixed_colors) if fixed_colors else _colors(panels)
    rows = [max(1, len(p.lanes)) for p in panels]
    figure = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, row_heights=rows,
                           vertical_spacing=min(0.12, 0.3 / len(panels)),
                           subplot_titles=[plotly_text(p.title) for p in panels])
    shown: set[str] = set()
    for row, panel in enumerate(panels, start=1):
        bars = panel.bars
        group = np.where(np.isin(bars.group, list(colors)), bars.group, OTHER) if len(bars) else bars.group
        depth = np.minimum(bars.depth, DEEPEST)
        for level in np.unique(depth).tolist():  # shallow first: nested bars are drawn over them
            for name in [g for g in [*colors, OTHER] if g in set(group[depth == level].tolist())]:
                pick = np.flatnonzero((depth == level) & (group == name))
                figure.add_trace(go.Bar(
                    orientation="h", y=[plotly_text(lane) for lane in bars.lane[pick].tolist()],
                    base=(bars.start_ns[pick] / scale).tolist(),
                    x=(bars.length_ns[pick] / scale).tolist(), width=0.8 * 0.72 ** level,
                    marker={"color": colors.get(name, _OTHER_COLOR), "line": {"width": 0}},
                    name=plotly_text(name), legendgroup=name, showlegend=name not in shown,
                    hovertext=[plotly_text(text).replace("\n", "<br>") for text in bars.hover[pick].tolist()],
                    hoverinfo="text"), row=row, col=1)
                shown.add(name)
        figure.update_yaxes(type="category", categoryorder="array", categoryarray=[plotly_text(lane) for lane in panel.lanes],
                            range=[len(panel.lanes) - 0.5, -0.5], row=row, col=1)
    figure.update_xaxes(title_text=f"time from the start ({unit})", row=len(panels), col=1)
    entries = len(shown)  # the legend needs its height, or it scrolls
    figure.update_layout(barmode="overlay", height=max(100 + 26 * sum(rows) + 60 * len(panels), 150 + 21 * entries),
                         margin={"t": 40, "l": 10}, legend={"traceorder": "normal"}, hoverlabel={"align": "left"})
    plot: str = pio.to_html(figure, full_html=False, include_plotlyjs=False, config={"responsive": True})
    return f'<p class="caption">{html.escape(caption)}</p>\n{plot}'



def plotly_text(text: str) -> str:
    """A name as Plotly's labels and hover texts take it: its markup characters as entities. Not
    quotes: Plotly decodes few entities (&quot; would show as such), and its JSON is script-safe."""
    return html.escape(text, quote=False)


def _colors(panels: Sequence[Panel]) -> dict[str, str]:
    """The groups with most time over every panel, each its colour, heaviest first."""
    time: dict[str, int] = {}
    for panel in panels:
        if not len(panel.bars):
            continue
        groups, at = np.unique(panel.bars.group, return_inverse=True)
        totals = np.bincount(at.reshape(-1), weights=panel.bars.length_ns, minlength=len(groups))
        for name, total in zip(groups.tolist(), totals.tolist()):
            time[str(name)] = time.get(str(name), 0) + int(total)
    named = sorted(time, key=lambda g: (-time[g], g))[:NAMED_GROUPS]
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(named) if name != OTHER}


def longest_index(length_ns: np.ndarray[Any, Any], most: int = MOST_BARS) -> np.ndarray[Any, Any]:
    """The indexes of the `most` longest bars, in their given order: hover texts are made for those
    alone."""
    if len(length_ns) <= most:
        return np.arange(len(length_ns))
    return np.sort(np.argsort(-np.asarray(length_ns), kind="stable")[:most])
