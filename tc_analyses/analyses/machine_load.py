"""The machine a trace was recorded on, as busy as it was: a busy machine inflates every measured cost.

``dfcompass record`` (tracer/session.py) notes the cores the process could use, the 1-minute load
average at start and at stop, and the process's CPU and wall seconds. The load besides the
program is the larger load average less the program's own average busy cores (CPU seconds over
wall seconds). A 1-minute average lags: a run of a few seconds mostly shows the load before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tracer import schema

BUSY_SHARE = 0.5  # busy: other work kept at least half the cores busy on average


@dataclass(frozen=True)
class MachineLoad:
    cores: int
    load: float  # the larger 1-minute load average of start and stop
    own: float  # the program's average busy cores: CPU seconds over wall seconds

    @property
    def others(self) -> float:
        return max(0.0, self.load - self.own)

    @property
    def busy(self) -> bool:
        return self.others >= max(0.5, BUSY_SHARE * self.cores)

    def text(self) -> str:
        return (f"recorded on a busy machine: a load of {self.others:.1f} besides this program on {self.cores} "
                f"core(s) (1-minute load average {self.load:.2f}; the program used {self.own:.1f} core(s)): its "
                "measured costs may be inflated by contention; record again on a quiet machine, or measure the "
                "plan with dfcompass verify")


def _number(env: Mapping[str, Any], key: str) -> float | None:
    try:
        return float(env[key])
    except (KeyError, TypeError, ValueError):
        return None


def of_env(env: Mapping[str, Any]) -> MachineLoad | None:
    """The machine's load from a trace's metadata environment; None when it was not recorded."""
    cores = _number(env, schema.ENV_CORES)
    loads = [v for v in (_number(env, schema.ENV_LOAD_START), _number(env, schema.ENV_LOAD_END)) if v is not None]
    cpu, wall = _number(env, schema.ENV_CPU_S), _number(env, schema.ENV_WALL_S)
    if not cores or not loads:
        return None
    own = cpu / wall if cpu is not None and wall else 0.0
    return MachineLoad(int(cores), max(loads), own)


def busy_notice(env: Mapping[str, Any]) -> str | None:
    """The one line a report prints when the recording was taken on a busy machine."""
    load = of_env(env)
    return load.text() if load is not None and load.busy else None
