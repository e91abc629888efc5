"""Matplotlib figures for the reports: the Agg backend and settings that make the files reproducible.

Every plot is written as PNG and SVG, byte for byte the same on every run: fixed size and DPI,
fixed SVG ids (``svg.hashsalt``), text as paths, and no dates or software names in the metadata.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

RC = {"svg.hashsalt": "dfcompass", "svg.fonttype": "path", "font.family": "DejaVu Sans", "font.size": 9,
      "path.simplify": False}
DPI = 100


@contextmanager
def figure(*grid: int, figsize: tuple[float, float], **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """``(fig, axes)`` of ``plt.subplots(*grid, ...)`` under :data:`RC`; closed on exit. Save inside the block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(RC):
        fig, axes = plt.subplots(*grid, figsize=figsize, dpi=DPI, **subplots)
        try:
            yield fig, axes
        finally:
            plt.close(fig)


def save(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    """Write ``out_dir/<stem>.png`` and ``.svg`` (laid out tight); returns their paths."""
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{stem}.png", out_dir / f"{stem}.svg"
    fig.savefig(png, format="png", metadata={"Software": None})
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return [png, svg]


# Columns of a lane image: about twice the pixels a 10-inch axes gets at DPI, so that a bar is
# never thinner on the image than the vector bar drawn with a white edge would look.
LANE_IMAGE_COLUMNS = 2_000
_BAR_ROWS = (1, 9)  # of 10 image rows per lane: the bar fills 0.1 to 0.9 of its lane, as broken_barh's does


def lane_image(starts: Any, durations: Any, lanes: Any, highlight: Any, rows: int, x_max: float) -> Any:
    """Bars on lanes as an RGBA image (``rows * 10`` by :data:`LANE_IMAGE_COLUMNS`) for ``imshow``
    with ``extent=(0, x_max, rows, 0)``: a pixel is red where a highlighted bar covers it, else blue
    where any bar does, else clear. For plans of many thousand ops, where one vector bar per op
    takes matplotlib minutes; bars of no duration are not drawn, as broken_barh draws none."""
    import numpy as np
    from matplotlib.colors import to_rgba

    starts, durations = np.asarray(starts, dtype=np.float64), np.asarray(durations, dtype=np.float64)
    lanes, highlight = np.asarray(lanes, dtype=np.int64), np.asarray(highlight, dtype=bool)
    shown = durations > 0
    width = LANE_IMAGE_COLUMNS
    per_column = max(x_max, 1e-12) / width
    first = np.clip(np.floor(starts[shown] / per_column), 0, width - 1).astype(np.int64)
    last = np.clip(np.ceil((starts[shown] + durations[shown]) / per_column), first + 1, width).astype(np.int64)
    covered = np.zeros((2, rows, width + 1), dtype=np.int64)  # any bar, a highlighted bar: +1 in, -1 out
    for layer, chosen in enumerate((np.ones(len(first), dtype=bool), highlight[shown])):
        np.add.at(covered[layer], (lanes[shown][chosen], first[chosen]), 1)
        np.add.at(covered[layer], (lanes[shown][chosen], last[chosen]), -1)
    any_bar, red = (np.cumsum(covered, axis=2)[:, :, :width] > 0)
    image = np.zeros((rows, width, 4), dtype=np.uint8)
    image[any_bar] = np.round(np.array(to_rgba("tab:blue")) * 255).astype(np.uint8)
    image[red] = np.round(np.array(to_rgba("tab:red")) * 255).astype(np.uint8)
    tall = np.zeros((rows, 10, width, 4), dtype=np.uint8)
    tall[:, _BAR_ROWS[0]:_BAR_ROWS[1]] = image[:, None]
    return tall.reshape(rows * 10, width, 4)
