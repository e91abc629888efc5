"""`dfcompass record` passes SIGTERM on to the program and never leaves it orphaned."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tc_analyses.reader import read_trace
from tests.helpers import subprocess_env

pytestmark = pytest.mark.slow

PROGRAM = """
import os, sys, time
import tracer
open(sys.argv[1], "w").write(str(os.getpid()))
for i in range(6000):
    with tracer.node("tick", op="sleep"):
        time.sleep(0.01)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ")[1].startswith("Z"))  # a zombie is dead


def _start(tmp_path: Path, dfcompass_exe: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    script, pid_file = tmp_path / "loop.py", tmp_path / "pid"
    script.write_text(PROGRAM)
    record = subprocess.Popen([*dfcompass_exe, "record", "-o", str(tmp_path / "t"), "--", "python", str(script),
                               str(pid_file)], env=subprocess_env(), stderr=subprocess.DEVNULL)
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    time.sleep(0.5)  # some ticks recorded
    return record, int(pid_file.read_text())


def _gone(pid: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_sigterm_to_record_reaches_the_program(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    record, child = _start(tmp_path, dfcompass_exe)
    record.send_signal(signal.SIGTERM)
    record.wait(timeout=30)
    assert _gone(child), "the program outlived dfcompass record"
    assert len(read_trace(tmp_path / "t").table("node_begin")) > 10


def test_a_killed_record_takes_the_program_with_it(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    record, child = _start(tmp_path, dfcompass_exe)
    record.kill()
    record.wait(timeout=30)
    assert _gone(child), "the program was left running, orphaned"
    assert len(read_trace(tmp_path / "t").table("node_begin")) > 10
