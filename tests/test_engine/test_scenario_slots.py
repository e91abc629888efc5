"""The array bookkeeping of keyed pair scenarios equals the event-by-event loop it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from tc_analyses.engine.scenario_slots import SlotRun, decide_slots, loop_slots


def _facts(seed: int, total: int, keys: int, overlap: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 4, total)  # 0: neither, 1: start class, 2: end class, 3: both (when overlap)
    if not overlap:
        kind[kind == 3] = 0
    start_choice = np.where((kind == 1) | (kind == 3), rng.integers(-1, 2, total), -2).astype(np.int64)
    end_choice = np.where(kind >= 2, rng.integers(0, 2, total), -1).astype(np.int64)
    start_key = rng.integers(0, keys, total).astype(np.int64)
    end_key = rng.integers(0, keys, total).astype(np.int64)
    return start_choice, start_key, end_choice, end_key


def _plain(run: SlotRun) -> dict[str, list[int]]:
    return {name: list(value) for name, value in vars(run).items()}


@pytest.mark.parametrize("seed", range(40))
def test_arrays_decide_as_the_loop(seed: int) -> None:
    total = [0, 1, 2, 7, 50, 3000][seed % 6]
    facts = _facts(seed, total, keys=1 + seed % 5 * 7, overlap=seed % 4 == 3)
    relevant = np.flatnonzero((facts[0] != -2) | (facts[2] >= 0))
    expected = _plain(loop_slots(total, relevant, *facts))
    assert _plain(decide_slots(total, *facts)) == expected


def test_a_freed_slot_goes_to_the_next_scenario_made() -> None:
    # start (key 5) at 0, start (key 6) at 1, end key 5 at 2, start at 3: the first slot comes back
    start_choice = np.array([0, 0, -2, 0, -2], dtype=np.int64)
    start_key = np.array([5, 6, 0, 7, 0], dtype=np.int64)
    end_choice = np.array([-1, -1, 0, -1, 0], dtype=np.int64)
    end_key = np.array([0, 0, 5, 0, 9], dtype=np.int64)  # key 9 ends nothing
    run = decide_slots(5, start_choice, start_key, end_choice, end_key)
    assert list(run.start_slot) == [0, 1, 2] and list(run.made_at) == [0, 1, 2, 4]
    assert list(run.end_at) == [2] and list(run.end_slot) == [0]
    assert list(run.made_slot) == [0, 1, 2, 0] and run.abandoned == [1, 2]
