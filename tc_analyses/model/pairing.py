"""Begin and end events paired into intervals, per key (device, queue and correlation id; thread
and name...): in bulk with two sorts when the trace is whole, else event by event, first in first
out, counting what is left unpaired (a truncated trace)."""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Iterable

import numpy as np

Array = np.ndarray[Any, Any]


def pair_in_order(begin_keys: list[np.ndarray[Any, Any]], begin_ts: np.ndarray[Any, Any],
                   end_keys: list[np.ndarray[Any, Any]], end_ts: np.ndarray[Any, Any]
                   ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """Indexes pairing the i-th begin of each key with its i-th end, when that is the whole story.

    Sorted by key then time, begins and ends pair position by position exactly when every key
    has as many ends as begins and no end comes before its begin: then first-in first-out
    pairing per key gives the same pairs. Otherwise (a truncated trace) None: the caller pairs
    event by event and counts what is left over.
    """
    if len(begin_ts) != len(end_ts):
        return None
    by_begin = np.lexsort((begin_ts, *reversed(begin_keys)))
    by_end = np.lexsort((end_ts, *reversed(end_keys)))
    if any(not np.array_equal(b[by_begin], e[by_end]) for b, e in zip(begin_keys, end_keys)):
        return None
    if np.any(end_ts[by_end] < begin_ts[by_begin]):
        return None
    return by_begin, by_end


def fifo_pair(begin_keys: Iterable[tuple[Any, ...]], begin_ts: list[int], end_keys: Iterable[tuple[Any, ...]],
               end_ts: list[int]) -> tuple[Array, Array, int]:
    """Pair begins and ends first in, first out per key, event by event (a truncated trace):
    (begin rows paired, their end times, events left unpaired). An end before its key's next
    begin has no recorded begin and is dropped."""
    pending_ends: dict[tuple[Any, ...], deque[int]] = defaultdict(deque)
    for key, ts in zip(end_keys, end_ts):
        pending_ends[key].append(ts)
    rows, paired, unpaired = [], [], 0
    for i, (key, ts) in enumerate(zip(begin_keys, begin_ts)):
        pending = pending_ends.get(key)
        while pending and pending[0] < ts:
            pending.popleft()  # an end whose begin was not recorded
            unpaired += 1
        if not pending:
            unpaired += 1
            continue
        rows.append(i)
        paired.append(pending.popleft())
    unpaired += sum(len(q) for q in pending_ends.values())
    return np.asarray(rows, dtype=np.int64), np.asarray(paired, dtype=np.int64), unpaired
