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
