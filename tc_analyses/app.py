"""What the ``dfcompass`` commands do, apart from parsing options and printing.

The command line (:mod:`tc_analyses.cli`) parses, calls one function here and echoes what it
returns. These functions read each trace once (:class:`~tc_analyses.inputs.TraceInputs`), run
the analyses and write the artifacts: placement plans and their views, HTML reports, the demo.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from tc_analyses.errors import AnalysisUnavailable, ConfigurationError, DfcompassError
from tc_analyses.inputs import JobInputs, Progress, TraceInputs, no_progress
from tc_analyses.registry import TRACE_KEYS
from tracer.job import JOB_ENV

if TYPE_CHECKING:
    from tc_analyses.analyses.placement.recommend import Recommendation
    from tc_analyses.analyses.result import Result
    from tc_analyses.export.html_report import Section
    from tc_analyses.export.sections import SeedSection
    from tc_analyses.model.window import Window

DEMO_DEVICES = "cpu,cuda:0=H100"  # the demo's placement question: this CPU plus one H100
DEMO_BATCHES = (2, 8, 32)  # the demo's roofline trajectory
Echo = Callable[[str], None]


# --------------------------------------------------------------------- import, build-analyses
def import_kineto(file: Path, output: Path, overwrite: bool, progress: Progress = no_progress) -> Any:
    """Convert a Kineto (PyTorch profiler) trace into a dfcompass trace; its ImportSummary. The
    importer's errors become dfcompass's (a bad FILE: exit 1; an existing OUTPUT: exit 2)."""
    from tc_analyses.errors import TraceError
    from tracer.ctf import TraceExistsError
    from tracer.importers import KinetoImportError
    from tracer.importers import import_kineto as convert

    try:
        # the bar counts the file's bytes over its two reads (a third, for flows, runs past the end)
        with progress(f"importing {file.name}", 2 * file.stat().st_size, "bytes") as advance:
            return convert(file, output, overwrite=overwrite, advance=advance)
    except KinetoImportError as exc:
        raise TraceError(exc.path, exc.problem) from None
    except TraceExistsError:
        raise ConfigurationError(f"{output}: already holds a trace (use --overwrite to replace it)") from None
    except OSError as exc:  # a missing or unreadable FILE, an unwritable OUTPUT
        raise TraceError(exc.filename if exc.filename is not None else file, exc.strerror or str(exc)) from None


def import_kineto_job(files: Sequence[Path], output: Path, overwrite: bool,
                      progress: Progress = no_progress, cluster: Mapping[str, Any] | None = None) -> list[Any]:
    """Import the Kineto files of one job (one per rank) as a job folder: OUTPUT/<name>/ each,
    named after its file. Their clocks are absolute wall time, so babeltrace2 and Trace Compass
    open the folder as one job; the rank each file names is kept in its trace's environment.
    With `cluster` (scheduler, workers, in_process) each file is a Dask task (tc_analyses.cluster)."""
    from tc_analyses.reader.job import unique_names

    names = unique_names([_stem(f) for f in files])
    if cluster is None or cluster.get("in_process"):
        return [import_kineto(f, output / name, overwrite, progress) for f, name in zip(files, names)]
    from tc_analyses.cluster import ImportTask, import_file, run_tasks

    tasks = [ImportTask(str(f.resolve()), str((output / name).resolve()), overwrite) for f, name in zip(files, names)]
    with progress("importing", len(tasks)) as advance:
        answers, _ = run_tasks(import_file, tasks, scheduler=cluster.get("scheduler"), workers=cluster.get("workers"),
                               in_process=False, advance=advance)
    for summary, error, code in answers:
        if summary is None:
            raise ConfigurationError(error) if code == 2 else DfcompassError(error)
    return [summary for summary, _, _ in answers]


def _stem(file: Path) -> str:
    name = file.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name or "trace"


@dataclass
class Built:
    """What ``build-analyses`` wrote, and what the XSD and the lint found wrong in it."""

    written: dict[str, Path]
    problems: list[str]
    xml_files: int


def build_analyses(trace: Path | None, output: Path, xsd: Path | None, validate: bool) -> Built:
    """Write the Trace Compass analyses for `trace` (or the whole catalogue) into `output`; with
    `validate`, check every XML file against Trace Compass's XSD (found from `xsd`) and the lint."""
    from tc_analyses.export.tracecompass import write_output
    from tc_analyses.export.tracecompass.validate import check_files, find_xsd

    schema = find_xsd(xsd) if validate else None  # a missing schema is reported before anything is written
    written = write_output(output, TraceInputs(trace).facts if trace is not None else None)
    xml = sorted(p for k, p in written.items() if k.startswith("xml/"))
    return Built(written, check_files(xml, schema) if schema is not None else [], len(xml))


def states(trace: Path, xml: Sequence[Path], path_glob: str, at: int | None,
           progress: Progress = no_progress) -> Iterator[Any]:
    """The intervals of the XML analyses' state systems whose path matches `path_glob` (at time
    `at`), as rows made one at a time (a state system can hold millions of intervals)."""
    from tc_analyses.analyses.states import iter_rows

    return iter_rows(TraceInputs(trace, progress).built(xml), path_glob, at)


def write_states_csv(rows: Iterable[Any], csv_out: Path) -> int:
    """Write `rows` as analysis,path,start,end,value (the analysis id tells apart the state systems
    of several analyses, such as latency.xml's patterns); the number of rows written."""
    import csv

    count = 0
    with open(csv_out, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["analysis", "path", "start", "end", "value"])
        for row in rows:
            writer.writerow([row.analysis, row.path, row.start, row.end, "" if row.value is None else row.value])
            count += 1
    return count


# ------------------------------------------------------------------------------------ analyze
def check_user_xml(xml: Sequence[Path], xsd: Path | None) -> None:
    """Schema-check the user's XML when Trace Compass's XSD can be found (--xsd or the environment)."""
    from tc_analyses.export.tracecompass.validate import ENV, find_xsd, load_schema, validate_xsd

    if not xml or (xsd is None and not os.environ.get(ENV, "").strip()):
        return  # no schema at hand: the engine still names the element and line of what it refuses
    schema = load_schema(find_xsd(xsd))
    problems = [problem for path in xml for problem in validate_xsd(path, schema)]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigurationError(f"{problems[0]}{more}")


@dataclass
class Analysis:
    """What ``dfcompass analyze`` found: the summary of the Trace Compass analyses and the sections."""

    summary: Any
    sections: list[SeedSection]

    def text(self, details: bool = True) -> str:
        """The summary, then each section in full; without `details`, one line per section (its first
        finding), so the page stays readable on real programs (a full page runs to hundreds of lines)."""
        from tc_analyses.export import reports
        from tc_analyses.export.sections import sections_headlines, sections_text

        summary = reports.summary_text(self.summary)
        return summary + (sections_text(self.sections) if details else sections_headlines(self.sections))

    def json(self) -> str:
        import json

        from tc_analyses.export import reports
        from tc_analyses.export.sections import sections_json

        if not self.sections:
            return reports.to_json(self.summary)
        return reports.to_json_document({**json.loads(reports.to_json(self.summary)),
                                         "sections": sections_json(self.sections)})


def analyze(inputs: TraceInputs, xml: Sequence[Path], top: int, section_keys: Sequence[str], peaks_device: str,
            plots: Path | None, progress: Progress = no_progress) -> Analysis:
    """The summary of the Trace Compass analyses (the generated ones unless `xml` names others),
    then the registered analyses named by `section_keys`."""
    from tc_analyses.analyses.summary import summarize

    summary = summarize(inputs.built(xml), top)
    sections = []
    if section_keys:
        with progress("seed analyses", len(section_keys)) as advance:
            sections = seed_sections(inputs, plots, tuple(section_keys), advance, _peaks_options(peaks_device))
    return Analysis(summary, sections)


def is_job_folder(path: Path) -> bool:
    """A folder of several process traces (a job), not one trace."""
    from tc_analyses.reader.metadata import find_traces

    return path.is_dir() and not (path / "metadata").is_file() and len(find_traces(path)) > 1


def analyze_job(job: Path, *, scheduler: str | None, workers: int | None, in_process: bool, top: int,
                sections: Sequence[str], peaks_device: str, cache: Path | None,
                progress: Progress = no_progress) -> Any:
    """``dfcompass analyze JOB/``: every process trace as a Dask task (tc_analyses.cluster); each
    trace's activity is kept as Parquet in `cache` (default ``JOB/.dfcompass-cache``)."""
    from tc_analyses.cluster import analyze_job as run

    return run(job, scheduler=scheduler, workers=workers, in_process=in_process, top=top, sections=sections,
               peaks_device=peaks_device, cache=_job_cache(job, cache), progress=progress)


def _job_cache(job: Path, cache: Path | None) -> Path:
    """Where a job's Parquet intermediate goes: `cache`, else inside the job folder."""
    return cache if cache is not None else job / ".dfcompass-cache"


def report_job(job: Path, output: Path, devices: str | None, peaks_device: str, *, scheduler: str | None,
               workers: int | None, in_process: bool, cache: Path | None, progress: Progress = no_progress) -> None:
    """``dfcompass report JOB/``: a section per process trace, each a Dask task (tc_analyses.cluster)."""
    from tc_analyses.cluster import report_job as run

    run(job, output, devices=devices, peaks_device=peaks_device, scheduler=scheduler, workers=workers,
        in_process=in_process, cache=_job_cache(job, cache), progress=progress)


def _peaks_options(peaks_device: str) -> dict[str, dict[str, Any]]:
    """The options of `analyze` and `report` by analysis: their --device goes to every option that
    takes a device's peaks; the others keep their defaults."""
    from tc_analyses.registry import ANALYSES

    return {a.key: {p.name: peaks_device for p in a.params if p.kind == "peaks-device"} for a in ANALYSES}


def seed_sections(inputs: TraceInputs, plot_dir: Path | None = None, keys: Sequence[str] = TRACE_KEYS,
                  advance: Callable[[int], None] = lambda n: None,
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> list[SeedSection]:
    """Run the analyses named by `keys` on one trace (`options` by key); plots go to `plot_dir`."""
    from tc_analyses.export.sections import SeedSection
    from tc_analyses.registry import entry

    foreign = None if inputs.is_dfcompass else AnalysisUnavailable(
        f"{inputs.path}: not a dfcompass trace (only the Trace Compass analyses run on other CTF traces)")
    sections = []
    for key in keys:
        analysis = entry(key)
        try:
            if foreign is not None:
                raise foreign
            result = analysis.run(inputs, (options or {}).get(key))
        except AnalysisUnavailable as exc:  # other errors (a broken trace, a bad option) stop the command
            sections.append(SeedSection(analysis, None, f"not available: {exc}\n"))
        else:
            plots = analysis.plots(result, plot_dir) if plot_dir is not None else []
            sections.append(SeedSection(analysis, result, analysis.text(result), plots))
        advance(1)
    return sections


@dataclass
class Ran:
    """What one analysis command gave: its text report and its JSON document."""

    text: str
    json: dict[str, Any]


def run_analysis(key: str, traces: Sequence[Path], options: dict[str, Any], output: Path | None,
                 labels: str | None = None, axis: str = "batch", progress: Progress = no_progress,
                 window: Window | None = None, cluster: Mapping[str, Any] | None = None) -> Ran:
    """``dfcompass <key> TRACE...``: one registered analysis on each trace (restricted to `window`),
    with the trajectory across them when there are several; its plots and other files go to `output`.
    A job analysis runs its per-process work on the Dask cluster `cluster` describes (scheduler,
    workers, in_process: tc_analyses.cluster.job_map), in this process when it is None."""
    from tc_analyses.analyses.labels import default_labels
    from tc_analyses.registry import entry

    analysis = entry(key)
    names = default_labels([str(t) for t in traces], labels)
    results = []
    with progress(key, len(traces) if len(traces) > 1 else None) as advance:
        for trace in traces:
            if analysis.job:
                from tc_analyses.cluster import job_map

                with job_map(**(cluster or {"scheduler": None, "workers": None, "in_process": True})) as map_tasks:
                    results.append(analysis.run(JobInputs(trace, progress, map_tasks), options))
            else:
                results.append(analysis.run(TraceInputs(trace, progress, window), options))
            advance(1)
    if len(results) == 1:
        written = analysis.artifacts(results[0], output) if output is not None else []
        ran = Ran(analysis.text(results[0]), results[0].to_json())
    else:
        trajectory = analysis.run_trajectory(list(zip(names, results)), axis, options)
        written = []
        if output is not None:
            written = analysis.artifacts(trajectory, output)
            for label, result in zip(names, results):
                written += analysis.artifacts(result, output / label)
        ran = Ran("\n".join(analysis.text(r) for r in results) + "\n" + analysis.text(trajectory),
                  {"runs": [r.to_json() for r in results], "trajectory": trajectory.to_json()})
    if written:
        ran.text += "plots: " + ", ".join(str(p.resolve()) for p in written) + "\n"
    if output is not None and analysis.artifacts_note:
        ran.text += f"{analysis.artifacts_note}: {output.resolve()}\n"
    return ran


def diff(control: Path, test: Path, window: Window | None, top: int, output: Path | None,
         progress: Progress = no_progress) -> tuple[Result, str]:
    """``dfcompass diff CONTROL TEST``: the diff and its text report; its plot goes to `output`."""
    from tc_analyses.analyses import trace_diff
    from tc_analyses.export import diff_report

    result = trace_diff.run(TraceInputs(control, progress, window), TraceInputs(test, progress, window))
    text = diff_report.text(result, top)
    if output is not None:
        text += "plots: " + ", ".join(str(p.resolve()) for p in diff_report.plots(result, output)) + "\n"
    return result, text


# ---------------------------------------------------------------------------------- placement
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
    graph = trace = activity = None
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
        problem = problem_from_trace(activity, graph, parsed, links)
    elif input_path.is_file():
        if links_from is not None:
            raise ConfigurationError("--links-from: a graph file sets its own links (graph.links); give a trace")
        problem = problem_from_graph_file(input_path, parsed)
    else:
        raise ConfigurationError(f"{input_path}: no such trace directory or graph file")
    result, predicted = recommend(problem, str(input_path), graph, activity, algorithm, notices, kind_text)
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


def verify_plan(plan_path: Path, output: Path, command: list[str], refit: bool, overwrite: bool) -> tuple[Any, str]:
    """Re-run `command` under the plan (a plan.json, or the folder recommend-placement wrote) into
    OUTPUT/trace and compare: OUTPUT/{verify.txt, verify.json, verify.png, verify.svg}."""
    import json

    from tc_analyses.analyses.placement.verify import verify
    from tc_analyses.export import verify_report
    from tracer.graph_program import PLAN_ENV, Plan, PlanError, plan_file_in, read_plan_file

    plan_file = plan_file_in(plan_path) if plan_path.is_dir() else plan_path
    try:
        plan = read_plan_file(plan_file)
    except (OSError, EOFError) as exc:
        raise ConfigurationError(f"{plan_file}: cannot read the plan ({getattr(exc, 'strerror', None) or exc})") from None
    except ValueError as exc:
        raise ConfigurationError(f"{plan_file}: not JSON ({exc})") from None
    try:  # what the program will read, checked before it runs
        Plan.load(plan_file)
    except PlanError as exc:
        raise ConfigurationError(str(exc)) from None
    if not isinstance(plan.get("predicted_makespan_ns"), int):
        raise ConfigurationError(f"{plan_file}: not a placement plan (no predicted_makespan_ns)")
    trace = output / "trace"
    # The program's output goes to stderr: stdout carries only the comparison (--format json).
    code = run_recorded(trace, command, overwrite, torch=False, extra_env={PLAN_ENV: str(plan_file.resolve())},
                        stdout=_stderr_file()).code
    if code != 0:
        raise DfcompassError(f"{' '.join(command)}: exited with code {code} under the plan; its trace is in {trace}")
    inputs = TraceInputs(trace)
    result = verify(plan, str(plan_file), inputs.activity, inputs.graph, refit)
    text = verify_report.text(result)
    (output / "verify.txt").write_text(text, encoding="utf-8")
    (output / "verify.json").write_text(verify_report.to_json(result), encoding="utf-8")
    verify_report.plots(result, output)
    return result, text


# ------------------------------------------------------------------------------------- report
def report_section(inputs: TraceInputs, work: Path, devices: str | None, peaks_device: str = "cpu",
                   progress: Progress = no_progress) -> tuple[Section, list[SeedSection]]:
    """The report section of one trace (info, analyze summary, the seed analyses with their plots,
    placement) and the seed sections themselves."""
    from tc_analyses.export import reports
    from tc_analyses.export.html_report import Block, Section, inline_svg
    section = Section(str(inputs.path))
    section.blocks.append(Block("Trace", reports.info_text(inputs.info)))
    section.blocks.append(Block("Headless analyses (busy, top nodes, memory)", reports.summary_text(inputs.summary())))
    with progress(f"seed analyses of {inputs.path.name}", len(TRACE_KEYS)) as advance:
        seeds = seed_sections(inputs, work, TRACE_KEYS, advance, _peaks_options(peaks_device))
    for seed in seeds:
        svg = next((p for p in seed.plots if p.suffix == ".svg"), None)
        section.blocks.append(Block(seed.title, seed.text, inline_svg(svg.read_text()) if svg else ""))
    if devices:
        _, text = place(inputs.path, devices, work / "placement", inputs)
        section.blocks.append(Block(f"Placement on {devices}", text))
    return section, seeds


def trajectory_section(runs: Sequence[TraceInputs], labels: Sequence[str], axis: str, peaks_device: str,
                       work: Path) -> Section:
    """The trajectories across the traces of every analysis that has one (roofline, runtime
    overhead...), for the traces that can feed it."""
    from tc_analyses.export.html_report import Block, Section, inline_svg
    from tc_analyses.registry import ANALYSES

    section = Section(f"Trajectory over {axis}: " + ", ".join(labels))
    missing = []
    for analysis in (a for a in ANALYSES if a.trajectory):
        options = _peaks_options(peaks_device).get(analysis.key)
        results = []
        for label, inputs in zip(labels, runs):
            try:
                results.append((label, analysis.run(inputs, options)))
            except AnalysisUnavailable as exc:
                missing.append(f"{analysis.title} of {label}: {exc}")
        if len(results) >= 2:
            trajectory = analysis.run_trajectory(results, axis, options)
            svg = next((p for p in analysis.plots(trajectory, work) if p.suffix == ".svg"), None)
            section.blocks.append(Block(f"{analysis.title}: trajectory", analysis.text(trajectory),
                                        inline_svg(svg.read_text()) if svg else ""))
    if missing:
        section.blocks.append(Block("Not in the trajectories", "\n".join(missing) + "\n"))
    return section


def report(traces: Sequence[Path], output: Path, devices: str | None, labels: str | None, axis: str,
           peaks_device: str, progress: Progress = no_progress, title: str = "dfcompass report") -> None:
    """One static HTML page with a section per trace, led by their trajectories when there are several."""
    from tc_analyses.analyses.labels import default_labels
    from tc_analyses.export.html_report import render

    names = default_labels([str(t) for t in traces], labels)
    runs = [TraceInputs(trace, progress) for trace in traces]
    with tempfile.TemporaryDirectory(prefix="dfcompass-report-") as tmp:
        sections = []
        for n, inputs in enumerate(runs):
            folder = Path(tmp) / str(n)
            folder.mkdir(parents=True)
            sections.append(report_section(inputs, folder, devices, peaks_device, progress)[0])
        if len(runs) >= 2:
            folder = Path(tmp) / "trajectory"
            folder.mkdir()
            sections.insert(0, trajectory_section(runs, names, axis, peaks_device, folder))
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render(title, sections), encoding="utf-8")


# ---------------------------------------------------------------------------------- recording
def _package_root() -> str:
    import tracer

    return str(Path(tracer.__file__).resolve().parent.parent)


@dataclass
class Recorded:
    """What ``dfcompass record`` left: the program's exit code and the job's process traces."""

    code: int
    job: Path
    traces: list[Any]  # tc_analyses.reader.job.ProcessTrace, one per recorded process

    def warning(self) -> str | None:
        """Why the user should doubt this job: nothing recorded at all, or no node anywhere."""
        if any(t.has_nodes() for t in self.traces):
            return None
        return (f"{self.job}: {len(self.traces)} process trace(s) but no dataflow node in any: if the work ran "
                "in child processes, they were not recorded (not Python, started with a cleared environment, "
                "or DFCOMPASS_FOLLOW=0)")


def run_recorded(output: Path, command: list[str], overwrite: bool, torch: bool = True,
                 extra_env: Mapping[str, str] | None = None, stdout: Any = None) -> Recorded:
    """Run `command` with dfcompass recording the job into the folder `output`.

    Every Python process of the job writes ``output/<host>-<pid>/`` (tracer/job.py). `torch=False`
    leaves PyTorch's profiler off (programs that record their own nodes, such as graph programs,
    would otherwise get every aten op twice); `extra_env` is added to the environment; `stdout`
    redirects the program's standard output (None: inherited)."""
    from tc_analyses.reader.job import job_traces
    from tracer import job
    from tracer.clock import OFFSET_ENV, measure_wall_offset_ns

    old = job_traces(output) if output.is_dir() else []
    if old and not overwrite:
        raise ConfigurationError(f"{output}: already holds a trace (use --overwrite to replace it)")
    for trace in old:  # only trace folders go: anything else the user keeps there stays
        shutil.rmtree(trace.path)
    if command[0].endswith(".py"):
        command = [sys.executable, *command]
    elif command[0] in ("python", "python3"):  # the Python dfcompass runs on (its venv), not PATH's
        command = [sys.executable, *command[1:]]
    autostart = str(Path(_package_root()) / "tracer" / "_autostart")
    env = dict(os.environ)
    env[job.JOB_ENV] = str(output.resolve())
    env[OFFSET_ENV] = str(measure_wall_offset_ns())  # one time base for the processes of this host
    if not torch:
        env[job.TORCH_ENV] = "0"  # else the user's own DFCOMPASS_TORCH stands
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [autostart, _package_root(), env.get("PYTHONPATH")]))
    from tc_analyses.child_process import run_child

    try:
        code = run_child(command, env, stdout)
    except FileNotFoundError:
        raise ConfigurationError(f"{command[0]}: command not found") from None
    traces = job_traces(output) if output.is_dir() else []
    if not traces:
        raise DfcompassError(f"{output}: no trace was written: '{command[0]}' did not start a Python "
                             "interpreter that could import dfcompass's tracer")
    return Recorded(code, output, traces)


def record_torch_workload(trace: Path, args: list[str]) -> int:
    """Record the embedded torch workload into `trace` (it records itself); its exit code."""
    return _record_workload("torch", "tracer.workloads.torch_models", trace, args,
                            "the torch demo workload needs torch (pip install torch==2.13.0); "
                            "or run: dfcompass demo --workload pipeline")


def record_tf_workload(trace: Path, args: list[str]) -> int:
    """Record the embedded Keras CNN into `trace` (it records itself with TFRecorder); its exit code."""
    return _record_workload("tensorflow", "tracer.workloads.tf_models", trace, args,
                            "the TensorFlow demo workload needs tensorflow: pip install -e '.[tf]'")


def _record_workload(package: str, module: str, trace: Path, args: list[str], missing: str) -> int:
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise ConfigurationError(missing)
    env = dict(os.environ)
    env.pop(JOB_ENV, None)  # the workload records itself: no autostarted session beside it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", module, "--out", str(trace), "--overwrite", *args]
    return subprocess.run(command, env=env).returncode


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


# --------------------------------------------------------------------------------------- demo
def demo(output: Path, workload: str, steps: int | None, echo: Echo, progress: Progress = no_progress,
         framework: str = "torch") -> None:
    """Record an embedded workload into OUTPUT/trace, then run the whole pipeline on it: info,
    Trace Compass analyses and their headless summary, placement, and one HTML report."""
    from tc_analyses.export import reports
    from tc_analyses.export.html_report import Block, Section, render
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
    main_section, seeds = report_section(inputs, output / "report", None, progress=progress)
    main_section.blocks.append(Block(f"Placement on {DEMO_DEVICES}", plan_text))
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
    (output / "report.html").write_text(render("dfcompass demo report", sections), encoding="utf-8")
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
        _, text = verify_plan(output / "plan", output / "rerun", command, True, True)
        advance(1)
    echo(f"\na plan verified on this machine: {DEMO_PROGRAM} on {DEMO_LANES} (dfcompass verify):\n\n")
    echo("\n".join(text.splitlines()[:7]) + f"\n  ... per step and per node in {output / 'rerun' / 'verify.txt'}\n")
    return text
