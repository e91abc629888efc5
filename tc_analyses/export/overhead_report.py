"""Text and plots of the runtime-overhead analysis (:mod:`tc_analyses.analyses.overhead`).

``overhead.png``/``.svg``: on the left one point per op execution, its host cost ``H + L``
against its GPU time ``K`` on log axes with the line ``K = H + L``: points under the line are
ops whose GPU work does not hide their host cost. On the right, per op type (most exposed
overhead first), the mean ``H``, ``L`` and ``Q`` stacked in one bar and the mean ``K`` in the
bar below it. ``overhead-trajectory.png``/``.svg``: hiding ratio and exposed host share against
the trajectory's labels. The files are byte-for-byte deterministic (fixed size, fonts, SVG ids,
no dates or software names in the metadata), like the roofline plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

from tc_analyses.analyses.overhead import WHOLE_TRACE, OverheadResult, Trajectory
from tc_analyses.analyses.result import Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.export.plotting import figure, save

TOP_TYPES = 20  # op types in the text table
PLOT_TYPES = 12  # op types in the bar chart
COLOR_TYPES = 8  # op types with their own colour in the scatter
NAME_WIDTH = 60


def _short(name: str, width: int = NAME_WIDTH) -> str:
    """Long names cut in the middle: the end (e.g. the backward function) tells ops apart."""
    if len(name) <= width:
        return name
    head = width // 3
    return name[:head] + "…" + name[-(width - head - 1):]


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    # The first column (names) reads left-aligned, numbers right-aligned.
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in cells]


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _verdict(ratio: float | None) -> str:
    return "-" if ratio is None else "host-bound" if ratio < 1 else "GPU-bound"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def overhead_text(r: OverheadResult) -> str:
    """The runtime-overhead report as text."""
    unattributed = f"{r.gpu_ops_unlaunched} without a recorded launch, {r.gpu_ops_unowned} launched outside any op"
    lines = [f"trace:    {r.trace}",
             f"steps:    {'none: the whole trace is one window' if r.whole_trace else len(r.steps)}, "
             f"mean {fmt_ns(r.mean_step_ns)}",
             f"ops:      {len(r.ops)} with GPU work; {r.gpu_ops} GPU ops ({unattributed})",
             f"overall:  hiding ratio {_ratio(r.hiding_ratio)} ({_verdict(r.hiding_ratio)}: "
             f"below 1 means host-bound), GPU busy {_pct(r.gpu_busy_share)}, exposed host {_pct(r.exposed_host_share)}",
             f"          short ops (K < H+L) {_pct(r.short_op_fraction)}, short kernels (< their op type's median "
             f"H+L) {_pct(r.short_kernel_share)}, mean kernel {fmt_ns(r.mean_kernel_ns)}, mean queue delay "
             f"{fmt_ns(r.mean_queue_ns)}", ""]
    lines += _table(("step", "duration", "ops", "sum H", "sum L", "sum K", "ratio", "GPU busy", "exposed host",
                     "short ops", "verdict"), [
        ("whole trace" if s.step == WHOLE_TRACE else s.step, fmt_ns(s.duration_ns), s.ops, fmt_ns(s.host_ns),
         fmt_ns(s.launch_ns), fmt_ns(s.device_ns), _ratio(s.hiding_ratio), _pct(s.gpu_busy_share),
         fmt_ns(s.exposed_host_ns), _pct(s.short_op_fraction),
         _verdict(s.hiding_ratio)) for s in r.steps])
    top = "" if len(r.op_types) <= TOP_TYPES else f"; top {TOP_TYPES}"
    lines += ["", f"op types (most exposed overhead first{top}; means per run; min K = median H+L):"]
    lines += _table(("op", "runs", "H", "L", "Q", "K", "min K", "short", "exposed"), [
        (_short(t.op), t.count, fmt_ns(t.mean_host_ns), fmt_ns(t.mean_launch_ns), fmt_ns(t.mean_queue_ns),
         fmt_ns(t.mean_device_ns), fmt_ns(t.min_hiding_kernel_ns), _pct(t.short_share),
         fmt_ns(t.exposed_overhead_ns)) for t in r.op_types[:TOP_TYPES]])
    if r.notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in r.notes]
    lines += ["", "findings:"] + [f"  - {f.text}" for f in r.findings]
    return "\n".join(lines) + "\n"


def trajectory_text(traj: Trajectory) -> str:
    """The overhead trajectory (one row per label) as text."""
    lines = _table(("label", "steps", "mean step", "hiding ratio", "exposed host", "GPU busy", "short ops",
                    "mean kernel"), [
        (p.label, p.steps, fmt_ns(p.mean_step_ns), _ratio(p.hiding_ratio), _pct(p.exposed_host_share),
         _pct(p.gpu_busy_share), _pct(p.short_op_fraction), fmt_ns(p.mean_kernel_ns)) for p in traj.points])
    lines += ["", "labels:   " + ("sorted by value" if traj.numeric else "in the order given"),
              f"crossing: {traj.crossing if traj.crossing is not None else '-'} (the label from which the hiding "
              "ratio stays at or above 1)", "", "findings:"] + [f"  - {f.text}" for f in traj.findings]
    return "\n".join(lines) + "\n"


FLOOR_US = 0.01  # zero times sit at 10 ns on the log axes


def write_overhead_plot(result: OverheadResult, out_dir: Path) -> list[Path]:
    """Write ``out_dir/overhead.png`` and ``overhead.svg``; returns their paths."""
    with figure(1, 2, figsize=(13.0, 6.5), gridspec_kw={"width_ratios": [1, 1.3]}) as (fig, (left, right)):
        _scatter(left, result)
        _bars(right, result)
        return save(fig, Path(out_dir), "overhead")


def _scatter(ax: Any, r: OverheadResult) -> None:
    colored = [t.op for t in r.op_types[:COLOR_TYPES]]
    palette = [f"C{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]  # C7 is gray, kept for "other"
    groups = [(op, palette[i % len(palette)]) for i, op in enumerate(colored)] + [("other", "lightgray")]
    values = [max(o.overhead_ns / 1e3, FLOOR_US) for o in r.ops] + [max(o.device_ns / 1e3, FLOOR_US) for o in r.ops]
    lo, hi = min(values) / 2, max(values) * 2
    for op, color in reversed(groups):  # "other" first, underneath
        ops = [o for o in r.ops if (o.op == op if op != "other" else o.op not in colored)]
        if ops:
            ax.scatter([max(o.overhead_ns / 1e3, FLOOR_US) for o in ops],
                       [max(o.device_ns / 1e3, FLOOR_US) for o in ops], s=12, color=color, alpha=0.7,
                       linewidths=0, label=f"{_short(op, 40)} ({len(ops)})")
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, ls="--", label="K = H+L (below: not hidden)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("host cost H+L per op (µs)")
    ax.set_ylabel("GPU time K per op (µs)")
    ax.set_title(f"Per op: {r.short_op_fraction:.0%} under the line (short)")
    ax.grid(True, which="major", ls=":", lw=0.5)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=6,
              frameon=False)


def _bars(ax: Any, r: OverheadResult) -> None:
    types = list(r.op_types[:PLOT_TYPES])[::-1]  # the most exposed at the top
    ys = list(range(len(types)))
    h = [t.mean_host_ns / 1e3 for t in types]
    ln = [t.mean_launch_ns / 1e3 for t in types]
    q = [t.mean_queue_ns / 1e3 for t in types]
    k = [t.mean_device_ns / 1e3 for t in types]
    up = [y + 0.2 for y in ys]
    ax.barh(up, h, height=0.38, color="tab:orange", label="H host dispatch")
    ax.barh(up, ln, left=h, height=0.38, color="tab:red", label="L launch")
    ax.barh(up, q, left=[a + b for a, b in zip(h, ln)], height=0.38, color="tab:gray", label="Q queue delay")
    ax.barh([y - 0.2 for y in ys], k, height=0.38, color="tab:blue", label="K GPU time")
    for y, t, kv in zip(ys, types, k):
        ax.text(kv, y - 0.2, f" {t.short_share:.0%} short", va="center", fontsize=6)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{_short(t.op, 45)} ({t.count})" for t in types], fontsize=7)
    ax.set_xlabel("mean per run (µs)")
    ax.set_title("Per op type, most exposed overhead at the top")
    ax.grid(True, axis="x", ls=":", lw=0.5)
    ax.legend(loc="lower right", fontsize=7)


def write_trajectory_plot(traj: Trajectory, out_dir: Path) -> list[Path]:
    """Write ``out_dir/overhead-trajectory.png`` and ``.svg``; returns their paths."""
    xs = list(range(len(traj.points)))
    ratios = [p.hiding_ratio for p in traj.points]
    with figure(figsize=(7.0, 5.0)) as (fig, ax):
        measured = [(x, v) for x, v in zip(xs, ratios) if v is not None and v > 0]
        ax.plot([x for x, _ in measured], [v for _, v in measured], marker="o", color="tab:blue",
                label="hiding ratio ΣK / Σ(H+L)")
        ax.axhline(1.0, color="tab:blue", ls="--", lw=0.8)
        values = [v for _, v in measured] + [1.0]
        if max(values) / min(values) > 20:
            ax.set_yscale("log")
        ax.set_ylabel("hiding ratio (below 1: host-bound)", color="tab:blue")
        ax.set_xlabel("label")
        ax.set_xticks(xs)
        ax.set_xticklabels([p.label for p in traj.points])
        share = ax.twinx()
        share.plot(xs, [100 * p.exposed_host_share for p in traj.points], marker="s", color="tab:red",
                   label="exposed host share (%)")
        share.set_ylim(0, 105)
        share.set_ylabel("exposed host share of step time (%)", color="tab:red")
        if traj.crossing is not None:
            ax.axvline(xs[[p.label for p in traj.points].index(traj.crossing)], color="gray", ls=":", lw=1)
        lines = ax.get_legend_handles_labels()
        more = share.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper center", bbox_to_anchor=(0.5, -0.14),
                  ncol=2, fontsize=7, frameon=False)
        ax.set_title("Runtime overhead trajectory" + (f": hidden from {traj.crossing} on"
                                                       if traj.crossing is not None else ""))
        ax.grid(True, ls=":", lw=0.5)
        return save(fig, Path(out_dir), "overhead-trajectory")


def text(result: Result) -> str:
    """The runtime overhead of one trace, or the trajectory of several, as text."""
    if isinstance(result.data, Trajectory):
        return trajectory_text(result.data)
    return overhead_text(result.data)


def plots(result: Result, folder: Path) -> list[Path]:
    """overhead.png/.svg, or overhead-trajectory.png/.svg for a trajectory."""
    if isinstance(result.data, Trajectory):
        return write_trajectory_plot(result.data, folder)
    return write_overhead_plot(result.data, folder)
