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
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from _common import OUT_DIR, log
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
    return {"rows": rows, "model": _model(rows), "cores": os.cpu_count(), "trace_events": EVENTS}


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
