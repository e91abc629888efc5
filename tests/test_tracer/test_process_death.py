"""A traced process that dies (SIGKILL, SIGTERM, an uncaught exception) leaves a readable trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.repair import repair_trace
from tests.helpers import check_packets, check_string_defs, requires_babeltrace2, run_babeltrace2, subprocess_env

FLUSH = 0.05
READY_AFTER = 2000  # nodes recorded before the child says it is ready

FOREVER = f"""
import sys, time, tracer
session = tracer.Session(sys.argv[1], flush_interval={FLUSH})
session.start()
start = time.monotonic()
count = 0
ready = False
while True:
    for _ in range(50):
        with tracer.node("work", op="loop"):
            pass
    count += 50
    if not ready and count > {READY_AFTER} and time.monotonic() - start > 3 * {FLUSH}:
        print("READY", count, flush=True)
        ready = True
    time.sleep(0.002)
"""

K = 137
FINITE_THEN_WAIT = f"""
import sys, time, tracer
session = tracer.Session(sys.argv[1], flush_interval=3600)  # no periodic flush: only finalization writes
session.start()
for i in range({K}):
    with tracer.node("n%d" % i, op="finite"):
        pass
print("READY", flush=True)
time.sleep(60)
print("not killed", flush=True)
"""

FINITE_THEN_RAISE = f"""
import sys, tracer
session = tracer.Session(sys.argv[1], flush_interval=3600)
session.start()
for i in range({K}):
    with tracer.node("n%d" % i, op="finite"):
        pass
raise RuntimeError("boom after {K} nodes")
"""


def _start(tmp_path: Path, source: str) -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "child.py"
    script.write_text(source)
    trace = tmp_path / "trace"
    child = subprocess.Popen([sys.executable, str(script), str(trace)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=subprocess_env())
    return child, trace


def _ready(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("READY"):
        child.kill()
        pytest.fail(f"child did not get ready: {line!r} {child.communicate()[1]}")
    return line


@requires_babeltrace2
def test_sigkill_leaves_whole_packets_but_the_one_being_written(tmp_path: Path) -> None:
    child, trace_dir = _start(tmp_path, FOREVER)
    try:
        ready = int(_ready(child).split()[1])
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    # Linux ends a write at a page boundary for a fatal signal: a kill during the flusher's write
    # of one packet leaves that packet's first pages (`dfcompass record` cuts them, see
    # tests/test_cli/test_record_killed_mid_packet.py). One flusher writes one packet at a time.
    cuts = repair_trace(trace_dir)
    assert len(cuts) <= 1 and all(cut.problem.startswith("truncated packet") for cut in cuts), cuts
    trace = read_trace(trace_dir)  # no TraceError: whole packets only
    assert run_babeltrace2("--output-format=dummy", trace_dir).returncode == 0
    check_packets(trace_dir)
    check_string_defs(trace)
    begins, ends = trace.table("node_begin"), trace.table("node_end")
    nb, ne = len(begins), len(ends)
    # each stream file is a prefix of what its thread recorded...
    assert begins["node_id"].tolist() == list(range(nb))
    assert ends["node_id"].tolist() == list(range(ne))
    # ...and everything recorded a few flush intervals before the kill made it to disk
    assert min(nb, ne) >= ready > READY_AFTER
    paired = min(nb, ne)
    assert (begins["timestamp"][:paired] < ends["timestamp"][:paired]).all()
    assert trace.discarded == 0


def test_sigterm_finalizes_the_trace_and_dies_of_sigterm(tmp_path: Path) -> None:
    child, trace_dir = _start(tmp_path, FINITE_THEN_WAIT)
    try:
        _ready(child)
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        out, _ = child.communicate()
    assert code == -signal.SIGTERM
    assert "not killed" not in out
    trace = read_trace(trace_dir)
    begins = trace.table("node_begin")
    assert begins.text("name").tolist() == [f"n{i}" for i in range(K)]
    assert len(trace.table("node_end")) == K
    check_packets(trace_dir)


def test_uncaught_exception_finalizes_the_trace(tmp_path: Path) -> None:
    child, trace_dir = _start(tmp_path, FINITE_THEN_RAISE)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert f"RuntimeError: boom after {K} nodes" in err
    trace = read_trace(trace_dir)
    assert trace.table("node_begin").text("name").tolist() == [f"n{i}" for i in range(K)]
    assert sorted(trace.table("node_end")["node_id"].tolist()) == list(range(K))
    check_packets(trace_dir)
