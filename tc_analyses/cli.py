"""The ``dfcompass`` command line. Each command parses, calls the library, renders.

Errors: every :class:`DfcompassError` becomes one line on stderr and its exit code (1 for
runtime problems, 2 for usage); an unexpected exception is reported the same way, with the
traceback only under ``--debug``.
"""

from __future__ import annotations

import functools
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator, TypeVar

import click

from tc_analyses.errors import ConfigurationError, DfcompassError, TraceError
from tc_analyses.registry import KEYS, Param

# Only click and the error classes load at start-up, so `dfcompass --help` answers at once; each
# command imports what it uses.
F = TypeVar("F", bound=Callable[..., Any])


class _State:
    debug = False
    progress = True


def _fail(message: str, code: int) -> None:
    click.echo(f"dfcompass: error: {message}", err=True)
    sys.exit(code)


def _handle_errors(func: F) -> F:
    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DfcompassError as exc:
            _fail(" ".join(str(exc).split()), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except BrokenPipeError:
            sys.exit(0)
        except Exception as exc:  # never a traceback by default: one line, exit 1
            if _State.debug:
                traceback.print_exc()
            _fail(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (run with --debug for details)", 1)
        return None

    return run  # type: ignore[return-value]


@contextmanager
def _progress(label: str, total: int | None, unit: str = "items") -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr when interactive; a no-op otherwise. `unit`: bytes or items."""
    if not _State.progress or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    count = (DownloadColumn() if unit == "bytes" else MofNCompleteColumn()) if total else TextColumn("{task.completed}")
    columns = [TextColumn(label), BarColumn(), count, TimeRemainingColumn()]
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _trace_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if path.is_dir() else 0


class BadValue(click.BadParameter):
    """A bad option value: one line naming the option and the problem, exit code 2."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"dfcompass: error: {' '.join(self.format_message().split())}", err=True)


def _check(convert: Callable[[str], Any], value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
    try:
        convert(str(value))
    except DfcompassError as exc:
        raise BadValue(str(exc), ctx, param) from None
    return str(value)


class PeaksDevice(click.ParamType):
    """A device whose peaks the device table knows: cpu, CPU-<cores> or a GPU model (H100...)."""

    name = "device"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from tc_analyses.perf.devices import spec

        return _check(spec, value, param, ctx)


class DeviceList(click.ParamType):
    """Devices to place on: cpu,cuda:0[=H100],hostB:cuda:0 ..."""

    name = "devices"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from tc_analyses.perf.devices import parse_devices

        return _check(parse_devices, value, param, ctx)


PEAKS_DEVICE, DEVICE_LIST = PeaksDevice(), DeviceList()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dfcompass")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
@click.option("--no-progress", is_flag=True, help="Never show progress bars.")
def main(debug: bool, no_progress: bool) -> None:
    """dfcompass: record dataflow and ML programs as CTF traces and analyse them."""
    _State.debug = debug
    _State.progress = not no_progress


@main.command()
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--reader", type=click.Choice(["auto", "fast", "bt2"]), default="auto", show_default=True,
              help="auto: the numpy reader for dfcompass traces, bt2 (babeltrace2) for any other CTF trace.")
@_handle_errors
def info(trace: Path, fmt: str, reader: str) -> None:
    """Events per class, streams, time span and discarded events of a CTF TRACE directory."""
    from tc_analyses.analyses import trace_info

    from tc_analyses.export import reports

    with _progress("reading", _trace_bytes(trace) if reader != "bt2" else None, "bytes") as advance:
        result = trace_info.run(trace, reader, advance)  # type: ignore[arg-type]
    click.echo(reports.to_json(result) if fmt == "json" else reports.info_text(result), nl=False)


@main.command()
@click.argument("trace", type=click.Path(path_type=Path))
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


@main.command("import-kineto")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Trace directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace a trace already in OUTPUT.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_handle_errors
def import_kineto(file: Path, output: Path, overwrite: bool, fmt: str) -> None:
    """Convert a PyTorch profiler (Kineto) trace FILE (.json or .json.gz) into a dfcompass trace."""
    from tc_analyses.export import reports
    from tracer.ctf import TraceExistsError
    from tracer.importers import KinetoImportError
    from tracer.importers import import_kineto as convert

    try:
        summary = convert(file, output, overwrite=overwrite)
    except KinetoImportError as exc:
        raise TraceError(exc.path, exc.problem) from None
    except TraceExistsError:
        raise ConfigurationError(f"{output}: already holds a trace (use --overwrite to replace it)") from None
    except OSError as exc:  # a missing or unreadable FILE, an unwritable OUTPUT
        raise TraceError(exc.filename if exc.filename is not None else file, exc.strerror or str(exc)) from None
    click.echo(reports.to_json(summary) if fmt == "json" else reports.kineto_import_text(summary), nl=False)


@main.command("build-analyses")
@click.argument("trace", required=False, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Folder for xml/, plugin/ and README.md.")
@click.option("--validate", is_flag=True, help="Check every file against Trace Compass's XSD and dfcompass's lint.")
@click.option("--xsd", type=click.Path(path_type=Path),
              help="Trace Compass's xmlDefinition.xsd, its folder, or a Trace Compass installation to find it in "
                   "(default: $DFCOMPASS_TRACECOMPASS_XSD).")
@_handle_errors
def build_analyses(trace: Path | None, output: Path, validate: bool, xsd: Path | None) -> None:
    """Generate Trace Compass analyses (XML and a plugin) for TRACE, or for the whole event catalogue."""
    from tc_analyses.export.tracecompass import write_output
    from tc_analyses.export.tracecompass.facts import trace_facts
    from tc_analyses.export.tracecompass.validate import check_files, find_xsd

    schema = find_xsd(xsd) if validate else None  # a missing schema is reported before anything is written
    facts = trace_facts(trace) if trace is not None else None
    written = write_output(output, facts)
    for key, path in written.items():
        click.echo(f"wrote {path}")
    if schema is not None:
        problems = check_files(sorted(p for k, p in written.items() if k.startswith("xml/")), schema)
        for problem in problems:
            click.echo(f"dfcompass: {problem}", err=True)
        if problems:
            raise DfcompassError(f"{len(problems)} problem(s) in the generated analyses")
        click.echo(f"validated {sum(k.startswith('xml/') for k in written)} files against the XSD and the lint")


@main.command()
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--xml", "xml", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Trace Compass XML analysis to run (repeatable); default: the generated analyses.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="How many top nodes to list.")
@click.option("--xsd", type=click.Path(path_type=Path), help="Check --xml files against Trace Compass's XSD first.")
@click.option("--section", "section_keys", multiple=True, type=click.Choice(KEYS),
              help="Seed analyses to add (repeatable; default: all). Sections a trace cannot feed say why.")
@click.option("--no-sections", is_flag=True, help="Only the summary of the Trace Compass analyses.")
@click.option("--device", type=PEAKS_DEVICE, default="cpu", show_default=True, help="Roofline peaks: cpu or a model of the device table.")
@click.option("--plots", type=click.Path(file_okay=False, path_type=Path), help="Write the sections' plots (PNG and SVG) here.")
@_handle_errors
def analyze(trace: Path, xml: tuple[Path, ...], fmt: str, top: int, xsd: Path | None, section_keys: tuple[str, ...],
            no_sections: bool, device: str, plots: Path | None) -> None:
    """Summarise TRACE: busy %, top nodes, memory peaks and lost events from the Trace Compass analyses
    run headless, then the seed analyses: roofline, runtime overhead, HTA-compatible breakdown,
    memory and inter-operator parallelism."""
    from tc_analyses import app
    from tc_analyses.inputs import TraceInputs

    app.check_user_xml(xml, xsd)
    keys = () if no_sections else section_keys or KEYS
    result = app.analyze(TraceInputs(trace, _progress), xml, top, keys, device, plots, _progress)
    click.echo(result.json() if fmt == "json" else result.text(), nl=False)


@main.command()
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--xml", "xml", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Trace Compass XML analysis to run (repeatable).")
@click.option("--path", "path_glob", default="*", show_default=True, help="Only attributes whose path matches (glob, '/' separated).")
@click.option("--at", type=int, help="Only the state at this time (ns, trace clock).")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path), help="Write path,start,end,value to this CSV file.")
@click.option("--xsd", type=click.Path(path_type=Path), help="Check the XML files against Trace Compass's XSD first.")
@_handle_errors
def states(trace: Path, xml: tuple[Path, ...], path_glob: str, at: int | None, csv_out: Path | None,
           xsd: Path | None) -> None:
    """Dump or query the intervals of XML analyses' state systems on TRACE."""
    import csv

    from tc_analyses import app
    from tc_analyses.analyses.states import rows
    from tc_analyses.inputs import TraceInputs

    app.check_user_xml(xml, xsd)
    found = rows(TraceInputs(trace, _progress).built(xml), path_glob, at)
    if csv_out is not None:
        with open(csv_out, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["path", "start", "end", "value"])
            for row in found:
                writer.writerow([row.path, row.start, row.end, "" if row.value is None else row.value])
        click.echo(f"wrote {len(found)} intervals to {csv_out}")
        return
    for row in found:
        click.echo(f"{row.analysis}  {row.path}  [{row.start}, {row.end}]  {'null' if row.value is None else row.value}")


@main.command("recommend-placement")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=Path))
@click.option("--devices", type=DEVICE_LIST, required=True, help="Devices to place on: cpu,cuda:0[=H100],hostB:cuda:0 ...")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Folder for the plan and its views.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_handle_errors
def recommend_placement(input_path: Path, devices: str, output: Path, fmt: str) -> None:
    """Recommend a placement of INPUT's nodes on DEVICES (INPUT: a trace, or a node-link JSON graph)."""
    from tc_analyses import app
    from tc_analyses.export import reports

    with _progress("planning", None):  # the search runs for seconds on large graphs
        result, text = app.place(input_path, devices, output)
    click.echo(reports.to_json(result) if fmt == "json" else text + f"\nplan, report and views: {output.resolve()}\n",
               nl=False)


_KINDS: dict[str, Any] = {"str": str, "int": int, "float": float, "peaks-device": PEAKS_DEVICE}


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
                **options: Any) -> None:
        from tc_analyses import app

        paths = traces if isinstance(traces, tuple) else (traces,)
        ran = app.run_analysis(key, paths, options, output, labels, axis, _progress)
        click.echo(_json(ran.json) if fmt == "json" else ran.text, nl=False)

    for param in reversed(analysis.params):
        command = _param_option(param)(command)
    if analysis.trajectory:
        command = click.option("--axis", default="batch", show_default=True,
                               help="With several traces: the setting that changes between them (batch, threads...).")(command)
        command = click.option("--labels", help="With several traces: their values on the trajectory axis, "
                                                "comma-separated (default: folder names).")(command)
        command = click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))(command)
    else:
        command = click.argument("traces", metavar="TRACE", type=click.Path(path_type=Path))(command)
    command = click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
                           help="Folder for the plots (PNG and SVG) and other files.")(command)
    command = _FORMAT(command)
    summary = analysis.summary + (" Several TRACES (e.g. batch sizes) give a trajectory." if analysis.trajectory else "")
    main.command(key, help=summary, short_help=analysis.title)(_handle_errors(command))


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


_FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
# The registry is plain data: the analysis commands cost nothing at start-up.
for _key in KEYS:
    _analysis_command(_key)


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The HTML file to write.")
@click.option("--devices", type=DEVICE_LIST, help="Also recommend a placement on these devices (as recommend-placement).")
@click.option("--labels", help="With several traces: their values on the trajectory axis, comma-separated (default: folder names).")
@click.option("--axis", default="batch", show_default=True, help="With several traces: the setting that changes between them.")
@click.option("--device", type=PEAKS_DEVICE, default="cpu", show_default=True, help="Roofline peaks: cpu or a model of the device table.")
@_handle_errors
def report(traces: tuple[Path, ...], output: Path, devices: str | None, labels: str | None, axis: str, device: str) -> None:
    """One static HTML page (no server needed) with the reports and plots of each TRACE.

    With several traces (the same program with different batch sizes or thread counts) the page
    opens with their roofline and runtime-overhead trajectories.
    """
    from tc_analyses import app

    app.report(traces, output, devices, labels, axis, device, _progress)
    click.echo(f"wrote {output}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Trace directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace a trace already in OUTPUT.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_handle_errors
def record(output: Path, overwrite: bool, command: tuple[str, ...]) -> None:
    """Run a Python program with tracing on: dfcompass record -o DIR -- python prog.py ARGS...

    The first Python process the command starts is traced into DIR; programs use
    tracer.node / tracer.traced / tracer.step to mark their dataflow.
    """
    from tc_analyses.app import run_recorded

    code = run_recorded(output, list(command), overwrite)
    click.echo(f"trace written to {output}", err=True)
    if code != 0:
        click.echo(f"dfcompass: the program exited with code {code}; its trace is still readable", err=True)
    sys.exit(code)


@main.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("demo-out"), show_default=True,
              help="Folder for everything the demo writes.")
@click.option("--workload", type=click.Choice(["torch", "pipeline"]), default="torch", show_default=True,
              help="torch: a small ResNet and transformer (tracer/workloads/torch_models.py); "
                   "pipeline: the threaded numpy pipeline (tracer/workloads/pipeline.py).")
@click.option("--steps", type=click.IntRange(1, 10_000), default=None,
              help="torch: training steps per model (default 3, after 2 inference steps each); "
                   "pipeline: steps (default 20).")
@_handle_errors
def demo(output: Path, workload: str, steps: int | None) -> None:
    """Record an embedded workload (PyTorch by default) into OUTPUT/trace, generate its Trace Compass
    analyses into OUTPUT/analyses and print the trace's info and headless summary.

    The torch workload records itself with tracer.torch_source.TorchRecorder (every aten op,
    exact tensor edges, memory); the numpy pipeline is run under `dfcompass record`.
    """
    from tc_analyses import app

    app.demo(output, workload, steps, lambda text: click.echo(text, nl=False), _progress)


if __name__ == "__main__":
    main()
