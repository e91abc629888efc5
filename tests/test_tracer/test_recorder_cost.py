"""The recorder's account of its own cost: hooks, window cuts and start, each counted once."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from tracer import recorder_cost, schema
from tracer.recorder_cost import RecorderCost, cost_line, timed_hook
from tracer.window_thread import WindowThread


class _Clock:
    """A perf_counter_ns that moves only when told (the accounting is then exact, not timed)."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Clock]:
    fake = _Clock()
    monkeypatch.setattr(recorder_cost.time, "perf_counter_ns", fake)
    yield fake


def test_a_window_cut_inside_a_hook_counts_as_a_window_only(clock: _Clock) -> None:
    cost = RecorderCost()

    def cut_window() -> None:
        started = cost.window_started()
        clock.now += 700  # converting the window
        cost.window_done(started)

    def hook(module: object) -> None:
        clock.now += 30  # the hook's own work before the cut
        cut_window()
        clock.now += 20

    timed = timed_hook(cost, hook)
    timed("module")
    timed("module")  # ...and a window cut outside any hook
    cut_window()
    assert (cost.hooks_ns, cost.windows_ns, cost.windows) == (2 * 50, 3 * 700, 3)


def test_a_hook_that_raises_is_still_counted(clock: _Clock) -> None:
    cost = RecorderCost()

    def hook() -> None:
        clock.now += 40
        raise ValueError("the program's hook failed")

    with pytest.raises(ValueError):
        timed_hook(cost, hook)()
    assert cost.hooks_ns == 40


def test_steps_are_the_users_else_the_optimizers_else_the_forwards() -> None:
    cost = RecorderCost()
    cost.forwards = 30
    assert cost.steps == 30
    cost.optimizer_steps = 10
    assert cost.steps == 10
    cost.user_steps = 5
    assert cost.steps == 5


def test_the_line_adds_the_parts_and_spreads_them_over_the_steps() -> None:
    cost = RecorderCost()
    cost.start_ns, cost.hooks_ns, cost.windows_ns, cost.windows, cost.user_steps = 1_000_000, 500_000, 8_500_000, 4, 5
    env: dict[str, object] = {**cost.env(), schema.ENV_DISCARDED: 12}
    line = cost_line(env)
    assert line is not None
    assert line.startswith("recording took 0.010 s of the program's time, 2.00 ms per step over 5 steps")
    assert "4 window cuts 0.009 s" in line and "hooks 0.001 s" in line and "start 0.001 s" in line
    assert line.endswith("; 12 events discarded")


@pytest.mark.parametrize("env", [{}, {schema.ENV_RECORDER_HOOKS_NS: 5}, {**RecorderCost().env(), schema.ENV_RECORDER_STEPS: "3"},
                                 {**RecorderCost().env(), schema.ENV_RECORDER_WINDOWS_NS: -1}])
def test_no_line_without_a_whole_account(env: dict[str, object]) -> None:
    assert cost_line(env) is None


def test_under_the_op_observer_the_line_adds_its_estimate_inside_the_ops() -> None:
    cost = RecorderCost()
    cost.windows_ns, cost.windows, cost.user_steps = 2_000_000, 2, 2
    profiled = cost_line(cost.env())
    assert profiled is not None and "not counted: the collection inside each op, by the profiler" in profiled
    cost.ops_observed, cost.op_ns = 120_000, 612.4
    assert cost.in_ops_ns == round(120_000 * 612.4)
    line = cost_line(cost.env())
    assert line is not None and "not counted" not in line
    assert "inside the ops, the op observer: about 0.073 s more (120,000 ops x 612 ns" in line


def test_the_window_threads_cpu_is_the_lines_upper_end() -> None:
    """The window thread's conversions run beside the program: free on a spare core, up to their
    CPU time where the program keeps every core busy. The line names it apart, and the thread
    measures its own CPU (not its wall time: a thread waiting for a core does not count)."""
    cost = RecorderCost()
    cost.windows_ns, cost.windows, cost.user_steps = 2_000_000, 2, 2
    assert "beside the program" not in str(cost_line(cost.env()))
    cost.beside_ns = 45_000_000
    line = cost_line(cost.env())
    assert line is not None and "beside the program, a recorder thread converting windows: 0.045 s of CPU" in line

    def spin_then_sleep(_: object) -> None:
        until = time.thread_time_ns() + 30_000_000
        while time.thread_time_ns() < until:
            pass
        time.sleep(0.2)  # wall time, no CPU

    thread = WindowThread(spin_then_sleep, lambda ns: None)
    thread.submit(object())
    thread.end()
    assert 30_000_000 <= thread.cpu_ns < 150_000_000
