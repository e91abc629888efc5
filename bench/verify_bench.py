"""Verified plans: measured against predicted, on three programs of different shapes.

For each graph program of bench/verify_programs.py (an image pipeline, a map-reduce of matrix
products, a chain with two heavy branches: programs no test uses), record a sequential baseline
(``dfcompass record`` stores the machine's calibration with it: hand-over and lane contention),
plan it on two pinned CPU lanes (``cpu:0,cpu:1``) and on one (``cpu:0``, the sequential sanity
case, predicted 1.00x), then run ``dfcompass verify`` on each: rounds under the recorded placement
and under the plan, interleaved, the speedup the median of the pairs' ratios with a bootstrap
interval (tc_analyses/analyses/placement/verify.py). Each verify is repeated `repeats` times, alone
and, with `burner`, while a bounded CPU burner (one process spinning on one core) runs beside it.
The plan and its range are made once, from the recording on the quiet machine: the range must hold
the burner's runs too.

Reported per program: predicted and measured speedup (per verify), how often the printed range holds
the measured median (and overlaps its interval), the one-lane plan's measured speedup and interval,
the plan's step error (the step its report printed against the median plan round, before any refit)
and the refit's error on held-out steps. Goals: the range holds >= 90% of the verifies, alone and
beside the burner; the one-lane plan within 1.00x +- 10%; step error within 20% before refit, 10%
after. Also reported: the calibration the recordings stored.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import log

from tc_analyses.app.place import place, verify_plan
from tc_analyses.app.record import run_recorded

PROGRAMS = ("image-pipeline", "map-reduce", "heavy-branches")
STEPS = 12
BEFORE_TARGET, AFTER_TARGET = 0.20, 0.10
_PROGRAMS_FILE = Path(__file__).with_name("verify_programs.py")


def _command(program: str) -> list[str]:
    return [sys.executable, str(_PROGRAMS_FILE), program, "--steps", str(STEPS)]


class _Burner:
    """A process spinning on one core for at most `limit_s` seconds (killed on exit, by its own handle)."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "_Burner":
        spin = f"import time\nend = time.monotonic() + {self.limit_s}\nwhile time.monotonic() < end: pass"
        self.process = subprocess.Popen([sys.executable, "-c", spin])
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def _verify(plan: Path, out: Path, program: str, refit: bool, pairs: tuple[int, int], burner_s: float | None) -> Any:
    def quiet(line: str) -> None:
        if "pairs:" in line:
            log(f"    {program}: {line.removeprefix('verify: ')}")

    with _Burner(burner_s) if burner_s else contextlib.nullcontext():
        result, _ = verify_plan(plan, out, _command(program), refit, True, pairs[0], pairs[1], quiet)
    return result


def _program(program: str, work: Path, repeats: int, pairs: tuple[int, int], burner_s: float | None) -> dict[str, Any]:
    base = work / program / "base"
    if run_recorded(base, _command(program), True, torch=False, stdout=sys.stderr).code != 0:
        raise RuntimeError(f"{program}: the baseline run failed")
    plan, _ = place(base, "cpu:0,cpu:1", work / program / "plan")
    one, _ = place(base, "cpu:0", work / program / "plan1")
    calibration = json.loads((base / "calibration.json").read_text()) if (base / "calibration.json").is_file() else None
    out: dict[str, Any] = {"nodes": plan.tasks, "predicted_speedup": plan.speedup, "calibration": calibration,
                           "speedup_range": list(plan.speedup_range) if plan.speedup_range else None,
                           "heldout_replay_error": plan.heldout_replay_error,
                           "sequential_predicted_speedup": one.speedup}
    conditions = [("alone", None)] + ([("burner", burner_s)] if burner_s else [])
    for condition, burn in conditions:
        verified = []
        for r in range(repeats):
            v = _verify(work / program / "plan", work / program / f"{condition}{r}", program, True, pairs, burn)
            rounds = v.rounds
            log(f"  {program} ({condition}) {r + 1}/{repeats}: {rounds.speedup:.2f}x ({rounds.ci[0]:.2f}-"
                f"{rounds.ci[1]:.2f}x, {len(rounds.ratios)} pairs), predicted {plan.speedup:.2f}x: "
                f"{'inside' if rounds.in_range else 'OUTSIDE'} the range")
            verified.append(v)
        sanity = _verify(work / program / "plan1", work / program / f"{condition}-seq", program, False, pairs, burn)
        s = sanity.rounds
        log(f"  {program} ({condition}): one-lane plan {s.speedup:.2f}x ({s.ci[0]:.2f}-{s.ci[1]:.2f}x)")
        out[condition] = {
            "measured_speedups": [v.rounds.speedup for v in verified],
            "intervals": [list(v.rounds.ci) for v in verified],
            "pairs": [len(v.rounds.ratios) for v in verified],
            "inside_range": sum(bool(v.rounds.in_range) for v in verified),
            "overlapping_range": sum(bool(v.rounds.overlaps) for v in verified),
            "verifies": len(verified),
            "loads": [statistics.median(r.load_before for r in v.rounds.rounds) for v in verified],
            "errors_before_refit": [v.error for v in verified],
            "errors_after_refit": [v.refit.error for v in verified if v.refit is not None],
            "sequential_speedup": s.speedup, "sequential_interval": list(s.ci),
            "sequential_within_10pct": 0.9 <= s.speedup <= 1.1, "sequential_error": sanity.error,
        }
    alone = out["alone"]
    before, after = alone["errors_before_refit"], alone["errors_after_refit"]
    # the keys bench/run.py reads (verify_rows): the verifies run alone
    out.update(measured_speedups=alone["measured_speedups"], measured_speedup=statistics.median(alone["measured_speedups"]),
               error_before_refit=statistics.median(before), errors_before_refit=before,
               error_after_refit=statistics.median(after) if after else None, errors_after_refit=after,
               sequential_error=alone["sequential_error"],
               pass_before=abs(statistics.median(before)) <= BEFORE_TARGET,
               pass_after=bool(after) and abs(statistics.median(after)) <= AFTER_TARGET)
    return out


def run(repeats: int = 2, programs: tuple[str, ...] = PROGRAMS, pairs: tuple[int, int] = (5, 15),
        burner_s: float | None = 900.0) -> dict[str, Any]:
    """`repeats` verifies of each program's plan (each `pairs` = (at least, at most) pairs of rounds),
    alone and, unless `burner_s` is None, beside a CPU burner bounded to `burner_s` seconds a verify."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    results: dict[str, Any] = {"cores": cores, "rounds": repeats, "steps": STEPS, "pairs": list(pairs),
                               "targets": {"before": BEFORE_TARGET, "after": AFTER_TARGET}, "programs": {}}
    if cores < 2:
        results["notice"] = "this machine has one core: two CPU lanes cannot run in parallel here"
    with tempfile.TemporaryDirectory(prefix="dfc-verify-") as tmp:
        for program in programs:
            results["programs"][program] = _program(program, Path(tmp), repeats, pairs, burner_s)
    return results


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pairs", default="5,15", help="at least,at most pairs of rounds a verify")
    parser.add_argument("--no-burner", action="store_true")
    args = parser.parse_args()
    low, high = (int(x) for x in args.pairs.split(","))
    print(json.dumps(run(args.repeats, tuple(args.programs.split(",")), (low, high),
                         None if args.no_burner else 900.0), indent=2))


if __name__ == "__main__":
    main()
