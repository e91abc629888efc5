"""Recording a multi-process job: a 2-rank DDP training on gloo, untraced, under ``dfcompass record``
and under ``torch.profiler`` in each rank.

Cases, alternated round by round (:func:`_common.alternate`), each a fresh ``mp.spawn`` job of
``tracer.workloads.ddp`` (2 ranks, STEPS steps of a 64-256-64 MLP, one thread per rank):

* ``untraced``: the job alone;
* ``profiler``: each rank's loop under ``torch.profiler(record_shapes=True, profile_memory=True)``,
  exporting nothing (the per-process baseline of bench/torch_overhead.py);
* ``recorded``: ``dfcompass record -o tmp -- python -m tracer.workloads.ddp``: every process of
  the job followed, each rank's ops, collectives and memory written as they run.

Reported: the training loop's wall time (the slowest rank's, from the ranks' own timers, so
process start-up and torch import are outside it), and the job's wall time as a user sees it
(start-up, import and the final conversion at exit inside). Headline: the ratio of slowdowns of
the loop, (recorded / untraced) / (profiler / untraced). Every recorded job is checked: 2 ranks,
and every collective joined across them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import Sample, alternate, log

STEPS = 30
ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _job(kind: str, work: Path, counter: list[int]) -> Sample:
    counter[0] += 1
    timings = work / f"timings-{counter[0]}.jsonl"
    workload = ["-m", "tracer.workloads.ddp", "--ranks", "2", "--steps", str(STEPS), "--timings", str(timings)]
    job = work / f"job-{counter[0]}"
    if kind == "recorded":
        command = [sys.executable, "-m", "tc_analyses.cli", "record", "-o", str(job), "--", sys.executable, *workload]
    else:
        command = [sys.executable, *workload, *(["--profile"] if kind == "profiler" else [])]
    import time

    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{kind}: the job ran past 180 s: {str(exc.stderr)[-1500:]}") from None
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{kind}: the job failed: {done.stderr[-1500:]}")
    loops = [json.loads(line)["loop_s"] for line in timings.read_text().splitlines()]
    if len(loops) != 2:
        raise RuntimeError(f"{kind}: {len(loops)} ranks reported their loop time, not 2")
    if kind == "recorded":
        _check(job)
        shutil.rmtree(job)
    return Sample(max(loops), {"wall_s": wall})


def _check(job: Path) -> None:
    from tc_analyses.analyses.ranks import analyse
    from tc_analyses.inputs import JobInputs

    result = analyse(JobInputs(job))
    if [p.rank for p in result.ranks] != [0, 1] or result.mismatch or len(result.collectives) < STEPS:
        raise RuntimeError(f"{job}: the recorded job is incomplete ({len(result.collectives)} collectives joined, "
                           f"{result.mismatch or 'no mismatch'})")


def run(rounds: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dfcompass-job-bench-") as tmp:
        counter = [0]
        cases = {kind: (lambda kind=kind: _job(kind, Path(tmp), counter)) for kind in ("untraced", "profiler", "recorded")}
        log(f"job overhead: 2-rank DDP, {STEPS} steps, {rounds} alternating rounds")
        timings = alternate(cases, rounds, log)
    loop = {k: min(t.all_seconds) for k, t in timings.items()}
    wall = {k: min(s.extra["wall_s"] for s in t.samples) for k, t in timings.items()}
    return {
        "steps": STEPS, "rounds": rounds, "loop_s": loop, "wall_s": wall,
        "loop_slowdown": {k: loop[k] / loop["untraced"] for k in ("profiler", "recorded")},
        "wall_slowdown": {k: wall[k] / wall["untraced"] for k in ("profiler", "recorded")},
        "ratio_recorded_per_profiler": loop["recorded"] / loop["profiler"],
        "all_loop_s": {k: t.all_seconds for k, t in timings.items()},
    }


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=2))
