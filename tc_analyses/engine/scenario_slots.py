"""Which scenario of a keyed pair FSM each event makes, starts or ends, and in which slot.

Trace Compass keeps one pending scenario; a start event (``start_choice >= 0``) starts it and a new
pending one is made before the next event; an end event ends the oldest running scenario whose
key equals the event's field, and that scenario's attribute slot goes back to a first-in,
first-out pool that new scenarios take from before growing it.

:func:`decide_slots` computes this with array operations when no event is both a start and an end
candidate (the common case: begin and end events of different classes): per key, the j-th
successful end ends the j-th start (first in, first out), an end succeeds while its key has more
starts than ends before it, and the pool hands the j-th freed slot to the j-th scenario that finds
it non-empty, both counters clamped at zero. Otherwise :func:`loop_slots` runs the bookkeeping
event by event, as the interpreter does.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from tc_analyses.engine.grouping import lexsort_pairs

IntArray = np.ndarray[Any, np.dtype[np.int64]]


@dataclass
class SlotRun:
    """What the bookkeeping decided for one FSM: each scenario's slot and where it was made, started, ended."""

    made_slot: array[int] = field(default_factory=lambda: array("q"))
    made_at: array[int] = field(default_factory=lambda: array("q"))
    start_slot: array[int] = field(default_factory=lambda: array("q"))
    start_at: array[int] = field(default_factory=lambda: array("q"))
    start_transition: array[int] = field(default_factory=lambda: array("q"))
    end_slot: array[int] = field(default_factory=lambda: array("q"))
    end_at: array[int] = field(default_factory=lambda: array("q"))
    end_transition: array[int] = field(default_factory=lambda: array("q"))
    abandoned: list[int] = field(default_factory=list)  # slots in progress at the end, sorted
    pending_saw: array[int] = field(default_factory=lambda: array("q"))  # positions the pending scenario tested


def decide_slots(total: int, start_choice: IntArray, start_key: IntArray, end_choice: IntArray,
                 end_key: IntArray) -> SlotRun:
    """The bookkeeping over `total` positions. start_choice: the start transition taken (-1: the
    event is tested but none passes, -2: no start transition names it); end_choice: the end
    transition naming the event (-1: none); the keys: value ids, compared for equality."""
    tested = start_choice != -2
    ending = end_choice >= 0
    if np.any(tested & ending):  # an end that finds no scenario falls through to the start: sequential
        return loop_slots(total, np.flatnonzero(tested | ending), start_choice, start_key, end_choice, end_key)
    starts = np.flatnonzero(start_choice >= 0)
    ends = np.flatnonzero(ending)
    ended, ended_start = _match_fifo(start_key[starts], starts, end_key[ends], ends)
    made_at = np.concatenate([np.zeros(1, np.int64), starts + 1])
    if total == 0 or made_at[-1] >= total:  # nothing follows the last start: no pending scenario after it
        made_at = made_at[:-1]
    slots = _pool_slots(made_at, ends[ended], ended_start)
    run = SlotRun()
    run.made_slot, run.made_at = _array(slots), _array(made_at)
    run.start_slot, run.start_at = _array(slots[:len(starts)]), _array(starts)
    run.start_transition = _array(start_choice[starts])
    run.end_slot, run.end_at = _array(slots[ended_start]), _array(ends[ended])
    run.end_transition = _array(end_choice[ends[ended]])
    running = np.ones(len(starts), dtype=bool)
    running[ended_start] = False
    run.abandoned = sorted(slots[:len(starts)][running].tolist())
    run.pending_saw = _array(np.flatnonzero(tested))
    return run


def _match_fifo(start_keys: IntArray, start_at: IntArray, end_keys: IntArray, end_at: IntArray
                ) -> tuple[IntArray, IntArray]:
    """(index of each end that ends a scenario, index of the start it ends), in time order.

    Per key, in time order, a start counts +1 and an end -1: the count clamped at zero is the
    number of running scenarios, and an end succeeds where it is above zero. First in, first out:
    the key's j-th successful end ends its j-th start."""
    keys = np.concatenate([start_keys, end_keys])
    step = np.concatenate([np.ones(len(start_keys), np.int64), -np.ones(len(end_keys), np.int64)])
    order = lexsort_pairs(np.concatenate([start_at, end_at]), keys)
    keys, step = keys[order], step[order]
    first = _group_firsts(keys)
    success = (step < 0) & (_clamped_before(step, first) > 0)
    is_start = step > 0
    starts_before: IntArray = np.cumsum(is_start) - is_start  # starts earlier in (key, time) order
    ended_rank = _rank_in_group(success, first)
    start_of_end = order[is_start][starts_before[first[success]] + ended_rank[success]]
    end_index = order[success] - len(start_keys)
    by_time = np.argsort(end_index, kind="stable")
    return end_index[by_time], start_of_end[by_time]


def _pool_slots(made_at: IntArray, freed_at: IntArray, freed_scenario: IntArray) -> IntArray:
    """The slot of each scenario made at `made_at` (scenario i is made at made_at[i]), given that
    the scenario freed_scenario[j] frees its slot at freed_at[j] (in time order). A scenario made
    at p comes after frees before p and before frees at p or later; it takes the oldest free slot,
    or a new one when none is free."""
    when = np.concatenate([2 * made_at, 2 * freed_at + 1])
    step = np.concatenate([-np.ones(len(made_at), np.int64), np.ones(len(freed_at), np.int64)])
    order = np.argsort(when, kind="stable")
    step = step[order]
    first = np.zeros(len(step), dtype=np.int64)  # one group
    reuses = (step < 0) & (_clamped_before(step, first) > 0)
    # the j-th reuse takes the j-th freed slot: it is the slot of scenario freed_scenario[j]
    reused = reuses[step < 0]
    parent = np.arange(len(made_at), dtype=np.int64)
    parent[reused] = freed_scenario[_rank_in_group(reuses, first)[reuses]]
    new_slot = np.cumsum(~reused) - 1
    while True:  # follow reuse chains back to the scenario that made the slot (halving their length)
        deeper = parent[parent]
        if np.array_equal(deeper, parent):
            break
        parent = deeper
    return new_slot[parent]


def _group_firsts(keys: IntArray) -> IntArray:
    """Per element of a sorted key column, the index of the first element with its key."""
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    return np.maximum.accumulate(np.where(starts, np.arange(len(keys)), 0))


def _clamped_before(step: IntArray, first: IntArray) -> IntArray:
    """Per element, its group's count before it, where the count adds each step and never goes
    below zero (a queue's length). After t it is prefix_t - min(0, lowest prefix up to t)."""
    total = np.cumsum(step)
    prefix = total - (total - step)[first]  # the group's own prefix, after each element
    group = np.cumsum(first == np.arange(len(step))) - 1
    lift = group * 2 * (len(step) + 1)  # each group above every earlier one: a running max stays in its group
    highest = np.maximum.accumulate(np.maximum(lift - prefix, lift))
    after = prefix + highest - lift
    before = np.empty_like(after)
    before[1:] = after[:-1]
    before[first == np.arange(len(step))] = 0
    return before


def _rank_in_group(mask: np.ndarray[Any, Any], first: IntArray) -> IntArray:
    """Per element, how many elements of its group before it are in `mask`."""
    seen = np.cumsum(mask) - mask
    return seen - seen[first]


def loop_slots(total: int, relevant: IntArray, start_choice: IntArray, start_key: IntArray, end_choice: IntArray,
               end_key: IntArray) -> SlotRun:
    """Trace Compass's scenario bookkeeping, event by event, on the decided facts only."""
    run = SlotRun()
    free: deque[int] = deque()
    slots = 0
    pending: int | None = None
    make_at = 0  # where the next pending scenario is made (before that event)
    active: dict[int, deque[int]] = {}
    for position, choice, key, end, end_value in _facts(relevant, start_choice, start_key, end_choice, end_key):
        if pending is None and make_at <= position:
            pending = free.popleft() if free else slots
            slots += pending == slots
            run.made_slot.append(pending)
            run.made_at.append(make_at)
        if end >= 0:
            waiting = active.get(end_value)
            if waiting:
                slot = waiting.popleft()
                run.end_slot.append(slot)
                run.end_at.append(position)
                run.end_transition.append(end)
                free.append(slot)
                continue
        if choice != -2 and pending is not None:
            run.pending_saw.append(position)
            if choice >= 0:
                run.start_slot.append(pending)
                run.start_at.append(position)
                run.start_transition.append(choice)
                active.setdefault(key, deque()).append(pending)
                pending, make_at = None, position + 1
    if pending is None and make_at < total:  # made before the next event, whatever it is
        pending = free.popleft() if free else slots
        run.made_slot.append(pending)
        run.made_at.append(make_at)
    run.abandoned = sorted(slot for waiting in active.values() for slot in waiting)
    return run


def _facts(relevant: IntArray, *columns: IntArray) -> Iterator[tuple[int, ...]]:
    """(position, column values...) per relevant position, made into Python ints a chunk at a time."""
    for begin in range(0, len(relevant), 65_536):
        chunk = relevant[begin:begin + 65_536]
        yield from zip(chunk.tolist(), *(column[chunk].tolist() for column in columns))


def _array(column: IntArray) -> array[int]:
    out = array("q")
    out.frombytes(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return out


def as_numpy(numbers: array[int]) -> IntArray:
    return np.frombuffer(numbers, dtype=np.int64) if len(numbers) else np.zeros(0, dtype=np.int64)
