"""Interactive, zoomable plots for the HTML report (Plotly, its JavaScript bundled in the page, so
the report stays one file that works offline). Hover names each point; the page's static SVG plots
stay beside them for printing.

The page carries plotly.js once, in its head (about 4.6 MB, :func:`library`), when it holds a figure."""

from __future__ import annotations

from typing import Any

from tc_analyses.analyses.roofline import RooflineResult
from tc_analyses.export.interactive_lanes import plotly_text


def library() -> str:
    """plotly.js, to go once in a page's <script>."""
    from plotly.offline import get_plotlyjs

    code: str = get_plotlyjs()
    return code


def roofline_figure(result: RooflineResult) -> str:
    """The roofline as an HTML fragment: each op type a point (intensity, achieved FLOP/s, its
    area its time), the memory and compute roofs as lines, log-log, zoomable."""
    import plotly.graph_objects as go
    import plotly.io as pio

    ops = [o for o in result.ops if o.flops > 0 and o.achieved_flops > 0]
    peaks = result.peaks
    total = sum(o.total_ns for o in ops) or 1
    low = min([o.intensity for o in ops] + [peaks.ridge() / 100]) / 2
    high = max([o.intensity for o in ops] + [peaks.ridge() * 100]) * 2
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=[low, peaks.ridge(), high], y=[low * peaks.bandwidth, peaks.fp32_flops, peaks.fp32_flops],
                                mode="lines", name=f"roof ({plotly_text(peaks.model)})", line={"color": "black"}))
    for bound, color in (("memory", "#1f77b4"), ("compute", "#d62728")):
        chosen = [o for o in ops if o.bound == bound]
        if chosen:
            figure.add_trace(go.Scatter(
                x=[o.intensity for o in chosen], y=[o.achieved_flops for o in chosen], mode="markers",
                name=f"{bound}-bound", marker={"size": [8 + 40 * (o.total_ns / total) ** 0.5 for o in chosen],
                                               "color": color, "opacity": 0.7, "line": {"width": 0.5}},
                text=[_hover(o) for o in chosen], hoverinfo="text"))
    figure.update_layout(title=f"Roofline on {plotly_text(peaks.model)} ({plotly_text(peaks.source)}): point area = op time",
                         xaxis={"type": "log", "title": "intensity (FLOP/byte)"},
                         yaxis={"type": "log", "title": "achieved FLOP/s"}, height=520, margin={"t": 50})
    fragment: str = pio.to_html(figure, full_html=False, include_plotlyjs=False, config={"responsive": True})
    return fragment


def _hover(op: Any) -> str:
    return (f"{plotly_text(op.op)}<br>{op.count} runs, {op.total_ns / 1e6:.3f} ms<br>{op.intensity:.3g} FLOP/byte, "
            f"{op.achieved_flops / 1e9:.3g} GFLOP/s ({op.efficiency:.0%} of its roof)")
