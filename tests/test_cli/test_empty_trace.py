"""A trace killed before its first event says that it is empty, naming it, in every command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import subprocess_env


@pytest.fixture(scope="module")
def empty_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("empty") / "t"
    code = f"import tracer, os, signal\ntracer.Session({str(path)!r}).start()\nos.kill(os.getpid(), signal.SIGKILL)\n"
    done = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL and (path / "metadata").exists()
    return path


@pytest.mark.parametrize("command", [["analyze"], ["overhead"], ["memory"]])
def test_analyses_say_the_trace_is_empty(empty_trace: Path, dfcompass_exe: list[str], command: list[str]) -> None:
    out = subprocess.run([*dfcompass_exe, *command, str(empty_trace)], capture_output=True, text=True,
                         env=subprocess_env(), timeout=120)
    assert out.returncode in (1, 2) and out.stderr.count("\n") == 1, out.stderr
    assert str(empty_trace) in out.stderr and "Traceback" not in out.stderr


def test_analyze_says_empty_in_so_many_words(empty_trace: Path, dfcompass_exe: list[str]) -> None:
    out = subprocess.run([*dfcompass_exe, "analyze", str(empty_trace)], capture_output=True, text=True,
                         env=subprocess_env(), timeout=120)
    assert f"{empty_trace}: the trace is empty" in out.stderr


def test_info_says_empty(empty_trace: Path, dfcompass_exe: list[str]) -> None:
    out = subprocess.run([*dfcompass_exe, "info", str(empty_trace)], capture_output=True, text=True,
                         env=subprocess_env(), timeout=120)
    assert out.returncode == 0 and "the trace is empty" in out.stdout
    assert os.path.exists(empty_trace / "metadata")
