"""The ranks analysis (:mod:`tc_analyses.analyses.ranks`) as text and as a plot.

The plot puts one line per rank over the job's collectives: how long after the first rank each
rank arrived. A straggler is the line on top; the area under the others is their wait.
"""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.ranks import JobRanks
from tc_analyses.analyses.result import Result
from tc_analyses.analyses.units import fmt_bytes, fmt_ns
from tc_analyses.export.plotting import figure, save
from tc_analyses.export.tables import table

MAX_ROWS = 20  # collectives listed in the text (all are in --format json)


def ranks_text(r: JobRanks) -> str:
    sizes = {p.world_size for p in r.ranks if p.world_size is not None}
    world = f" (world size {sizes.pop()})" if len(sizes) == 1 else ""
    lines = [f"job:     {r.job}", f"ranks:   {len(r.ranks)} of {len(r.processes)} process traces{world}"]
    lines += [f"warning: {reason}" for reason in r.apart] + [""]
    lines.append("per process (times are unions of node intervals):")
    lines += table(("rank", "host", "pid", "nodes", "compute", "comm", "overlap", "collectives", "waited", "last at"), [
        ("-" if p.rank is None else p.rank, p.host, p.pid if p.pid is not None else "-", p.nodes, fmt_ns(p.compute_ns),
         fmt_ns(p.comm_ns), "-" if p.overlap is None else f"{p.overlap:.0%}", p.collectives,
         fmt_ns(p.wait_ns) if p.rank is not None else "-", p.last_at if p.rank is not None else "-")
        for p in r.processes], "  ")
    lines += ["", f"collectives joined across ranks: {len(r.collectives)}" + (f" ({r.mismatch})" if r.mismatch else "")]
    if r.collectives:
        lines += table(("seq", "kind", "bytes", "last rank", "skew", "late by"), [
            (c.seq, c.kind, fmt_bytes(c.bytes), c.last_rank, fmt_ns(c.skew_ns), fmt_ns(c.late_by_ns))
            for c in r.collectives[:MAX_ROWS]], "  ")
        if len(r.collectives) > MAX_ROWS:
            lines.append(f"  ... {len(r.collectives) - MAX_ROWS} more in --format json")
    fit = r.link
    if fit is not None and fit.link is not None:
        link = fit.link
        checked = (f"on {fit.held_out} held-out transfers within {fit.error_median:.0%} (median; "
                   f"{fit.error_low:.0%}..{fit.error_high:.0%})" if fit.error_median is not None and
                   fit.error_low is not None and fit.error_high is not None else "no held-out transfers to check it on")
        lines += ["", f"transfer cost between processes: {fmt_ns(link.latency_ns)} + bytes at "
                      f"{link.bytes_per_ns:.3g} GB/s, fitted on {fit.fitted_on} transfers (even seq); predicts {checked}"]
    path = r.critical_path
    if path is not None:
        lines += ["", f"critical path: {fmt_ns(path.length_ns)} from its first node to the job's end, "
                      f"{len(path.steps)} nodes ({fmt_ns(path.busy_ns)} in them), {path.crossings} crossings between ranks"]
        crossing = [i for i, (a, b) in enumerate(zip(path.steps, path.steps[1:])) if a.rank != b.rank]
        shown = sorted({j for i in crossing for j in (i, i + 1)} | {len(path.steps) - 1})[:MAX_ROWS]
        lines += table(("rank", "op", "name", "duration", "via"), [
            (path.steps[i].rank, path.steps[i].op, path.steps[i].name[:48],
             fmt_ns(path.steps[i].end_ns - path.steps[i].start_ns), path.steps[i].via or "-") for i in shown], "  ")
        zero = sum(1 for *_, slack in path.slack if slack == 0)
        lines.append(f"  (the crossings and the last node; all {len(path.steps)} steps and every node's slack in "
                     f"--format json; {zero} of {len(path.slack)} nodes have no slack)")
    return "\n".join(lines) + "\n"


def text(result: Result) -> str:
    findings = [f"  - {f.text}" for f in result.findings] or ["  none"]
    return ranks_text(result.data) + "\nfindings:\n" + "\n".join(findings) + "\n"


def write_arrival_plot(r: JobRanks, folder: Path) -> list[Path]:
    """ranks.png/.svg: each rank's arrival after the first, per collective."""
    with figure(figsize=(8.0, 4.0)) as (fig, ax):
        x = list(range(len(r.collectives)))
        for rank in sorted({rank for c in r.collectives for rank in c.arrivals_ns}):
            late = [(c.arrivals_ns[rank] - min(c.arrivals_ns.values())) / 1e6 for c in r.collectives]
            ax.plot(x, late, marker="o", markersize=3, label=f"rank {rank}")
        ax.set_xlabel("collective (issue order)")
        ax.set_ylabel("arrival after the first rank (ms)")
        ax.set_title("Arrival at each collective")
        if r.collectives:
            ax.legend(loc="upper right")
        return save(fig, folder, "ranks")


def plots(result: Result, folder: Path) -> list[Path]:
    """ranks.png/.svg."""
    return write_arrival_plot(result.data, folder)
