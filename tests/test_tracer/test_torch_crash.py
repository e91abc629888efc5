"""A recorded torch training loop killed with SIGKILL keeps every completed step but at most one.

The PyTorch recorder converts and writes each step's window while the program runs, so a
SIGKILL (no atexit, no signal handler) loses only the window it interrupts. `make fuzz` runs
the same check 20 times (scripts/crash_torch.py).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.job import single_trace
from tests.fuzz.torch_crash import STEP_OP, kill_once
from tests.helpers import BABELTRACE2, check_packets, dfcompass_cmd, subprocess_env

pytestmark = [pytest.mark.torch, pytest.mark.slow]
torch = pytest.importorskip("torch")

from tracer import native  # noqa: E402
from tracer.torch_observer import ENGINE_ENV  # noqa: E402


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigkill_loses_at_most_one_completed_step(tmp_path: Path, seed: int) -> None:
    kill = kill_once(seed, tmp_path, dfcompass_cmd(), subprocess_env(), BABELTRACE2, max_delay_s=2.0)
    assert not kill.error, kill.error
    assert kill.completed >= 1
    # -1: a window may end as the optimizer's record_function scope closes (a due window ends on the
    # last open scope's close), so a step can be in the trace before the program counted it.
    assert -1 <= kill.lost <= 1, f"{kill.completed} steps completed, {kill.surviving} {STEP_OP} in the trace"
    assert kill.babeltrace2_ok is not False, "babeltrace2 cannot read the killed run's trace"
    check_packets(single_trace(tmp_path / "trace"))  # whole packets only: Trace Compass opens it without repair


def test_sigkill_beside_a_cpu_burner_loses_at_most_one_completed_step(tmp_path: Path) -> None:
    """A busy machine: one core burnt beside the program. Window converters (fork children) that
    fall behind still write every window the program finished, after the kill."""
    kill = kill_once(3, tmp_path, dfcompass_cmd(), subprocess_env(), BABELTRACE2, max_delay_s=2.0, burn=True)
    assert not kill.error, kill.error
    assert -1 <= kill.lost <= 1, f"{kill.completed} steps completed, {kill.surviving} {STEP_OP} in the trace"
    assert kill.babeltrace2_ok is not False, "babeltrace2 cannot read the killed run's trace"
    check_packets(single_trace(tmp_path / "trace"))


@pytest.mark.parametrize("seed", [4, 5])
def test_under_the_op_observer_a_sigkill_beside_a_burner_loses_at_most_one_step(tmp_path: Path, seed: int) -> None:
    """The op observer's windows convert on a thread of the program's process (tracer/window_thread.py),
    one window in flight: a kill loses that window, one completed step at most."""
    if native.op_observer(torch) is None or native.window_converter() is None:
        pytest.skip("the op observer or the window converter is not built (python -m tracer.native build)")
    env = {**subprocess_env(), ENGINE_ENV: "observer"}
    kill = kill_once(seed, tmp_path, dfcompass_cmd(), env, BABELTRACE2, max_delay_s=2.0, burn=True)
    assert not kill.error, kill.error
    assert -1 <= kill.lost <= 1, f"{kill.completed} steps completed, {kill.surviving} {STEP_OP} in the trace"
    assert kill.babeltrace2_ok is not False, "babeltrace2 cannot read the killed run's trace"
    check_packets(single_trace(tmp_path / "trace"))
    assert read_trace(single_trace(tmp_path / "trace")).metadata.env.get("torch_engine") == "observer"


def test_under_the_op_observer_sigterm_converts_the_window_in_progress(tmp_path: Path) -> None:
    if native.op_observer(torch) is None or native.window_converter() is None:
        pytest.skip("the op observer or the window converter is not built (python -m tracer.native build)")
    env = {**subprocess_env(), ENGINE_ENV: "observer"}
    kill = kill_once(8, tmp_path, dfcompass_cmd(), env, BABELTRACE2, max_delay_s=1.0, sig=signal.SIGTERM)
    assert not kill.error, kill.error
    assert kill.lost in (0, -1), f"{kill.completed} steps completed, {kill.surviving} {STEP_OP} in the trace"
    check_packets(single_trace(tmp_path / "trace"))
    assert read_trace(single_trace(tmp_path / "trace")).metadata.env.get("torch_engine") == "observer"


def test_sigterm_converts_the_window_in_progress(tmp_path: Path) -> None:
    """SIGTERM stops the session, which first has the recorder convert what it holds: no step lost.

    The step in progress may be in the trace too (its backward ran before the program could
    count the step), so the trace may hold one step more than the program's count.
    """
    kill = kill_once(7, tmp_path, dfcompass_cmd(), subprocess_env(), BABELTRACE2, max_delay_s=1.0, sig=signal.SIGTERM)
    assert not kill.error, kill.error
    assert kill.lost in (0, -1), f"{kill.completed} steps completed, {kill.surviving} {STEP_OP} in the trace"
    assert kill.babeltrace2_ok is not False
    check_packets(single_trace(tmp_path / "trace"))
