"""Unions of time intervals, the one helper every analysis measures busy and idle time with.

Intervals are half-open, ``[start, end)``, in nanoseconds. A closed interval ``[start, end]``
of a state system is the half-open ``[start, end + 1)``.

Examples
--------
>>> union_ns([0, 5, 20], [10, 12, 30])
22
>>> clipped_union_ns([0, 5, 20], [10, 12, 30], 8, 25)
9
"""

from __future__ import annotations

from typing import Any

import numpy as np


def merge_intervals(starts: Any, ends: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The union of half-open intervals ``[start, end)`` as sorted, disjoint intervals.

    Parameters
    ----------
    starts, ends : array_like of int
        The intervals' bounds, in any order.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Starts and ends (int64) of the disjoint intervals, by start. Intervals that touch
        (one ends where the next starts) are merged.

    Examples
    --------
    >>> s, e = merge_intervals([5, 0, 20], [12, 5, 30])
    >>> s.tolist(), e.tolist()
    ([0, 20], [12, 30])
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if len(starts) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new_group = np.empty(len(s), dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > reach[:-1]
    return s[new_group], np.maximum.reduceat(e, np.flatnonzero(new_group))


def union_ns(starts: Any, ends: Any) -> int:
    """Total length of the union of the intervals ``[start, end)``.

    Examples
    --------
    >>> union_ns([0, 2], [3, 4]), union_ns([], [])
    (4, 0)
    """
    s, e = merge_intervals(starts, ends)
    return int((e - s).sum())


def clipped_union_ns(starts: Any, ends: Any, lo: int, hi: int) -> int:
    """Length of the union of the intervals within the window ``[lo, hi)``.

    Examples
    --------
    >>> clipped_union_ns([0, 20], [10, 30], 5, 25)
    10
    """
    s = np.clip(np.asarray(starts, dtype=np.int64), lo, hi)
    e = np.clip(np.asarray(ends, dtype=np.int64), lo, hi)
    return union_ns(s, e)
