"""The roofline plot of a :class:`~tc_analyses.analyses.roofline.RooflineResult`, as PNG and SVG.

Log-log axes: arithmetic intensity (FLOP/byte) against FLOP/s. The roof is the memory slope
``intensity * bandwidth`` up to the ridge point, then the flat fp32 peak (and the dashed
half-precision peak when the device has one). One point per op type, its area proportional to
the op type's total time, labelled with the op. Op types without FLOPs (intensity 0) cannot sit
on log axes and are left out. The files are byte-for-byte deterministic: fixed size, fonts and
SVG ids, no dates or software names in the metadata.
"""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.roofline import RooflineResult

SIZE_IN = (8.0, 5.5)
DPI = 100


def write_roofline_plot(result: RooflineResult, output: Path) -> list[Path]:
    """Write ``output/roofline.png`` and ``output/roofline.svg``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [o for o in result.ops if o.flops > 0 and o.achieved_flops > 0]
    peaks = result.peaks
    with matplotlib.rc_context({"svg.hashsalt": "dfcompass", "svg.fonttype": "path", "font.family": "DejaVu Sans",
                                "font.size": 9, "path.simplify": False}):
        fig, ax = plt.subplots(figsize=SIZE_IN, dpi=DPI)
        try:
            intensities = [o.intensity for o in ops] + [result.ridge_point]
            lo = min(min(intensities) / 10, 0.01)
            hi = max(max(intensities) * 10, result.ridge_point * 100)
            xs = [lo, result.ridge_point, hi]
            ax.plot(xs, [min(peaks.fp32_flops, x * peaks.bandwidth) for x in xs], color="black", lw=1.5,
                    label=f"roof: {peaks.bandwidth / 1e9:.1f} GB/s, {peaks.fp32_flops / 1e12:.2f} TFLOP/s fp32")
            if peaks.half_flops:
                ridge = peaks.half_flops / peaks.bandwidth
                hx = [result.ridge_point, ridge, max(hi, ridge * 10)]
                ax.plot(hx, [min(peaks.half_flops, x * peaks.bandwidth) for x in hx], color="gray", lw=1,
                        ls="--", label=f"half-precision peak {peaks.half_flops / 1e12:.0f} TFLOP/s")
            total = sum(o.total_ns for o in ops) or 1
            for i, o in enumerate(ops):
                color = "tab:blue" if o.bound == "memory" else "tab:red"
                ax.scatter([o.intensity], [o.achieved_flops], s=30 + 600 * o.total_ns / total, color=color,
                           alpha=0.6, edgecolors="black", linewidths=0.5, zorder=3)
                ax.annotate(f"{o.op} ({o.efficiency:.0%})", (o.intensity, o.achieved_flops),
                            textcoords="offset points", xytext=(6, 4 + (i % 3) * 6), fontsize=7)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lo, hi)
            ax.set_xlabel("arithmetic intensity (FLOP/byte)")
            ax.set_ylabel("achieved FLOP/s")
            ax.set_title(f"Roofline on {peaks.model} ({peaks.source}); point area = op time")
            ax.grid(True, which="major", ls=":", lw=0.5)
            ax.legend(loc="lower right", fontsize=7)
            fig.tight_layout()
            output.mkdir(parents=True, exist_ok=True)
            png, svg = output / "roofline.png", output / "roofline.svg"
            fig.savefig(png, format="png", metadata={"Software": None})
            fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
    return [png, svg]
