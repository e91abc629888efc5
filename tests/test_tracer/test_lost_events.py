"""Lost events: a flusher that cannot keep up drops whole buffers and says exactly how many."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import tracer
from tc_analyses.analyses import trace_info
from tc_analyses.reader.fast import read_trace
from tests.helpers import CountingClock, check_packets, requires_bt2
from tracer import schema
from tracer.ctf import records_per_packet
from tracer.session import Session

PACKET = 1024
NODES = 1000
PER_BEGIN = records_per_packet(schema.BY_SHORT["node_begin"], PACKET)  # 30
PER_END = records_per_packet(schema.BY_SHORT["node_end"], PACKET)  # 48
# max_pending=0: every full buffer is dropped; only the last partial buffer is written, at stop()
LOST_BEGIN = NODES // PER_BEGIN * PER_BEGIN
LOST_END = NODES // PER_END * PER_END


@pytest.fixture
def lossy_trace(tmp_path: Path) -> Path:
    path = tmp_path / "lossy"
    with Session(path, clock=CountingClock(), packet_size=PACKET, max_pending=0, flush_interval=3600,
                 handle_signals=False):
        for _ in range(NODES):
            with tracer.node("n", op="o"):
                pass
    return path


def _streams(trace: Any) -> dict[str, Any]:
    return {s.event_class: s for s in trace.streams}


def test_discarded_counts_are_exact(lossy_trace: Path) -> None:
    trace = read_trace(lossy_trace)
    streams = _streams(trace)
    begin, end = streams["dfc:node_begin"], streams["dfc:node_end"]
    assert (begin.events, begin.discarded) == (NODES - LOST_BEGIN, LOST_BEGIN)
    assert (end.events, end.discarded) == (NODES - LOST_END, LOST_END)
    assert begin.events + begin.discarded == NODES == end.events + end.discarded
    assert len(trace.table("node_begin")) == NODES - LOST_BEGIN
    assert trace.discarded == LOST_BEGIN + LOST_END == 1950
    # the survivors are the last nodes, in order
    assert trace.table("node_begin")["node_id"].tolist() == list(range(LOST_BEGIN, NODES))
    assert all(s.discarded == 0 for s in trace.streams if s.event_class not in ("dfc:node_begin", "dfc:node_end"))
    check_packets(lossy_trace)


def test_info_reports_the_loss(lossy_trace: Path, cli: Any) -> None:
    text = cli("info", lossy_trace)
    assert text.exit_code == 0, text.stderr
    assert "discarded:  1950 events" in text.stdout and "events were lost" in text.stdout
    js = cli("info", "--format", "json", lossy_trace)
    data = json.loads(js.stdout)
    assert data["discarded"] == 1950
    per_stream = {s["name"].partition("-")[0]: s["discarded"] for s in data["streams"]}
    assert per_stream["node_begin"] == LOST_BEGIN and per_stream["node_end"] == LOST_END


@requires_bt2
def test_bt2_reports_where_events_were_lost(lossy_trace: Path) -> None:
    from tc_analyses.reader import bt2_source

    lost = [i for i in bt2_source.iter_trace(lossy_trace, with_fields=False) if isinstance(i, bt2_source.Discarded)]
    assert sorted(Path(d.stream).name.partition("-")[0] for d in lost) == ["node_begin", "node_end"]


@requires_bt2
def test_bt2_counts_losses_before_the_first_packet(lossy_trace: Path) -> None:
    from tc_analyses.reader import bt2_source

    lost = [i for i in bt2_source.iter_trace(lossy_trace, with_fields=False) if isinstance(i, bt2_source.Discarded)]
    assert sorted((Path(d.stream).name.partition("-")[0], d.count) for d in lost) == [
        ("node_begin", LOST_BEGIN), ("node_end", LOST_END)]
    assert trace_info.run(lossy_trace, "bt2").discarded == LOST_BEGIN + LOST_END


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the flusher never wrote the first packets"
        time.sleep(0.01)


@requires_bt2
def test_losses_after_a_written_packet_agree_in_every_reader(tmp_path: Path) -> None:
    """A stream's first packet is written, then the flusher falls behind: all readers agree on the count."""
    from tc_analyses.reader import bt2_source

    path = tmp_path / "t"
    emitted = 0
    with Session(path, packet_size=PACKET, max_pending=0, flush_interval=0.02, handle_signals=False):
        for _ in range(3):
            with tracer.node("n", op="o"):
                pass
        emitted += 3
        _wait_for(lambda: list(path.glob("node_begin-*")) and list(path.glob("node_end-*")))
        for _ in range(3000):
            with tracer.node("n", op="o"):
                pass
        emitted += 3000
    trace = read_trace(path)
    streams = _streams(trace)
    for name in ("dfc:node_begin", "dfc:node_end"):
        assert streams[name].events + streams[name].discarded == emitted
        assert streams[name].discarded > 0
    events, lost = [], []
    for item in bt2_source.iter_trace(path, with_fields=False):
        (events if isinstance(item, bt2_source.Event) else lost).append(item)
    assert all(d.count is not None for d in lost)
    assert sum(d.count for d in lost) == trace.discarded
    assert len(events) == sum(len(t) for t in trace.tables.values())
    fast_info, bt2_info = trace_info.run(path, "fast"), trace_info.run(path, "bt2")
    assert fast_info.discarded == bt2_info.discarded == trace.discarded
    assert json.loads(json.dumps([s.__dict__ for s in fast_info.streams])) == [s.__dict__ for s in bt2_info.streams]
    check_packets(path)
