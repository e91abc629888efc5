"""A trace with no op (a launcher, a program that ended before its first op) says what it holds
and what fits it, in every command that needs ops, never an internal step's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

import tracer


@pytest.fixture()
def launcher_trace(tmp_path: Path) -> Path:
    path = tmp_path / "job" / "host-50"
    with tracer.Session(path, env={"pid": 50, "ppid": 49}, handle_signals=False):
        pass
    return path


@pytest.mark.parametrize("command", [("analyze",), ("parallelism",), ("report", "-o", "{out}/r.html"),
                                     ("recommend-placement", "--devices", "cpu,cuda:0", "-o", "{out}/plan")])
def test_commands_that_need_ops_name_what_the_trace_holds(launcher_trace: Path, tmp_path: Path,
                                                          command: tuple[str, ...], cli: Callable[..., Any]) -> None:
    args = [a.format(out=tmp_path) for a in command]
    result = cli(args[0], launcher_trace, *args[1:])
    assert result.exit_code == 1, result.stdout
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"{launcher_trace}: no op was recorded" in line
    assert "1 process_info" in line and "launcher" in line
    assert "stateProvider" not in line and "device ''" not in line


def test_a_process_of_a_job_points_to_its_folder(launcher_trace: Path, cli: Callable[..., Any]) -> None:
    with tracer.Session(launcher_trace.parent / "host-51", env={"pid": 51, "ppid": 50}, handle_signals=False):
        with tracer.node("n", op="work"):
            pass
    result = cli("parallelism", launcher_trace)
    assert result.exit_code == 1
    assert f"its job folder {launcher_trace.parent} reads the main process" in result.stderr
