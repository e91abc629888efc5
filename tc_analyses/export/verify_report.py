"""`dfcompass verify` as text, JSON and a plot: predicted against measured, per step and per node."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tc_analyses.analyses.placement.verify import Rounds, Verification
from tc_analyses.export.tables import table

TOP_NODES = 12


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _yes(x: bool | None) -> str:
    return "-" if x is None else ("yes" if x else "NO")


def _rounds_lines(r: Rounds) -> list[str]:
    pairs = len(r.ratios)
    lines = [f"rounds:     {pairs} pairs, interleaved A B A B ...: A = the recorded placement "
             f"({', '.join(r.baseline_devices)}; from {r.baseline}), B = the plan; stopped: {r.stop}"]
    predicted = ""
    if r.predicted_speedup is not None:
        predicted = f"; predicted {r.predicted_speedup:.2f}x"
        if r.predicted_range is not None:
            low, high = r.predicted_range
            predicted += (f" (range {low:.2f}-{high:.2f}x): the range holds the measured median: {_yes(r.in_range)}, "
                          f"overlaps the interval: {_yes(r.overlaps)}")
    lines.append(f"speedup:    measured {r.speedup:.2f}x ({r.confidence:.0%} interval {r.ci[0]:.2f}-{r.ci[1]:.2f}x, "
                 f"bootstrap over {pairs} pairs; median of the pairs' baseline step over plan step){predicted}")
    lines.append(f"baseline:   measured {_ms(r.baseline_ns)}, plan {_ms(r.plan_ns)} (medians over the rounds of each "
                 "round's median step)")
    return lines


def text(v: Verification) -> str:
    lines = [f"plan:       {v.plan}"]
    if v.rounds is not None:
        lines += _rounds_lines(v.rounds)
    elif v.predicted_speedup is not None:
        lines.append(f"speedup:    predicted {v.predicted_speedup:.2f}x, not measured")
    lines += [f"step:       predicted {_ms(v.predicted_ns)} ({v.prediction}), measured {_ms(v.measured_ns)} "
              f"(the median plan round, {sum(not s.warmup for s in v.steps)} steps, p10-p90 {_ms(v.measured_range_ns[0])}-"
              f"{_ms(v.measured_range_ns[1])}): error {_pct(v.error)}",
              f"re-run:     {v.rerun} (lanes {', '.join(v.devices)}): the steps and nodes below"]
    if v.recorded_step_ns is not None:
        lines.append(f"recorded:   the trace the plan was made from measured {_ms(v.recorded_step_ns)} a step, in another "
                     "run at another load: not used as the baseline")
    if v.refit is not None:
        r = v.refit
        lines.append(f"refit:      costs from steps {_steps(r.calibration_steps)} of the re-run predict "
                     f"{_ms(r.predicted_ns)}; steps {_steps(r.heldout_steps)} measured {_ms(r.measured_ns)}: "
                     f"error {_pct(r.error)}")
    median = v.node_error_median
    if median is not None:
        lines.append(f"nodes:      median |error| of node durations {100 * median:.1f}% over {len(v.nodes)} nodes "
                     f"(against the plan's schedule, makespan {_ms(v.makespan_ns)})")
    lines += [f"notice:     {n}" for n in v.notices]
    if v.rounds is not None:
        ratios = dict(zip(sorted({r.pair for r in v.rounds.rounds}), v.rounds.ratios))
        lines += ["", "per round (load: 1-minute load average before -> after; cores: CPU time over wall time):"]
        lines += table(("round", "placement", "median step", "steps", "load", "cores busy", "wall", "pair ratio"),
                       [(r.name, "baseline" if r.side == "a" else "plan", _ms(r.step_ns), r.steps,
                         f"{r.load_before:.2f}->{r.load_after:.2f}", "-" if r.cpu_share is None else f"{r.cpu_share:.2f}",
                         f"{r.wall_s:.1f} s", f"{ratios[r.pair]:.2f}x" if r.side == "b" and r.pair in ratios else "")
                        for r in v.rounds.rounds], "  ")
    lines += ["", "per step (the median plan round):"]
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
    if v.rounds is not None:
        r = v.rounds
        data["rounds"].update(ratios=r.ratios, baseline_ns=r.baseline_ns, plan_ns=r.plan_ns, in_range=r.in_range,
                              overlaps=r.overlaps)
        for row, one in zip(data["rounds"]["rounds"], r.rounds):
            row["name"] = one.name
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def plots(v: Verification, folder: Path) -> list[Path]:
    """verify-steps.{png,svg}: measured step times against the prediction; verify-nodes: per node."""
    from tc_analyses.export.plotting import figure, save

    with figure(1, 3, figsize=(15, 3.6)) as (fig, (steps_ax, nodes_ax, rounds_ax)):
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
        if v.rounds is not None:
            for side, label in (("a", "baseline (recorded placement)"), ("b", "plan")):
                runs = v.rounds.side(side)
                rounds_ax.plot([r.pair for r in runs], [r.step_ns / 1e6 for r in runs], "o-", label=label)
            rounds_ax.axhline(v.predicted_ns / 1e6, color="C1", linestyle=":", label="plan, predicted")
            rounds_ax.set(xlabel="pair", ylabel="median step (ms)",
                          title=f"rounds: {v.rounds.speedup:.2f}x ({v.rounds.ci[0]:.2f}-{v.rounds.ci[1]:.2f}x)")
            rounds_ax.legend()
        else:
            rounds_ax.set_axis_off()
        return save(fig, folder, "verify")

