"""Verified plans: predicted against measured, on three programs of different shapes.

For each graph program (tracer/workloads/graph_programs.py: CNN training, transformer inference, a
branchy MLP): record a sequential baseline, plan it on two pinned CPU lanes (``cpu:0,cpu:1``), then
re-run it with ``dfcompass verify`` under that plan and, right after, under the one-lane plan (the
sequential sanity case, predicted 1.00x). Each round pairs the two re-runs, so the measured speedup
is a ratio of runs made side by side; rounds repeat the pair.

Reported per program: predicted and measured speedup, the plan's step error (predicted makespan
against the measured median step, before any refit) and the refit's error on held-out steps.
Goals: within 20% before refit, within 10% after. Also measured: the thread hand-over latency that
the link spec between two CPU lanes assumes (tc_analyses/perf/devices.py).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import log

from tc_analyses.app.place import place, verify_plan
from tc_analyses.app.record import run_recorded

PROGRAMS = ("cnn-train", "transformer-infer", "branchy-mlp")
STEPS = 12
BEFORE_TARGET, AFTER_TARGET = 0.20, 0.10


def _command(program: str) -> list[str]:
    return [sys.executable, "-m", "tracer.workloads.graph_programs", program, "--steps", str(STEPS)]


def handover_latency_us(samples: int = 200) -> dict[str, float]:
    """How long a thread waiting on an Event takes to run again once it is set."""
    latencies: list[int] = []
    for _ in range(samples):
        event, set_at = threading.Event(), [0]

        def wait() -> None:
            event.wait()
            latencies.append(time.perf_counter_ns() - set_at[0])

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.0003)
        set_at[0] = time.perf_counter_ns()
        event.set()
        thread.join()
    latencies.sort()
    return {"median_us": statistics.median(latencies) / 1e3, "p90_us": latencies[int(0.9 * len(latencies))] / 1e3}


def _program(program: str, work: Path, rounds: int) -> dict[str, Any]:
    base = work / program / "base"
    if run_recorded(base, _command(program), True, torch=False, stdout=sys.stderr).code != 0:
        raise RuntimeError(f"{program}: the baseline run failed")
    plan, _ = place(base, "cpu:0,cpu:1", work / program / "plan")
    one, _ = place(base, "cpu:0", work / program / "plan1")
    pairs = []
    for r in range(rounds):
        planned, _ = verify_plan(work / program / "plan", work / program / f"rerun{r}", _command(program), True, True)
        sequential, _ = verify_plan(work / program / "plan1", work / program / f"seq{r}", _command(program), False, True)
        pairs.append((planned, sequential))
        log(f"  {program}: round {r + 1}/{rounds}: plan {planned.measured_ns / 1e6:.2f} ms, "
            f"one lane {sequential.measured_ns / 1e6:.2f} ms")
    speedups = [s.measured_ns / p.measured_ns for p, s in pairs]
    before = [p.error for p, _ in pairs]
    after = [p.refit.error for p, _ in pairs if p.refit is not None]
    sanity = [s.error for _, s in pairs]
    return {
        "nodes": plan.tasks, "predicted_speedup": plan.speedup, "measured_speedups": speedups,
        "measured_speedup": statistics.median(speedups),
        "error_before_refit": statistics.median(before), "errors_before_refit": before,
        "error_after_refit": statistics.median(after) if after else None, "errors_after_refit": after,
        "heldout_replay_error": plan.heldout_replay_error,
        "sequential_predicted_speedup": one.speedup, "sequential_error": statistics.median(sanity),
        "pass_before": abs(statistics.median(before)) <= BEFORE_TARGET,
        "pass_after": bool(after) and abs(statistics.median(after)) <= AFTER_TARGET,
    }


def run(rounds: int = 2) -> dict[str, Any]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    results: dict[str, Any] = {"cores": cores, "rounds": rounds, "steps": STEPS,
                               "targets": {"before": BEFORE_TARGET, "after": AFTER_TARGET},
                               "handover": handover_latency_us(), "programs": {}}
    if cores < 2:
        results["notice"] = "this machine has one core: two CPU lanes cannot run in parallel here"
    with tempfile.TemporaryDirectory(prefix="dfc-verify-") as tmp:
        for program in PROGRAMS:
            results["programs"][program] = _program(program, Path(tmp), rounds)
    return results
