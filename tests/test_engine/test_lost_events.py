"""Lost events reach the XML analyses as Trace Compass hands them over: one synthetic "Lost event" per
packet whose events_discarded grew, at the packet's begin time (clock offset applied), with the
fields "Lost events" and "duration" (to the packet's end)."""

from __future__ import annotations

from typing import Any

from tc_analyses.engine import build
from tc_analyses.engine.events import LOST_EVENT, iter_events
from tc_analyses.reader import read_trace
from tests.helpers import lossy_trace

COUNT_XML = """<tmfxml><stateProvider id="lost" version="1"><eventHandler eventName="Lost event"><stateChange>
<stateAttribute type="constant" value="lost"/><stateValue type="eventField" value="Lost events"/></stateChange>
</eventHandler></stateProvider></tmfxml>"""


def test_lost_events_are_synthesized_where_trace_compass_puts_them(make_trace: Any, tmp_path: Any) -> None:
    path = lossy_trace(make_trace)
    trace = read_trace(path)
    assert trace.discarded > 0
    offset = trace.metadata.clock_offset_ns
    lost = [(ts, fields) for name, ts, fields in iter_events(trace) if name == LOST_EVENT]
    expected = sorted((begin + offset, count, duration) for s in trace.streams for begin, count, duration in s.lost)
    assert [(ts, f["Lost events"], f["duration"]) for ts, f in lost] == expected
    assert sum(f["Lost events"] for _, f in lost) == trace.discarded
    # An XML analysis reads them like any event; the state starts at the first one's time.
    xml = tmp_path / "lost.xml"
    xml.write_text(COUNT_XML)
    built = build(path, [xml])
    assert built.lost == trace.discarded
    values = [(i.start, i.value.value) for i in built.systems["lost"].intervals(("lost",)) if i.value is not None]
    assert values[0][0] == expected[0][0] and values[-1][1] == expected[-1][1]
