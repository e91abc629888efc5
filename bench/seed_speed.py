"""Seed analyses speed: read a trace and run every seed analysis (roofline, overhead, breakdown,
memory, parallelism), side by side with ``babeltrace2 --output-format=dummy`` reading the same trace.

The ratio is events/s against events/s. Target (prior-art §5.2): a 10M-event trace fully analysed
in under 30 s on 2 cores, i.e. >= 0.33 M events/s, which is about 0.15x babeltrace2's dummy
sink on this machine; the table reports both.
"""

from __future__ import annotations

import subprocess
from typing import Any

from _common import OUT_DIR, Sample, alternate, log, timed
from tc_analyses.export.sections import SECTIONS, load, seed_sections
from tracegen import ensure_trace

EVENTS = 1_000_000
TARGET_EVENTS_PER_S = 10_000_000 / 30


def run(rounds: int) -> dict[str, Any]:
    trace = OUT_DIR / "trace-1m"
    ensure_trace(trace, EVENTS)
    log(f"seed analyses speed: {len(SECTIONS)} analyses on a {EVENTS:,}-event trace, {rounds} rounds")

    def babeltrace2() -> Sample:
        seconds, done = timed(lambda: subprocess.run(["babeltrace2", "--output-format=dummy", str(trace)],
                                                     capture_output=True))
        if done.returncode != 0:
            raise RuntimeError(f"babeltrace2 failed: {done.stderr.decode()[:200]}")
        return Sample(seconds)

    def seeds() -> Sample:
        seconds, sections = timed(lambda: seed_sections(load(trace)))
        available = [s.key for s in sections if s.available]
        if not available:
            raise RuntimeError("no seed analysis ran: the benchmark would measure no work")
        return Sample(seconds, {"available": available})

    timings = alternate({"babeltrace2 dummy": babeltrace2, "seed analyses": seeds}, rounds, log)
    bt, ours = timings["babeltrace2 dummy"].best, timings["seed analyses"].best
    ours_rate = EVENTS / ours.seconds
    return {
        "events": EVENTS, "trace": str(trace),
        "cases": {name: {"best_s": t.best.seconds, "events_per_s": EVENTS / t.best.seconds, "all_s": t.all_seconds,
                         **t.best.extra} for name, t in timings.items()},
        "ratio": ours_rate / (EVENTS / bt.seconds), "target_events_per_s": TARGET_EVENTS_PER_S,
        "pass": ours_rate >= TARGET_EVENTS_PER_S,
    }
