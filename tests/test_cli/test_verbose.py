"""`dfcompass --verbose` lets the frameworks' notices through; without it they stay off the console
(issue 39: no third-party noise unless --verbose)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracer.verbosity import VERBOSE_ENV

NOTICE = "I0000 00:00:1700000000.000000  4242 cpu_feature_guard.cc:210] This TensorFlow binary is optimized"


@pytest.fixture
def fake_workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module standing in for an embedded workload: it prints TensorFlow's start-up notice, a line
    of its own and the TF log level it was given, on stderr."""
    (tmp_path / "noisy_workload.py").write_text(
        "import os, sys\n"
        f"sys.stderr.write({NOTICE!r} + '\\n')\n"
        "sys.stderr.write('the workload speaks\\n')\n"
        "sys.stderr.write('TF level ' + os.environ.get('TF_CPP_MIN_LOG_LEVEL', 'unset') + '\\n')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    return "noisy_workload"


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_a_demo_workload_s_notices_pass_only_when_verbose(fake_workload: str, verbose: bool, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from tc_analyses.app.record import _record_workload

    monkeypatch.setenv(VERBOSE_ENV, "1" if verbose else "0")
    assert _record_workload("json", fake_workload, tmp_path / "trace", [], "") == 0
    err = capsys.readouterr().err
    assert "the workload speaks" in err  # its own lines always pass
    assert (NOTICE in err) == verbose
    assert ("TF level unset" if verbose else "TF level 2") in err


def test_dask_s_logs_are_left_alone_when_verbose(monkeypatch: pytest.MonkeyPatch) -> None:
    from tc_analyses.cluster import _quiet

    log = logging.getLogger("distributed")
    before = log.level
    monkeypatch.setenv(VERBOSE_ENV, "0")
    with _quiet("distributed"):
        assert log.level == logging.CRITICAL
    monkeypatch.setenv(VERBOSE_ENV, "1")
    with _quiet("distributed"):
        assert log.level == before
    assert log.level == before


def test_the_recorder_s_stderr_filter_passes_everything_when_verbose(monkeypatch: pytest.MonkeyPatch, capfd: Any) -> None:
    from tracer.torch_source import _KINETO_NOISE, _kineto_log_filtered

    noise = next(iter(_KINETO_NOISE)).decode()
    for setting in ("0", "1"):
        monkeypatch.setenv(VERBOSE_ENV, setting)
        with _kineto_log_filtered():
            os.write(2, f"{noise} (setting {setting})\n".encode())
            os.write(2, f"kept (setting {setting})\n".encode())
    err = capfd.readouterr().err
    assert "kept (setting 0)" in err and "kept (setting 1)" in err
    assert f"{noise} (setting 1)" in err and f"{noise} (setting 0)" not in err


def test_the_flag_reaches_the_environment(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERBOSE_ENV, "0")  # restored after the test: the flag sets it for this process
    assert cli("--verbose", "--help").exit_code == 0
    assert os.environ[VERBOSE_ENV] == "0"  # --help ends before the command runs
    assert cli("--verbose", "info", Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
               ).exit_code == 0
    assert os.environ[VERBOSE_ENV] == "1"


@pytest.mark.torch
@pytest.mark.slow
def test_a_recorded_torch_program_shows_the_profiler_s_advice_only_when_verbose(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    program = tmp_path / "tiny.py"
    program.write_text("import torch\nm = torch.nn.Linear(8, 8)\nfor _ in range(3):\n"
                       "    m(torch.randn(4, 8)).sum().backward()\n")
    env = {k: v for k, v in os.environ.items() if k != VERBOSE_ENV}
    errs = {}
    for flags in ((), ("--verbose",)):
        done = subprocess.run([sys.executable, "-m", "tc_analyses.cli", *flags, "record", "-o", str(tmp_path / "t"),
                               "--overwrite", "--", sys.executable, str(program)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        errs[flags] = done.stderr
    assert "warmup" not in errs[()] and "warmup" in errs[("--verbose",)]  # torch.profiler's own UserWarning
