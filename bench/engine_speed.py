"""Headless analyses speed: build every generated state system (and pattern) of a trace, side by
side with ``babeltrace2 --output-format=dummy`` reading the same trace, and with the event-by-event
interpreter (``engine="events"``, the reference) building the same analyses.

Target (issues 5, 16): the engine at >= 0.5x babeltrace2's events/s. On a 200k-event trace: the
ratio is events/s against events/s, so the size does not favour either side (engine_scale.py
shows how it grows). The two engines must build the same intervals and segments.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

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

    def engine(kind: str) -> Callable[[], Sample]:
        def case() -> Sample:
            seconds, built = timed(lambda: build(trace, files, engine=kind))
            intervals = sum(len(ss.columns(p)[0]) for ss in built.systems.values() for p in ss.paths())
            segments = sum(len(s) for s in built.segments.values())
            if not intervals or not segments:
                raise RuntimeError("the engine built nothing: the benchmark would measure no work")
            columnar = sorted(a for a, how in built.engines.items() if how == "columns")
            return Sample(seconds, {"intervals": intervals, "segments": segments, "analyses": len(built.systems),
                                    "on_columns": columnar})
        return case

    timings = alternate({"babeltrace2 dummy": babeltrace2_dummy(trace), "engine": engine("auto"),
                         "event by event": engine("events")}, rounds, log)
    bt, ours, reference = (timings[k].best for k in ("babeltrace2 dummy", "engine", "event by event"))
    if (ours.extra["intervals"], ours.extra["segments"]) != (reference.extra["intervals"], reference.extra["segments"]):
        raise RuntimeError("the engines disagree: run tests/test_engine/test_engine_equivalence.py")
    ratio = (EVENTS / ours.seconds) / (EVENTS / bt.seconds)
    return {
        "speedup_over_event_by_event": reference.seconds / ours.seconds,
        "events": EVENTS, "trace": str(trace), "analyses": [f.name for f in files],
        "cases": {name: {"best_s": t.best.seconds, "events_per_s": EVENTS / t.best.seconds, "all_s": t.all_seconds,
                         **t.best.extra} for name, t in timings.items()},
        "ratio": ratio, "target_ratio": TARGET_RATIO, "pass": ratio >= TARGET_RATIO,
        "per_event_us": ours.seconds / EVENTS * 1e6,
    }
