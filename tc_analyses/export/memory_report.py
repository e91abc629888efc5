"""The memory analysis (:mod:`tc_analyses.analyses.memory`) as text and as a plot.

The plot shows bytes in use over time, one line per device, its peak marked and labelled. The
files are byte-for-byte deterministic (same rc settings as the roofline plot): fixed size, fonts
and SVG ids, no dates or software names in the metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tc_analyses.analyses.memory import SHORT_LIVED_NS, MemoryResult
from tc_analyses.analyses.result import Result
from tc_analyses.analyses.units import fmt_bytes, fmt_ns
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table

SIZE_IN = (8.0, 4.5)


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _indented(headers: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    return table(headers, rows, "  ")


def memory_text(r: MemoryResult) -> str:
    """The memory analysis as text: peaks, churn, copies by host memory, redundant transfers, findings."""
    lines = [f"trace:   {r.trace}", f"steps:   {r.steps}", ""]
    if r.peaks:
        lines.append("peak memory (time from the trace start):")
        lines += _indented(("device", "peak", "at", "step", "node running", "live blocks"), [
            (p.device, fmt_bytes(p.peak_bytes) + ("" if p.in_use_recorded else " (traced sum)"),
             fmt_ns(p.time_ns - r.start_ns), p.step if p.step >= 0 else "-", p.node,
             f"{p.live_blocks} ({fmt_bytes(p.live_bytes)})") for p in r.peaks])
        for p in r.peaks:
            for b in p.largest:
                lines.append(f"    {p.device} live at peak: {fmt_bytes(b.bytes)} at 0x{b.addr:x}, "
                             f"allocated at {fmt_ns(b.allocated_ns - r.start_ns)} by {b.node}")
        lines += ["", f"allocation churn (short-lived: freed within {fmt_ns(SHORT_LIVED_NS)}; "
                      "turnover: bytes allocated per step / peak):"]
        lines += _indented(("device", "allocs", "frees", "allocated", "allocs/step", "bytes/step", "allocs/ms",
                         "short-lived", "turnover"), [
            (c.device, c.allocations, c.frees, fmt_bytes(c.bytes_allocated), _num(c.allocations_per_step),
             "-" if c.bytes_per_step is None else fmt_bytes(c.bytes_per_step), _num(c.allocations_per_ms, "{:.2f}"),
             f"{c.short_lived_share:.0%}", f"{c.turnover:.2f}x") for c in r.churn])
    else:
        lines.append("peak memory: the trace has no dfc:mem_alloc/dfc:mem_free events")
    lines.append("")
    if r.copy_kinds:
        lines.append("host-device copies by host memory:")
        lines += _indented(("direction", "host memory", "copies", "bytes", "time", "GB/s"), [
            (k.direction, k.host_memory, k.copies, fmt_bytes(k.bytes), fmt_ns(k.ns), f"{k.gbps:.2f}")
            for k in r.copy_kinds])
    else:
        lines.append("host-device copies: none")
    lines.append("")
    per = "per step" if r.steps else "in the trace"
    lines.append(f"tensors moved to the same device more than once: {len(r.repeated_tensors)}, "
                 f"{fmt_bytes(r.tensor_wasted_bytes_per_step)} moved again {per}"
                 + (f" (about {fmt_ns(r.tensor_wasted_ns_per_step)})" if r.tensor_wasted_ns_per_step else ""))
    if r.repeated_tensors:
        lines += _indented(("tensor", "from", "to", "moves", "bytes", "wasted"), [
            (t.tensor_id, t.src_device, t.dst_device, t.moves, fmt_bytes(t.bytes), fmt_bytes(t.wasted_bytes))
            for t in r.repeated_tensors[:10]])
    lines.append(f"host-to-device uploads repeated in every step: {len(r.repeated_uploads)}, "
                 f"{fmt_bytes(r.upload_wasted_bytes_per_step)} and {fmt_ns(r.upload_wasted_ns_per_step)} per step")
    if r.repeated_uploads:
        lines += _indented(("device", "op", "node", "bytes", "copies/step", "time/step"), [
            (u.device, u.op, u.node, fmt_bytes(u.bytes), f"{u.copies_per_step:g}", fmt_ns(u.ns_per_step))
            for u in r.repeated_uploads[:10]])
    lines += ["", "findings:"] + ([f"  {i}. {f.text}" for i, f in enumerate(r.findings, 1)] or ["  none"])
    return "\n".join(lines) + "\n"


def write_memory_plot(result: MemoryResult, out_dir: Path) -> list[Path]:
    """Write ``out_dir/memory.png`` and ``out_dir/memory.svg`` (bytes in use over time); returns their paths."""
    out_dir = Path(out_dir)
    with figure(figsize=SIZE_IN) as (fig, ax):
        top = max((p.peak_bytes for p in result.peaks), default=0)
        scale, unit = next(((1024.0 ** k, u) for k, u in ((3, "GiB"), (2, "MiB"), (1, "KiB"))
                            if top >= 1024 ** k), (1.0, "B"))
        for p in result.peaks:
            xs = [(t - result.start_ns) / 1e6 for t, _ in p.series]
            ys = [v / scale for _, v in p.series]
            line, = ax.step(xs, ys, where="post", lw=1, label=p.device)
            px, py = (p.time_ns - result.start_ns) / 1e6, p.peak_bytes / scale
            ax.plot([px], [py], marker="v", color=line.get_color(), markersize=7, zorder=3)
            ax.annotate(f"peak {fmt_bytes(p.peak_bytes)}" + (f", step {p.step}" if p.step >= 0 else ""),
                        (px, py), textcoords="offset points", xytext=(4, 6), fontsize=7)
        if not result.peaks:
            ax.text(0.5, 0.5, "no memory events in this trace", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_xlabel("time since trace start (ms)")
        ax.set_ylabel(f"bytes in use ({unit})")
        ax.set_ylim(bottom=0)
        ax.set_title("Memory in use per device; peak marked")
        ax.grid(True, ls=":", lw=0.5)
        if result.peaks:
            ax.legend(loc="upper left", fontsize=7)
        return save(fig, out_dir, "memory")


def text(result: Result) -> str:
    """The memory analysis as text."""
    return memory_text(result.data)


def plots(result: Result, folder: Path) -> list[Path]:
    """memory.png/.svg."""
    return write_memory_plot(result.data, folder)
