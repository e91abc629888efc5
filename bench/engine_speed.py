"""Headless analyses speed: build every generated state system (and pattern) of a trace, side by
side with ``babeltrace2 --output-format=dummy`` reading the same trace.

Target (issue 5): our engine at >= 0.5x babeltrace2's events/s. The engine interprets compiled
closures per event, so it runs on a 200k-event trace (the ratio is events/s against events/s,
so the trace size does not favour either side); the 5M-event trace would take minutes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _common import OUT_DIR, Sample, alternate, babeltrace2_dummy, log, timed
from tc_analyses.engine import build
from tc_analyses.export.tracecompass.facts import trace_facts
from tc_analyses.export.tracecompass.render import render_xml
from tracegen import ensure_trace

TARGET_RATIO = 0.5
EVENTS = 200_000


def run(rounds: int) -> dict[str, Any]:
    trace = OUT_DIR / "trace-200k"
    ensure_trace(trace, EVENTS)
    workdir = Path(tempfile.mkdtemp(prefix="dfcompass-engine-bench-"))
    files = []
    for name, data in render_xml(trace_facts(trace)).items():
        (workdir / name).write_bytes(data)
        files.append(workdir / name)
    log(f"engine speed: {len(files)} generated analyses on a {EVENTS:,}-event trace, {rounds} rounds")

    def engine() -> Sample:
        seconds, built = timed(lambda: build(trace, files))
        intervals = sum(len(i) for ss in built.systems.values() for _, i in ss.items())
        segments = sum(len(s) for s in built.segments.values())
        if not intervals or not segments:
            raise RuntimeError("the engine built nothing: the benchmark would measure no work")
        return Sample(seconds, {"intervals": intervals, "segments": segments, "analyses": len(built.systems)})

    timings = alternate({"babeltrace2 dummy": babeltrace2_dummy(trace), "engine": engine}, rounds, log)
    bt, ours = timings["babeltrace2 dummy"].best, timings["engine"].best
    ratio = (EVENTS / ours.seconds) / (EVENTS / bt.seconds)
    return {
        "events": EVENTS, "trace": str(trace), "analyses": [f.name for f in files],
        "cases": {name: {"best_s": t.best.seconds, "events_per_s": EVENTS / t.best.seconds, "all_s": t.all_seconds,
                         **t.best.extra} for name, t in timings.items()},
        "ratio": ratio, "target_ratio": TARGET_RATIO, "pass": ratio >= TARGET_RATIO,
        "per_event_us": ours.seconds / EVENTS * 1e6,
    }
