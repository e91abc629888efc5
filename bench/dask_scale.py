"""`dfcompass analyze JOB/` on Dask as the job grows: N = 1, 2, 4, 8 and 16 rank traces of 1M events
each (bench/tracegen.py's trace, hard-linked once per rank), on a LocalCluster of 1 worker and of
2 workers (this machine's cores), with a fresh Parquet cache each run. Each task is `analyze
--no-sections` of its trace (every generated Trace Compass analysis and the summary, about 5 s a
trace here): the graph sections (roofline, parallelism) take about 30 s and 1.8 GB on a trace of
333 k node runs, which would make the sweep last an hour without telling more about the scaling.

Reported per (N, workers): wall time (cluster start-up included), the peak RSS of the busiest
worker (each worker's own ru_maxrss, as its tasks report it) and the speedup from 1 to 2 workers.

Beyond the cores, a model: T(N, W) = start-up + ceil(N / W) x t_trace, fitted (least squares) on
the 1-worker runs only and checked against the 2-worker runs it did not see; the table gives its
error there, then what it predicts for 4, 8 and 16 workers with as many cores.

Against HTA (traceinsight 0.6.1 from ``DFCOMPASS_HTA_PYTHON``, skipped without it) on the same
job as Kineto JSON: N = 1, 2 and 4 ranks, each the shared nccl trace repeated 25 times (about 1M
events, bench/kineto_scale.py) with its ``distributedInfo`` rank set. dfcompass: ``import-kineto``
of the N files into a job folder, then ``analyze JOB --section breakdown`` on 2 workers (every
generated Trace Compass analysis too); HTA: ``TraceAnalysis`` of the folder and its temporal
breakdown, in one process. Time, and peak RSS (dfcompass: the import's and the busiest worker's).
"""

from __future__ import annotations

import gzip
import math
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from _common import OUT_DIR, log, run_child
from kineto_scale import HTA, scaled_file
from tc_analyses.cluster import analyze_job
from tracegen import ensure_trace

RANKS = (1, 2, 4, 8, 16)
WORKERS = (1, 2)
EVENTS = 1_000_000


def _job(base: Path, ranks: int) -> Path:
    """A job folder of `ranks` copies of `base` (hard links: no extra disk)."""
    job = OUT_DIR / f"dask-job-{ranks}"
    if job.is_dir() and len([p for p in job.iterdir() if p.is_dir()]) == ranks:
        return job
    shutil.rmtree(job, ignore_errors=True)
    for rank in range(ranks):
        folder = job / f"rank{rank}"
        folder.mkdir(parents=True)
        for file in base.iterdir():
            if file.is_file():
                os.link(file, folder / file.name)
    return job


def run() -> dict[str, Any]:
    base = OUT_DIR / f"trace-{EVENTS}"
    ensure_trace(base, EVENTS)
    rows = []
    for ranks in RANKS:
        job = _job(base, ranks)
        for workers in WORKERS:
            with tempfile.TemporaryDirectory(prefix="dfcompass-dask-bench-") as cache:
                done = analyze_job(job, workers=workers, sections=(), cache=Path(cache))
            if any(a.document is None for a in done.answers):
                raise RuntimeError(f"{job}: a trace failed: {[a.error for a in done.answers if a.error][:1]}")
            peak = max(a.peak_rss_mib for a in done.answers)
            rows.append({"ranks": ranks, "workers": workers, "seconds": done.seconds, "peak_worker_rss_mib": peak,
                         "events": ranks * EVENTS})
            log(f"  {ranks:>2} ranks, {workers} worker(s): {done.seconds:.1f} s, busiest worker {peak} MiB")
    for row in rows:
        if row["workers"] == 2:
            one = next(r for r in rows if r["ranks"] == row["ranks"] and r["workers"] == 1)
            row["speedup_from_1_worker"] = one["seconds"] / row["seconds"]
    return {"rows": rows, "model": _model(rows), "cores": os.cpu_count(), "trace_events": EVENTS, "hta": hta_job()}


HTA_RANKS = (1, 2, 4)


def _rank_files(ranks: int) -> list[Path]:
    """The ~1M-event nccl trace once per rank, its distributedInfo saying which rank it is."""
    source = OUT_DIR / "kineto-x25" / "scaled.json.gz"
    if not source.is_file():
        source.parent.mkdir(parents=True, exist_ok=True)
        scaled_file(25, source)
    folder = OUT_DIR / f"kineto-job-{ranks}"
    files = [folder / f"rank{r}.json.gz" for r in range(ranks)]
    if all(f.is_file() for f in files) and len(list(folder.iterdir())) == ranks:
        return files
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    text = gzip.decompress(source.read_bytes())
    info = re.compile(rb'("distributedInfo": \{"backend": "nccl", "rank": )0(, "world_size": )2')
    for rank, file in enumerate(files):
        body, found = info.subn(rb"\g<1>" + str(rank).encode() + rb"\g<2>" + str(ranks).encode(), text, count=1)
        if not found:
            raise RuntimeError(f"{source}: no distributedInfo to give a rank")
        file.write_bytes(gzip.compress(body, compresslevel=1, mtime=0))
    return files


def hta_job() -> dict[str, Any]:
    hta_python = os.environ.get("DFCOMPASS_HTA_PYTHON", "")
    if not (hta_python and Path(hta_python).is_file()):
        return {"skipped": "DFCOMPASS_HTA_PYTHON is not set to a Python with traceinsight 0.6.1"}
    dfcompass = str(Path(sys.executable).parent / "dfcompass")
    rows = []
    for ranks in HTA_RANKS:
        files = _rank_files(ranks)
        with tempfile.TemporaryDirectory(prefix="dfcompass-hta-job-") as tmp:
            job = Path(tmp) / "job"
            import_s, import_rss = run_child([dfcompass, "--no-progress", "import-kineto", *map(str, files), "-o", str(job)])
            if ranks == 1:  # one file gives a trace, not a job folder: make it a job of one
                single = Path(tmp) / "single"
                job.rename(single)
                job.mkdir()
                single.rename(job / "rank0")
            done = analyze_job(job, workers=2, sections=("breakdown",), cache=Path(tmp) / "cache")
            worker_rss = max(a.peak_rss_mib for a in done.answers)
            script = Path(tmp) / "hta_side.py"
            script.write_text(HTA)
            hta_s, hta_rss = run_child([hta_python, str(script), str(files[0].parent)])
        ours_s = import_s + done.seconds
        rows.append({"ranks": ranks, "import_s": import_s, "import_rss_mib": import_rss / 1024,
                     "analyze_s": done.seconds, "worker_rss_mib": worker_rss, "dfcompass_s": ours_s,
                     "hta_s": hta_s, "hta_rss_mib": hta_rss / 1024, "time_ratio": ours_s / hta_s,
                     "rss_ratio": max(import_rss / 1024, worker_rss) / (hta_rss / 1024)})
        log(f"  {ranks} Kineto rank(s): dfcompass {ours_s:.1f} s (import {import_s:.1f} s), HTA {hta_s:.1f} s, "
            f"{hta_rss / 1024:.0f} MiB")
    return {"rows": rows}


def _model(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """T = start-up + ceil(N / W) x t_trace: fitted on W = 1, checked on W = 2, then extrapolated."""
    fit = [r for r in rows if r["workers"] == 1]
    a = np.array([[1.0, r["ranks"]] for r in fit])
    startup, per_trace = np.linalg.lstsq(a, np.array([r["seconds"] for r in fit]), rcond=None)[0]

    def predict(ranks: int, workers: int) -> float:
        return float(startup + math.ceil(ranks / workers) * per_trace)

    held_out = [{"ranks": r["ranks"], "workers": r["workers"], "measured_s": r["seconds"],
                 "predicted_s": predict(r["ranks"], r["workers"]),
                 "error": predict(r["ranks"], r["workers"]) / r["seconds"] - 1} for r in rows if r["workers"] == 2]
    beyond = {workers: {"seconds_16_ranks": predict(16, workers), "speedup_16_ranks": predict(16, 1) / predict(16, workers)}
              for workers in (4, 8, 16)}
    return {"startup_s": float(startup), "per_trace_s": float(per_trace), "held_out": held_out, "beyond_the_cores": beyond}
