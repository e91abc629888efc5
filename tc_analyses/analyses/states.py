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
    if at is not None:  # a point query: the interval holding `at` in each attribute, found with arrays
        for analysis, paths, which, begins, finishes, ids, item in iter_column_groups(built, path_glob):
            for i in np.flatnonzero((begins <= at) & (finishes >= at)).tolist():
                yield StateRow(analysis, paths[which[i]], int(begins[i]), int(finishes[i]), _text(item(int(ids[i]))))
        return
    for analysis, ss in sorted(built.systems.items()):
        for path in ss.paths():
            joined = "/".join(path)
            if not fnmatch.fnmatchcase(joined, path_glob):
                continue
            starts, ends, values = ss.columns(path)
            for start, end, value in zip(starts, ends, values):
                yield StateRow(analysis, joined, start, end, _text(value))


def iter_column_groups(built: BuiltAnalyses, path_glob: str = "*", rows: int = 1 << 20) -> Iterator[
        tuple[str, list[str], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any],
              Callable[[int], Value | None]]]:
    """The rows of :func:`iter_rows` (without `at`) as columns, no object per interval: many
    attributes at a time where a state system holds them as one block (groups of about `rows`
    intervals): (analysis, the attributes' joined paths, each interval's index into them, starts,
    ends, value ids, the value of an id). A million attributes (one per correlation id) cost a few
    array operations, not a million slices."""
    for analysis, ss in sorted(built.systems.items()):
        paths = ss.paths()
        joined = ["/".join(path) for path in paths]
        if path_glob != "*":
            kept = [i for i, text in enumerate(joined) if fnmatch.fnmatchcase(text, path_glob)]
            paths, joined = [paths[i] for i in kept], [joined[i] for i in kept]
        counts = ss.block_counts(paths)
        if counts is None:  # built event by event: one attribute at a time
            for path, text in zip(paths, joined):
                starts, ends, ids, item = ss.arrays(path)
                yield analysis, [text], np.zeros(len(starts), dtype=np.int64), starts, ends, ids, item
            continue
        group = (np.cumsum(counts) - counts) // rows  # the group of each attribute, by its first interval
        cuts = np.flatnonzero(np.diff(group)) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(paths)]):
            which, starts, ends, ids, item = ss.gather(paths[lo:hi])
            if len(which):
                yield analysis, joined[lo:hi], which, starts, ends, ids, item


def rows(built: BuiltAnalyses, path_glob: str = "*", at: int | None = None) -> list[StateRow]:
    """:func:`iter_rows` as a list."""
    return list(iter_rows(built, path_glob, at))


def _text(value: Value | None) -> str | None:
    return None if value is None else str(value)
