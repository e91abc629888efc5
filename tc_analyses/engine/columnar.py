"""Run an XML state provider on columns: every event of a class at once, with numpy.

The interpreter (:mod:`tc_analyses.engine.xml_provider`) applies each handler to one event after
another. Here each ``stateChange`` runs once per event class over the class's rows: paths from
fields and constants, values, conditions on fields, mapping groups and forced types become array
operations (Python runs once per distinct value, not per event). Every change made goes to a
*write log* of (attribute, order, value), where the order is the change's place in the
interpreter's run: the event's global position, then the change's index among the handlers the
event matches, then its step within the change. Then:

* a ``query`` (in a path, a value or a condition) is an as-of lookup in the log: the last value
  written to the attribute before the reading change, so the changes it reads must be logged
  first. The provider's changes are ordered by what they read and write (path templates: the
  constants of a path, any field a wildcard); a change that reads what it writes itself, other
  than through a stack or an increment, is a cycle, and the provider goes to the interpreter;
* ``stack="push"``/``"pop"`` changes on the same stack run together: the depth is a cumulative
  sum per stack attribute (a pop on an empty stack does nothing, as in Trace Compass);
* ``increment="true"`` changes and the other changes to the same attribute run together, in
  order, per attribute;
* the intervals come from the log with the state system's rules (a change to the value held
  makes nothing, several changes at one time keep the last, a type is locked by the first value).

Constructs that need event-by-event state (futureTime, update, popAll, peek,
mapping groups with non-constant entries) raise :class:`NotColumnar`; the caller runs the
interpreter instead. tests/test_engine/test_engine_equivalence.py holds both to the same result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tc_analyses.engine.columns import (STEPS, Evaluator, Frame, IntArray, NotColumnar, Template,
                                        timestamps_by_position, under, unify)
from tc_analyses.engine.events import EventClassRows
from tc_analyses.engine.state_system import StateSystem, Value
from tc_analyses.engine.xml_provider import StateProvider, XmlAnalysisError

_NUMERIC = ("int", "long", "double")


# ---------------------------------------------------------------------- the provider's changes
@dataclass
class _Leaf:
    """One stateChange branch: the if/then/else guards that lead to it, its path and value."""

    handler: int
    change: int  # index among its handler's stateChanges
    guards: list[tuple[Any, bool]]  # (condition element, required outcome)
    path: list[Any]  # stateAttribute elements, locations inlined
    value: Any  # the stateValue element
    stack: str | None
    increment: bool
    write: Template = ()
    reads: list[Template] = field(default_factory=list)


@dataclass
class _Unit:
    kind: str  # "plain", "stack" or "accumulate"
    leaves: list[int]
    writes: list[Template]


class ColumnarProvider(Evaluator):
    """A compiled stateProvider, planned for columns. Raises NotColumnar when it cannot be."""

    def __init__(self, provider: StateProvider) -> None:
        self.provider = self.compiler = provider
        self._scope = provider._scope
        self.leaves: list[_Leaf] = []
        for h, handler in enumerate(provider.element.iterfind("eventHandler")):
            for c, change in enumerate(handler.iterfind("stateChange")):
                self._flatten(h, c, change, [])
        self.units = self._plan()

    # ------------------------------------------------------------------ planning
    def _flatten(self, handler: int, change: int, element: Any, guards: list[tuple[Any, bool]]) -> None:
        condition = element.find("if")
        if condition is not None:
            test = [c for c in condition if isinstance(c.tag, str)]
            if len(test) != 1:
                raise NotColumnar("an <if> without exactly one condition")
            self._flatten(handler, change, element.find("then"), guards + [(test[0], True)])
            otherwise = element.find("else")
            if otherwise is not None:
                self._flatten(handler, change, otherwise, guards + [(test[0], False)])
            return
        value = element.find("stateValue")
        if value is None or element.find("futureTime") is not None or value.get("update") == "true":
            raise NotColumnar("futureTime or update")
        stack = value.get("stack")
        if stack in ("popAll", "peek") or value.get("type") in ("script", "peek"):
            raise NotColumnar(f"stack {stack}")
        leaf = _Leaf(handler, change, guards, self._inline(element.findall("stateAttribute")), value,
                     stack, value.get("increment") == "true")
        leaf.write = self._template(leaf.path)
        if not leaf.write:
            raise NotColumnar("an empty path")
        leaf.reads = [r for g, _ in guards for r in self._condition_reads(g)]
        leaf.reads += self._path_reads(leaf.path) + self._value_reads(value)
        self.leaves.append(leaf)

    def _path_reads(self, path: list[Any]) -> list[Template]:
        reads = []
        for element in path:
            if element.get("type") == "query":
                inner = self._inline(element.findall("stateAttribute"))
                reads += [self._template(inner)] + self._path_reads(inner)
        return reads

    def _value_reads(self, element: Any) -> list[Template]:
        reads = []
        if element.get("type") == "query":
            inner = self._inline(element.findall("stateAttribute"))
            reads += [self._template(inner)] + self._path_reads(inner)
        group = element.get("mappingGroup")
        if group:
            for source, target in self._scope.mappings.get(group, []):
                if source.get("type") not in ("int", "long", "string", "null"):
                    raise NotColumnar("a mapping group with a non-constant entry")
                reads += self._value_reads(target)
        return reads

    def _condition_reads(self, element: Any) -> list[Template]:
        if element.tag in ("and", "or", "not"):
            return [r for c in element if isinstance(c.tag, str) for r in self._condition_reads(c)]
        reads = []
        attributes = self._inline(element.findall("stateAttribute"))
        if attributes:
            reads += [self._template(attributes)] + self._path_reads(attributes)
        for value in element.findall("stateValue"):
            reads += self._value_reads(value)
        return reads

    def _plan(self) -> list[_Unit]:
        """Units of changes in an order where every read comes after the writes it can see."""
        stacks = [i for i, leaf in enumerate(self.leaves) if leaf.stack]
        counters = [i for i, leaf in enumerate(self.leaves) if leaf.increment and not leaf.stack]
        units: list[_Unit] = []
        grouped: set[int] = set()
        for kind, members in (("stack", stacks), ("accumulate", counters)):
            for i in members:
                if i in grouped:
                    continue
                group = [i]
                grouped.add(i)
                for j, other in enumerate(self.leaves):
                    if j in grouped:
                        continue
                    same = any(unify(self.leaves[g].write, other.write) for g in group)
                    if same and (kind == "accumulate" or other.stack):
                        group.append(j)
                        grouped.add(j)
                units.append(_Unit(kind, group, [self.leaves[g].write for g in group]))
        for i, leaf in enumerate(self.leaves):
            if i not in grouped:
                units.append(_Unit("plain", [i], [leaf.write]))
        for unit in units:  # nothing else may write into a stack: its pops null whole subtrees
            if unit.kind == "stack":
                for rival in units:
                    if rival is not unit and any(under(t, w) for t in unit.writes for w in rival.writes):
                        raise NotColumnar("a stack whose attributes other changes write")
        return _ordered(units, [[r for i in u.leaves for r in self.leaves[i].reads] for u in units])

    # ------------------------------------------------------------------ running
    def run(self, classes: list[EventClassRows], span: tuple[int, int]) -> StateSystem:
        handlers = self.provider._handlers
        matched = {rows.name: [h for h, (pattern, _) in enumerate(handlers) if pattern.fullmatch(rows.name)]
                   for rows in classes if len(rows)}
        changes = [len(list(changes)) for _, changes in handlers]
        k_max = max([sum(changes[h] for h in hs) for hs in matched.values()] + [1])
        total = int(max((int(r.positions.max()) for r in classes if len(r)), default=0)) + 1
        self._k = k_max
        Evaluator.__init__(self, self.provider, total * k_max * STEPS + 1)
        self._frames: dict[tuple[int, str], Frame] = {}
        by_name = {rows.name: rows for rows in classes}
        self._leaf_frames: list[list[Frame]] = []
        for leaf in self.leaves:
            frames = []
            for name, hs in matched.items():
                if leaf.handler in hs:
                    k = sum(changes[h] for h in hs[:hs.index(leaf.handler)]) + leaf.change
                    rows = by_name[name]
                    frames.append(Frame(rows, rows.positions * k_max + k))
            self._leaf_frames.append(frames)
        self._unit_of = {i: u for u, unit in enumerate(self.units) for i in unit.leaves}
        for u, unit in enumerate(self.units):
            if unit.kind == "stack":
                self._run_stack(u, unit)
            elif unit.kind == "accumulate":
                self._run_accumulate(u, unit)
            else:
                attrs, bases, values, _ = self._evaluate(unit.leaves[0])
                self.log.add(u, attrs, bases * STEPS, values)
        return self.state_system(timestamps_by_position(classes), span, k_max)

    def _writers(self, template: Template) -> tuple[int, ...]:
        return tuple(u for u, unit in enumerate(self.units) if any(
            (under(w, template) if unit.kind == "stack" else unify(w, template)) for w in unit.writes))

    def _evaluate(self, index: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(attribute, base order, value, leaf) of every row the leaf changes."""
        leaf = self.leaves[index]
        out = []
        for frame in self._leaf_frames[index]:
            rows = np.arange(len(frame.rows), dtype=np.int64)
            for condition, outcome in leaf.guards:
                rows = rows[self._condition(condition, frame, rows) == outcome]
            rows, attrs = self._path(leaf.path, frame, rows)
            values = self._value(leaf.value, frame, rows)
            out.append((attrs, frame.base[rows], values))
        if not out:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty, empty
        attrs, bases, values = (np.concatenate([o[i] for o in out]) for i in range(3))
        return attrs, bases, values, np.full(len(attrs), index, dtype=np.int64)

    # ------------------------------------------------------------------ units that keep state
    def _run_accumulate(self, u: int, unit: _Unit) -> None:
        """Increments and the other changes of the same attributes, in order per attribute."""
        parts = [self._evaluate(i) for i in unit.leaves]
        attrs, bases, values, leaves = (np.concatenate([p[i] for p in parts]) for i in range(4))
        order = np.lexsort((bases, attrs))
        out = np.empty(len(order), dtype=np.int64)
        current: dict[int, int] = {}
        items = self.values.items
        for n, (a, v, leaf) in enumerate(zip(attrs[order].tolist(), values[order].tolist(), leaves[order].tolist())):
            new = items[v]
            if self.leaves[leaf].increment and new is not None and new.kind in _NUMERIC:
                old = items[current.get(a, 0)]
                if old is not None and old.kind != new.kind:
                    raise XmlAnalysisError(self.leaves[leaf].value, f"increment of a {old.kind} attribute "
                                           f"{'/'.join(self.attrs.paths[a])} by a {new.kind}: the analysis fails")
                v = self.values.intern(Value(new.kind, (old.value if old is not None else 0) + new.value))
            current[a] = v
            out[n] = v
        self.log.add(u, attrs[order], bases[order] * STEPS, out)

    def _run_stack(self, u: int, unit: _Unit) -> None:
        """Pushes and pops: the depth per stack attribute is a running sum; a pop at depth 0 does nothing."""
        parts = [self._evaluate(i) for i in unit.leaves]
        attrs, bases, values, leaves = (np.concatenate([p[i] for p in parts]) for i in range(4))
        push = np.array([self.leaves[i].stack == "push" for i in range(len(self.leaves))])[leaves] if len(leaves) \
            else np.zeros(0, dtype=bool)
        order = np.lexsort((bases, attrs))
        attrs, bases, values, push = attrs[order], bases[order], values[order], push[order]
        step = np.where(push, 1, -1)
        depth = _running_depth(attrs, step)  # depth before each change
        done = push | (depth > 0)  # a pop on an empty stack writes nothing
        attrs, bases, values, push, depth = attrs[done], bases[done], values[done], push[done], depth[done]
        level = np.where(push, depth + 1, depth)  # the element pushed or popped
        level_names = np.array([self.names.intern(str(d)) for d in range(int(level.max(initial=0)) + 1)])
        elements = self.attrs.child(attrs, level_names[level], self.names.texts)
        after = depth + step[done]
        counts = np.array([self.values.intern(Value("int", d) if d else None) for d in range(int(after.max(initial=0)) + 1)])
        depth_values = counts[after]
        orders = bases * STEPS
        # push: the depth, then the element; pop: the element (nulled), then the depth
        self.log.add(u, np.concatenate([np.where(push, attrs, elements), np.where(push, elements, attrs)]),
                     np.concatenate([orders, orders + 1]),
                     np.concatenate([np.where(push, depth_values, 0), np.where(push, values, depth_values)]))

def _ordered(units: list[_Unit], reads: list[list[Template]]) -> list[_Unit]:
    """The units in an order where each comes after every unit whose writes it reads."""
    def hits(reader: int, writer: int) -> bool:
        unit = units[writer]
        match = under if unit.kind == "stack" else unify
        return any(match(w, r) for w in unit.writes for r in reads[reader])

    needs = {i: {j for j in range(len(units)) if j != i and hits(i, j)} for i in range(len(units))}
    for i in range(len(units)):
        if hits(i, i):  # a change that reads what it writes: only the interpreter knows the order
            raise NotColumnar("a change reads an attribute it writes")
    done: list[int] = []
    while len(done) < len(units):
        ready = [i for i in range(len(units)) if i not in done and needs[i] <= set(done)]
        if not ready:
            raise NotColumnar("changes that read each other's attributes")
        done.extend(ready)
    return [units[i] for i in done]


def _running_depth(attrs: IntArray, step: IntArray) -> IntArray:
    """The stack depth before each change (rows sorted by attribute, then order); pops at 0 do nothing."""
    total = np.cumsum(step)
    starts = np.flatnonzero(np.append(True, attrs[1:] != attrs[:-1])) if len(attrs) else np.zeros(0, np.int64)
    base = np.repeat(total[starts] - step[starts], np.diff(np.append(starts, len(attrs))))
    after = total - base
    if not len(after) or after.min() >= 0:
        return after - step
    depth = np.empty(len(step), dtype=np.int64)  # an underflow somewhere: walk in order, it is rare
    current, last = 0, None
    for n, (a, s) in enumerate(zip(attrs.tolist(), step.tolist())):
        if a != last:
            current, last = 0, a
        depth[n] = current
        current = max(current + s, 0) if s < 0 else current + s
    return depth


def run_columnar(provider: StateProvider, classes: list[EventClassRows], span: tuple[int, int]) -> StateSystem:
    """The provider's state system, on columns; NotColumnar when it uses what needs the interpreter."""
    return ColumnarProvider(provider).run(classes, span)
