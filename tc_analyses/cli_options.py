"""The options several ``dfcompass`` commands share (output format, analysis window, job folders),
and the choice of one process of a job folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tc_analyses.cli_support import F

FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)


def window_options(command: F) -> F:
    """--window, --annotation and --include-last-step (tc_analyses.model.window), in that order."""
    command = click.option("--include-last-step", is_flag=True,
                           help="Keep the last step (left out by default when there are two or more, as HTA does: "
                                "a profiler's last step is usually cut short).")(command)
    command = click.option("--annotation", metavar="NAME",
                           help="Only the time inside the user annotations called NAME (record_function, NVTX; "
                                "a glob such as 'forward*' when no name matches exactly).")(command)
    return click.option("--window", metavar="STEPS|START:END",
                        help="Only these steps (ProfilerStep#2, 2, 2-4) or this time range from the trace's start "
                             "(12ms:30ms, 1.5s:2s).")(command)


def job_options(func: F | None = None, cache: bool = True) -> Any:
    """--scheduler, --workers, --in-process and --cache: how a job folder's traces are run
    (docs/jobs.md); ``@job_options(cache=False)`` leaves out --cache."""
    if func is None:
        return lambda f: job_options(f, cache)
    for option in reversed([
            click.option("--scheduler", metavar="ADDRESS", help="A job folder: run its traces on the Dask scheduler at "
                         "ADDRESS (tcp://HOST:PORT); default: a LocalCluster sized to this machine."),
            click.option("--workers", type=click.IntRange(1, 1024), help="A job folder: the LocalCluster's worker "
                         "processes (default: one per CPU)."),
            click.option("--in-process", is_flag=True, help="A job folder: its traces one after another here, without Dask."),
            click.option("--cache", type=click.Path(file_okay=False, path_type=Path), help="A job folder: where each "
                         "trace's activity is kept as Parquet (default: JOB/.dfcompass-cache).")][:4 if cache else 3]):
        func = option(func)
    return func


def process_option(command: F) -> F:
    """--process: which process of a job folder a one-trace command reads."""
    return click.option("--process", metavar="main|rank N|PID", default=None,
                        help="A job folder (dfcompass record of a program with workers or ranks): the process to "
                             "read; default: the main one (rank 0, else the process record started). "
                             "A PID or a process folder's name picks any other.")(command)


def one_process(path: Path, process: str | None) -> Path:
    """The trace a one-trace command reads at `path`: in a job folder the main process (or
    `process`), said in one line on stderr."""
    from tc_analyses.reader.job import choose_process

    chosen = choose_process(path, process)
    if chosen.notice:
        click.echo(f"dfcompass: {chosen.notice}", err=True)
    return chosen.path


def window_of(window: str | None, annotation: str | None, include_last_step: bool) -> Any:
    from tc_analyses.model.window import Window

    return Window(window, annotation, include_last_step)
