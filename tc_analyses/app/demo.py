"""``dfcompass demo``: an embedded workload recorded, then the whole pipeline run on it (info,
the Trace Compass analyses and their headless summary, placement, a plan verified on this
machine, one HTML report); or a 2-rank DDP job compared across its ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from tc_analyses.app.place import place, verify_plan
from tc_analyses.app.record import record_tf_workload, record_torch_workload, run_recorded
from tc_analyses.app.report import leads, report_section, trajectory_section
from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.inputs import JobInputs, Progress, TraceInputs, no_progress

DEMO_DEVICES = "cpu,cuda:0=H100"  # the demo's placement question: this CPU plus one H100
DEMO_BATCHES = (2, 8, 32)  # the demo's roofline trajectory
Echo = Callable[[str], None]


def demo(output: Path, workload: str, steps: int | None, echo: Echo, progress: Progress = no_progress,
         framework: str = "torch") -> None:
    """Record an embedded workload into OUTPUT/trace, then run the whole pipeline on it: info,
    Trace Compass analyses and their headless summary, placement, and one HTML report."""
    from tc_analyses.export import reports
    from tc_analyses.export.html_report import Block, Section, ranked, render
    from tc_analyses.export.plan_gantt import placement_figure
    from tc_analyses.export.tracecompass import write_output

    if framework == "tf" and workload != "torch":
        raise ConfigurationError(f"--framework tf has its own workload (a Keras CNN): leave out --workload {workload}")
    if workload == "ddp":
        demo_job(output, steps, echo, progress)
        return
    trace = output / "trace"
    if workload == "pipeline":
        code = run_recorded(trace, [sys.executable, "-m", "tracer.workloads.pipeline", "--steps", str(steps or 20)],
                            True).code
    elif framework == "tf":
        workload = "tf"
        code = record_tf_workload(trace, [] if steps is None else ["--steps-train", str(steps)])
    else:
        code = record_torch_workload(trace, [] if steps is None else ["--steps-train", str(steps)])
    if code != 0:
        raise DfcompassError(f"the demo workload failed with exit code {code}")
    inputs = TraceInputs(trace, progress)
    echo(reports.info_text(inputs.info))
    (output / "info.json").write_text(reports.to_json(inputs.info))
    # The rest of the pipeline: Trace Compass analyses for this trace, and their headless summary.
    write_output(output / "analyses", inputs.facts)
    summary = inputs.summary()  # the analyses just written, run headless
    text = reports.summary_text(summary)
    (output / "summary.txt").write_text(text)
    (output / "summary.json").write_text(reports.to_json(summary))
    echo(f"\nTrace Compass analyses: {output / 'analyses'} (see its README.md to install them)\n\n")
    echo(text)
    # And the payoff: where these nodes should run on a CPU and a GPU, and how much faster a step gets.
    plan, plan_text = place(trace, DEMO_DEVICES, output / "placement", inputs)
    echo(f"\nplacement on {DEMO_DEVICES} (dfcompass recommend-placement):\n\n")
    echo("\n".join(plan_text.splitlines()[:9])
         + f"\n  ... {len(plan.moved)} moved nodes in {output / 'placement' / 'report.txt'}\n\n")
    # Everything on one page: the seed analyses with their plots, the placement, and a roofline
    # trajectory over batch sizes from short extra runs of the same workload.
    (output / "report").mkdir(exist_ok=True)
    main_section, seeds = report_section(inputs, output / "report", None, progress=progress, interactive=True)
    main_section.blocks.append(Block(f"Placement on {DEMO_DEVICES}", plan_text, anchor="placement",
                                     interactive=placement_figure(plan, inputs.activity)))
    sections = [main_section]
    echo("\nseed analyses (dfcompass analyze), first finding of each:\n")
    for seed in seeds:
        echo(f"  {seed.title}: {seed.headline()}\n")
    if workload == "torch":
        runs = [TraceInputs(path, progress) for path in record_batch_trajectory(output / "trajectory", progress)]
        (output / "report" / "trajectory").mkdir(exist_ok=True)
        sections.append(trajectory_section(runs, [str(b) for b in DEMO_BATCHES], "batch", "cpu",
                                           output / "report" / "trajectory"))
    verified = demo_verified_plan(output / "verified", echo, progress) if workload != "tf" else ""
    if verified:
        sections.append(Section("A plan verified on this machine", [Block("dfcompass verify", verified)]))
    (output / "report.html").write_text(render("dfcompass demo report", sections, ranked(leads("", "", seeds))),
                                        encoding="utf-8")
    echo(f"\nHTML report (seed analyses, plots, batch-size trajectory): {output / 'report.html'}\n")
    echo(f"\ndemo output: {output.resolve()}\n")


def demo_job(output: Path, steps: int | None, echo: Echo, progress: Progress = no_progress) -> None:
    """Record the DDP workload (2 gloo ranks, rank 1 slowed by 20 ms per step) into OUTPUT/job
    and compare its ranks (dfcompass ranks)."""
    import importlib.util

    from tc_analyses.registry import entry

    if importlib.util.find_spec("torch") is None:
        raise ConfigurationError("the ddp demo workload needs torch (pip install torch==2.13.0)")
    command = [sys.executable, "-m", "tracer.workloads.ddp", "--ranks", "2", "--steps", str(steps or 6),
               "--slow-rank", "1", "--delay-ms", "20"]
    with progress("recording a 2-rank DDP job", None):
        recorded = run_recorded(output / "job", command, True)
    if recorded.code != 0:
        raise DfcompassError(f"the ddp demo workload failed with exit code {recorded.code}")
    ranks = entry("ranks")
    result = ranks.run(JobInputs(output / "job", progress))
    (output / "ranks.json").write_text(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")
    plots = ranks.plots(result, output)
    echo(f"a 2-rank DDP job on gloo, rank 1 slowed by 20 ms per step, recorded in {output / 'job'} "
         f"({len(recorded.traces)} process traces):\n\n")
    echo(ranks.text(result))
    echo(f"\nplots: {', '.join(str(p) for p in plots)}\ndemo output: {output.resolve()}\n")


DEMO_PROGRAM = "cnn-train"
DEMO_LANES = "cpu:0,cpu:1"


def demo_verified_plan(output: Path, echo: Echo, progress: Progress = no_progress) -> str:
    """Plan the CNN training graph program on two CPU lanes, re-run it under the plan and print
    predicted against measured (the same path a GPU plan takes, on devices this machine has)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        echo("\nverified plan: skipped (the graph programs need torch)\n")
        return ""
    command = [sys.executable, "-m", "tracer.workloads.graph_programs", DEMO_PROGRAM, "--steps", "10"]
    with progress("verifying a plan", 3) as advance:
        if run_recorded(output / "baseline", command, True, torch=False, stdout=subprocess.DEVNULL).code != 0:
            raise DfcompassError(f"the {DEMO_PROGRAM} graph program failed")
        advance(1)
        place(output / "baseline", DEMO_LANES, output / "plan")
        advance(1)
        result, text = verify_plan(output / "plan", output / "rerun", command, True, True,
                                   rounds=DEMO_PAIRS[0], max_rounds=DEMO_PAIRS[1], progress=lambda _line: None)
        advance(1)
    echo(f"\na plan verified on this machine: {DEMO_PROGRAM} on {DEMO_LANES} (dfcompass verify):\n\n")
    echo("\n".join(text.splitlines()[:7]) + f"\n  ... per step and per node in {output / 'rerun' / 'verify.txt'}\n")
    verdict = verify_verdict(result.rounds)
    echo(verdict + "\n")
    return text + "\n" + verdict


DEMO_PAIRS = (3, 6)  # baseline/plan pairs at least, and at most while the interval is wide
NOISY = 0.15  # an interval wider than the median +-15% cannot tell a range's edge from noise


def verify_verdict(rounds: Any) -> str:
    """One line: whether the measured speedup lies inside the printed range, or why the machine was
    too noisy to tell."""
    if rounds is None or rounds.predicted_range is None:
        return "verdict:    no printed range to check the measured speedup against"
    low, high = rounds.predicted_range
    ci_low, ci_high = rounds.ci
    loads = [r.load_after for r in rounds.rounds]
    if low <= rounds.speedup <= high:
        return (f"verdict:    the measured speedup {rounds.speedup:.2f}x lies inside the printed range "
                f"{low:.2f}-{high:.2f}x")
    if ci_high - ci_low > 2 * NOISY * rounds.speedup:
        return (f"verdict:    the machine was too noisy to verify: the measured speedup's interval "
                f"{ci_low:.2f}-{ci_high:.2f}x is wider than its median +-{NOISY:.0%} (1-minute load "
                f"{min(loads):.1f}-{max(loads):.1f} during the rounds)")
    return (f"verdict:    the measured speedup {rounds.speedup:.2f}x (interval {ci_low:.2f}-{ci_high:.2f}x) lies "
            f"outside the printed range {low:.2f}-{high:.2f}x: the plan's model misses something on this machine "
            "(verify.txt: per step and per node)")


def record_batch_trajectory(folder: Path, progress: Progress = no_progress) -> list[Path]:
    """The torch workload once per DEMO_BATCHES (one inference and one training step each)."""
    traces = []
    with progress("recording the batch trajectory", len(DEMO_BATCHES)) as advance:
        for batch in DEMO_BATCHES:
            path = folder / f"batch{batch}"
            code = record_torch_workload(path, ["--batch", str(batch), "--steps-infer", "2", "--steps-train", "1"])
            if code != 0:
                raise DfcompassError(f"the demo workload (batch {batch}) failed with exit code {code}")
            traces.append(path)
            advance(1)
    return traces
