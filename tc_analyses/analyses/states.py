"""Query the state systems of analyses built headless (:func:`tc_analyses.engine.build`).

The ``states`` command prints these rows, or writes them as CSV.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from tc_analyses.engine.run import BuiltAnalyses
from tc_analyses.engine.state_system import Value


@dataclass(frozen=True)
class StateRow:
    analysis: str
    path: str
    start: int
    end: int
    value: str | None


def iter_rows(built: BuiltAnalyses, path_glob: str = "*", at: int | None = None) -> Iterator[StateRow]:
    """Intervals of every attribute whose '/'-joined path matches `path_glob` (only the one holding
    at time `at`, when given), one row at a time, read from the state systems' columns."""
    for analysis, ss in sorted(built.systems.items()):
        for path in ss.paths():
            joined = "/".join(path)
            if not fnmatch.fnmatchcase(joined, path_glob):
                continue
            if at is not None:  # a point query: one binary search, not a scan
                for interval in ss.query_range(path, at, at):
                    yield StateRow(analysis, joined, interval.start, interval.end, _text(interval.value))
                continue
            starts, ends, values = ss.columns(path)
            for start, end, value in zip(starts, ends, values):
                yield StateRow(analysis, joined, start, end, _text(value))


def iter_columns(built: BuiltAnalyses, path_glob: str = "*") -> Iterator[
        tuple[str, str, np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], Callable[[int], Value | None]]]:
    """The rows of :func:`iter_rows` (without `at`) as columns, one attribute at a time: (analysis,
    path, starts, ends, value ids, the value of an id); no object is made per interval."""
    for analysis, ss in sorted(built.systems.items()):
        for path in ss.paths():
            joined = "/".join(path)
            if fnmatch.fnmatchcase(joined, path_glob):
                yield (analysis, joined, *ss.arrays(path))


def rows(built: BuiltAnalyses, path_glob: str = "*", at: int | None = None) -> list[StateRow]:
    """:func:`iter_rows` as a list."""
    return list(iter_rows(built, path_glob, at))


def _text(value: Value | None) -> str | None:
    return None if value is None else str(value)
