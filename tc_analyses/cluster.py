"""A whole job analysed on Dask: one task per process trace, then a reduction across the ranks.

``dfcompass analyze JOB/`` runs :func:`run_trace` for every process trace of the job (its summary
and its seed analyses, as ``analyze TRACE`` gives them) as Dask tasks, and :class:`JobAnalysis`
puts the answers side by side and merges them (top nodes over the job). ``dfcompass report JOB/``
runs :func:`report_trace` the same way: each process's HTML section, plots inlined.

* **Where it runs.** By default on a ``LocalCluster`` this command starts and stops: one worker
  process per CPU, one thread each (the analyses hold the GIL), the machine's memory split
  between them. ``--scheduler tcp://HOST:PORT`` sends the tasks to a running cluster instead
  (``dask scheduler`` and ``dask worker`` processes, which must see the job's folder at the same
  path). ``--in-process`` runs the same tasks one after another in this process: the reference
  the tests hold the cluster to.
* **What crosses the wire.** To a worker: a :class:`TraceTask` (the trace's path and the options,
  a few hundred bytes). Back: the trace's ``analyze --format json`` document and its worker's
  peak RSS. No trace, interval or state system is ever sent: a worker reads its trace from the
  shared file system, and its memory is one trace's working set, never the job's.
* **The intermediate.** Each trace's activity (paired intervals) is kept as Parquet in the cache
  folder (default ``JOB/.dfcompass-cache``, :mod:`tc_analyses.model.activity_store`): written by
  the first run, read by every later one.
* **What the tasks run.** ``analyze`` and ``report``'s own per-trace work, from
  :mod:`tc_analyses.app.analyze` and :mod:`tc_analyses.app.report`; the commands that send work
  here (:mod:`tc_analyses.app.jobs`, :mod:`~tc_analyses.app.imports`, the job analyses of
  :mod:`~tc_analyses.app.analysis_commands`) are never imported back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import resource
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.inputs import Progress, TraceInputs, no_progress
from tc_analyses.reader.job import role_labels
from tracer.verbosity import verbose

T = TypeVar("T")
A = TypeVar("A")


@dataclass(frozen=True)
class TraceTask:
    """One process trace's work, as it is sent to a worker."""

    path: str
    cache: str | None
    top: int
    sections: tuple[str, ...]
    peaks_device: str


@dataclass(frozen=True)
class TraceAnswer:
    """What a worker sends back for one trace."""

    path: str
    document: dict[str, Any] | None  # the trace's analyze JSON; None when it failed
    error: str  # the one-line error when it failed
    peak_rss_mib: int  # of the worker process, so far
    activity_from: str  # "cache" or "trace"
    node_times: list[dict[str, Any]] = field(default_factory=list)  # every op's, not only the top ones


def failure(exc: BaseException) -> str:
    """What a worker sends back instead of its traceback: a dfcompass error names the file and
    its problem as it is; anything else says what it was, on one line."""
    text = " ".join(str(exc).split())
    return text if isinstance(exc, DfcompassError) else f"internal error: {type(exc).__name__}: {text}"


# every op of a trace: the job's top nodes add the ranks' figures, so a rank's own cut cannot be used
_ALL_NODES = 1_000_000_000


def run_trace(task: TraceTask) -> TraceAnswer:
    """The analyze result of one trace (this runs on a worker). Errors come back as text: a
    dfcompass error names the trace and its problem, and the client reports it as it is."""
    from tc_analyses.app.analyze import analyze

    document, error, source, node_times = None, "", "", []
    try:
        inputs = TraceInputs(task.path, cache=Path(task.cache) if task.cache else None)
        document = json.loads(analyze(inputs, (), _ALL_NODES, task.sections, task.peaks_device, None).json())
        # the top nodes are sorted already: the trace's own --top is their first rows
        node_times, document["top_nodes"] = document["top_nodes"], document["top_nodes"][:task.top]
        source = inputs.activity_from
    except Exception as exc:  # noqa: BLE001 (a worker's traceback must not reach the user's terminal)
        error = failure(exc)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return TraceAnswer(task.path, document, error, rss, source, node_times)


_ADDRESS = re.compile(r"(?:[a-z]+://)?(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A client of the cluster at `scheduler`, or of a LocalCluster of `workers` processes
    (default: one per CPU) started here and shut down on the way out."""
    from dask.distributed import Client, LocalCluster

    if scheduler:
        if not _ADDRESS.fullmatch(scheduler):  # said at once, not after the 10 s a connection may take
            raise ConfigurationError(f"--scheduler {scheduler}: not a scheduler address (tcp://HOST:PORT)")
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address Dask reads
            raise ConfigurationError(f"--scheduler {scheduler}: no Dask scheduler answers there "
                                     f"({' '.join(str(exc).split())})") from exc
        with client:
            yield client
        return
    count = workers or os.cpu_count() or 1
    # The tasks report their own errors; Dask's logs (a worker's heartbeat cut by the shutdown,
    # say) would only put tracebacks on the user's terminal, unless --verbose asks for them.
    with _quiet("distributed"):
        for attempt in range(START_ATTEMPTS):
            try:
                cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       memory_limit=_memory_per_worker(count),
                                       silence_logs=False if verbose() else logging.CRITICAL)
                break
            except RuntimeError as exc:  # "Nanny failed to start": a worker process died as it started
                if "Nanny failed to start" not in str(exc):
                    raise
                if attempt + 1 == START_ATTEMPTS:
                    raise DfcompassError(f"the local Dask cluster of {count} workers did not start, "
                                         f"{START_ATTEMPTS} times ({' '.join(str(exc).split()).rstrip('.')}: a worker process died "
                                         "while starting, out of memory or killed); --in-process runs the traces "
                                         "here, --workers fewer") from None
        with cluster, Client(cluster) as client:
            yield client


START_ATTEMPTS = 2  # a worker killed once as the cluster starts (the OOM killer) is tried again


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """`logger` silenced for the block (left alone with ``dfcompass --verbose``)."""
    if verbose():
        yield
        return
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _memory_per_worker(workers: int) -> int | str:
    """The machine's memory split between the workers (Dask's "auto" when it cannot be read)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "auto"
    return max(total // workers, 256 << 20)


@dataclass
class JobAnalysis:
    """The answers of a job's traces, in the job's order (by rank), and what they say together."""

    job: str
    labels: list[str]  # each process by its role: "rank 0 (pid 12)", "DataLoader worker (pid 14)"
    answers: list[TraceAnswer]
    workers: int  # how many workers ran the tasks (1 in process)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def documents(self) -> list[dict[str, Any]]:
        return [a.document for a in self.answers if a.document is not None]

    def top_nodes(self, top: int) -> list[dict[str, Any]]:
        """Every trace's nodes merged by op (counts and totals added, the longest kept), the first
        `top` by total time."""
        merged: dict[str, dict[str, Any]] = {}
        for answer in self.answers:
            for row in answer.node_times:
                into = merged.setdefault(row["op"], {"op": row["op"], "count": 0, "total_ns": 0, "max_ns": 0})
                into["count"] += row["count"]
                into["total_ns"] += row["total_ns"]
                into["max_ns"] = max(into["max_ns"], row["max_ns"])
        return sorted(merged.values(), key=lambda r: (-r["total_ns"], r["op"]))[:top]

    def to_json(self, top: int) -> dict[str, Any]:
        ranks = [{"label": label, "trace": a.path, **({"analysis": a.document} if a.document is not None
                                                       else {"error": a.error})}
                 for label, a in zip(self.labels, self.answers)]
        events = sum(d.get("events", 0) for d in self.documents())
        return {"job": self.job, "traces": len(self.answers), "events": events,
                "top_nodes": self.top_nodes(top), "ranks": ranks}

    def text(self, top: int) -> str:
        lines = [f"Job {self.job}: {len(self.answers)} process traces, analysed on {self.workers} "
                 f"worker{'s' if self.workers != 1 else ''} in {self.seconds:.1f} s", ""]
        width = max([18] + [len(label) for label in self.labels])
        lines.append(f"  {'process':<{width}} {'events':>12} {'span':>12} {'lost':>6}  busiest device")
        for label, a in zip(self.labels, self.answers):
            if a.document is None:
                said = "no op recorded (a launcher or a helper process)" if _ran_no_op(a.error) else f"failed: {a.error}"
                lines.append(f"  {label:<{width}} {said}")
                continue
            d = a.document
            busy = max((b for b in d.get("busy", []) if not b.get("queue")), key=lambda b: b["percent"], default=None)
            where = f"{busy['device']} {busy['percent']:.1f}% busy" if busy else "-"
            lines.append(f"  {label:<{width}} {d.get('events', 0):>12,} {d.get('span_ns', 0) / 1e6:>10.1f}ms "
                         f"{d.get('lost_events', 0):>6}  {where}")
        merged = self.top_nodes(top)
        if merged:
            lines += ["", "Top nodes over the job (time summed over the processes):"]
            lines += [f"  {r['op']:<48} {r['count']:>9,} runs {r['total_ns'] / 1e6:>12.3f} ms "
                      f"(longest {r['max_ns'] / 1e6:.3f} ms)" for r in merged]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


@contextlib.contextmanager
def streamed(function: Callable[[T], A], tasks: Sequence[T], *, scheduler: str | None, workers: int | None,
             in_process: bool, advance: Callable[[int], None]) -> Iterator[tuple[Iterator[A], int]]:
    """`function` over `tasks`, on Dask (see the module docstring) or here one after another: the
    answers in the tasks' order, each handed over as soon as it and those before it are done, and
    let go on the cluster then (the caller holds one at a time if it wants); and how many workers
    run them (1 in process)."""
    if in_process:
        yield _advancing((function(task) for task in tasks), advance), 1
        return
    with dask_client(scheduler, workers) as client:
        used = len(client.scheduler_info(n_workers=-1).get("workers", {})) or 1
        futures = client.map(function, list(tasks), pure=False)

        def in_order() -> Iterator[A]:
            for future in futures:
                answer: A = future.result()
                future.release()
                yield answer

        yield _advancing(in_order(), advance), used


def _advancing(answers: Iterator[A], advance: Callable[[int], None]) -> Iterator[A]:
    for answer in answers:
        advance(1)
        yield answer


def run_tasks(function: Callable[[T], A], tasks: Sequence[T], *, scheduler: str | None, workers: int | None,
              in_process: bool, advance: Callable[[int], None]) -> tuple[list[A], int]:
    """Every answer of :func:`streamed`, and how many workers made them (1 in process)."""
    with streamed(function, tasks, scheduler=scheduler, workers=workers, in_process=in_process,
                  advance=advance) as (answers, used):
        return list(answers), used


@contextlib.contextmanager
def job_map(scheduler: str | None, workers: int | None, in_process: bool
            ) -> Iterator[Callable[[Callable[[T], A], Sequence[T]], list[A]]]:
    """The ``map`` a job analysis (``dfcompass ranks``) runs its per-process work with: on the
    cluster (a LocalCluster by default, as long as the block lasts), or here with `in_process`."""
    from tc_analyses.inputs import map_here

    if in_process:
        yield map_here
        return
    with dask_client(scheduler, workers) as client:
        def on_dask(function: Callable[[T], A], items: Sequence[T]) -> list[A]:
            return list(client.gather(client.map(function, list(items), pure=False)))

        yield on_dask


def _ran_no_op(error: str) -> bool:
    """Whether a process's error is that it ran no op and holds nothing else (a torchrun launcher, a
    helper): no failure. One with GPU calls or memory events but no op is a rank that broke."""
    return ": no op was recorded (" in error and "a launcher such as torchrun" in error


def _processes(job: Path) -> list[Any]:
    from tc_analyses.reader.job import job_traces

    processes = job_traces(job)
    if not processes:
        raise ConfigurationError(f"{job}: no process traces in this folder")
    return processes


def analyze_job(job: Path, *, scheduler: str | None = None, workers: int | None = None, in_process: bool = False,
                top: int = 10, sections: Sequence[str] = (), peaks_device: str = "cpu", cache: Path | None = None,
                progress: Progress = no_progress) -> JobAnalysis:
    """Analyse every process trace of `job` (see the module docstring for where it runs)."""
    processes = _processes(job)
    # absolute paths: a worker of --scheduler may run in another folder
    tasks = [TraceTask(str(p.path.resolve()), str(cache.resolve()) if cache else None, top, tuple(sections),
                       peaks_device) for p in processes]
    began = time.perf_counter()
    with progress("traces", len(tasks)) as advance:
        answers, used = run_tasks(run_trace, tasks, scheduler=scheduler, workers=workers, in_process=in_process,
                                  advance=advance)
    analysis = JobAnalysis(str(job), role_labels(processes), answers, used, time.perf_counter() - began)
    failed = [a for a in answers if a.document is None]
    if len(failed) == len(answers):
        raise DfcompassError(f"{job}: no trace of the job could be analysed; the first: {failed[0].error}")
    analysis.notes += [f"{a.path}: not analysed: {a.error}" for a in failed if not _ran_no_op(a.error)]
    return analysis


# ----------------------------------------------------------------------------------- the report
@dataclass(frozen=True)
class ReportTask:
    """One process trace's section of the job's HTML report, as it is sent to a worker."""

    path: str
    label: str
    cache: str | None
    devices: str | None
    peaks_device: str


def report_trace(task: ReportTask) -> tuple[Any, list[Any]]:
    """The report section of one trace and its findings (this runs on a worker; its plots are drawn
    in a scratch folder there and inlined): a ``Section`` of text and SVG and a few ``Lead``s,
    which is all that goes back."""
    from tc_analyses.app.report import leads, report_section
    from tc_analyses.export.html_report import Block, Section

    anchor = re.sub(r"[^A-Za-z0-9]+", "-", task.label).strip("-") + "-"
    found = []
    try:
        inputs = TraceInputs(task.path, cache=Path(task.cache) if task.cache else None)
        with tempfile.TemporaryDirectory(prefix="dfcompass-report-") as work:
            section, seeds = report_section(inputs, Path(work), task.devices, task.peaks_device, anchor=anchor)
            found = leads(task.label, anchor, seeds)  # while the plots they show are there
    except Exception as exc:  # noqa: BLE001 (one line, never a worker's traceback)
        section = Section(task.path, [Block("Not analysed", failure(exc) + "\n")])
    section.title = _report_title(task)
    return section, found


def _report_title(task: ReportTask) -> str:
    return f"{task.label}: {task.path}"


def report_job(job: Path, output: Path, *, devices: str | None, peaks_device: str, scheduler: str | None = None,
               workers: int | None = None, in_process: bool = False, cache: Path | None = None,
               progress: Progress = no_progress) -> None:
    """``dfcompass report JOB/``: one HTML page with a section per process trace, each made by a
    Dask task and written out as soon as it comes back, in the job's order; the page opens on the
    findings of every process, ranked by the time at stake."""
    from tc_analyses.export.html_report import write_page

    processes = _processes(job)
    tasks = [ReportTask(str(p.path.resolve()), label, str(cache.resolve()) if cache else None, devices, peaks_device)
             for p, label in zip(processes, role_labels(processes))]
    output.parent.mkdir(parents=True, exist_ok=True)
    with progress("traces", len(tasks)) as advance, \
            streamed(report_trace, tasks, scheduler=scheduler, workers=workers, in_process=in_process,
                     advance=advance) as (answers, _):
        write_page(output, f"dfcompass report of the job {job} ({len(processes)} processes)",
                   [_report_title(t) for t in tasks], answers)
