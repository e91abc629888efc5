"""Query the state systems of analyses built headless (:func:`tc_analyses.engine.build`).

The ``states`` command prints these rows, or writes them as CSV.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from tc_analyses.engine.run import BuiltAnalyses
from tc_analyses.engine.state_system import Interval


@dataclass(frozen=True)
class StateRow:
    analysis: str
    path: str
    start: int
    end: int
    value: str | None


def rows(built: BuiltAnalyses, path_glob: str = "*", at: int | None = None) -> list[StateRow]:
    """Intervals of every attribute whose '/'-joined path matches `path_glob` (all at time `at`)."""
    out = []
    for analysis, ss in sorted(built.systems.items()):
        for path, intervals in ss.items():
            joined = "/".join(path)
            if not fnmatch.fnmatchcase(joined, path_glob):
                continue
            for interval in _select(intervals, at):
                value = None if interval.value is None else str(interval.value)
                out.append(StateRow(analysis, joined, interval.start, interval.end, value))
    return out


def _select(intervals: list[Interval], at: int | None) -> list[Interval]:
    if at is None:
        return intervals
    return [i for i in intervals if i.start <= at <= i.end]
