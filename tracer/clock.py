"""Trace clocks. One clock per trace, in nanoseconds at 1 GHz (see the CTF compatibility notes).

The real clock is CLOCK_MONOTONIC, the clock LTTng uses, so our traces line up with LTTng
traces of the same machine. Its offset to wall time is measured once at session start; in a
recorded job, once per host by ``dfcompass record``, which hands it to every process it starts
(:data:`OFFSET_ENV`), so the processes of one host share one time base exactly.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Protocol


class Clock(Protocol):
    now: Callable[[], int]

    def offset_to_wall_ns(self) -> int:
        """Wall time (ns since the Unix epoch) minus this clock's reading; never negative."""
        ...


OFFSET_ENV = "DFCOMPASS_CLOCK_OFFSET_NS"


def measure_wall_offset_ns() -> int:
    """Wall time minus CLOCK_MONOTONIC, in ns, from the least disturbed of a few paired readings."""
    best: int | None = None
    offset = 0
    for _ in range(5):
        mono_before = time.monotonic_ns()
        wall = time.time_ns()
        mono_after = time.monotonic_ns()
        if best is None or mono_after - mono_before < best:  # least disturbed by preemption
            best = mono_after - mono_before
            offset = wall - (mono_before + mono_after) // 2
    return max(offset, 0)


class MonotonicClock:
    """CLOCK_MONOTONIC in ns."""

    name = "monotonic"

    def __init__(self) -> None:
        self.now: Callable[[], int] = time.monotonic_ns

    def offset_to_wall_ns(self) -> int:
        shared = os.environ.get(OFFSET_ENV, "")
        if shared.isdigit():  # set by `dfcompass record` for every process of the job on this host
            return int(shared)
        return measure_wall_offset_ns()


@dataclass
class FixedClock:
    """A deterministic clock for test traces: starts at `start` and advances by `step` per reading."""

    start: int = 1_000_000
    step: int = 1_000
    wall_offset: int = 1_700_000_000_000_000_000
    name: str = "monotonic"

    def __post_init__(self) -> None:
        self._t = self.start - self.step

    def now(self) -> int:
        self._t += self.step
        return self._t

    def offset_to_wall_ns(self) -> int:
        return self.wall_offset
