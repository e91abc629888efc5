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

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from tc_analyses.engine.columns import (STEPS, Evaluator, Frame, IntArray, NotColumnar, Template,
                                        timestamps_by_position, under, unify)
from tc_analyses.engine.events import EventClassRows
from tc_analyses.engine.grouping import lexsort_pairs
from tc_analyses.engine.ids import Values
from tc_analyses.engine.sequential import SequentialRunner, Unsupported
from tc_analyses.engine.speculative import solve
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
    kind: str  # "plain", "stack", "accumulate" or "sequential"
    leaves: list[int]
    writes: list[Template]
    prefixes: list[Template] = field(default_factory=list)  # stacks: everything below is theirs too

    def may_write(self, template: Template) -> bool:
        return any(unify(w, template) for w in self.writes) or any(under(p, template) for p in self.prefixes)


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
        if value.get("type") == "script":
            raise NotColumnar("script")
        if stack == "peek":  # a plain change whose value is the top of a stack
            stack = None
        leaf = _Leaf(handler, change, guards, self._inline(element.findall("stateAttribute")), value,
                     stack, value.get("increment") == "true")
        leaf.write = self._template(leaf.path)
        if not leaf.write:
            raise NotColumnar("an empty path")
        leaf.reads = [r for g, _ in guards for r in self._condition_reads(g)]
        leaf.reads += self._path_reads(leaf.path) + self._value_reads(value)
        if stack == "popAll":  # reads its own depth: it runs event by event (a sequential unit)
            leaf.reads.append(leaf.write)
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
        if element.get("type") in ("query", "peek") or element.get("stack") == "peek":
            inner = self._inline(element.findall("stateAttribute"))
            reads += [self._template(inner)] + self._path_reads(inner)
            if element.get("type") == "peek" or element.get("stack") == "peek":  # the depth, then the top
                reads.append(self._template(inner) + (None,))
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
                writes = [self.leaves[g].write for g in group]
                how = "sequential" if any(self.leaves[g].stack == "popAll" for g in group) else kind  # popAll:
                units.append(_Unit(how, group, writes, writes if kind == "stack" else []))  # the depth decides
        for i, leaf in enumerate(self.leaves):
            if i not in grouped:  # a peek reads a stack's top through its depth: event by event
                peeks = any(v.get("stack") == "peek" or v.get("type") == "peek" for e in
                            [leaf.value] + [g for g, _ in leaf.guards] for v in e.iter("stateValue"))
                units.append(_Unit("sequential" if peeks else "plain", [i], [leaf.write]))
        for unit in units:  # nothing else may write into a stack: its pops null whole subtrees
            if unit.kind == "stack":
                for rival in units:
                    if rival is not unit and any(under(t, w) for t in unit.writes for w in rival.writes):
                        raise NotColumnar("a stack whose attributes other changes write")
        return self._ordered(units)

    def _ordered(self, units: list[_Unit]) -> list[_Unit]:
        """The units in an order where each comes after every unit whose writes it reads. Units that
        read each other's writes (a cycle, or a change reading what it writes) become one
        "sequential" unit, with every branch of their stateChanges: it runs event by event."""
        while True:
            reads = [[r for i in u.leaves for r in self.leaves[i].reads] for u in units]
            # successors[j]: the units that read what unit j may write, in unit order
            successors = [[i for i in range(len(units)) if any(units[j].may_write(r) for r in reads[i])]
                          for j in range(len(units))]
            cyclic = [c for c in _cycles(successors) if len(c) > 1 or (
                units[next(iter(c))].kind != "sequential" and next(iter(c)) in successors[next(iter(c))])]
            # a sequential unit runs whole stateChanges: no branch of them may run in another unit
            changes_of = [{(self.leaves[i].handler, self.leaves[i].change) for i in unit.leaves} for unit in units]
            cyclic += [{u, v} for u, unit in enumerate(units) if unit.kind == "sequential"
                       for v in range(len(units)) if v != u and changes_of[u] & changes_of[v]]
            if not cyclic:  # a sequential unit reading its own writes is what it is for
                return [units[i] for i in _generations([[i for i in out if i != j] for j, out in enumerate(successors)])]
            members = set().union(*cyclic)
            changes = {(self.leaves[i].handler, self.leaves[i].change) for u in members for i in units[u].leaves}
            members |= {u for u, unit in enumerate(units)
                        if any((self.leaves[i].handler, self.leaves[i].change) in changes for i in unit.leaves)}
            merged = _Unit("sequential", sorted(i for u in members for i in units[u].leaves),
                           [w for u in members for w in units[u].writes],
                           [p for u in members for p in units[u].prefixes])
            units = [merged] + [unit for u, unit in enumerate(units) if u not in members]

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
        fields: dict[str, dict[str, IntArray]] = {}  # class -> field -> value ids: shared by its leaves
        for leaf in self.leaves:
            frames = []
            for name, hs in matched.items():
                if leaf.handler in hs:
                    k = sum(changes[h] for h in hs[:hs.index(leaf.handler)]) + leaf.change
                    rows = by_name[name]
                    frames.append(Frame(rows, rows.positions * k_max + k, fields.setdefault(name, {})))
            self._leaf_frames.append(frames)
        for u, unit in enumerate(self.units):
            if unit.kind == "stack":
                self._run_stack(u, unit)
            elif unit.kind == "accumulate":
                self._run_accumulate(u, unit)
            elif unit.kind == "sequential":
                self._run_sequential(u, unit, classes)
            else:
                attrs, bases, values, _ = self._evaluate(unit.leaves[0])
                self.log.add(u, attrs, bases * STEPS, values)
        return self.state_system(timestamps_by_position(classes), span, k_max)

    def _writers(self, template: Template) -> tuple[int, ...]:
        return tuple(u for u, unit in enumerate(self.units) if unit.may_write(template))

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
    def _run_sequential(self, u: int, unit: _Unit, classes: list[EventClassRows]) -> None:
        """Changes that read each other's writes, event by event over the rows they take, after
        replaying what the units before wrote: solved by array passes where they settle
        (:mod:`tc_analyses.engine.speculative`), else event by event on precomputed columns where
        the changes allow (:mod:`tc_analyses.engine.sequential`), else with the interpreter's
        compiled changes."""
        changes: dict[tuple[int, int], int] = {}  # (handler, change) -> a leaf of it, for its frames
        for i in unit.leaves:
            changes.setdefault((self.leaves[i].handler, self.leaves[i].change), i)
        frames = [(frame, h, c) for (h, c), i in changes.items() for frame in self._leaf_frames[i]]
        if not frames:
            return
        state, programs = self._sequential_programs(unit, frames)
        replay_attrs, replay_orders, replay_values = self._replay([r for i in unit.leaves for r in self.leaves[i].reads], u)
        if isinstance(state, SequentialRunner):  # array passes first; the loop where they do not settle
            solved = solve(state, programs, [frame.base for frame, _, _ in frames],
                           (replay_attrs, replay_orders, replay_values))
            state.specs.clear()  # they refer to the runner: a cycle, and analyses run with the collector off
            state.arrays.clear()
            if solved is not None:
                self.log.add(u, *solved)
                return
        bases = np.concatenate([frame.base for frame, _, _ in frames])
        which = np.concatenate([np.full(len(frame.base), n, dtype=np.int64) for n, (frame, _, _) in enumerate(frames)])
        rows = np.concatenate([np.arange(len(frame.base), dtype=np.int64) for frame, _, _ in frames])
        order = np.argsort(bases, kind="stable")
        current, next_replay, replays = state.current, 0, len(replay_orders)
        for base, n, row in zip(bases[order].tolist(), which[order].tolist(), rows[order].tolist()):
            at = base * STEPS
            while next_replay < replays and replay_orders[next_replay] < at:
                current[replay_attrs[next_replay]] = replay_values[next_replay]
                next_replay += 1
            state.order, state.step = at, 0
            programs[n](row)
        attrs, orders, values = (np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64)
                                 for c in state.written)
        self.log.add(u, attrs, orders, values)

    def _sequential_programs(self, unit: _Unit, frames: list[tuple[Frame, int, int]]
                             ) -> tuple["SequentialRunner | _Recorder", list[Callable[[int], None]]]:
        """Each (frame, handler, change) as a function of a row, and the state they share."""
        handlers = list(self.provider.element.iterfind("eventHandler"))
        runner = SequentialRunner(self, unit.may_write)
        try:
            return runner, [runner.compile(handlers[h].findall("stateChange")[c], frame) for frame, h, c in frames]
        except Unsupported:
            pass
        recorder = _Recorder(self)
        payloads: dict[str, list[dict[str, Any]]] = {}  # the same class's rows serve every change
        programs: list[Callable[[int], None]] = []
        for frame, h, c in frames:
            rows = frame.rows
            if rows.name not in payloads:
                payloads[rows.name] = _payloads(rows)
            programs.append(partial(_interpret, self.provider._handlers[h][1][c], rows.name, rows.ts,
                                    payloads[rows.name], recorder))
        return recorder, programs

    def _replay(self, reads: list[Template], before: int) -> tuple[list[int], list[int], list[int]]:
        """The logged writes of the units that may write what `reads` name, in order."""
        units = sorted({w for r in reads for w in self._writers(r) if w != before and w in self.log.parts})
        if not units:
            return [], [], []
        attrs, orders, values = (np.concatenate([self.log.parts[w][i] for w in units]).astype(np.int64)
                                 for i in range(3))
        order = np.argsort(orders, kind="stable")
        return attrs[order].tolist(), orders[order].tolist(), values[order].tolist()

    def _run_accumulate(self, u: int, unit: _Unit) -> None:
        """Increments and the other changes of the same attributes, in order per attribute."""
        parts = [self._evaluate(i) for i in unit.leaves]
        attrs, bases, values, leaves = (np.concatenate([p[i] for p in parts]) for i in range(4))
        order = lexsort_pairs(bases, attrs)
        increments = np.array([leaf.increment for leaf in self.leaves], dtype=bool)[leaves[order]] if len(order) \
            else np.zeros(0, dtype=bool)
        summed = long_sums(self.values, attrs[order], values[order], increments)
        if summed is not None:
            self.log.add(u, attrs[order], bases[order] * STEPS, summed)
            return
        out = np.empty(len(order), dtype=np.int64)
        current: dict[int, int] = {}
        item = self.values.item
        for n, (a, v, leaf) in enumerate(zip(attrs[order].tolist(), values[order].tolist(), leaves[order].tolist())):
            new = item(v)
            if self.leaves[leaf].increment and new is not None and new.kind in _NUMERIC:
                old = item(current.get(a, 0))
                if old is not None and old.kind != new.kind:
                    raise XmlAnalysisError(self.leaves[leaf].value, f"increment of a {old.kind} attribute "
                                           f"{'/'.join(self.attrs.paths[a])} by a {new.kind}: the analysis fails")
                base: Any = old.value if old is not None else 0  # numeric: _NUMERIC kinds only
                v = self.values.intern(Value(new.kind, base + new.value))
            current[a] = v
            out[n] = v
        self.log.add(u, attrs[order], bases[order] * STEPS, out)

    def _run_stack(self, u: int, unit: _Unit) -> None:
        """Pushes and pops: the depth per stack attribute is a running sum; a pop at depth 0 does nothing."""
        parts = [self._evaluate(i) for i in unit.leaves]
        attrs, bases, values, leaves = (np.concatenate([p[i] for p in parts]) for i in range(4))
        push = np.array([self.leaves[i].stack == "push" for i in range(len(self.leaves))])[leaves] if len(leaves) \
            else np.zeros(0, dtype=bool)
        order = lexsort_pairs(bases, attrs)
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

class _Recorder:
    """What the interpreter's compiled changes see as a state system, inside a columnar run: the
    current value of each attribute, and every change logged at the order of the change running."""

    def __init__(self, owner: "ColumnarProvider") -> None:
        self.owner, self.attrs, self.values = owner, owner.attrs, owner.values
        self.current: dict[int, int] = {}  # attribute -> value id
        self.order = 0  # of the change running; its writes take the next steps
        self.step = 0
        self.written: tuple[array[int], array[int], array[int]] = (array("q"), array("q"), array("q"))

    def attribute(self, path: tuple[str, ...]) -> int:
        return self.attrs.id_of(path)

    def ongoing(self, path: tuple[str, ...]) -> Value | None:
        return self.values.item(self.current.get(self.attrs.id_of(path), 0))

    def modify(self, path: tuple[str, ...], value: Value | None, t: int) -> None:
        attr, value_id = self.attrs.id_of(path), self.values.intern(value)
        self.current[attr] = value_id
        for column, item in zip(self.written, (attr, self.order + min(self.step, STEPS - 1), value_id)):
            column.append(item)
        self.step += 1

    def update_ongoing(self, path: tuple[str, ...], value: Value | None) -> None:
        raise NotColumnar("update")  # it rewrites the past: refused at planning already

    def subtree(self, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = self.attrs.find(path)
        return [] if found is None else [self.attrs.paths[a] for a in self.attrs.subtree(found)]


def _interpret(change: Any, name: str, ts: IntArray, fields: list[dict[str, Any]], recorder: _Recorder,
               row: int) -> None:
    """One row through the interpreter's compiled change."""
    queued: list[Any] = []
    change((name, int(ts[row]), fields[row]), recorder, queued)
    if queued:
        raise NotColumnar("futureTime")


def long_sums(table: Values, attrs: IntArray, values: IntArray, increments: IntArray) -> IntArray | None:
    """The value after each change (rows sorted by attribute, then order) when every value is
    a long or null, as running sums: an assignment (or a null increment) starts a new sum from
    its value. None where a value of another kind, or a sum past 62 bits, needs the loop."""
    kinds = np.frombuffer(table.kinds, dtype=np.int8)[values]
    if not len(values) or (kinds[values != 0] != Values.KINDS["long"]).any() or table.boxed(values).any():
        return None
    numbers = np.where(values != 0, table.payloads(values), 0)
    if max(-int(numbers.min()), int(numbers.max())) * len(numbers) >= 2**62:  # Python ints: |-2^63| fits
        return None
    summing = increments & (values != 0)
    starts = ~summing  # an assignment, or a null increment, sets the value
    starts[np.flatnonzero(np.append(True, attrs[1:] != attrs[:-1]))] = True  # each attribute's first change
    total = np.cumsum(numbers)
    first = np.maximum.accumulate(np.where(starts, np.arange(len(values)), 0))  # where each sum began
    base = total[first] - numbers[first]  # the cumulative sum before that change
    out = values.copy()
    out[summing] = table.longs((total - base)[summing])
    return out


def _payloads(rows: EventClassRows) -> list[dict[str, Any]]:
    """Each row's fields as the interpreter gets them (Python values, in the class's field order)."""
    names = list(rows.columns)
    columns = [rows.columns[name].tolist() for name in names]
    return [dict(zip(names, values)) for values in zip(*columns)] if columns else [{} for _ in range(len(rows))]


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


def _cycles(successors: list[list[int]]) -> list[set[int]]:
    """The strongly connected components of a small directed graph (Tarjan's algorithm)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    found: list[set[int]] = []

    def visit(node: int) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in successors[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            found.append(component)

    for node in range(len(successors)):
        if node not in index:
            visit(node)
    return found


def _generations(successors: list[list[int]]) -> list[int]:
    """A topological order of an acyclic graph, as networkx's topological_sort gives it: generation
    by generation (Kahn), each in the order its nodes became ready."""
    waiting = [0] * len(successors)
    for out in successors:
        for node in out:
            waiting[node] += 1
    generation = [node for node in range(len(successors)) if not waiting[node]]
    order: list[int] = []
    while generation:
        order += generation
        ready = []
        for node in generation:
            for successor in successors[node]:
                waiting[successor] -= 1
                if not waiting[successor]:
                    ready.append(successor)
        generation = ready
    return order


def run_columnar(provider: StateProvider, classes: list[EventClassRows], span: tuple[int, int]) -> StateSystem:
    """The provider's state system, on columns; NotColumnar when it uses what needs the interpreter."""
    return ColumnarProvider(provider).run(classes, span)
