"""``dfcompass import-kineto``: Kineto (PyTorch profiler) traces to dfcompass traces; the files
of a job's ranks as a job folder, each file a Dask task (:mod:`tc_analyses.cluster`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.inputs import Progress, no_progress


def import_kineto(file: Path, output: Path, overwrite: bool, progress: Progress = no_progress,
                  ctf_version: str | None = None) -> Any:
    """Convert a Kineto (PyTorch profiler) trace into a dfcompass trace; its ImportSummary. The
    importer's errors become dfcompass's (a bad FILE: exit 1; an existing OUTPUT: exit 2)."""
    from tc_analyses.errors import TraceError
    from tracer.ctf import TraceExistsError
    from tracer.importers import KinetoImportError
    from tracer.importers import import_kineto as convert

    if file.is_dir():  # the user's words for what it is, not the OS's "Is a directory"
        said = ("is a CTF trace: give it to analyze (or any analysis), not import-kineto"
                if (file / "metadata").is_file() else "is a folder; import-kineto takes Kineto files (.json or .json.gz)")
        raise TraceError(file, said)

    try:
        # the bar counts the file's bytes over its two reads (a third, for flows, runs past the end)
        with progress(f"importing {file.name}", 2 * file.stat().st_size, "bytes") as advance:
            return convert(file, output, overwrite=overwrite, advance=advance, ctf_version=ctf_version)
    except KinetoImportError as exc:
        raise TraceError(exc.path, exc.problem) from None
    except TraceExistsError:
        raise ConfigurationError(f"{output}: already holds a trace (use --overwrite to replace it)") from None
    except OSError as exc:  # a missing or unreadable FILE, an unwritable OUTPUT
        raise TraceError(exc.filename if exc.filename is not None else file, exc.strerror or str(exc)) from None


def import_kineto_job(files: Sequence[Path], output: Path, overwrite: bool, progress: Progress = no_progress,
                      cluster: Mapping[str, Any] | None = None, ctf_version: str | None = None) -> list[Any]:
    """Import the Kineto files of one job (one per rank) as a job folder: OUTPUT/<name>/ each,
    named after its file. Their clocks are absolute wall time, so babeltrace2 and Trace Compass
    open the folder as one job; the rank each file names is kept in its trace's environment.
    With `cluster` (scheduler, workers, in_process) each file is a Dask task (tc_analyses.cluster)."""
    from tc_analyses.reader.job import unique_names

    names = unique_names([_stem(f) for f in files])
    if cluster is None or cluster.get("in_process"):
        return [import_kineto(f, output / name, overwrite, progress, ctf_version) for f, name in zip(files, names)]
    from tc_analyses.cluster import run_tasks

    tasks = [ImportTask(str(f.resolve()), str((output / name).resolve()), overwrite, ctf_version)
             for f, name in zip(files, names)]
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


# ------------------------------------------------------------------------ the task on a worker
@dataclass(frozen=True)
class ImportTask:
    """One Kineto file of a job to convert, as it is sent to a worker."""

    file: str
    output: str
    overwrite: bool
    ctf_version: str | None = None


def import_file(task: ImportTask) -> tuple[Any, str, int]:
    """Convert one Kineto file on a worker: (its ImportSummary, "", 0), or (None, the one-line
    error, its exit code)."""
    from tc_analyses.cluster import failure

    try:
        return import_kineto(Path(task.file), Path(task.output), task.overwrite, ctf_version=task.ctf_version), "", 0
    except Exception as exc:  # noqa: BLE001 (one line, never a worker's traceback)
        return None, failure(exc), exc.exit_code if isinstance(exc, DfcompassError) else 1
