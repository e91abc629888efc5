"""A converted window's string definitions go into the stream of their first use's thread.

Events of one thread come in time order from window to window; those of all threads together do
not (a window drained while another thread runs holds some of its ops, the next window the rest),
and no stream may go back in time (babeltrace2's muxer refuses the trace)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.reader.fast import read_trace
from tests.helpers import check_packets
from tracer.batch import Batch
from tracer.session import Session


def test_definitions_follow_the_thread_of_their_first_use_and_no_stream_goes_back(tmp_path: Path) -> None:
    session = Session(str(tmp_path / "t")).start()
    assert session.trace is not None
    cpu = session.device("cpu")
    origin = session.trace.origin_ts
    # Window 1: thread 2 runs late in it; window 2 holds thread 1's ops from before that (drained later).
    first = Batch(session, origin, 0)
    first.add("node_begin", "torch-2", origin + 5_000, 1, "late op", "late op", cpu, 2, 0)
    first.flush()
    second = Batch(session, origin, 0)
    second.add("node_begin", "torch-1", origin + 1_000, 2, "early op", "early op", cpu, 1, 0)
    second.add("node_begin", "torch-1", origin + 6_000, 3, "late op", "late op", cpu, 1, 0)
    second.flush()
    session.stop()
    streams = {path.name for path in (tmp_path / "t").iterdir()}
    assert {"string_def-torch-1", "string_def-torch-2"} <= streams
    check_packets(tmp_path / "t")  # with one shared string stream, "early op" would go back in time
    trace = read_trace(tmp_path / "t")
    assert sorted(trace.table("node_begin").text("op").tolist()) == ["early op", "late op", "late op"]


def test_the_observer_clock_offset_is_one_value_per_recording(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("torch")
    from tracer.torch_source import TorchRecorder

    session = Session(str(tmp_path / "t")).start()
    recorder = TorchRecorder(session)
    offsets = {recorder._observer_offset(session) for _ in range(100)}
    session.stop()
    assert offsets == {0}  # the trace clock is CLOCK_MONOTONIC, as the observer's: no jitter
