"""A program killed while it appends a packet: `record` cuts the half-written packet, so the trace
opens without `dfcompass repair`.

Linux ends a write at a page boundary when a fatal signal arrives (SIGKILL, the OOM killer), so a
kill that lands during a packet's write leaves its first pages only. When that happens is a matter
of microseconds; the program here makes the same damage on purpose (it appends the first page of
a copy of its last packet, as the kernel would have written it) and then SIGKILLs itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.job import job_traces
from tests.helpers import check_packets, requires_babeltrace2, run_babeltrace2, subprocess_env

PROGRAM = """
import os, signal, time, tracer
from tracer import session as session_module
for i in range(3000):
    with tracer.node("n%d" % i, op="work"):
        pass
folder = session_module.active_session().trace.path
def whole_packets():  # the flusher's first packet, written whole (a stream file is made before its packet)
    streams = [p for p in sorted(folder.iterdir()) if p.name.startswith("node_begin")]
    if not streams:
        return None
    size = streams[0].stat().st_size
    time.sleep(0.02)
    return streams[0] if size > 4096 and streams[0].stat().st_size == size else None
while (stream := whole_packets()) is None:
    time.sleep(0.01)
data = stream.read_bytes()
with open(stream, "ab") as out:
    out.write(data[:4096])  # a packet's first page: its header says far more bytes follow
os.kill(os.getpid(), signal.SIGKILL)
"""


def _record(tmp_path: Path, dfcompass_exe: list[str], program: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "prog.py"
    script.write_text(program)
    job = tmp_path / "job"
    done = subprocess.run([*dfcompass_exe, "record", "-o", str(job), "--no-calibrate", "--", "python", str(script)],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)
    return done, job


@requires_babeltrace2
def test_record_cuts_what_a_kill_left_half_written(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    done, job = _record(tmp_path, dfcompass_exe, PROGRAM)
    assert done.returncode == 128 + 9 and "killed by SIGKILL" in done.stderr, done.stderr
    [process] = job_traces(job)
    cut = [line for line in done.stderr.splitlines() if "half-written" in line]
    assert len(cut) == 1 and "cut 4,096 bytes" in cut[0] and f"process {process.pid}" in cut[0], done.stderr
    assert "still readable" in done.stderr
    check_packets(process.path)
    assert run_babeltrace2("--output-format=dummy", process.path).returncode == 0
    nodes = read_trace(process.path).table("node_begin")["node_id"].tolist()
    assert nodes and nodes == list(range(len(nodes)))  # every whole packet kept, in order


def test_a_clean_exit_is_not_checked_nor_cut(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    done, job = _record(tmp_path, dfcompass_exe, "import tracer\nwith tracer.node('a', op='work'):\n    pass\n")
    assert done.returncode == 0, done.stderr
    assert "half-written" not in done.stderr
    [process] = job_traces(job)
    assert len(read_trace(process.path).table("node_begin")) == 1
