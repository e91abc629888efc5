"""Trace clocks."""

from __future__ import annotations

import time

from tracer.clock import FixedClock, MonotonicClock


def test_fixed_clock_is_deterministic() -> None:
    a, b = FixedClock(start=500, step=10, wall_offset=7), FixedClock(start=500, step=10, wall_offset=7)
    readings = [a.now() for _ in range(4)]
    assert readings == [500, 510, 520, 530] == [b.now() for _ in range(4)]
    assert a.offset_to_wall_ns() == 7
    assert FixedClock().name == "monotonic"


def test_monotonic_clock_offset_maps_to_wall_time() -> None:
    clock = MonotonicClock()
    offset = clock.offset_to_wall_ns()
    assert offset > 0
    first, second = clock.now(), clock.now()
    assert first <= second
    # offset + clock reading is wall time (within a generous second)
    assert abs(offset + clock.now() - time.time_ns()) < 1_000_000_000
