"""Run a Trace Compass XML ``pattern`` headless: finite state machines that emit latency segments.

Follows Trace Compass's data-driven FSM runtime:

* On the first event, the FSMs named in ``patternHandler@initial`` (all of them when none is
  named) get a *pending* scenario. Afterwards, before each event, every FSM with
  ``multiple="true"`` that has scenarios but no pending one gets a new pending scenario.
* The initial state is, by precedence, an ``<initialState>`` pseudo-state (its transitions,
  with events, tests and actions, leave the pending state), the ``fsm@initial`` attribute, the
  target of the ``<initial>`` element (only its target counts: Trace Compass ignores its event,
  cond and action), or the first ``<state>``.
* For each event and FSM: if no ``precondition`` matches, the FSM ignores the event. Otherwise
  the active scenarios see it first, in creation order; in a ``consuming`` FSM (the default) the
  first one that takes a transition consumes it. Then the pending scenario sees it, unless the
  event was consumed.
* A scenario takes the first transition of its state whose event pattern and tests match:
  the state's ``onexit`` actions, the stored fields saved (``saveStoredFields``), the
  transition's actions, the stored fields cleared (``clearStoredFields``), the target's
  ``onentry`` actions. Then a pending scenario starts (``startTime`` = now), and a target that is
  a ``<final>`` or has no transitions ends it (MATCHED): its attributes are recycled (set to null)
  and its slot ``<n>`` goes back to the pool (reused first in, first out).
* A segment spans the scenario's ``startTime`` to the current event unless ``segTime`` says
  otherwise, and carries its ``segContent`` plus the scenario's non-null stored fields (by alias).

Scenario attributes live in the pattern's state system under ``scenarios/<fsm>/<n>``
(``status``: 0 pending, 1 in progress, 2 matched; ``state`` and ``state/<id>/startTime``;
``startTime``; ``storedFields/<alias>``), and ``#CurrentScenario`` in a path names that node.
Not supported: ``timerange`` / ``elapsedTime`` tests and ``fsmScheduleAction`` (refused with the
element's line).
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable


from tc_analyses.engine.event_names import NameMatcher
from tc_analyses.engine.state_system import StateSystem, Value
from tc_analyses.model.tables import MadeOnRead
from tc_analyses.engine.xml_provider import (Compiler, Event, XmlAnalysisError, analysis_elements, content_field,
                                             event_regex, force_type, null_subtree, typed_value)
from tc_analyses.errors import DfcompassError

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


class SegmentColumns(MadeOnRead[Segment]):
    """Segments held as columns (the columnar engine's): start, end, a name id and a value id per
    content field for each segment, about 20 bytes plus 4 per field; a :class:`Segment` is made
    when one is asked for."""

    def __init__(self, starts: array[int], ends: array[int], names: list[str], name_ids: array[int],
                 fields: dict[str, array[int]], item: Callable[[int], Value | None]) -> None:
        self.starts, self.ends, self.names, self.name_ids = starts, ends, names, name_ids
        self.fields, self._item = fields, item  # field -> value id per segment, 0 where it has none

    def __len__(self) -> int:
        return len(self.starts)

    def _make(self, i: int) -> Segment:
        content = {}
        for name, ids in self.fields.items():
            value = self._item(ids[i]) if ids[i] else None
            if value is not None:
                content[name] = value.value
        return Segment(self.starts[i], self.ends[i], self.names[self.name_ids[i]], content)


class PatternStateSystem(StateSystem):
    """A state system that knows which scenario is running (for ``#CurrentScenario``)."""

    scenario_path: tuple[str, ...] = ()


@dataclass
class _Transition:
    event: NameMatcher | None
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

    @property
    def path(self) -> tuple[str, ...]:
        return ("scenarios", self.fsm.id, str(self.index))


@dataclass
class _Fsm:
    id: str
    initial: str
    states: dict[str, list[_Transition]]
    finals: set[str]
    onentry: dict[str, list[str]]
    onexit: dict[str, list[str]]
    preconditions: list[tuple[NameMatcher | None, list[Callable[[Event, StateSystem], bool]]]]
    multiple: bool
    consuming: bool
    active: list[_Scenario] = field(default_factory=list)
    pending: _Scenario | None = None
    created: int = 0
    slots: int = 0  # scenario slots made so far
    free: deque = field(default_factory=deque)  # recycled slots, reused first in, first out

    def is_final(self, state: str) -> bool:
        return state in self.finals or not self.states.get(state)  # a state without transitions is final


def _event_pattern(element: Any, text: str | None) -> NameMatcher | None:
    return None if text in (None, "") else event_regex(element, text)


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
        self._queued: list = []  # futureTime changes made by the current event's actions

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
        onentry: dict[str, list[str]] = {}
        onexit: dict[str, list[str]] = {}
        for state in element.findall("state"):
            states[state.get("id")] = [self._transition(t) for t in state.findall("transition")]
            for kind, actions in (("onentry", onentry), ("onexit", onexit)):
                found = state.find(kind)
                if found is not None:
                    actions[state.get("id")] = self._action_ids(found)
        finals = {f.get("id") for f in element.findall("final")}
        # TmfXmlFsmStateCu.compileFsm: <initialState> first, then @initial, then <initial>'s target
        initial = element.get("initial")
        pseudo = element.find("initialState")
        target = element.find("initial/transition")
        if pseudo is not None:  # a pseudo-state whose transitions leave the pending state
            states["initialState"] = [self._transition(t) for t in pseudo.findall("transition")]
            initial = "initialState"
        elif initial is None and target is not None:  # only the target counts; event, cond, action are ignored
            initial = target.get("target")
        if initial is None:
            first = element.find("state")
            initial = first.get("id") if first is not None else None
        if initial is None or (initial not in states and initial not in finals):
            raise XmlAnalysisError(element, f"fsm {element.get('id')!r} has no initial state {initial!r}")
        for transitions in states.values():
            for t in transitions:
                if t.target not in states and t.target not in finals:
                    raise XmlAnalysisError(element, f"transition to unknown state {t.target!r}")
        preconditions = [(_event_pattern(p, p.get("event")), self._tests_of(p, p.get("cond")))
                         for p in element.findall("precondition")]
        return _Fsm(element.get("id"), initial, states, finals, onentry, onexit, preconditions,
                    element.get("multiple", "true") == "true", element.get("consuming", "true") == "true")

    def _action_ids(self, element: Any) -> list[str]:
        actions = [a for a in (element.get("action") or "").split(":") if a]
        for action in actions:
            if action not in self._action_elements:
                raise XmlAnalysisError(element, f"unknown action {action!r}")
        return actions

    def _transition(self, element: Any) -> _Transition:
        return _Transition(_event_pattern(element, element.get("event")),
                           self._tests_of(element, element.get("cond")), element.get("target"),
                           self._action_ids(element), element.get("saveStoredFields") == "true",
                           element.get("clearStoredFields") == "true")

    def _action(self, action_id: str) -> Callable[[Event, PatternStateSystem, _Scenario], None]:
        found = self._actions.get(action_id)
        if found is None:
            found = self._actions[action_id] = self._action_body(self._action_elements[action_id])
        return found

    def _change_step(self, change: Any) -> Callable[[Event, PatternStateSystem, _Scenario], None]:
        def step(event: Event, ss: PatternStateSystem, scenario: _Scenario) -> None:
            change(event, ss, self._queued)

        return step

    def _action_body(self, element: Any) -> Callable[[Event, PatternStateSystem, _Scenario], None]:
        steps: list[Callable[[Event, PatternStateSystem, _Scenario], None]] = []
        for child in element:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "stateChange":
                steps.append(self._change_step(self._change(child)))
            elif child.tag == "segment":
                steps.append(self._segment_action(child))
            elif child.tag == "action":  # a nested action is compiled in place (compileNamedAction)
                steps.append(self._action_body(child))
            else:
                raise XmlAnalysisError(child, f"<{child.tag}> is not supported by the headless engine")

        def run(event: Event, ss: PatternStateSystem, scenario: _Scenario) -> None:
            for step in steps:
                step(event, ss, scenario)

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
            # DataDrivenActionSegment: the default start is the start of the ongoing interval of
            # the scenario's startTime attribute (the scenario's first transition once it ran).
            now = event[1]
            if fixed_name or name is None:  # a non-empty segName attribute wins over <segName>
                label = fixed_name or ""
            else:
                got_name = name(event, ss)
                label = "null" if got_name is None else str(got_name)  # String.valueOf
            start = ss.attribute(scenario.path + ("startTime",)).start
            stop = now
            if begin is not None and _is_number(b := begin(event, ss)):
                start = int(b.value)  # type: ignore[union-attr]
            if end is not None:
                if _is_number(e := end(event, ss)) and int(e.value) >= start:  # type: ignore[union-attr]
                    stop = int(e.value)  # type: ignore[union-attr]
            elif duration is not None and _is_number(d := duration(event, ss)):
                if start + int(d.value) >= start:  # type: ignore[union-attr]
                    stop = start + int(d.value)  # type: ignore[union-attr]
            content: dict[str, Any] = {}
            for field_name, kind, value, constant in fields:
                got = value(event, ss) if value is not None else (Value("string", constant) if constant else None)
                if kind == "null" or got is None:  # segment content has no null values
                    continue
                if kind is not None and kind != got.kind:
                    got = force_type(got, kind, element)
                content[field_name] = got.value  # type: ignore[union-attr]
            for alias in self._stored.values():  # stored fields, as the pre-2019 segment builder added them
                stored = ss.ongoing(scenario.path + ("storedFields", alias))
                if stored is not None:
                    content[alias] = stored.value
            self.segments.append(Segment(start, stop, label, content))

        return emit

    def handled(self, names: Iterable[str]) -> set[str] | None:
        """The event names (of `names`) that a precondition or transition names; None when one
        takes any event. Other events change nothing but where the next pending scenario starts."""
        patterns = [p for fsm in self._fsms for p, _ in fsm.preconditions]
        patterns += [t.event for fsm in self._fsms for ts in fsm.states.values() for t in ts]
        if any(p is None for p in patterns):
            return None
        return {name for name in names if any(p.fullmatch(name) for p in patterns if p is not None)}

    # ------------------------------------------------------------------ running
    def run(self, events: Iterable[Event], span: tuple[int, int] | None = None
            ) -> tuple[list[Segment], PatternStateSystem]:
        """Segments and state system from `events`. With `span` (the whole trace's first and last
        timestamps), `events` may leave out the events :meth:`handled` does not name, except the
        trace's first event (the initial scenarios start there) and the one right after each
        handled event (the next pending scenario starts there)."""
        ss: PatternStateSystem | None = None
        self.segments = []
        self._queued = []
        future: list[tuple[int, int, Callable[[StateSystem], None]]] = []
        order = 0
        for fsm in self._fsms:
            fsm.active, fsm.pending, fsm.created, fsm.slots, fsm.free = [], None, 0, 0, deque()
        last = 0 if span is None else span[1]
        for event in events:
            ts = event[1]
            first = ss is None
            if ss is None:
                ss = PatternStateSystem(ts)
            while future and future[0][0] <= ts:  # queued futureTime changes land before this event
                future.pop(0)[2](ss)
            if first:
                for fsm in self._initial:
                    self._new_scenario(fsm, ss, ts)
            else:
                for fsm in self._fsms:
                    if fsm.multiple and fsm.created > 0 and fsm.pending is None:
                        self._new_scenario(fsm, ss, ts)
            last = max(last, ts)
            for fsm in self._fsms:
                self._handle(fsm, event, ss)
            for when, apply in self._queued:
                order += 1
                future.append((when, order, apply))
            future.sort(key=lambda item: (item[0], item[1]))
            self._queued = []
        if ss is None:
            raise DfcompassError(f"pattern {self.id}: the trace has no events")
        for _, _, apply in future:  # leftovers apply after the last event
            apply(ss)
        self._abandon_open_scenarios(ss, ss.end)
        ss.close(last)
        return self.segments, ss

    def _abandon_open_scenarios(self, ss: PatternStateSystem, end: int) -> None:
        """Trace Compass disposes the pattern at the end of the trace: every scenario still in
        progress is abandoned (DataDrivenFsm.dispose, scenario.cancel), and completing it without an
        event recycles its node at the state system's end time (getCurrentEndTime: the end of the
        latest interval stored, the last change - 1, not the last event): its subtree becomes null
        there, or from its ongoing state's start where that is later.
        The pending scenario of each FSM is not in progress and keeps its values."""
        for fsm in self._fsms:
            for scenario in fsm.active:
                if scenario.status == IN_PROGRESS:
                    scenario.status = ABANDONED
                    null_subtree(ss, scenario.path, end)

    def _new_scenario(self, fsm: _Fsm, ss: PatternStateSystem, ts: int) -> None:
        if fsm.free:  # TmfAttributePool (FIFO): a recycled slot first, else a new one
            index = fsm.free.popleft()
        else:
            index, fsm.slots = fsm.slots, fsm.slots + 1
        fsm.pending = _Scenario(fsm, index, fsm.initial)
        fsm.created += 1
        self._update(fsm.pending, ss, ts)

    @staticmethod
    def _update(scenario: _Scenario, ss: PatternStateSystem, ts: int) -> None:
        """DataDrivenScenarioHistoryBuilder.update: state/<id>/startTime on a change of state, state, status."""
        state_path = scenario.path + ("state",)
        previous = ss.ongoing(state_path)
        if previous is None or str(previous) != scenario.state:
            ss.modify(state_path + (scenario.state, "startTime"), Value("long", ts), ts)
        ss.modify(state_path, Value("string", scenario.state), ts)
        ss.modify(scenario.path + ("status",), Value("int", scenario.status), ts)

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
        fsm = scenario.fsm
        for transition in fsm.states.get(scenario.state, []):
            if transition.event is not None and not transition.event.fullmatch(event[0]):
                continue
            ss.scenario_path = scenario.path
            if not all(test(event, ss) for test in transition.tests):
                continue
            for action in fsm.onexit.get(scenario.state, []):
                self._action(action)(event, ss, scenario)
            if transition.save:  # fields missing from the event keep their stored value
                for field_id, alias in self._stored.items():
                    found = typed_value(content_field(event[2], field_id))
                    if found is not None:
                        ss.modify(scenario.path + ("storedFields", alias), found, ts)
            for action in transition.actions:
                self._action(action)(event, ss, scenario)
            if transition.clear:
                for alias in self._stored.values():
                    ss.modify(scenario.path + ("storedFields", alias), None, ts)
            for action in fsm.onentry.get(transition.target, []):
                self._action(action)(event, ss, scenario)
            if scenario.status == PENDING:  # the scenario starts with its first transition
                scenario.status = IN_PROGRESS
                ss.modify(scenario.path + ("startTime",), Value("long", ts), ts)
            if fsm.is_final(transition.target):  # matched: the slot is recycled (its subtree nulled)
                scenario.status = MATCHED
                null_subtree(ss, scenario.path, ts)
                fsm.free.append(scenario.index)
            scenario.state = transition.target
            self._update(scenario, ss, ts)
            return True
        return False


def _is_number(value: Value | None) -> bool:
    return value is not None and value.kind in ("int", "long", "double")


def load_patterns(path: str | Path) -> list[Pattern]:
    """Every pattern in an XML analysis file, compiled."""
    return [Pattern(e) for e in analysis_elements(path, "pattern")]


__all__ = ["Pattern", "PatternStateSystem", "Segment", "load_patterns"]
