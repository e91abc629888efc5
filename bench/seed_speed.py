"""Seed analyses speed: read a trace and run every seed analysis (roofline, overhead, breakdown,
memory, parallelism), side by side with ``babeltrace2 --output-format=dummy`` reading the same trace.

The trace is a synthetic GPU training run (:mod:`gpu_tracegen`, generated, not recorded) so that
every analysis has work to do.

The ratio is events/s against events/s. Target (prior-art §5.2): a 10M-event trace fully analysed
in under 30 s on 2 cores, i.e. >= 0.33 M events/s, which is about 0.15x babeltrace2's dummy
sink on this machine; the table reports both.
"""

from __future__ import annotations

from typing import Any

from _common import OUT_DIR, Sample, alternate, babeltrace2_dummy, log, timed
from tc_analyses.app.analyze import seed_sections
from tc_analyses.inputs import TraceInputs
from tc_analyses.registry import TRACE_KEYS
from gpu_tracegen import ensure_gpu_trace

EVENTS = 1_000_000
TARGET_EVENTS_PER_S = 10_000_000 / 30


def run(rounds: int) -> dict[str, Any]:
    trace = OUT_DIR / "gpu-trace-1m"
    events = ensure_gpu_trace(trace, EVENTS)
    log(f"seed analyses speed: {len(TRACE_KEYS)} per-trace analyses on a {events:,}-event synthetic GPU trace, {rounds} rounds")

    def seeds() -> Sample:
        seconds, sections = timed(lambda: seed_sections(TraceInputs(trace)))
        available = [s.key for s in sections if s.available]
        if len(available) != len(TRACE_KEYS):
            raise RuntimeError(f"only {available} ran on the benchmark trace: it must feed every analysis")
        return Sample(seconds, {"available": available})

    timings = alternate({"babeltrace2 dummy": babeltrace2_dummy(trace), "seed analyses": seeds}, rounds, log)
    bt, ours = timings["babeltrace2 dummy"].best, timings["seed analyses"].best
    ours_rate = events / ours.seconds
    return {
        "events": events, "trace": str(trace),
        "cases": {name: {"best_s": t.best.seconds, "events_per_s": events / t.best.seconds, "all_s": t.all_seconds,
                         **t.best.extra} for name, t in timings.items()},
        "ratio": ours_rate / (events / bt.seconds), "target_events_per_s": TARGET_EVENTS_PER_S,
        "pass": ours_rate >= TARGET_EVENTS_PER_S,
    }
