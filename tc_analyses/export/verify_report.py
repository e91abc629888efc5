"""`dfcompass verify` as text, JSON and a plot: predicted against measured, per step and per node."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from tc_analyses.analyses.placement.verify import Verification
from tc_analyses.export.tables import table

TOP_NODES = 12


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def text(v: Verification) -> str:
    lines = [f"plan:       {v.plan}",
             f"re-run:     {v.rerun} (lanes {', '.join(v.devices)})",
             f"step:       predicted {_ms(v.predicted_ns)}, measured {_ms(v.measured_ns)} "
             f"(median of {sum(not s.warmup for s in v.steps)} steps, p10-p90 {_ms(v.measured_range_ns[0])}-"
             f"{_ms(v.measured_range_ns[1])}): error {_pct(v.error)}"]
    if v.predicted_speedup is not None and v.measured_speedup is not None:
        lines.append(f"speedup:    predicted {v.predicted_speedup:.2f}x, measured {v.measured_speedup:.2f}x "
                     "(the plan's baseline step over the re-run's)")
    if v.refit is not None:
        r = v.refit
        lines.append(f"refit:      costs from steps {_steps(r.calibration_steps)} of the re-run predict "
                     f"{_ms(r.predicted_ns)}; steps {_steps(r.heldout_steps)} measured {_ms(r.measured_ns)}: "
                     f"error {_pct(r.error)}")
    median = v.node_error_median
    if median is not None:
        lines.append(f"nodes:      median |error| of node durations {100 * median:.1f}% over {len(v.nodes)} nodes")
    lines += [f"notice:     {n}" for n in v.notices]
    lines += ["", "per step:"]
    lines += table(("step", "measured", "predicted", "error"),
                   [(s.step, _ms(s.measured_ns), _ms(s.predicted_ns), "warm-up" if s.warmup else _pct(s.error))
                    for s in v.steps], "  ")
    worst = sorted(v.nodes, key=lambda n: -abs(n.predicted_ns - n.measured_ns))[:TOP_NODES]
    if worst:
        lines += ["", f"nodes furthest from the prediction (of {len(v.nodes)}):"]
        lines += table(("node", "op", "device", "predicted", "measured", "error", "start pred.", "start meas."),
                       [(n.node, n.op, n.device, _ms(n.predicted_ns), _ms(n.measured_ns), _pct(n.error),
                         _ms(n.predicted_start_ns), _ms(n.measured_start_ns)) for n in worst], "  ")
    return "\n".join(lines) + "\n"


def _steps(steps: tuple[int, ...]) -> str:
    return ",".join(str(s) for s in steps)


def to_json(v: Verification) -> str:
    data = dataclasses.asdict(v)
    data["error"] = v.error
    data["measured_speedup"] = v.measured_speedup
    data["node_error_median"] = v.node_error_median
    data["measured_range_ns"] = list(v.measured_range_ns)
    for row, step in zip(data["steps"], v.steps):
        row["error"] = step.error
    for row, node in zip(data["nodes"], v.nodes):
        row["error"] = node.error
    if v.refit is not None:
        data["refit"]["error"] = v.refit.error
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def plots(v: Verification, folder: Path) -> list[Path]:
    """verify-steps.{png,svg}: measured step times against the prediction; verify-nodes: per node."""
    from tc_analyses.export.plotting import figure, save

    with figure(1, 2, figsize=(10, 3.6)) as (fig, (steps_ax, nodes_ax)):
        xs = [s.step for s in v.steps]
        steps_ax.plot(xs, [s.measured_ns / 1e6 for s in v.steps], "o-", label="measured (re-run)")
        steps_ax.axhline(v.predicted_ns / 1e6, color="C1", label="predicted (plan)")
        if v.refit is not None:
            steps_ax.axhline(v.refit.predicted_ns / 1e6, color="C2", linestyle="--", label="refit")
        steps_ax.set(xlabel="step", ylabel="step time (ms)", title="per step")
        steps_ax.legend()
        measured = [n.measured_ns / 1e3 for n in v.nodes]
        predicted = [n.predicted_ns / 1e3 for n in v.nodes]
        nodes_ax.loglog(predicted, measured, ".", alpha=0.7)
        top = max(measured + predicted, default=1.0)
        nodes_ax.plot([1, top], [1, top], color="grey", linewidth=0.8)
        nodes_ax.set(xlabel="predicted duration (us)", ylabel="measured duration (us)", title="per node")
        return save(fig, folder, "verify")

