"""Run an XML pattern on columns, for the common shape of latency patterns.

Trace Compass's FSM runtime (:mod:`tc_analyses.engine.xml_pattern`) is sequential: scenarios
are made, take transitions and are recycled one event at a time. For two kinds of FSM the
sequence only depends on a few facts per event, so array operations decide it
(:mod:`tc_analyses.engine.scenario_slots`) and numpy does the rest:

* a **table** FSM (``multiple="false"``, one state that loops on itself, no tests): one scenario
  that takes every event its transitions name and runs their actions (dfcompass's string table);
* a **keyed pair** FSM: a waiting state whose transitions (tests on the event and on attributes
  outside the scenario) lead to a running state, whose transitions all carry one test, "the
  event's field F equals the scenario's attribute K", lead to a final state, and emit segments.
  The start actions write K from the event. Which scenario an end event completes is then the
  oldest running scenario whose K equals F.

The bookkeeping records, per scenario, its slot (Trace Compass's attribute pool, reused first in,
first out), where it was made, started and ended; the scenario attributes (``status``, ``state``,
``state/<id>/startTime``, ``startTime``) and the actions' changes are then written to the log as
arrays, and the segments read their names and fields from it, as the interpreter would at that
event. Anything else (stored fields, onentry/onexit, preconditions with tests, timers, tests on
the scenario other than the key, actions with conditions) raises NotColumnar, and the
interpreter runs the pattern.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from tc_analyses.engine.event_names import NameMatcher
from tc_analyses.engine.columns import (CURRENT_SCENARIO, STEPS, Evaluator, Frame, IntArray, NotColumnar, Template,
                                        timestamps_by_position, under, unify)
from tc_analyses.engine.events import EventClassRows
from tc_analyses.engine.grouping import lexsort_pairs, search_sorted, unique_inverse
from tc_analyses.engine.ids import Values
from tc_analyses.engine.scenario_slots import SlotRun, as_numpy, decide_slots
from tc_analyses.engine.state_system import Value
from tc_analyses.engine.xml_pattern import (IN_PROGRESS, MATCHED, PENDING, Pattern, PatternStateSystem,
                                            Segment, SegmentColumns, _event_pattern)
from tc_analyses.engine.xml_provider import event_regex, force_type

K = 64  # steps per event: creation 0-2, table actions 8-15, start actions 16-39, start 40-43,
_TABLE, _START, _STARTED, _SEGMENT, _END = 8, 16, 40, 47, 48  # segments 47, end 48-51


@dataclass
class _Transition:
    event: NameMatcher
    tests: list[Any]  # condition elements
    target: str
    actions: list[Any]  # action elements


@dataclass
class _Fsm:
    id: str
    kind: str  # "table" or "pair"
    initial: str
    starts: list[_Transition]  # table: its transitions; pair: the waiting state's
    ends: list[_Transition]  # pair: the running state's
    running: str = ""
    final: str = ""
    key_field: str = ""
    key_attribute: str = ""
    precondition: list[NameMatcher] | None = None  # table: the event patterns it takes


class ColumnarPattern(Evaluator):
    def __init__(self, pattern: Pattern) -> None:
        self.pattern = self.compiler = pattern
        self._scope = pattern._scope
        element = pattern.element
        if element.find("storedField") is not None:
            raise NotColumnar("stored fields")
        handler = element.find("patternHandler")
        self._tests = {t.get("id"): t for t in handler.iterfind("test")}
        self._action_elements = {a.get("id"): a for a in handler.iterfind("action")}
        self.fsms = [self._fsm(f) for f in handler.iterfind("fsm")]
        kinds = [f.kind for f in self.fsms]
        if "table" in kinds and "pair" in kinds and kinds.index("pair") < len(kinds) - kinds[::-1].index("table") - 1:
            raise NotColumnar("a table FSM after a pair FSM")  # its changes at an event would come after
        names = (handler.get("initial") or "").split(":")
        self.initial = {f.id for f in self.fsms if f.id in names} or {f.id for f in self.fsms}

    # ------------------------------------------------------------------ recognising the shape
    def _fsm(self, element: Any) -> _Fsm:
        if element.find("initialState") is not None or element.find("state/onentry") is not None \
                or element.find("state/onexit") is not None:
            raise NotColumnar("initialState, onentry or onexit")
        states = {s.get("id"): [self._transition(t) for t in s.findall("transition")] for s in element.findall("state")}
        finals = {f.get("id") for f in element.findall("final")} | {s for s, ts in states.items() if not ts}
        initial = element.get("initial")
        target = element.find("initial/transition")
        if initial is None and target is not None:
            initial = target.get("target")
        if initial is None:
            first = element.find("state")
            initial = first.get("id") if first is not None else None
        if initial not in states:
            raise NotColumnar("an FSM that starts final")
        fsm_id = element.get("id")
        multiple = element.get("multiple", "true") == "true"
        consuming = element.get("consuming", "true") == "true"
        preconditions = element.findall("precondition")
        if not multiple and len(states) == 1 and all(t.target == initial and not t.tests for t in states[initial]):
            if any(p.get("cond") or not p.get("event") for p in preconditions):
                raise NotColumnar("a precondition with a test")
            self._check_actions(states[initial], scenario_paths=False, segments=False)
            return _Fsm(fsm_id, "table", initial, states[initial], [],
                        precondition=[event_regex(p, p.get("event")) for p in preconditions] or None)
        if not multiple or not consuming or preconditions:
            raise NotColumnar("an FSM of another shape")
        starts = states[initial]
        running = {t.target for t in starts}
        if len(running) != 1 or (run := running.pop()) in finals or run == initial:
            raise NotColumnar("an FSM of another shape")
        ends = states[run]
        if len({t.target for t in ends} - finals) or len({t.target for t in ends}) != 1:
            raise NotColumnar("an FSM of another shape")
        keys = {self._key_test(t) for t in ends}
        if len(keys) != 1:
            raise NotColumnar("end transitions that do not share one key test")
        key_field, key_attribute = keys.pop()
        for t in starts:
            if any(CURRENT_SCENARIO in _text(test) for test in t.tests):
                raise NotColumnar("a start test on the scenario")
        self._check_actions(starts, scenario_paths=True, segments=False)
        self._check_actions(ends, scenario_paths=False, segments=True)
        writes_key = [any(self._writes(change, key_attribute) for a in t.actions for change in a.iterfind("stateChange"))
                      for t in starts]
        if not all(writes_key):
            raise NotColumnar("a start that does not set the key")
        return _Fsm(fsm_id, "pair", initial, starts, ends, run, ends[0].target, key_field, key_attribute)

    def _transition(self, element: Any) -> _Transition:
        if element.get("saveStoredFields") == "true" or element.get("clearStoredFields") == "true":
            raise NotColumnar("stored fields")
        event = _event_pattern(element, element.get("event"))
        if event is None:
            raise NotColumnar("a transition on any event")
        tests = []
        for test_id in filter(None, (element.get("cond") or "").split(":")):
            condition = [c for c in self._tests[test_id].find("if") if isinstance(c.tag, str)][0]
            tests.append(condition)
        actions = [self._action_elements[a] for a in filter(None, (element.get("action") or "").split(":"))]
        return _Transition(event, tests, element.get("target"), actions)

    def _key_test(self, transition: _Transition) -> tuple[str, str]:
        """(field F, attribute K) of the one test "F eq #CurrentScenario/K"."""
        if len(transition.tests) != 1:
            raise NotColumnar("end transitions need exactly the key test")
        test = transition.tests[0]
        named, values = test.find("field"), test.findall("stateValue")
        if test.tag != "condition" or named is None or len(values) != 1 or test.get("operator", "eq") != "eq":
            raise NotColumnar("an end test other than a key test")
        value = values[0]
        path = value.findall("stateAttribute")
        if value.get("type") != "query" or value.get("forcedType") or value.get("mappingGroup") or len(path) != 2 \
                or [p.get("type") for p in path] != ["constant", "constant"] or path[0].get("value") != CURRENT_SCENARIO:
            raise NotColumnar("an end test other than a key test")
        return named.get("name"), self.compiler._defined(path[1].get("value"), path[1])

    def _check_actions(self, transitions: list[_Transition], scenario_paths: bool, segments: bool) -> None:
        for transition in transitions:
            for action in transition.actions:
                for child in action:
                    if not isinstance(child.tag, str):
                        continue
                    if child.tag == "segment" and segments:
                        if child.find("segTime") is not None:
                            raise NotColumnar("segTime")
                        continue
                    if child.tag != "stateChange" or segments or child.find("if") is not None \
                            or child.find("futureTime") is not None:
                        raise NotColumnar(f"<{child.tag}> in this action")
                    value = child.find("stateValue")
                    if value is None or value.get("stack") or value.get("increment") == "true" \
                            or value.get("update") == "true":
                        raise NotColumnar("a stack, increment or update in an action")
                    paths = [a.get("value") for a in child.findall("stateAttribute")]
                    if CURRENT_SCENARIO in _text(value) or (not scenario_paths and CURRENT_SCENARIO in paths):
                        raise NotColumnar("an action that reads the scenario")
                    if scenario_paths and (not paths or paths[0] != CURRENT_SCENARIO):
                        raise NotColumnar("a start action that writes outside its scenario")

    def _writes(self, change: Any, attribute: str) -> bool:
        path = change.findall("stateAttribute")
        return len(path) == 2 and path[0].get("value") == CURRENT_SCENARIO and path[1].get("type") == "constant" \
            and self.compiler._defined(path[1].get("value"), path[1]) == attribute

    # ------------------------------------------------------------------ running
    def run(self, classes: list[EventClassRows], span: tuple[int, int], deferred: bool = False
            ) -> tuple[Sequence[Segment], PatternStateSystem | Callable[[], PatternStateSystem]]:
        """The segments and the state system; with `deferred`, the state system may come as a function
        that builds it (from the write log, kept until then): `analyze` reads only the segments, and
        building the system was a third of its time on a 1M-event trace. Only a log whose types
        agree is deferred, so a type error is still raised here, as Trace Compass raises it."""
        total = max((int(r.positions.max()) + 1 for r in classes if len(r)), default=0)
        Evaluator.__init__(self, self.compiler, (total + 1) * K * STEPS + 1)
        self._classes = [rows for rows in classes if len(rows)]
        self._total = total
        self._unit = 0
        self._templates: dict[int, tuple[Template | None, bool]] = {}  # log part -> what it writes
        self._slot_attrs: dict[str, IntArray] = {}
        self._fields: dict[str, dict[str, IntArray]] = {}  # class -> field -> value ids, for every frame
        self._span = span
        ts = timestamps_by_position(classes)
        self._ts = np.append(ts, span[1]) if len(ts) else np.array([span[1]], dtype=np.int64)  # +1: the end
        del ts
        batches: list[_Batch] = []
        for fsm in (f for f in self.fsms if f.kind == "table"):  # their writes are what the others read
            self._run_table(fsm)
        for index, fsm in enumerate(self.fsms):
            if fsm.kind == "pair" and fsm.id in self.initial:
                batches += [batch._replace(fsm=index) for batch in self._run_pair(fsm)]
        segments = self._segment_columns(batches)
        if deferred and self.types_agree():
            self._classes, self._fields, self._slot_attrs = [], {}, {}  # what building the system does not read
            return segments, self._built_system
        return segments, self._built_system()

    def _built_system(self) -> PatternStateSystem:
        system = self.state_system(self._ts, self._span, K, PatternStateSystem, at_history_end=self._total)
        assert isinstance(system, PatternStateSystem)
        return system

    def _segment_columns(self, batches: list["_Batch"]) -> SegmentColumns:
        """The batches' segments in the interpreter's order: by end event, then by fsm, then as emitted."""
        def joined(column: Any, dtype: Any) -> IntArray:
            parts = [np.asarray(column(b), dtype=dtype) for b in batches]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        positions = joined(lambda b: b.positions, np.int64)
        fsms = joined(lambda b: np.full(len(b.positions), b.fsm), np.int64)
        order = lexsort_pairs(fsms, positions)
        names: dict[str, int] = {}
        name_ids = joined(lambda b: _global_ids(b.texts, b.text_ids, names), np.int32)
        fields: dict[str, IntArray] = {}
        for name in dict.fromkeys(f for b in batches for f in b.fields):
            fields[name] = joined(lambda b: b.fields.get(name, np.zeros(len(b.positions), np.int64)), np.int32)[order]
        return SegmentColumns(_array("q", joined(lambda b: b.starts, np.int64)[order]),
                              _array("q", joined(lambda b: b.stops, np.int64)[order]), list(names),
                              _array("i", name_ids[order]), {k: _array("i", v) for k, v in fields.items()},
                              self.values.item)

    def _frames(self, transitions: list[_Transition]) -> list[tuple[Frame, list[int]]]:
        """Each class some transition names, with the transitions (by index) whose event matches it."""
        out = []
        for rows in self._classes:
            matching = [i for i, t in enumerate(transitions) if t.event.fullmatch(rows.name)]
            if matching:
                out.append((Frame(rows, rows.positions * K, self._fields.setdefault(rows.name, {})), matching))
        return out

    def _add(self, attrs: IntArray, orders: IntArray, values: IntArray, template: Template | None = None,
             below: bool = False) -> None:
        """Log some writes as one part; `template` says which attributes they may be (or with
        `below` be under), so that a read skips the parts that cannot hold what it reads."""
        self.log.add(self._unit, attrs, orders, values)
        self._templates[self._unit] = (template, below)
        self._unit += 1

    def _writers(self, template: Template) -> tuple[int, ...]:
        """The parts that may have written an attribute of `template` (the scenario's own
        attributes are many parts, and most reads want one kind of them)."""
        out = []
        for unit in self.log.parts:
            written, below = self._templates.get(unit, (None, False))
            if written is None or (under(written, template) if below else unify(written, template)):
                out.append(unit)
        return tuple(out)

    def _scenario_template(self, fsm: "_Fsm", *names: str) -> Template:
        return ("scenarios", fsm.id, None, *names)

    def _scenario_attr(self, fsm: _Fsm, slots: IntArray, *names: str) -> IntArray:
        """scenarios/<fsm>/<slot>/<names...> per slot."""
        known = self._slot_attrs.setdefault(fsm.id, np.zeros(0, dtype=np.int64))
        if len(slots) and int(slots.max()) >= len(known):  # the slots' own attributes, made once
            more = np.arange(len(known), int(slots.max()) + 1, dtype=np.int64)
            attrs = np.zeros(len(more), dtype=np.int64)
            for part in ("scenarios", fsm.id):
                attrs = self.attrs.child(attrs, np.full(len(more), self.names.intern(part)), self.names.texts)
            attrs = self.attrs.child(attrs, self._as_names(more, text=True), self.names.texts)
            known = self._slot_attrs[fsm.id] = np.concatenate([known, attrs])
        attrs = known[slots]
        for part in names:
            attrs = self.attrs.child(attrs, np.full(len(slots), self.names.intern(part)), self.names.texts)
        return attrs

    def _control(self, fsm: _Fsm, slots: IntArray, at: IntArray, step: int, state: str, status: int | None,
                 previous_differs: np.ndarray[Any, Any] | None = None) -> None:
        """DataDrivenScenarioHistoryBuilder.update at `at`: state/<state>/startTime (where the previous
        state differs), state, status; and for a start, startTime."""
        if not len(slots):
            return
        when = self.values_of_times(at)
        orders = (at * K + step) * STEPS
        state_value = self.values.intern(Value("string", state))
        mask = np.ones(len(slots), dtype=bool) if previous_differs is None else previous_differs
        self._add(self._scenario_attr(fsm, slots[mask], "state", state, "startTime"), orders[mask], when[mask],
                  self._scenario_template(fsm, "state", state, "startTime"))
        self._add(self._scenario_attr(fsm, slots, "state"), orders + 1, np.full(len(slots), state_value),
                  self._scenario_template(fsm, "state"))
        if status is not None:
            self._add(self._scenario_attr(fsm, slots, "status"), orders + 2,
                      np.full(len(slots), self.values.intern(Value("int", status))), self._scenario_template(fsm, "status"))

    def values_of_times(self, positions: IntArray) -> IntArray:
        return self.values.longs(self._ts[positions])

    def _run_actions(self, transition: _Transition, frame: Frame, rows: IntArray, step: int) -> None:
        """The transition's state changes, on the rows that took it."""
        index = 0
        for action in transition.actions:
            for change in action.iterfind("stateChange"):
                at = Frame(frame.rows, frame.rows.positions * K + step + index, frame.fields, frame.scenario)
                alive, attrs = self._path(self._inline(change.findall("stateAttribute")), at, rows)
                values = self._value(change.find("stateValue"), at, alive)
                self._add(attrs, at.base[alive] * STEPS, values,
                          self._template(self._inline(change.findall("stateAttribute"))))
                index += 1

    def _run_table(self, fsm: _Fsm) -> None:
        if fsm.id not in self.initial:
            return
        self.scenario_fsm = fsm.id
        slot0 = np.zeros(1, dtype=np.int64)
        self._control(fsm, slot0, np.zeros(1, dtype=np.int64), 0, fsm.initial, PENDING)
        taken: list[IntArray] = []
        for frame, matching in self._frames(fsm.starts):
            if fsm.precondition is not None and not any(p.fullmatch(frame.rows.name) for p in fsm.precondition):
                continue
            rows = np.arange(len(frame.rows), dtype=np.int64)
            frame.scenario = np.zeros(len(rows), dtype=np.int64)
            self._run_actions(fsm.starts[matching[0]], frame, rows, _TABLE)
            taken.append(frame.rows.positions)
        if not taken or not sum(len(t) for t in taken):
            return
        first = np.array([min(int(t.min()) for t in taken if len(t))], dtype=np.int64)
        self._add(self._scenario_attr(fsm, slot0, "startTime"), (first * K + _STARTED) * STEPS, self.values_of_times(first),
                  self._scenario_template(fsm, "startTime"))
        self._control(fsm, slot0, first, _STARTED + 1, fsm.initial, IN_PROGRESS, np.zeros(1, dtype=bool))
        self._null_slots(fsm, slot0, np.array([self._total], dtype=np.int64), 0)  # abandoned at the end

    def _null_slots(self, fsm: _Fsm, slots: IntArray, at: IntArray, step: int, skip: set[str] = set()) -> None:
        """StateSystem.removeAttribute of each scenario: every attribute under it becomes null."""
        parent = self.attrs.find(("scenarios", fsm.id))
        below: dict[int, list[int]] = {}  # slot -> the attributes under it, by id
        for slot_attr in self.attrs.children_of(parent) if parent is not None else []:
            found = sorted(a for a in self.attrs.subtree(slot_attr)[1:]
                           if "/".join(self.attrs.paths[a][3:]) not in skip)
            if found and self.attrs.paths[slot_attr][2].isdigit():
                below[int(self.attrs.paths[slot_attr][2])] = found
        if not below or not len(slots):
            return
        width = max(below) + 1
        counts = np.zeros(max(width, int(slots.max()) + 1), dtype=np.int64)
        counts[list(below)] = [len(v) for v in below.values()]
        table = np.array([a for slot in sorted(below) for a in below[slot]], dtype=np.int64)
        first = np.cumsum(counts) - counts  # where each slot's attributes begin in the table
        per_slot = counts[slots]
        within = np.arange(int(per_slot.sum()), dtype=np.int64) - np.repeat(np.cumsum(per_slot) - per_slot, per_slot)
        attrs = table[np.repeat(first[slots], per_slot) + within]
        orders = np.repeat((at * K + step) * STEPS, per_slot)
        self._add(attrs, orders, np.zeros(len(attrs), dtype=np.int64), self._scenario_template(fsm), below=True)

    def _run_pair(self, fsm: _Fsm) -> list["_Batch"]:
        self.scenario_fsm = fsm.id  # what #CurrentScenario names
        starts, ends = self._frames(fsm.starts), self._frames(fsm.ends)
        start_choice, start_key = self._start_facts(fsm, starts)
        end_choice, end_key = self._end_facts(fsm, ends)
        self._check_keys(start_key, end_key)
        decided = decide_slots(self._total, start_choice, start_key, end_choice, end_key)
        del start_key, end_choice, end_key  # one slot per event each: the peak of analyze is this method
        if self.missed:  # the tests the pending scenario ran, now making what they read (a subset of
            # the look-ahead's reads: when it found every path, there is nothing to make)
            for frame, matching in starts:
                self._touch_start_tests(fsm, frame, matching, as_numpy(decided.pending_saw))
        made_slot, made_at = as_numpy(decided.made_slot), as_numpy(decided.made_at)
        self._control(fsm, made_slot, made_at, 0, fsm.initial, PENDING)
        del made_slot, made_at
        start_slot, start_at = as_numpy(decided.start_slot), as_numpy(decided.start_at)
        slot_by_position = np.zeros(self._total, dtype=np.int64)
        slot_by_position[start_at] = start_slot
        for frame, matching in starts:  # the start actions, per transition taken
            taken = np.flatnonzero(np.isin(frame.rows.positions, start_at))
            choice = start_choice[frame.rows.positions[taken]]
            frame.scenario = slot_by_position[frame.rows.positions]
            for t in matching:
                self._run_actions(fsm.starts[t], frame, taken[choice == t], _START)
        del start_choice, slot_by_position, starts  # and the start frames' scenario columns
        self._add(self._scenario_attr(fsm, start_slot, "startTime"), (start_at * K + _STARTED) * STEPS,
                  self.values_of_times(start_at), self._scenario_template(fsm, "startTime"))
        self._control(fsm, start_slot, start_at, _STARTED + 1, fsm.running, IN_PROGRESS)
        end_slot, end_at = as_numpy(decided.end_slot), as_numpy(decided.end_at)
        started_at = self._started_at(decided)
        self._control(fsm, end_slot, end_at, _END + 1, fsm.final, MATCHED)
        # after every write that makes a scenario attribute: nulling one that is null changes nothing;
        # and not state, status, state/<final>/startTime: written again at the same time, the last wins
        self._null_slots(fsm, end_slot, end_at, _END, skip={"state", "status", f"state/{fsm.final}/startTime"})
        abandoned = np.array(decided.abandoned, dtype=np.int64)
        self._null_slots(fsm, abandoned, np.full(len(abandoned), self._total, dtype=np.int64), 0)
        return self._segments(fsm, ends, decided, started_at)

    def _start_facts(self, fsm: _Fsm, starts: list[tuple[Frame, list[int]]]) -> tuple[IntArray, IntArray]:
        """Per position: the first start transition whose event and tests pass (-1: none passes,
        -2: no start transition names the event), and the value its start action writes to the key."""
        choice = np.full(self._total, -2, dtype=np.int64)
        keys = np.full(self._total, -1, dtype=np.int64)
        creating, self.creating = self.creating, False  # a look-ahead: attributes are made after the loop
        self.missed = False
        try:
            for at, matching in starts:  # read after the table FSMs' changes at the same event
                frame = Frame(at.rows, at.rows.positions * K + _START, at.fields)
                rows = np.arange(len(frame.rows), dtype=np.int64)
                pick = np.full(len(rows), -1, dtype=np.int64)
                still_open = np.ones(len(rows), dtype=bool)  # a mask, not setdiff1d: no sort per transition
                open_rows = rows
                for t in matching:
                    passed = open_rows
                    for test in fsm.starts[t].tests:
                        passed = passed[self._condition(test, frame, passed)]
                    pick[passed] = t
                    still_open[passed] = False
                    open_rows = np.flatnonzero(still_open)
                choice[frame.rows.positions] = pick
                for t in matching:
                    mine = rows[pick == t]
                    keys[frame.rows.positions[mine]] = self._key_written(fsm, fsm.starts[t], frame, mine)
        finally:
            self.creating = creating
        return choice, keys

    def _key_written(self, fsm: _Fsm, transition: _Transition, frame: Frame, rows: IntArray) -> IntArray:
        """The value the start action writes to the scenario's key attribute (the last write)."""
        found = np.zeros(len(rows), dtype=np.int64)
        for action in transition.actions:
            for change in action.iterfind("stateChange"):
                if self._writes(change, fsm.key_attribute):
                    found = self._value(change.find("stateValue"), frame, rows)
        return found

    def _end_facts(self, fsm: _Fsm, ends: list[tuple[Frame, list[int]]]) -> tuple[IntArray, IntArray]:
        """Per position: the first end transition naming the event (-1: none), and the key field's value."""
        choice = np.full(self._total, -1, dtype=np.int64)
        keys = np.full(self._total, -1, dtype=np.int64)
        for frame, matching in ends:
            choice[frame.rows.positions] = matching[0]  # all share the key test: the first naming the event
            keys[frame.rows.positions] = self._field(frame, fsm.key_field)
        return choice, keys

    def _check_keys(self, *keys: IntArray) -> None:
        """Equal value ids are equal values, which is DataDrivenCondition's eq when both sides are
        all longs or all strings; a null or a mix follows rules (intValue, "null" text) left to the
        interpreter."""
        used = np.concatenate([k[k >= 0] for k in keys])
        kinds = set(np.unique(np.array(self.values.kinds, dtype=np.int64)[used]).tolist())
        if len(kinds) > 1 or kinds - {Values.KINDS["long"], Values.KINDS["string"]}:
            raise NotColumnar("keys that are null or mix types")

    def _touch_start_tests(self, fsm: _Fsm, frame: Frame, matching: list[int], saw: IntArray) -> None:
        still_open = np.isin(frame.rows.positions, saw)  # a mask, not setdiff1d: no sort per transition
        rows = np.flatnonzero(still_open)
        for t in matching:
            passed = rows
            for test in fsm.starts[t].tests:
                passed = passed[self._condition(test, frame, passed)]
            still_open[passed] = False
            rows = np.flatnonzero(still_open)

    def _started_at(self, run: SlotRun) -> IntArray:
        """Per end (in run.end_at order), where its scenario started: the slot's last start before it
        (a slot holds one scenario at a time)."""
        total = self._total + 1
        start_keys = as_numpy(run.start_slot) * total + as_numpy(run.start_at)
        order = np.argsort(start_keys)
        end_keys = as_numpy(run.end_slot) * total + as_numpy(run.end_at)
        at = search_sorted(start_keys[order], end_keys) - 1
        return as_numpy(run.start_at)[order][at] if len(at) else np.zeros(0, dtype=np.int64)

    def _segments(self, fsm: _Fsm, ends: list[tuple[Frame, list[int]]], run: SlotRun,
                  started_at: IntArray) -> list["_Batch"]:
        """The segments of the end transitions' actions, each read at its end event."""
        slot_of = np.zeros(self._total, dtype=np.int64)  # by end position
        transition_of = np.full(self._total, -1, dtype=np.int64)
        start_of = np.zeros(self._total, dtype=np.int64)
        end_at = as_numpy(run.end_at)
        slot_of[end_at] = as_numpy(run.end_slot)
        transition_of[end_at] = as_numpy(run.end_transition)
        start_of[end_at] = started_at
        out: list[_Batch] = []
        for frame, _ in ends:
            positions = frame.rows.positions
            frame = Frame(frame.rows, positions * K + _SEGMENT, frame.fields, slot_of[positions])
            taken = transition_of[positions]
            for t in np.unique(taken[taken >= 0]).tolist():
                rows = np.flatnonzero(taken == t)
                for action in fsm.ends[t].actions:
                    for segment in action.iterfind("segment"):
                        out.append(self._emit(segment, frame, rows, start_of))
        return out

    def _emit(self, element: Any, frame: Frame, rows: IntArray, start_of: IntArray) -> "_Batch":
        seg_type = element.find("segType")
        fixed = seg_type.get("segName") if seg_type is not None else None
        name_value = seg_type.find("segName/stateValue") if seg_type is not None else None
        if fixed or name_value is None:
            texts, text_ids = [fixed or ""], np.zeros(len(rows), dtype=np.int64)
        else:
            ids = self._value(name_value, frame, rows)
            unique, inverse = unique_inverse(ids)
            texts = ["null" if (v := self.values.item(i)) is None else str(v) for i in unique.tolist()]
            text_ids = inverse.reshape(-1)
        fields: dict[str, IntArray] = {}
        for seg_field in element.iterfind("segContent/segField"):
            name, kind, value = seg_field.get("name"), seg_field.get("type"), seg_field.find("stateValue")
            if kind == "null":
                continue
            if value is not None:
                ids = self._value(value, frame, rows)
            else:
                constant = seg_field.get("value")
                ids = np.full(len(rows), self.values.intern(Value("string", constant)) if constant else 0, np.int64)
            if kind is not None:  # as the field's type says: a value of another type is converted
                other = (np.frombuffer(self.values.kinds, np.int8)[ids] != Values.KINDS.get(kind, -1)) & (ids != 0)
                if other.any():
                    ids = ids.copy()
                    ids[other] = self.values.map(ids[other], lambda v: v if v is None or v.kind == kind
                                                 else force_type(v, kind, element))
            earlier = fields.get(name)
            fields[name] = ids if earlier is None else np.where(ids != 0, ids, earlier)  # a null keeps the earlier one
        positions = frame.rows.positions[rows]
        return _Batch(positions, self._ts[start_of[positions]], self._ts[positions], texts, text_ids, fields)


class _Batch(NamedTuple):
    """The segments one segment action emitted, as columns."""

    positions: IntArray  # the end event of each
    starts: IntArray
    stops: IntArray
    texts: list[str]  # the names the segments have
    text_ids: IntArray  # each segment's name, as an index into texts
    fields: dict[str, IntArray]  # field -> value id of each segment, 0 where it has none
    fsm: int = 0


def _global_ids(texts: list[str], text_ids: IntArray, names: dict[str, int]) -> IntArray:
    """A batch's name indexes as ids of `names`, new names numbered in the order the batch's
    segments first show them (as one name at a time would number them)."""
    if not len(text_ids):
        return text_ids
    seen, first = np.unique(text_ids, return_index=True)
    mapping = np.zeros(len(texts), dtype=np.int64)
    for local in seen[np.argsort(first)].tolist():
        mapping[local] = names.setdefault(texts[local], len(names))
    return mapping[text_ids]


def _array(code: str, column: IntArray) -> array[int]:
    out = array(code)
    out.frombytes(column.astype(np.int64 if code == "q" else np.int32).tobytes())
    return out


def _text(element: Any) -> str:
    from lxml import etree

    return etree.tostring(element, encoding="unicode")


def run_columnar_pattern(pattern: Pattern, classes: list[EventClassRows], span: tuple[int, int]
                         ) -> tuple[Sequence[Segment], PatternStateSystem]:
    """The pattern's segments and state system, on columns; NotColumnar for other shapes."""
    segments, system = ColumnarPattern(pattern).run(classes, span)
    assert isinstance(system, PatternStateSystem)
    return segments, system


def run_columnar_pattern_deferred(pattern: Pattern, classes: list[EventClassRows], span: tuple[int, int]
                                  ) -> tuple[Sequence[Segment], PatternStateSystem | Callable[[], PatternStateSystem]]:
    """:func:`run_columnar_pattern`, the state system as a function that builds it where it can wait."""
    return ColumnarPattern(pattern).run(classes, span, deferred=True)
