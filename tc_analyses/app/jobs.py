"""Job folders (one trace per process, ``dfcompass record`` of torchrun or mp.spawn): ``analyze
JOB/`` and ``report JOB/``, every process trace a Dask task (:mod:`tc_analyses.cluster`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from tc_analyses.inputs import Progress, no_progress


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
