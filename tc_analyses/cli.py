"""The ``dfcompass`` command line. Each command parses, calls the library, renders.

Errors: every :class:`DfcompassError` becomes one line on stderr and its exit code (1 for
runtime problems, 2 for usage); an unexpected exception is reported the same way, with the
traceback only under ``--debug``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import click

from tc_analyses.cli_support import (DEVICE_LIST, PEAKS_DEVICE, F, InputPath, OneLineErrors, State, handle_errors as _handle_errors,
                                     progress as _progress, trace_bytes as _trace_bytes, without_cycle_collector)
from tc_analyses.cli_options import FORMAT, job_options, one_process, process_option, window_of, window_options
from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.registry import KEYS, TRACE_KEYS, Param

# Only click, the registry (plain data) and the error classes load at start-up, so `dfcompass
# --help` answers at once; each command imports what it uses.
@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dfcompass")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
@click.option("--no-progress", is_flag=True, help="Never show progress bars.")
@click.option("--verbose", is_flag=True, help="Let the frameworks' own notices through (TensorFlow's C++ log, "
              "torch.profiler's lines, Dask's logs), here and in every process dfcompass starts.")
def main(debug: bool, no_progress: bool, verbose: bool) -> None:
    """dfcompass: record dataflow and ML programs as CTF traces and analyse them."""
    State.debug = debug
    State.progress = not no_progress
    if verbose:  # in the environment: the programs record and demo start read it too
        import os

        from tracer.verbosity import VERBOSE_ENV

        os.environ[VERBOSE_ENV] = "1"


@main.command()
@click.argument("trace", type=InputPath())
@FORMAT
@click.option("--reader", type=click.Choice(["auto", "fast", "ctf", "bt2"]), default="auto", show_default=True,
              help="auto: the numpy reader for dfcompass traces, ctf (our CTF 1.8 reader) for any other CTF trace, "
                   "bt2 (babeltrace2, in a child process) for metadata ctf does not take.")
@_handle_errors
@without_cycle_collector
def info(trace: Path, fmt: str, reader: str) -> None:
    """Events per class, streams, time span and discarded events of a CTF TRACE directory."""
    from tc_analyses.analyses import trace_info

    from tc_analyses.export import reports

    from tc_analyses.reader.metadata import is_dfcompass_trace

    numpy_read = reader == "fast" or (reader == "auto" and is_dfcompass_trace(trace))  # counts bytes; others events
    with _progress("reading", _trace_bytes(trace) if numpy_read else None, "bytes" if numpy_read else "items") as advance:
        result = trace_info.run(trace, reader, advance)  # type: ignore[arg-type]
    click.echo(reports.to_json(result) if fmt == "json" else reports.info_text(result), nl=False)


@main.command("check-edges")
@click.argument("trace", type=InputPath())
@click.argument("execution_trace", type=InputPath())
@FORMAT
@process_option
@_handle_errors
@without_cycle_collector
def check_edges(trace: Path, execution_trace: Path, fmt: str, process: str | None) -> None:
    """Check TRACE's tensor edges against PyTorch's EXECUTION_TRACE of the same run (precision, recall)."""
    from tc_analyses.analyses.edge_check import check_edges as check
    from tc_analyses.export import reports

    if not execution_trace.is_file():
        raise ConfigurationError(f"{execution_trace}: no such execution trace file")
    trace = one_process(trace, process)
    with _progress("reading the execution trace", execution_trace.stat().st_size, "bytes") as advance:
        result = check(trace, execution_trace, advance)
    click.echo(reports.to_json(result) if fmt == "json" else reports.edge_check_text(result), nl=False)


@main.command()
@click.argument("trace", type=InputPath())
@click.option("--dry-run", is_flag=True, help="Only say what would be cut.")
@_handle_errors
def repair(trace: Path, dry_run: bool) -> None:
    """Cut damaged stream files of a dfcompass TRACE back to their last complete packet."""
    from tc_analyses.reader.repair import repair_trace

    repairs = repair_trace(trace, dry_run=dry_run)
    if not repairs:
        click.echo(f"{trace}: every packet is whole; nothing to repair")
    verb = "would cut" if dry_run else "cut"
    for r in repairs:
        click.echo(f"{r.path}: {verb} {r.dropped_bytes} bytes at byte {r.kept_bytes} ({r.problem})")


_CTF_VERSION = click.option(
    "--ctf", type=click.Choice(["1.8", "2"]), default="1.8", show_default=True,
    help="The CTF version of the trace written: 1.8 (TSDL metadata; what Trace Compass releases in use and "
         "babeltrace2 2.0 read) or 2 (JSON metadata, as LTTng 2.15 writes; babeltrace2 2.1 reads it). The "
         "event streams are the same bytes.")


@main.command("import-kineto")
@click.argument("files", metavar="FILE...", nargs=-1, required=True, type=InputPath())
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Trace directory to write; with several FILEs, the job folder (one trace per file).")
@click.option("--overwrite", is_flag=True, help="Replace a trace already in OUTPUT.")
@_CTF_VERSION
@FORMAT
@job_options(cache=False)
@_handle_errors
@without_cycle_collector
def import_kineto(files: tuple[Path, ...], output: Path, overwrite: bool, ctf: str, fmt: str, scheduler: str | None,
                  workers: int | None, in_process: bool) -> None:
    """Convert PyTorch profiler (Kineto) traces (.json or .json.gz) into dfcompass traces.

    One FILE gives the trace OUTPUT; the files of a job's ranks give OUTPUT/<file name>/ each,
    with absolute clocks, so babeltrace2 and Trace Compass open OUTPUT as one job. Several files
    are converted as Dask tasks (docs/jobs.md), one per file.
    """
    from tc_analyses.app import imports
    from tc_analyses.export import reports

    if len(files) == 1:
        summary = imports.import_kineto(files[0], output, overwrite, _progress, ctf)
        click.echo(reports.to_json(summary) if fmt == "json" else reports.kineto_import_text(summary), nl=False)
        return
    summaries = imports.import_kineto_job(list(files), output, overwrite, _progress,
                                          {"scheduler": scheduler, "workers": workers, "in_process": in_process}, ctf)
    if fmt == "json":
        click.echo(reports.to_json_document({"job": str(output), "traces": summaries}), nl=False)
    else:
        click.echo("\n".join(reports.kineto_import_text(s) for s in summaries), nl=False)


@main.command("build-analyses")
@click.argument("trace", required=False, type=InputPath())
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Folder for xml/, plugin/ and README.md.")
@click.option("--validate", is_flag=True, help="Check every file against Trace Compass's XSD and dfcompass's lint.")
@click.option("--xsd", type=click.Path(path_type=Path),
              help="Trace Compass's xmlDefinition.xsd, its folder, or a Trace Compass installation to find it in "
                   "(default: $DFCOMPASS_TRACECOMPASS_XSD).")
@process_option
@_handle_errors
@without_cycle_collector
def build_analyses(trace: Path | None, output: Path, validate: bool, xsd: Path | None, process: str | None) -> None:
    """Generate Trace Compass analyses (XML and a plugin) for TRACE, or for the whole event catalogue.

    TRACE may be a job folder: the analyses then fit every process's events, and the README says
    how to open the folder's traces as one Trace Compass experiment (--process: one process only)."""
    from tc_analyses.app import build, jobs

    job = trace is not None and process is None and jobs.is_job_folder(trace)
    if trace is not None and not job:
        trace = one_process(trace, process)
    built = build.build_analyses(trace, output, xsd if validate else None, validate, job=job)
    for path in built.written.values():
        click.echo(f"wrote {path}")
    for problem in built.problems:
        click.echo(f"dfcompass: {problem}", err=True)
    if built.problems:
        raise DfcompassError(f"{len(built.problems)} problem(s) in the generated analyses")
    if validate:
        click.echo(f"validated {built.xml_files} files against the XSD and the lint")


@main.command()
@click.argument("trace", type=InputPath())
@click.option("--xml", "xml", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Trace Compass XML analysis to run (repeatable); default: the generated analyses.")
@FORMAT
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="How many top nodes to list.")
@click.option("--xsd", type=click.Path(path_type=Path), help="Check --xml files against Trace Compass's XSD first.")
@click.option("--section", "section_keys", multiple=True, type=click.Choice(TRACE_KEYS),
              help="Seed analyses to add (repeatable; default: all). Sections a trace cannot feed say why.")
@click.option("--no-sections", is_flag=True, help="Only the summary of the Trace Compass analyses.")
@click.option("--details", is_flag=True, help="Print every section in full (by default: one line each, its first "
                                               "finding; sections named with --section are printed in full).")
@click.option("--device", type=PEAKS_DEVICE, default="cpu", show_default=True, help="Roofline peaks: cpu or a model of the device table.")
@click.option("--plots", type=click.Path(file_okay=False, path_type=Path), help="Write the sections' plots (PNG and SVG) here.")
@window_options
@job_options
@_handle_errors
@without_cycle_collector
def analyze(trace: Path, xml: tuple[Path, ...], fmt: str, top: int, xsd: Path | None, section_keys: tuple[str, ...],
            no_sections: bool, details: bool, device: str, plots: Path | None, window: str | None,
            annotation: str | None, include_last_step: bool, scheduler: str | None, workers: int | None,
            in_process: bool, cache: Path | None) -> None:
    """Summarise TRACE: busy %, top nodes, memory peaks and lost events from the Trace Compass analyses
    run headless, then the seed analyses: roofline, runtime overhead, HTA-compatible breakdown,
    memory and inter-operator parallelism.

    TRACE may be a job folder (one trace per process, `dfcompass record` of torchrun or
    mp.spawn): each process's trace is then analysed as a Dask task and the answers are put
    side by side, with the top nodes merged over the job."""
    from tc_analyses.app import build, jobs
    from tc_analyses.app.analyze import analyze as analyze_trace
    from tc_analyses.inputs import TraceInputs

    build.check_user_xml(xml, xsd)
    keys = () if no_sections else section_keys or TRACE_KEYS
    if jobs.is_job_folder(trace):
        if xml or plots or window or annotation or include_last_step:
            raise ConfigurationError(f"{trace}: a job folder takes the generated analyses, without --xml, --plots "
                                     "or window options; give one process's trace for those")
        job = jobs.analyze_job(trace, scheduler=scheduler, workers=workers, in_process=in_process, top=top,
                               sections=keys, peaks_device=device, cache=cache, progress=_progress)
        from tc_analyses.export.reports import to_json_document

        click.echo(to_json_document(job.to_json(top)) if fmt == "json" else job.text(top), nl=False)
        return
    inputs = TraceInputs(trace, _progress, window_of(window, annotation, include_last_step))
    result = analyze_trace(inputs, xml, top, keys, device, plots, _progress)
    click.echo(result.json() if fmt == "json" else result.text(details or bool(section_keys)), nl=False)


@main.command()
@click.argument("trace", type=InputPath())
@click.option("--xml", "xml", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Trace Compass XML analysis to run (repeatable).")
@click.option("--path", "path_glob", default="*", show_default=True, help="Only attributes whose path matches (glob, '/' separated).")
@click.option("--at", type=int, help="Only the state at this time (ns, trace clock).")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path), help="Write path,start,end,value to this CSV file.")
@click.option("--parquet", "parquet_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the same columns to this Parquet file (not with --at).")
@click.option("--xsd", type=click.Path(path_type=Path), help="Check the XML files against Trace Compass's XSD first.")
@process_option
@_handle_errors
@without_cycle_collector
def states(trace: Path, xml: tuple[Path, ...], path_glob: str, at: int | None, csv_out: Path | None,
           parquet_out: Path | None, xsd: Path | None, process: str | None) -> None:
    """Dump or query the intervals of XML analyses' state systems on TRACE."""
    from tc_analyses.app import build

    trace = one_process(trace, process)
    if parquet_out is not None and (at is not None or csv_out is not None):
        raise ConfigurationError("--parquet writes every interval: give it without --at and --csv")

    build.check_user_xml(xml, xsd)
    if parquet_out is not None:
        click.echo(f"wrote {build.states_parquet(trace, xml, path_glob, parquet_out, _progress)} intervals to "
                   f"{parquet_out}")
        return
    if csv_out is not None and at is None:
        click.echo(f"wrote {build.states_csv(trace, xml, path_glob, csv_out, _progress)} intervals to {csv_out}")
        return
    found = build.states(trace, xml, path_glob, at, _progress)
    if csv_out is not None:
        click.echo(f"wrote {build.write_states_csv(found, csv_out)} intervals to {csv_out}")
        return
    for row in found:
        click.echo(f"{row.analysis}  {row.path}  [{row.start}, {row.end}]  {_shown(row.value)}")


@main.command()
@click.argument("control", type=InputPath())
@click.argument("test", type=InputPath())
@click.option("--top", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Rows per side (GPU, CPU) in the text report.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), help="Folder for the plot (PNG and SVG).")
@FORMAT
@window_options
@_handle_errors
@without_cycle_collector
def diff(control: Path, test: Path, top: int, output: Path | None, fmt: str, window: str | None,
         annotation: str | None, include_last_step: bool) -> None:
    """Compare two traces op by op and kernel by kernel: counts and time in CONTROL and TEST (HTA's
    TraceDiff). The window options apply to both traces."""
    from tc_analyses.app.analysis_commands import diff as diff_traces
    from tc_analyses.export.reports import to_json_document

    control, test = one_process(control, None), one_process(test, None)  # a job folder: its main process
    result, text = diff_traces(control, test, window_of(window, annotation, include_last_step), top, output, _progress)
    click.echo(to_json_document(result.to_json()) if fmt == "json" else text, nl=False)


@main.command("export-perfetto")
@click.argument("trace", type=InputPath())
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The JSON file to write (gzip-compressed when it ends in .gz).")
@_handle_errors
@without_cycle_collector
def export_perfetto(trace: Path, output: Path) -> None:
    """Export TRACE (a trace or a job folder) as Chrome/Perfetto JSON for ui.perfetto.dev: ops, API calls,
    kernels and copies on their queues, memory and queue-length counters, tensor and launch arrows."""
    from tc_analyses.export import perfetto

    with _progress("exporting", None):
        counts = perfetto.write(trace, output)
    slices, flows, counters = counts.get("X", 0), counts.get("s", 0), counts.get("C", 0)
    click.echo(f"wrote {output}: {slices} slices, {flows} arrows, {counters} counter values "
               "(open it in ui.perfetto.dev)")


@main.command("recommend-placement")
@click.argument("input_path", metavar="INPUT", type=InputPath())
@click.option("--devices", type=DEVICE_LIST, required=True, help="Devices to place on: cpu,cuda:0[=H100],hostB:cuda:0 ...")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Folder for the plan and its views.")
@click.option("--algorithm", type=click.Choice(["auto", "heft", "search", "milp"]), default="auto", show_default=True,
              help="auto: the exact MILP up to 20 nodes, else HEFT plus local search; or one of them.")
@click.option("--links-from", type=click.Path(path_type=Path), default=None,
              help="A job folder (dfcompass record of a multi-process run): the transfer cost measured between its "
                   "processes sets the links between devices of different hosts.")
@click.option("--step-kind", type=click.IntRange(0), default=None,
              help="Plan this kind of step (0: the one with the most steps, then the most time; the report lists them).")
@FORMAT
@process_option
@_handle_errors
@without_cycle_collector
def recommend_placement(input_path: Path, devices: str, output: Path, algorithm: str, links_from: Path | None,
                        step_kind: int | None, fmt: str, process: str | None) -> None:
    """Recommend a placement of INPUT's nodes on DEVICES (INPUT: a trace, a job folder's main process,
    or a node-link JSON graph)."""
    from tc_analyses.app import place

    if input_path.is_dir():
        input_path = one_process(input_path, process)
    with _progress("planning", None):  # the search runs for seconds on large graphs
        result, text = place.place(input_path, devices, output, algorithm=algorithm, step_kind=step_kind,
                                   links_from=links_from)
    if fmt == "json":  # the JSON place() wrote: a 10k-node plan is not encoded twice
        from tc_analyses.export.placement_views import written_plan_text

        click.echo(written_plan_text(output), nl=False)
        return
    click.echo(text + f"\nplan, report and views: {output.resolve()}\n", nl=False)


_KINDS: dict[str, Any] = {"str": str, "int": int, "float": float, "peaks-device": PEAKS_DEVICE}


def _shown(value: str | None) -> str:
    """A state value as `states` prints it: null apart from an empty string."""
    return "null" if value is None else value or '""'


def _param_option(param: Param) -> Callable[[F], F]:
    """The click option of a registry Param."""
    if param.kind == "flag":
        return click.option(param.flag, param.name, is_flag=True, help=param.help)
    kind = _KINDS.get(param.kind, str)
    if param.minimum is not None:
        kind = click.IntRange(min=int(param.minimum)) if kind is int else click.FloatRange(min=param.minimum)
    return click.option(param.flag, param.name, type=kind, default=param.default,
                        show_default=param.default is not None, help=param.help)


def _analysis_command(key: str) -> None:
    """Add `dfcompass KEY TRACE...` for the registry entry KEY: its options, -o and --format."""
    from tc_analyses.registry import entry

    analysis = entry(key)

    def command(traces: tuple[Path, ...] | Path, output: Path | None, fmt: str, labels: str | None = None, axis: str = "batch",
                window: str | None = None, annotation: str | None = None, include_last_step: bool = False,
                **options: Any) -> None:
        from tc_analyses.app.analysis_commands import run_analysis
        from tc_analyses.export.reports import to_json_document

        paths = traces if isinstance(traces, tuple) else (traces,)
        if not analysis.job:  # a job folder's main process (or --process)
            process = options.pop("process", None)
            paths = tuple(one_process(path, process) for path in paths)
        cluster: dict[str, Any] = {k: options.pop(k) for k in ("scheduler", "workers", "in_process") if k in options}
        ran = run_analysis(key, paths, options, output, labels, axis, _progress,
                           window_of(window, annotation, include_last_step), cluster or None)
        click.echo(to_json_document(ran.json) if fmt == "json" else ran.text, nl=False)

    for param in reversed(analysis.params):
        command = _param_option(param)(command)
    if analysis.axis:
        command = click.option("--axis", default="batch", show_default=True,
                               help="With several traces: the setting that changes between them (batch, threads...).")(command)
    if analysis.trajectory:
        command = click.option("--labels", help="With several traces: their values on the trajectory axis, "
                                                "comma-separated (default: folder names).")(command)
        command = click.argument("traces", nargs=-1, required=True, type=InputPath())(command)
    else:
        command = click.argument("traces", metavar="JOB" if analysis.job else "TRACE",
                                 type=InputPath())(command)
    if not analysis.job:
        command = window_options(process_option(command))
    else:
        command = job_options(command, cache=False)
    command = click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
                           help="Folder for the plots (PNG and SVG) and other files.")(command)
    command = FORMAT(command)
    summary = analysis.summary + (" Several TRACES (e.g. batch sizes) give a trajectory." if analysis.trajectory else "")
    main.command(key, help=summary, short_help=analysis.title)(_handle_errors(without_cycle_collector(command)))


# The registry is plain data: the analysis commands cost nothing at start-up.
for _key in KEYS:
    _analysis_command(_key)


@main.command()
@click.argument("traces", nargs=-1, required=True, type=InputPath())
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The HTML file to write.")
@click.option("--devices", type=DEVICE_LIST, help="Also recommend a placement on these devices (as recommend-placement).")
@click.option("--labels", help="With several traces: their values on the trajectory axis, comma-separated (default: folder names).")
@click.option("--axis", default="batch", show_default=True, help="With several traces: the setting that changes between them.")
@click.option("--device", type=PEAKS_DEVICE, default="cpu", show_default=True, help="Roofline peaks: cpu or a model of the device table.")
@job_options
@_handle_errors
@without_cycle_collector
def report(traces: tuple[Path, ...], output: Path, devices: str | None, labels: str | None, axis: str, device: str,
           scheduler: str | None, workers: int | None, in_process: bool, cache: Path | None) -> None:
    """One static HTML page (no server needed) with the reports and plots of each TRACE.

    With several traces (the same program with different batch sizes or thread counts) the page
    opens with their roofline and runtime-overhead trajectories. A job folder (one trace per
    process) gets a section per process, each made by a Dask task (docs/jobs.md).
    """
    from tc_analyses.app import jobs
    from tc_analyses.app.report import report as report_traces

    if len(traces) == 1 and jobs.is_job_folder(traces[0]):
        jobs.report_job(traces[0], output, devices, device, scheduler=scheduler, workers=workers,
                        in_process=in_process, cache=cache, progress=_progress)
    else:
        report_traces(traces, output, devices, labels, axis, device, _progress)
    click.echo(f"wrote {output}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Trace directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace a trace already in OUTPUT.")
@click.option("--torch/--no-torch", default=True, show_default=True,
              help="Record PyTorch ops with its profiler (off for programs that record their own nodes, "
                   "such as tracer.graph_program programs).")
@click.option("--torch-engine", type=click.Choice(["auto", "profiler", "observer"]), default=None,
              help="What records the CPU ops: dfcompass's native op observer (a fraction of the profiler's cost; "
                   "CPU only), or torch.profiler (GPU runs, scheduled windows). Default: $DFCOMPASS_TORCH_ENGINE, "
                   "else auto: the observer where it can record the run and is built. See docs/pytorch.md.")
@click.option("--calibrate/--no-calibrate", default=True, show_default=True,
              help="After the program, measure this machine's hand-over between threads and the slowdown of "
                   "two lanes computing at once (about 1 s), stored as JOB/calibration.json: the ranges of "
                   "recommend-placement's multi-lane plans use them.")
@_CTF_VERSION
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_handle_errors
def record(output: Path, overwrite: bool, torch: bool, torch_engine: str | None, calibrate: bool, ctf: str,
           command: tuple[str, ...]) -> None:
    """Run a program with tracing on: dfcompass record -o JOB -- python prog.py ARGS...

    Every Python process the command starts (its children too: fork, spawn, torchrun, mp.spawn,
    DataLoader workers) is traced into JOB/<host>-<pid>/; programs use tracer.node /
    tracer.traced / tracer.step to mark their dataflow, and PyTorch ops are recorded as they run.
    """
    from tc_analyses.app.record import run_recorded, shell_status, signal_name

    recorded = run_recorded(output, list(command), overwrite, torch, calibrate=calibrate, torch_engine=torch_engine,
                            extra_env={"DFCOMPASS_CTF": ctf})
    count = len(recorded.traces)
    click.echo(f"trace written to {output}" + (f" ({count} processes)" if count > 1 else ""), err=True)
    for line in recorded.cost_lines():
        click.echo(f"dfcompass: {line}", err=True)
    warning = recorded.warning()
    if warning:
        click.echo(f"dfcompass: warning: {warning}", err=True)
    if recorded.code != 0:
        ended = f"was killed by {signal_name(-recorded.code)}" if recorded.code < 0 else f"exited with code {recorded.code}"
        click.echo(f"dfcompass: the program {ended}; its trace is still readable", err=True)
    sys.exit(shell_status(recorded.code))


@main.command()
@click.argument("plan", type=InputPath())
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Folder for the rounds' traces (OUTPUT/rounds) and the comparison.")
@click.option("--refit", is_flag=True, help="Also refit the costs on half of the median plan round's steps and check them on the other half.")
@click.option("--rounds", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Pairs of rounds (A: the recorded placement, B: the plan, interleaved) run at least.")
@click.option("--max-rounds", type=click.IntRange(1, 1000), default=15, show_default=True,
              help="Pairs run at most, while the speedup's 90% interval is wider than ±15% of its median.")
@click.option("--overwrite", is_flag=True, help="Replace the rounds already in OUTPUT/rounds.")
@FORMAT
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_handle_errors
def verify(plan: Path, output: Path, refit: bool, rounds: int, max_rounds: int, overwrite: bool, fmt: str,
           command: tuple[str, ...]) -> None:
    """Run a program under its recorded placement and under PLAN, interleaved, and compare:
    dfcompass verify PLAN -o DIR -- python prog.py ARGS...

    PLAN is what recommend-placement wrote (its folder, plan.json or plan.json.gz). The program applies a
    placement when it runs on tracer.graph_program (it reads DFCOMPASS_PLAN). Rounds A (every node where
    the trace recorded it) and B (the plan) alternate, each recorded into DIR/rounds/{a0,b0,a1,...}; the
    measured speedup is the median of the pairs' ratios, with a bootstrap interval, checked against the
    plan's printed range; the median plan round's steps and nodes are compared with the plan's predictions.
    One line per round goes to stderr.
    """
    from tc_analyses.app import place
    from tc_analyses.export import verify_report

    result, text = place.verify_plan(plan, output, list(command), refit, overwrite, rounds, max_rounds,
                                     lambda line: click.echo(line, err=True))
    click.echo(verify_report.to_json(result) if fmt == "json" else text + f"\nre-run and comparison: {output.resolve()}\n",
               nl=False)


@main.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Folder for everything the demo writes [default: demo-out for the torch workload, "
                   "demo-out-<workload> (demo-out-tf, -pipeline, -ddp) for the others, so no demo writes "
                   "over another's].")
@click.option("--workload", type=click.Choice(["torch", "pipeline", "ddp"]), default="torch", show_default=True,
              help="torch: a small ResNet and transformer (tracer/workloads/torch_models.py); "
                   "pipeline: the threaded numpy pipeline (tracer/workloads/pipeline.py); "
                   "ddp: a 2-rank DistributedDataParallel job on gloo with a slowed rank (tracer/workloads/ddp.py), "
                   "compared by dfcompass ranks.")
@click.option("--framework", type=click.Choice(["torch", "tf"]), default="torch", show_default=True,
              help="tf: the embedded workload is a small Keras CNN (tracer/workloads/tf_models.py), eager "
                   "inference then model.fit, recorded with tracer.tf_source.TFRecorder (needs the [tf] extra).")
@click.option("--steps", type=click.IntRange(1, 10_000), default=None,
              help="torch: training steps per model (default 3, after 2 inference steps each); "
                   "pipeline: steps (default 20).")
@_handle_errors
def demo(output: Path | None, workload: str, framework: str, steps: int | None) -> None:
    """Run everything dfcompass does on a small embedded program, in a few minutes.

    It records the program (a small ResNet and transformer in PyTorch by default; --framework tf, a
    Keras CNN; --workload pipeline, a threaded numpy pipeline; --workload ddp, a 2-rank PyTorch DDP
    job with one rank slowed) into OUTPUT/trace, prints the trace's info, generates its Trace Compass
    analyses into OUTPUT/analyses, runs them headless and prints the summary, recommends a CPU/GPU
    placement (OUTPUT/placement), and ends with one HTML page of every result, OUTPUT/report.html.
    """
    from tc_analyses.app.demo import demo as run_demo

    if output is None:
        name = "tf" if framework == "tf" else workload
        output = Path("demo-out" if name == "torch" else f"demo-out-{name}")
    run_demo(output, workload, steps, lambda text: click.echo(text, nl=False), _progress, framework)


if __name__ == "__main__":
    main()
