"""A pattern's state system is built when first read (analyze reads only the segments); it must be
the system built at once, and a log whose types clash must still fail the build itself."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from tc_analyses.engine import build
from tc_analyses.engine.columnar_pattern import run_columnar_pattern
from tc_analyses.engine.columns import StateTypeError
from tc_analyses.engine.events import EventOrder
from tc_analyses.engine.ids import Values
from tc_analyses.engine.run import Systems, _Deferred
from tc_analyses.engine.state_system import Value
from tc_analyses.engine.xml_pattern import load_patterns
from tc_analyses.export.tracecompass import render_xml
from tc_analyses.export.tracecompass.facts import trace_facts
from tc_analyses.reader import read_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


def _intervals(system: object) -> dict[tuple[str, ...], list[tuple[int, int, object]]]:
    return {path: list(zip(*system.columns(path))) for path in system.paths()}  # type: ignore[attr-defined]


def test_the_deferred_system_is_the_one_built_at_once(tmp_path: Path) -> None:
    xml = tmp_path / "latency.xml"
    xml.write_bytes(render_xml(trace_facts(TRACE))["latency.xml"])
    built = build(TRACE, [xml])
    deferred = [key for key, item in built.systems._items.items() if isinstance(item, _Deferred)]
    assert deferred, "no pattern's state system was deferred"
    trace = read_trace(TRACE)
    order = EventOrder(trace)
    span = (order.first_ts, order.last_ts)
    for pattern in load_patterns(xml):
        _, at_once = run_columnar_pattern(pattern, order.classes, span)
        assert _intervals(built.systems[pattern.id]) == _intervals(at_once)
        assert sum(len(v) for v in _intervals(at_once).values()) > 10
    assert not any(isinstance(item, _Deferred) for item in built.systems._items.values())


def test_a_log_whose_types_clash_is_built_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shapes the columnar pattern takes write the scenario's key and label and read the string
    table, so a well-typed trace cannot make their types clash; were they to, the system is built
    in the run, where its type error fails the build as Trace Compass fails the analysis."""
    from tc_analyses.engine import columnar_pattern

    xml = tmp_path / "latency.xml"
    xml.write_bytes(render_xml(trace_facts(TRACE))["latency.xml"])
    order = EventOrder(read_trace(TRACE))
    pattern = load_patterns(xml)[0]
    _, later = columnar_pattern.run_columnar_pattern_deferred(pattern, order.classes, (order.first_ts, order.last_ts))
    assert callable(later)
    monkeypatch.setattr(columnar_pattern.ColumnarPattern, "types_agree", lambda self: False)
    _, now = columnar_pattern.run_columnar_pattern_deferred(pattern, order.classes, (order.first_ts, order.last_ts))
    assert not callable(now) and _intervals(now) == _intervals(later())


def test_types_agree_is_the_type_check_passing() -> None:
    """On random logs: types_agree() is True exactly when the state system's type check passes."""
    from tc_analyses.engine.columns import Evaluator, WriteLog

    rng = random.Random(11)
    kinds = [Value("int", 1), Value("long", 2), Value("double", 0.5), Value("string", "s"), Value("int", 7)]
    for _ in range(300):
        evaluator = Evaluator.__new__(Evaluator)  # only the tables the check reads
        evaluator.values = Values()
        ids = [evaluator.values.intern(v) for v in kinds]
        evaluator.attrs = type("A", (), {"paths": [(f"a{i}",) for i in range(6)]})()
        evaluator.log = WriteLog(10_000)
        choices = [0] + rng.sample(ids, rng.randint(1, 2))  # null, and one or two kinds of values
        for unit in range(rng.randint(1, 3)):
            n = rng.randint(0, 12)
            attrs = np.array([rng.randrange(1, 6) for _ in range(n)], dtype=np.int64)
            orders = np.array(sorted(rng.randrange(10_000) for _ in range(n)), dtype=np.int64)
            values = np.array([rng.choice(choices) for _ in range(n)], dtype=np.int64)
            evaluator.log.add(unit, attrs, orders, values)
        parts = list(evaluator.log.parts.values())
        attrs, orders, values = (np.concatenate([p[i] for p in parts]) for i in range(3))
        order = np.lexsort((orders, attrs))
        try:
            evaluator._check_types(attrs[order], orders[order], values[order])
            passes = True
        except StateTypeError:
            passes = False
        assert evaluator.types_agree() == passes


def test_systems_build_once_keep_their_order_and_travel_built() -> None:
    calls: list[str] = []

    def later(name: str) -> object:
        calls.append(name)
        return name.upper()

    systems = Systems()
    systems["a"] = "A"  # type: ignore[assignment]
    systems.defer("b", lambda: later("b"))  # type: ignore[arg-type,return-value]
    systems["c"] = "C"  # type: ignore[assignment]
    assert list(systems) == ["a", "b", "c"] and not calls
    assert systems["b"] == "B" and systems["b"] == "B" and calls == ["b"]
    systems.defer("d", lambda: later("d"))  # type: ignore[arg-type,return-value]
    copy = pickle.loads(pickle.dumps(systems))
    assert dict(copy.items()) == {"a": "A", "b": "B", "c": "C", "d": "D"} and calls == ["b", "d"]
