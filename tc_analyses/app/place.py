"""``dfcompass recommend-placement`` and ``dfcompass verify``: a placement of a trace's nodes on
devices, with its plan, report and views; and the program re-run under the plan, compared."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from tc_analyses.app.record import run_recorded
from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.inputs import JobInputs, TraceInputs

if TYPE_CHECKING:
    from tc_analyses.analyses.placement.recommend import Recommendation


def place(input_path: Path, devices: str, output: Path, inputs: TraceInputs | None = None,
          algorithm: str = "auto", step_kind: int | None = None,
          links_from: Path | None = None) -> tuple[Recommendation, str]:
    """Recommend a placement and write OUTPUT/{plan.json, report.txt, predicted/, views/, graph.*}.

    INPUT is a trace directory (read through `inputs` when given) or a node-link JSON graph file.
    `links_from`: a job folder whose measured transfer cost between processes sets the links
    between devices of different hosts.
    """
    from tc_analyses.perf.devices import parse_devices
    from tc_analyses.analyses.placement.graph_file import problem_from_graph_file
    from tc_analyses.analyses.placement.recommend import problem_from_trace, recommend
    from tc_analyses.export import reports
    from tc_analyses.export.placement_views import write_plan, write_plan_graph, write_predicted_trace
    from tc_analyses.export.tracecompass import write_output
    from tc_analyses.export.tracecompass.facts import trace_facts
    from tc_analyses.model.step_inference import infer_steps, with_steps
    from tc_analyses.model.step_kinds import graph_of_kind, step_kinds

    parsed = parse_devices(devices)
    graph = trace = activity = calibration = None
    notices: list[str] = []
    kind_text: str | None = None
    if input_path.is_dir():
        inputs = inputs if inputs is not None else TraceInputs(input_path)
        graph, trace, activity = inputs.graph, inputs.trace, inputs.activity
        if not activity.steps and (inferred := infer_steps(activity)) is not None:
            # No step marks: plan one iteration of the loop, not set-up and warm-up folded together.
            activity = with_steps(activity, inferred)
            notices.append(inferred.describe())
        # One graph per kind of step, warm-up left out: ops of steps that never ran together
        # (inference and training, two models) are not overlapped.
        try:
            graph, kind = graph_of_kind(trace, activity, step_kind)
        except ValueError as exc:
            raise ConfigurationError(f"{input_path}: {exc}") from None
        if kind is not None:
            others = len(step_kinds(activity)) - 1
            kind_text = kind.label + (f"; {others} other kind(s): --step-kind N" if others else "")
        elif step_kind is not None:
            raise ConfigurationError(f"{input_path}: --step-kind {step_kind}: the trace has no steps")
        links = None
        if links_from is not None:
            links, notice = job_links(links_from, parsed)
            notices.append(notice)
        calibration, lane_links, lane_notice = lane_calibration(input_path, parsed)
        if lane_notice:
            notices.append(lane_notice)
        problem = problem_from_trace(activity, graph, parsed, {**lane_links, **(links or {})})
    elif input_path.is_file():
        if links_from is not None:
            raise ConfigurationError("--links-from: a graph file sets its own links (graph.links); give a trace")
        problem = problem_from_graph_file(input_path, parsed)
    else:
        raise ConfigurationError(f"{input_path}: no such trace directory or graph file")
    if trace is not None:
        from tc_analyses.analyses.machine_load import busy_notice

        if (busy := busy_notice(trace.metadata.env)) is not None:
            notices.append(busy)
    if activity is not None:
        from tc_analyses.analyses.data_loading import of_job

        loading = of_job(input_path, activity)
        if loading is not None:  # the plan moves the main process's ops; it cannot shorten this wait
            notices.append(loading.text())
    result, predicted = recommend(problem, str(input_path), graph, activity, algorithm, notices, kind_text, calibration)
    output.mkdir(parents=True, exist_ok=True)
    write_plan(output, reports.to_json(result), len(problem.tasks))
    text = reports.placement_text(result)
    (output / "report.txt").write_text(text)
    start = int(min(trace.table("node_begin")["timestamp"])) if trace is not None else 1_000
    offset = trace.metadata.clock_offset_ns if trace is not None else 0
    predicted_trace = write_predicted_trace(output / "predicted", problem, predicted, start, offset)
    write_output(output / "views", trace_facts(predicted_trace))
    if graph is not None:
        write_plan_graph(output, graph, predicted)
    return result, text


def lane_calibration(trace: Path, devices: Sequence[Any]) -> tuple[Any, dict[tuple[str, str], Any], str | None]:
    """The calibration stored with `trace`, the links between its CPU lanes at the measured
    hand-over, and the notice that says where they came from (None with fewer than two CPU lanes)."""
    from tc_analyses.perf.calibration import handover_links, read_calibration

    calibration = read_calibration(trace)
    links = handover_links(calibration, list(devices)) if calibration is not None else {}
    if calibration is None:
        from tc_analyses.perf.calibration import cpu_pairs

        if not cpu_pairs(list(devices)):
            return None, {}, None
        return None, {}, ("no calibration stored with the trace (dfcompass record measures one): the hand-over "
                          "between CPU lanes is the link spec's 90 us, and the range leaves out lanes slowing each "
                          "other and a busy machine")
    return calibration, links, (calibration.describe() if links else None)


def job_links(job: Path, devices: Sequence[Any]) -> tuple[dict[tuple[str, str], Any], str]:
    """The transfer cost measured between `job`'s processes, for every pair of `devices` on
    different hosts; and the notice that says so (with how well it predicted held-out transfers)."""
    from tc_analyses.analyses.ranks import analyse

    pairs = [(a.name, b.name) for a in devices for b in devices if a.host != b.host]
    if not pairs:
        raise ConfigurationError(f"--links-from {job}: every device is on one host; name devices of other hosts "
                                 "(hostB:cpu, hostB:cuda:0) for the measured link to apply")
    fit = analyse(JobInputs(job)).link
    if fit is None or fit.link is None:
        raise DfcompassError(f"{job}: no transfer cost could be fitted (it needs collectives of two sizes or more "
                             "with their backend spans)")
    link = fit.link
    checked = (f", {fit.error_median:.0%} median error on {fit.held_out} held-out transfers"
               if fit.error_median is not None else "")
    notice = (f"transfers between hosts use the cost measured in {job}: {link.latency_ns / 1e3:.1f} us + bytes at "
              f"{link.bytes_per_ns:.3g} GB/s{checked}" + (" (measured between processes of one host)" if fit.hosts <= 1 else ""))
    return {pair: link for pair in pairs}, notice


def _stderr_file() -> Any:
    """sys.stderr when it is a real file a child process can write to, else DEVNULL (a captured stream)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both an OSError and a ValueError
        return subprocess.DEVNULL
    return sys.stderr


def _recorded_activity(plan: dict[str, Any]) -> Any:
    """The activity of the trace the plan was made from (plan.json ``input``, or ``source``), or None
    when it cannot be read here."""
    path = plan.get("input") or plan.get("source")
    if not isinstance(path, str) or not Path(path).is_dir():
        return None
    try:
        return TraceInputs(Path(path)).activity
    except (DfcompassError, OSError, ValueError):
        return None


def verify_plan(plan_path: Path, output: Path, command: list[str], refit: bool, overwrite: bool,
                rounds: int | None = None, max_rounds: int | None = None,
                progress: Callable[[str], None] | None = None) -> tuple[Any, str]:
    """Run `command` in interleaved rounds, A under the baseline placement (the recorded one), B under
    the plan (a plan.json, or the folder recommend-placement wrote), each recorded into
    OUTPUT/rounds/{a0,b0,a1,...}; `rounds` pairs at least, more up to `max_rounds` while the speedup's
    interval is wide (tc_analyses.analyses.placement.verify). Writes OUTPUT/{baseline-plan.json,
    verify.txt, verify.json, verify.png, verify.svg}; `progress` gets one line per round (default: stderr)."""
    import json
    import os
    import resource
    import shutil
    import time
    from dataclasses import replace

    from tc_analyses.analyses.placement import verify as check
    from tc_analyses.export import verify_report
    from tracer.graph_program import PLAN_ENV, Plan, PlanError, plan_file_in, read_plan_file

    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    plan_file = plan_file_in(plan_path) if plan_path.is_dir() else plan_path
    try:
        plan = read_plan_file(plan_file)
    except (OSError, EOFError) as exc:
        raise ConfigurationError(f"{plan_file}: cannot read the plan ({getattr(exc, 'strerror', None) or exc})") from None
    except ValueError as exc:
        raise ConfigurationError(f"{plan_file}: not JSON ({exc})") from None
    try:  # what the program will read, checked before it runs
        planned = Plan.load(plan_file)
    except PlanError as exc:
        raise ConfigurationError(str(exc)) from None
    if not isinstance(plan.get("predicted_makespan_ns"), int):
        raise ConfigurationError(f"{plan_file}: not a placement plan (no predicted_makespan_ns)")
    folder = output / "rounds"
    if folder.exists() and any(folder.iterdir()):
        if not overwrite:
            raise ConfigurationError(f"{folder}: already holds rounds of a verify (use --overwrite to replace them)")
        shutil.rmtree(folder)
    try:
        baseline, source = check.baseline_plan(plan, _recorded_activity(plan))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"{plan_file}: not a placement plan dfcompass can verify ({exc})") from None
    output.mkdir(parents=True, exist_ok=True)
    baseline_file = output / "baseline-plan.json"
    baseline_file.write_text(json.dumps(baseline, indent=1) + "\n", encoding="utf-8")
    sides = {"a": (baseline_file, Plan.load(baseline_file).assignment, "baseline"),
             "b": (plan_file, planned.assignment, "plan")}
    say(f"verify: rounds A (the recorded placement, from {source}) and B (the plan), interleaved")

    def run(side: str, pair: int) -> check.Round:
        path, assignment, label = sides[side]
        trace = folder / f"{side}{pair}"
        load = os.getloadavg()[0]
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        # The program's output goes to stderr: stdout carries only the comparison (--format json).
        code = run_recorded(trace, command, True, torch=False, extra_env={PLAN_ENV: str(path.resolve())},
                            stdout=_stderr_file(), calibrate=False).code
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if code != 0:
            raise DfcompassError(f"{' '.join(command)}: exited with code {code} under the {label}; its trace is in {trace}")
        cpu = (after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime) / wall if wall > 0 else None
        found = replace(check.measure_round(TraceInputs(trace).activity, assignment, side, pair, wall,
                                            (load, os.getloadavg()[0]), cpu), trace=str(trace))
        say(f"verify: round {found.name} ({label}): median step {found.step_ns / 1e6:.3f} ms over {found.steps} steps, "
            f"load {found.load_before:.2f}->{found.load_after:.2f}" + (f", {cpu:.2f} cores busy" if cpu is not None else ""))
        return found

    def after_pair(done: list[check.Round]) -> None:
        ratios = check.pair_ratios(done)
        if len(ratios) >= 2:
            low, high = check.bootstrap_ci(ratios)
            say(f"verify: {len(ratios)} pairs: speedup {statistics.median(ratios):.2f}x "
                f"({check.CONFIDENCE:.0%} interval {low:.2f}-{high:.2f}x)")

    min_pairs = rounds if rounds is not None else check.MIN_PAIRS
    done, stop = check.run_rounds(run, min_pairs, max_rounds if max_rounds is not None else check.MAX_PAIRS,
                                  after_pair=after_pair)
    summary = check.summarise(done, stop, plan, source, sorted(set(sides["a"][1].values())))
    detail = check.median_round(done)
    inputs = TraceInputs(Path(detail.trace))
    result = check.verify(plan, str(plan_file), inputs.activity, inputs.graph, refit, summary)
    text = verify_report.text(result)
    (output / "verify.txt").write_text(text, encoding="utf-8")
    (output / "verify.json").write_text(verify_report.to_json(result), encoding="utf-8")
    verify_report.plots(result, output)
    return result, text
