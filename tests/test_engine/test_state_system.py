"""The columnar state system: intervals as arrays per attribute, point and range queries, shared values."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from tc_analyses.engine.state_system import Interval, StateSystem, Value


def _system() -> StateSystem:
    """a: 1 from 10, 2 from 20, null from 30; b: "x" from 15, "x" again at 25 (no change); closed at 40."""
    ss = StateSystem(0)
    ss.modify(("a",), Value("long", 1), 10)
    ss.modify(("b",), Value("string", "x"), 15)
    ss.modify(("a",), Value("long", 2), 20)
    ss.modify(("b",), Value("string", "x"), 25)
    ss.modify(("a",), None, 30)
    ss.close(40)
    return ss


def test_intervals_are_stored_as_columns() -> None:
    ss = _system()
    starts, ends, values = ss.columns(("a",))
    assert (list(starts), list(ends)) == ([0, 10, 20, 30], [9, 19, 29, 40])
    assert values == [None, Value("long", 1), Value("long", 2), None]
    assert ss.intervals(("b",)) == [Interval(0, 14, None), Interval(15, 40, Value("string", "x"))]
    assert [p for p, _ in ss.items()] == [("a",), ("b",)]


def test_point_and_range_queries() -> None:
    ss = _system()
    assert [ss.query_at(("a",), t) for t in (0, 10, 19, 20, 29, 30, 40, 41)] == [
        None, Value("long", 1), Value("long", 1), Value("long", 2), Value("long", 2), None, None, None]
    assert ss.query_range(("a",), 15, 25) == [Interval(10, 19, Value("long", 1)), Interval(20, 29, Value("long", 2))]
    assert ss.query_range(("a",), 19, 19) == [Interval(10, 19, Value("long", 1))]
    assert ss.query_range(("b",), 0, 100) == ss.intervals(("b",))


def test_equal_values_are_one_object() -> None:
    ss = StateSystem(0)
    for t in range(1, 7):
        ss.modify(("k", str(t % 2)), Value("string", "busy" if t % 3 else "idle"), t)
    ss.close(10)
    held = [v for p, _ in ss.items() for v in ss.columns(p)[2] if v is not None]
    assert len(held) >= 4 and len({id(v) for v in held}) == len(set(held)) == 2


def _answers(ss: StateSystem) -> list[object]:
    return [(p, ss.intervals(p), [ss.query_at(p, t) for t in range(-1, 45)], ss.query_range(p, 12, 27),
             [list(c) for c in ss.columns(p)]) for p in ss.paths()]


def test_spilled_intervals_give_the_same_answers(tmp_path: Path) -> None:
    ss = _system()
    before = _answers(ss)
    moved = ss.spill(tmp_path)
    assert moved == 16 * 6  # two 8-byte times for each of the 6 intervals
    assert list(tmp_path.iterdir()) == []  # the file is unlinked; the mapping keeps it
    assert isinstance(ss.columns(("a",))[0], memoryview)
    assert _answers(ss) == before
    assert ss.spill(tmp_path) == 0  # nothing left to move
    with pytest.raises(AssertionError, match="spilled"):
        ss.attribute(("a",)).end_interval(50)


def test_a_spill_that_cannot_be_written_keeps_the_intervals_in_memory(tmp_path: Path) -> None:
    from tc_analyses.engine.run import _spill_if_large

    ss = _system()
    before = _answers(ss)
    _spill_if_large(ss, 0, tmp_path / "missing-folder")
    assert isinstance(ss.columns(("a",))[0], array) and _answers(ss) == before
    _spill_if_large(ss, 0, tmp_path)
    assert isinstance(ss.columns(("a",))[0], memoryview) and _answers(ss) == before
