"""Command-line start-up: ``dfcompass --help`` side by side with a bare Python start and with
``babeltrace2 --help``, so the ratio says what dfcompass adds to starting an interpreter.

The command line imports only click at start-up and each command loads numpy, networkx or scipy
when it runs; importing those at start-up made ``--help`` take 0.6 s here (3.5-4 s on a slower
machine) before the lazy imports. Target: under 0.5 s, i.e. a small multiple of a bare start; ``info /nonexistent`` within 1.2x
``--help`` (it took 10x when the report module loaded the placement optimiser first).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import Sample, alternate, log, timed

TARGET_S = 0.5
MISSING_PATH_TARGET = 1.2  # `info /nonexistent` against `--help`


def _command(argv: list[str], code: int = 0) -> Any:
    def case() -> Sample:
        seconds, done = timed(lambda: subprocess.run(argv, capture_output=True))
        if done.returncode != code:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.decode()[:200]}")
        return Sample(seconds)

    return case


def run(rounds: int) -> dict[str, Any]:
    dfcompass = Path(sys.executable).parent / "dfcompass"
    cases = {"python -c pass": _command([sys.executable, "-c", "pass"]),
             "dfcompass --help": _command([str(dfcompass), "--help"]),
             # a mistyped path must answer as fast as --help: nothing heavy loads before the check
             "dfcompass info /nonexistent": _command([str(dfcompass), "info", "/nonexistent"], 1),
             "babeltrace2 --help": _command(["babeltrace2", "--help"])}
    log(f"start-up: dfcompass --help against a bare Python start, {rounds} rounds")
    timings = alternate(cases, rounds, log)
    best = {name: t.best.seconds for name, t in timings.items()}
    return {"cases": {name: {"best_s": s, "all_s": timings[name].all_seconds} for name, s in best.items()},
            "ratio_python": best["dfcompass --help"] / best["python -c pass"],
            "ratio_babeltrace2": best["dfcompass --help"] / best["babeltrace2 --help"],
            "ratio_missing_path_to_help": best["dfcompass info /nonexistent"] / best["dfcompass --help"],
            "target_s": TARGET_S, "missing_path_target": MISSING_PATH_TARGET,
            "pass": best["dfcompass --help"] < TARGET_S
            and best["dfcompass info /nonexistent"] / best["dfcompass --help"] <= MISSING_PATH_TARGET}
