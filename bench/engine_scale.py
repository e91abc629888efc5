"""How `dfcompass analyze` grows with the trace: 100k, 1M and (with --big) 10M events, side by side
with ``babeltrace2 --output-format=dummy`` on the same traces.

Each trace (bench/tracegen.py: node begin/end and edges on 4 threads) is analysed by
``dfcompass analyze --no-sections`` (every generated analysis, the summary) in a fresh process, then
read by babeltrace2; up to 1M events also by the event-by-event engine (DFCOMPASS_ENGINE=events,
the reference the columnar engine is tested against). Wall time and peak RSS of each, events/s,
the ratio of our events/s to babeltrace2's, and how time and RSS grow from one size to the next.
One round each: at these sizes the run is long enough that noise is small next to the growth.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _common import OUT_DIR, log, run_child
from tracegen import ensure_trace

SIZES = (100_000, 1_000_000)
BIG = 10_000_000
REFERENCE_UP_TO = 1_000_000  # the event-by-event engine takes minutes beyond


def run(big: bool = False) -> dict[str, Any]:
    dfcompass = str(Path(sys.executable).parent / "dfcompass")
    rows = []
    for events in SIZES + ((BIG,) if big else ()):
        trace = OUT_DIR / f"trace-{events}"
        ensure_trace(trace, events)
        size = sum(p.stat().st_size for p in trace.iterdir())
        analyze = [dfcompass, "--no-progress", "analyze", str(trace), "--no-sections"]
        ours_s, ours_rss = run_child(analyze)
        bt_s, bt_rss = run_child(["babeltrace2", "--output-format=dummy", str(trace)])
        row = {"events": events, "trace_mb": size / 1e6, "analyze_s": ours_s, "analyze_rss_mib": ours_rss / 1024,
               "babeltrace2_s": bt_s, "babeltrace2_rss_mib": bt_rss / 1024,
               "analyze_events_per_s": events / ours_s, "ratio_to_babeltrace2": bt_s / ours_s,
               "rss_per_trace_size": ours_rss * 1024 / size}
        if events <= REFERENCE_UP_TO:
            ref_s, ref_rss = run_child(analyze, env={"DFCOMPASS_ENGINE": "events"})
            row.update(event_by_event_s=ref_s, event_by_event_rss_mib=ref_rss / 1024, speedup=ref_s / ours_s)
        if rows:
            before = rows[-1]
            row.update(time_growth=ours_s / before["analyze_s"], rss_growth=ours_rss / 1024 / before["analyze_rss_mib"],
                       size_growth=events / before["events"])
        log(f"  {events:,} events: analyze {ours_s:.1f} s / {ours_rss / 1024:.0f} MiB; babeltrace2 {bt_s:.2f} s"
            + (f"; event by event {row['event_by_event_s']:.1f} s" if "event_by_event_s" in row else ""))
        rows.append(row)
    return {"rows": rows}
