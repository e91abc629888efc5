"""Run a Trace Compass XML ``pattern`` headless: finite state machines that emit latency segments.

Follows Trace Compass's data-driven FSM runtime:

* On the first event, the FSMs named in ``patternHandler@initial`` (all of them when none is
  named) get a *pending* scenario. Afterwards, before each event, every FSM with
  ``multiple="true"`` that has scenarios but no pending one gets a new pending scenario.
* For each event and FSM: if no ``precondition`` matches, the FSM ignores the event. Otherwise
  the active scenarios see it first, in creation order; in a ``consuming`` FSM (the default) the
  first one that takes a transition consumes it. Then the pending scenario sees it, unless the
  event was consumed.
* A scenario takes the first transition of its state whose event pattern and tests match,
  running its actions (state changes, segments). Its start time is the timestamp of its first
  transition; a transition into a final state ends it (MATCHED).
* A segment spans the scenario's start to the current event unless ``segTime`` says otherwise,
  and carries the scenario's stored fields plus its ``segContent``.

Scenario attributes live in the pattern's state system under ``scenarios/<fsm>/<n>``
(``status``: 0 pending, 1 in progress, 2 matched, 3 abandoned; ``state``; ``startTime``), and
``#CurrentScenario`` in a path names that node. Not supported: ``timerange`` / ``elapsedTime``
tests and ``fsmScheduleAction`` (refused with the element's line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from lxml import etree

from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.model.state_system import StateSystem, Value
from tc_analyses.model.xml_provider import Compiler, Event, XmlAnalysisError, _typed, field_value

PENDING, IN_PROGRESS, MATCHED, ABANDONED = 0, 1, 2, 3


@dataclass(frozen=True)
class Segment:
    start: int
    end: int
    name: str
    content: dict[str, Any]

    @property
    def duration(self) -> int:
        return self.end - self.start


class PatternStateSystem(StateSystem):
    """A state system that knows which scenario is running (for ``#CurrentScenario``)."""

    scenario_path: tuple[str, ...] = ()


@dataclass
class _Transition:
    event: re.Pattern[str] | None
    tests: list[Callable[[Event, StateSystem], bool]]
    target: str
    actions: list[str]
    save: bool
    clear: bool


@dataclass
class _Scenario:
    fsm: "_Fsm"
    index: int
    state: str
    status: int = PENDING
    start: int | None = None
    stored: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> tuple[str, ...]:
        return ("scenarios", self.fsm.id, str(self.index))


@dataclass
class _Fsm:
    id: str
    initial: str
    states: dict[str, list[_Transition]]
    finals: set[str]
    preconditions: list[tuple[re.Pattern[str] | None, list[Callable[[Event, StateSystem], bool]]]]
    multiple: bool
    consuming: bool
    active: list[_Scenario] = field(default_factory=list)
    pending: _Scenario | None = None
    created: int = 0


def _event_pattern(text: str | None) -> re.Pattern[str] | None:
    return None if text in (None, "") else re.compile(re.escape(text).replace(r"\*", ".*"))


class Pattern(Compiler):
    """A compiled ``pattern``: ``run(events)`` returns its segments and state system."""

    def __init__(self, element: Any) -> None:
        super().__init__(element)
        self._stored = {f.get("id"): f.get("alias") or f.get("id") for f in element.iterfind("storedField")}
        handler = element.find("patternHandler")
        if handler is None:
            raise XmlAnalysisError(element, "a pattern needs a patternHandler")
        self._tests = {t.get("id"): self._test(t) for t in handler.iterfind("test")}
        self._action_elements = {a.get("id"): a for a in handler.iterfind("action")}
        self._actions: dict[str, Callable[[Event, PatternStateSystem, _Scenario], None]] = {}
        self._fsms = [self._fsm(f) for f in handler.iterfind("fsm")]
        names = (handler.get("initial") or "").split(":")
        self._initial = [f for f in self._fsms if f.id in names] or self._fsms
        self.segments: list[Segment] = []

    # ------------------------------------------------------------------ compiling
    def _test(self, element: Any) -> Callable[[Event, StateSystem], bool]:
        condition = element.find("if")
        if condition is None:
            raise XmlAnalysisError(element, "a test needs an <if>")
        children = [c for c in condition if isinstance(c.tag, str)]
        if len(children) != 1:
            raise XmlAnalysisError(condition, "expects exactly one child condition")
        for bad in children[0].iter("timerange", "elapsedTime"):
            raise XmlAnalysisError(bad, f"<{bad.tag}> tests are not supported by the headless engine")
        return self._condition(children[0])

    def _tests_of(self, element: Any, ids: str | None) -> list[Callable[[Event, StateSystem], bool]]:
        tests = []
        for test_id in filter(None, (ids or "").split(":")):
            if test_id not in self._tests:
                raise XmlAnalysisError(element, f"unknown test {test_id!r}")
            tests.append(self._tests[test_id])
        return tests

    def _fsm(self, element: Any) -> _Fsm:
        states: dict[str, list[_Transition]] = {}
        for state in element.iter("state"):
            states[state.get("id")] = [self._transition(t) for t in state.findall("transition")]
        finals = {f.get("id") for f in element.iter("final")}
        initial = element.get("initial")
        pseudo = element.find("initial")
        if pseudo is not None:  # an <initial> pseudo-state: its transitions leave the pending state
            states["#initial"] = [self._transition(t) for t in pseudo.findall("transition")]
            initial = "#initial"
        if initial is None:
            first = element.find("state")
            initial = first.get("id") if first is not None else None
        if initial is None or (initial not in states and initial not in finals):
            raise XmlAnalysisError(element, f"fsm {element.get('id')!r} has no initial state {initial!r}")
        for transitions in states.values():
            for t in transitions:
                if t.target not in states and t.target not in finals:
                    raise XmlAnalysisError(element, f"transition to unknown state {t.target!r}")
        preconditions = [(_event_pattern(p.get("event")), self._tests_of(p, p.get("cond")))
                         for p in element.findall("precondition")]
        return _Fsm(element.get("id"), initial, states, finals, preconditions,
                    element.get("multiple", "true") == "true", element.get("consuming", "true") == "true")

    def _transition(self, element: Any) -> _Transition:
        actions = [a for a in (element.get("action") or "").split(":") if a]
        for action in actions:
            if action not in self._action_elements:
                raise XmlAnalysisError(element, f"unknown action {action!r}")
        return _Transition(_event_pattern(element.get("event")), self._tests_of(element, element.get("cond")),
                           element.get("target"), actions, element.get("saveStoredFields") == "true",
                           element.get("clearStoredFields") == "true")

    def _action(self, action_id: str) -> Callable[[Event, PatternStateSystem, _Scenario], None]:
        found = self._actions.get(action_id)
        if found is not None:
            return found
        element = self._action_elements[action_id]
        steps: list[Callable[[Event, PatternStateSystem, _Scenario], None]] = []
        for child in element:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "stateChange":
                change = self._change(child)
                steps.append(lambda e, ss, sc, change=change: change(e, ss, []))
            elif child.tag == "segment":
                steps.append(self._segment_action(child))
            elif child.tag == "action":
                nested = child.get("id") or ""
                steps.append(lambda e, ss, sc, nested=nested: self._action(nested)(e, ss, sc))
            else:
                raise XmlAnalysisError(child, f"<{child.tag}> is not supported by the headless engine")

        def run(event: Event, ss: PatternStateSystem, scenario: _Scenario) -> None:
            for step in steps:
                step(event, ss, scenario)

        self._actions[action_id] = run
        return run

    def _segment_action(self, element: Any) -> Callable[[Event, PatternStateSystem, _Scenario], None]:
        seg_type = element.find("segType")
        name_value = seg_type.find("segName/stateValue") if seg_type is not None else None
        fixed_name = seg_type.get("segName") if seg_type is not None else None
        name = self._value(name_value) if name_value is not None else None
        times = element.find("segTime")
        begin = end = duration = None
        if times is not None:
            begin = self._value(times.find("begin")) if times.find("begin") is not None else None
            end = self._value(times.find("end")) if times.find("end") is not None else None
            duration = self._value(times.find("duration")) if times.find("duration") is not None else None
        fields = []
        for seg_field in element.iterfind("segContent/segField"):
            value_element = seg_field.find("stateValue")
            constant = seg_field.get("value")
            fields.append((seg_field.get("name"), seg_field.get("type"),
                           self._value(value_element) if value_element is not None else None, constant))

        def emit(event: Event, ss: PatternStateSystem, scenario: _Scenario) -> None:
            now = event[1]
            label = fixed_name if name is None else str(name(event, ss) or "")
            start = scenario.start if scenario.start is not None else now
            stop = now
            if begin is not None and (b := begin(event, ss)) is not None:
                start = int(b.value)
            if end is not None and (e := end(event, ss)) is not None:
                stop = int(e.value)
            elif duration is not None and (d := duration(event, ss)) is not None:
                stop = start + int(d.value)
            content = {self._stored.get(k, k): v for k, v in scenario.stored.items()}
            for field_name, kind, value, constant in fields:
                got = value(event, ss) if value is not None else (Value("string", constant) if constant else None)
                content[field_name] = None if got is None or kind == "null" else (
                    str(got) if kind == "string" else int(got.value) if kind in ("int", "long") else got.value)
            self.segments.append(Segment(start, stop, label or "", content))

        return emit

    # ------------------------------------------------------------------ running
    def run(self, events: Iterable[Event]) -> tuple[list[Segment], PatternStateSystem]:
        ss: PatternStateSystem | None = None
        self.segments = []
        for fsm in self._fsms:
            fsm.active, fsm.pending, fsm.created = [], None, 0
        last = 0
        for event in events:
            ts = event[1]
            if ss is None:
                ss = PatternStateSystem(ts)
                for fsm in self._initial:
                    self._new_scenario(fsm, ss, ts)
            else:
                for fsm in self._fsms:
                    if fsm.multiple and fsm.created > 0 and fsm.pending is None:
                        self._new_scenario(fsm, ss, ts)
            last = ts
            for fsm in self._fsms:
                self._handle(fsm, event, ss)
        if ss is None:
            raise DfcompassError(f"pattern {self.id}: the trace has no events")
        ss.close(last)
        return self.segments, ss

    def _new_scenario(self, fsm: _Fsm, ss: PatternStateSystem, ts: int) -> None:
        busy = {s.index for s in fsm.active}
        index = next(i for i in range(len(busy) + 1) if i not in busy)  # scenario slots are reused
        fsm.pending = _Scenario(fsm, index, fsm.initial)
        fsm.created += 1
        ss.modify(fsm.pending.path + ("status",), Value("int", PENDING), ts)
        ss.modify(fsm.pending.path + ("state",), Value("string", fsm.initial), ts)

    def _handle(self, fsm: _Fsm, event: Event, ss: PatternStateSystem) -> None:
        name = event[0]
        if fsm.preconditions and not any((p is None or p.fullmatch(name)) and all(t(event, ss) for t in tests)
                                         for p, tests in fsm.preconditions):
            return
        consumed = False
        for scenario in list(fsm.active):
            if scenario.status != IN_PROGRESS:
                fsm.active.remove(scenario)
                continue
            if self._step(scenario, event, ss):
                consumed = True
                if fsm.consuming:
                    break
        fsm.active = [s for s in fsm.active if s.status == IN_PROGRESS]
        pending = fsm.pending
        if pending is not None and not (fsm.consuming and consumed):
            if self._step(pending, event, ss):
                fsm.pending = None
                if pending.status == IN_PROGRESS:
                    fsm.active.append(pending)

    def _step(self, scenario: _Scenario, event: Event, ss: PatternStateSystem) -> bool:
        ts = event[1]
        for transition in scenario.fsm.states.get(scenario.state, []):
            if transition.event is not None and not transition.event.fullmatch(event[0]):
                continue
            ss.scenario_path = scenario.path
            if not all(test(event, ss) for test in transition.tests):
                continue
            if scenario.status == PENDING:  # the scenario starts with its first transition
                scenario.status = IN_PROGRESS
                scenario.start = ts
                ss.modify(scenario.path + ("startTime",), Value("long", ts), ts)
            if transition.save:
                for field_id in self._stored:
                    scenario.stored[field_id] = field_value(event, field_id)
            for action in transition.actions:
                self._action(action)(event, ss, scenario)
            if transition.clear:
                scenario.stored.clear()
            scenario.state = transition.target
            if transition.target in scenario.fsm.finals:
                scenario.status = MATCHED
            ss.modify(scenario.path + ("status",), Value("int", scenario.status), ts)
            ss.modify(scenario.path + ("state",), Value("string", scenario.state), ts)
            return True
        return False


def load_patterns(path: str | Path) -> list[Pattern]:
    """Every pattern in an XML analysis file, compiled."""
    try:
        tree = etree.parse(str(path))
    except (OSError, etree.XMLSyntaxError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from None
    return [Pattern(e) for e in tree.getroot().iterfind("pattern")]


__all__ = ["Pattern", "PatternStateSystem", "Segment", "load_patterns", "_typed"]
