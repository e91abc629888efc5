"""Random providers with a sequential unit (tests/fuzz/sequential_providers.py), each run four
ways: the interpreter event by event (the reference), the columnar engine with the unit solved by
array passes (tc_analyses/engine/speculative.py), the same with the unit's event loop on
precomputed columns (tc_analyses/engine/sequential.py), and the columnar engine with the unit on the
interpreter's compiled changes (the route before them). The three columnar routes give the same state
system or the same error on every seed; against the reference they give the same state system, and
fail where it fails.

One difference is older than the runner and left as it is: where an increment of the wrong kind and
a value of the wrong type both occur, the interpreter reports the type (StateTypeError, at the
change) and both columnar routes the increment (XmlAnalysisError: types are checked when the
intervals are built). Both are one-line errors of the analysis."""

from __future__ import annotations

import random
from typing import Any

import pytest
from lxml import etree

from tc_analyses.engine import columnar, speculative
from tc_analyses.engine.columnar import ColumnarProvider, NotColumnar, run_columnar
from tc_analyses.engine.events import rows_of
from tc_analyses.engine.sequential import SequentialRunner
from tc_analyses.engine.xml_provider import StateProvider
from tc_analyses.errors import DfcompassError
from tests.fuzz.sequential_providers import gen_events, gen_provider
from tests.test_engine.test_sequential import _on_interpreter_changes, _outcome

SEEDS = range(400)


def test_random_sequential_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = 0
    original = SequentialRunner.compile

    def counting(self: SequentialRunner, change: Any, frame: Any) -> Any:
        nonlocal compiled
        got = original(self, change, frame)
        compiled += 1
        return got

    sequential = settled = called = 0
    original_solve = speculative.solve

    def solving(*args: Any) -> Any:
        nonlocal settled, called
        got = original_solve(*args)
        called += speculative.ROUNDS > 0
        settled += got is not None
        return got

    for seed in SEEDS:
        monkeypatch.setattr(columnar, "solve", solving)
        rng = random.Random(seed)
        xml = gen_provider(rng, typed=rng.random() < 0.5)
        events = gen_events(rng)
        element = etree.fromstring(xml).find("stateProvider")
        try:
            provider = StateProvider(element)
            units = ColumnarProvider(provider).units
        except (DfcompassError, NotColumnar):
            continue
        sequential += any(u.kind == "sequential" for u in units)
        span = (events[0][1], max(e[1] for e in events))
        reference = _outcome(lambda: StateProvider(element).run(events, span))
        monkeypatch.setattr(SequentialRunner, "compile", counting)
        monkeypatch.setattr(speculative, "ROUNDS", 64)
        solved = _outcome(lambda: run_columnar(StateProvider(element), rows_of(events), span))
        monkeypatch.setattr(speculative, "ROUNDS", 0)
        columns = _outcome(lambda: run_columnar(StateProvider(element), rows_of(events), span))
        monkeypatch.setattr(SequentialRunner, "compile", _on_interpreter_changes)
        before = _outcome(lambda: run_columnar(StateProvider(element), rows_of(events), span))
        monkeypatch.undo()
        assert solved == columns == before, seed
        assert columns[0] == reference[0], seed
        if reference[0] == "ok":
            assert columns == reference, seed
    assert sequential > 300 and compiled > 300, (sequential, compiled)  # most take the column route
    assert called > 150 and settled >= 0.9 * called, (called, settled)  # and those settle by array passes
