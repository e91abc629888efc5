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

Constructs that need event-by-event state (futureTime, update, popAll, peek, pattern scenarios,
mapping groups with non-constant entries) raise :class:`NotColumnar`; the caller runs the
interpreter instead. tests/test_engine/test_engine_equivalence.py holds both to the same result.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tc_analyses.engine.events import EventClassRows
from tc_analyses.engine.state_system import Attribute, StateSystem, StateTypeError, Value
from tc_analyses.engine.xml_provider import (StateProvider, XmlAnalysisError, _compare, content_field, force_type,
                                             typed_value)

Template = tuple["str | None", ...]  # a path's constants, None where a field or a query names the element
IntArray = np.ndarray[Any, Any]
_STEPS = 4  # writes of one change: a stack change writes twice; reads come before all of them
_NUMERIC = ("int", "long", "double")


class NotColumnar(Exception):
    """A construct the columnar engine leaves to the event-by-event interpreter."""


# ---------------------------------------------------------------------- tables
class Values:
    """Every distinct state value gets an id; 0 is null."""

    def __init__(self) -> None:
        self.items: list[Value | None] = [None]
        self._ids: dict[Value, int] = {}

    def intern(self, value: Value | None) -> int:
        if value is None:
            return 0
        found = self._ids.get(value)
        if found is None:
            found = self._ids[value] = len(self.items)
            self.items.append(value)
        return found

    def map(self, ids: IntArray, fn: Callable[[Value | None], Value | None]) -> IntArray:
        """fn applied to each distinct value of `ids` once."""
        if not len(ids):
            return ids
        unique, inverse = np.unique(ids, return_inverse=True)
        return np.array([self.intern(fn(self.items[i])) for i in unique.tolist()], dtype=np.int64)[inverse]

    def of_raw(self, column: np.ndarray[Any, Any]) -> IntArray:
        """A field column as Trace Compass types it (typed_value), as value ids."""
        if column.dtype == object:  # one Python value per row: lists of events, structs
            return np.array([self.intern(typed_value(x)) for x in column.tolist()], dtype=np.int64)
        unique, inverse = np.unique(column, return_inverse=True)
        return np.array([self.intern(typed_value(x)) for x in unique.tolist()], dtype=np.int64)[inverse]


class Attributes:
    """The attribute tree: ids for paths, made with their parents as Trace Compass makes them."""

    ROOT = 0

    def __init__(self) -> None:
        self.paths: list[tuple[str, ...]] = [()]
        self._child: dict[tuple[int, str], int] = {}

    def child(self, parents: IntArray, names: list[str] | IntArray, texts: list[str]) -> IntArray:
        """The attribute `texts[name]` below each parent (made when missing)."""
        if not len(parents):
            return np.zeros(0, dtype=np.int64)
        pairs = np.stack([parents, np.asarray(names, dtype=np.int64)], axis=1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        out = np.empty(len(unique), dtype=np.int64)
        for i, (parent, name) in enumerate(unique.tolist()):
            key = (parent, texts[name])
            found = self._child.get(key)
            if found is None:
                found = self._child[key] = len(self.paths)
                self.paths.append(self.paths[parent] + (texts[name],))
            out[i] = found
        return out[inverse.reshape(-1)]


class Names:
    """Path elements (strings) as ids."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._ids: dict[str, int] = {}

    def intern(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self.texts)
            self.texts.append(text)
        return found


# ---------------------------------------------------------------------- the write log
class WriteLog:
    """Every change made so far, per unit of changes, and the as-of reads over them."""

    def __init__(self, span: int) -> None:
        self.span = span  # orders are below this
        self.parts: dict[int, tuple[IntArray, IntArray, IntArray]] = {}  # unit -> (attr, order, value)
        self._sorted: dict[tuple[int, ...], tuple[IntArray, IntArray]] = {}

    def add(self, unit: int, attrs: IntArray, orders: IntArray, values: IntArray) -> None:
        self.parts[unit] = (attrs.astype(np.int64), orders.astype(np.int64), values.astype(np.int64))

    def read(self, units: tuple[int, ...], attrs: IntArray, before: IntArray) -> IntArray:
        """The value each attribute held just before each order: the last write with a lower order."""
        if not len(attrs):
            return np.zeros(0, dtype=np.int64)
        found = self._sorted.get(units)
        if found is None:
            parts = [self.parts[u] for u in units if u in self.parts]
            a = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
            o = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
            v = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
            keys = self._keys(a, o)
            order = np.argsort(keys, kind="stable")
            found = self._sorted[units] = (keys[order], v[order])
        keys, values = found
        if not len(keys):
            return np.zeros(len(attrs), dtype=np.int64)
        at = np.searchsorted(keys, self._keys(attrs, before), side="left") - 1
        hit = (at >= 0) & (keys[np.maximum(at, 0)] // self.span == attrs)
        return np.where(hit, values[np.maximum(at, 0)], 0)

    def _keys(self, attrs: IntArray, orders: IntArray) -> IntArray:
        if len(attrs) and int(attrs.max()) >= (2**62) // self.span:
            raise NotColumnar("too many attributes and events for one 64-bit key")
        return attrs.astype(np.int64) * self.span + orders


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


@dataclass
class _Frame:
    """One event class's rows that a handler takes, with the orders of their changes."""

    rows: EventClassRows
    base: IntArray  # (position * K + k): the change's place, per row, for the leaf being run
    fields: dict[str, IntArray] = field(default_factory=dict)


class ColumnarProvider:
    """A compiled stateProvider, planned for columns. Raises NotColumnar when it cannot be."""

    def __init__(self, provider: StateProvider) -> None:
        self.provider = provider
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

    def _inline(self, elements: Iterable[Any]) -> list[Any]:
        out = []
        for element in elements:
            if element.get("type") == "location":
                name = element.get("value")
                if name not in self._scope.locations:
                    raise NotColumnar(f"unknown location {name}")
                out.extend(self._inline(self._scope.locations[name]))
            else:
                out.append(element)
        return out

    def _template(self, path: list[Any]) -> Template:
        out: list[str | None] = []
        for element in path:
            kind = element.get("type")
            if kind == "constant":
                text = self.provider._defined(element.get("value"), element)
                if text == "#CurrentScenario":
                    raise NotColumnar("#CurrentScenario")
                out.append(text)
            elif kind in ("eventField", "eventName", "query"):
                out.append(None)
            elif kind != "null":
                raise NotColumnar(f"stateAttribute type {kind}")
        return tuple(out)

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
                    same = any(_unify(self.leaves[g].write, other.write) for g in group)
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
                    if rival is not unit and any(_under(t, w) for t in unit.writes for w in rival.writes):
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
        self.values, self.names, self.attrs = Values(), Names(), Attributes()
        self.log = WriteLog(total * k_max * _STEPS + 1)
        self._frames: dict[tuple[int, str], _Frame] = {}
        by_name = {rows.name: rows for rows in classes}
        self._leaf_frames: list[list[_Frame]] = []
        for leaf in self.leaves:
            frames = []
            for name, hs in matched.items():
                if leaf.handler in hs:
                    k = sum(changes[h] for h in hs[:hs.index(leaf.handler)]) + leaf.change
                    rows = by_name[name]
                    frames.append(_Frame(rows, rows.positions * k_max + k))
            self._leaf_frames.append(frames)
        self._unit_of = {i: u for u, unit in enumerate(self.units) for i in unit.leaves}
        for u, unit in enumerate(self.units):
            if unit.kind == "stack":
                self._run_stack(u, unit)
            elif unit.kind == "accumulate":
                self._run_accumulate(u, unit)
            else:
                attrs, bases, values, _ = self._evaluate(unit.leaves[0])
                self.log.add(u, attrs, bases * _STEPS, values)
        return self._state_system(classes, span)

    def _writers(self, template: Template) -> tuple[int, ...]:
        return tuple(u for u, unit in enumerate(self.units) if any(
            (_under(w, template) if unit.kind == "stack" else _unify(w, template)) for w in unit.writes))

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

    # ------------------------------------------------------------------ expressions
    def _field(self, frame: _Frame, name: str) -> IntArray:
        found = frame.fields.get(name)
        if found is None:
            found = frame.fields[name] = self._field_ids(frame.rows, name)
        return found

    def _field_ids(self, rows: EventClassRows, name: str) -> IntArray:
        columns = rows.columns
        if "_" + name in columns:
            return self.values.of_raw(columns["_" + name])
        if name in columns and not name.startswith("_"):
            return self.values.of_raw(columns[name])
        if "." in name:
            head = name.split(".")[0]
            column = columns.get("_" + head, columns.get(head) if not head.startswith("_") else None)
            if column is not None and column.dtype == object:
                return np.array([self.values.intern(typed_value(_dotted(x, name.split(".")[1:])))
                                 for x in column.tolist()], dtype=np.int64)
        if name.lower() == "timestamp":
            return self.values.of_raw(rows.ts)
        return np.zeros(len(rows), dtype=np.int64)

    def _path(self, path: list[Any], frame: _Frame, rows: IntArray) -> tuple[IntArray, IntArray]:
        """The rows whose path has no null element, and their attributes (made as they resolve)."""
        attrs = np.zeros(len(rows), dtype=np.int64)
        for element in path:
            names = self._element(element, frame, rows)
            if names is None:
                continue
            ok = names >= 0
            if not ok.all():
                rows, attrs, names = rows[ok], attrs[ok], names[ok]
            attrs = self.attrs.child(attrs, names, self.names.texts)
        return rows, attrs

    def _element(self, element: Any, frame: _Frame, rows: IntArray) -> IntArray | None:
        """Name ids of one path element per row (-1: null, the change is skipped), None for type null."""
        kind = element.get("type")
        if kind == "constant":
            text = self.provider._defined(element.get("value"), element)
            return np.full(len(rows), self.names.intern(text), dtype=np.int64)
        if kind == "eventName":
            return np.full(len(rows), self.names.intern(frame.rows.name), dtype=np.int64)
        if kind == "null":
            return None
        if kind == "eventField":
            values = self._field(frame, element.get("value"))[rows]
        else:  # query
            values = self._query(self._inline(element.findall("stateAttribute")), frame, rows)
        return self._as_names(values)

    def _as_names(self, values: IntArray) -> IntArray:
        if not len(values):
            return values
        unique, inverse = np.unique(values, return_inverse=True)
        ids = [-1 if (v := self.values.items[i]) is None else self.names.intern(str(v)) for i in unique.tolist()]
        return np.array(ids, dtype=np.int64)[inverse]

    def _query(self, path: list[Any], frame: _Frame, rows: IntArray) -> IntArray:
        """The value each row's path holds when the change runs (null where the path is null)."""
        alive, attrs = self._path(path, frame, rows)
        out = np.zeros(len(rows), dtype=np.int64)
        if len(alive):
            got = self.log.read(self._writers(self._template(path)), attrs, frame.base[alive] * _STEPS)
            out[np.searchsorted(rows, alive)] = got
        return out

    def _value(self, element: Any, frame: _Frame, rows: IntArray) -> IntArray:
        kind, raw = element.get("type"), element.get("value")
        if kind in ("int", "long"):
            ids = np.full(len(rows), self.values.intern(Value(kind, int(self.provider._defined(raw, element)))))
        elif kind == "string":
            ids = np.full(len(rows), self.values.intern(Value("string", self.provider._defined(raw, element))))
        elif kind in ("null", "delete"):
            ids = np.zeros(len(rows), dtype=np.int64)
        elif kind == "eventField":
            ids = self._field(frame, raw or "")[rows]
        elif kind == "eventName":
            ids = np.full(len(rows), self.values.intern(Value("string", frame.rows.name)))
        elif kind == "query":
            ids = self._query(self._inline(element.findall("stateAttribute")), frame, rows)
        else:
            raise NotColumnar(f"stateValue type {kind}")
        ids = ids.astype(np.int64)
        group = element.get("mappingGroup")
        if group:
            ids = self._mapped(ids, group, frame, rows)
        forced = element.get("forcedType")
        if forced is not None:
            ids = self.values.map(ids, lambda v: force_type(v, forced, element))
        return ids

    def _mapped(self, ids: IntArray, group: str, frame: _Frame, rows: IntArray) -> IntArray:
        """DataDrivenMappingGroup: the target of the first entry whose (constant) source equals the
        value, else null; a target is evaluated only for the rows that take it."""
        out = np.zeros(len(ids), dtype=np.int64)
        open_rows = np.ones(len(ids), dtype=bool)
        for source, target in self._scope.mappings[group]:
            hit = open_rows & (ids == self.values.intern(self._constant(source)))
            if hit.any():
                out[hit] = self._value(target, frame, rows[hit])
            open_rows &= ~hit
        return out

    def _constant(self, element: Any) -> Value | None:
        kind, raw = element.get("type"), element.get("value")
        if kind in ("int", "long"):
            value: Value | None = Value(kind, int(self.provider._defined(raw, element)))
        elif kind == "string":
            value = Value("string", self.provider._defined(raw, element))
        else:
            value = None
        return force_type(value, element.get("forcedType"), element)

    def _condition(self, element: Any, frame: _Frame, rows: IntArray) -> np.ndarray[Any, Any]:
        tag = element.tag
        if tag in ("and", "or"):
            parts = [c for c in element if isinstance(c.tag, str)]
            result = np.full(len(rows), tag == "and")
            undecided = np.arange(len(rows))
            for part in parts:  # all()/any() stop at the first deciding part: later ones never run
                got = self._condition(part, frame, rows[undecided])
                decided = ~got if tag == "and" else got
                result[undecided[decided]] = tag == "or"
                undecided = undecided[~decided]
            return result
        if tag == "not":
            inner = [c for c in element if isinstance(c.tag, str)]
            return ~self._condition(inner[0], frame, rows)
        operator = element.get("operator", "eq")
        values = element.findall("stateValue")
        named = element.find("field")
        attributes = self._inline(element.findall("stateAttribute"))
        if named is not None:
            first = self._field(frame, named.get("name"))[rows]
        elif attributes:
            first = self._query(attributes, frame, rows)
        else:
            first = self._value(values.pop(0), frame, rows)
        second = self._value(values[0], frame, rows)
        if not len(rows):
            return np.zeros(0, dtype=bool)
        pairs, inverse = np.unique(np.stack([first, second], axis=1), axis=0, return_inverse=True)
        items = self.values.items
        outcome = np.array([_compare(items[a], items[b], operator) for a, b in pairs.tolist()], dtype=bool)
        return outcome[inverse.reshape(-1)]

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
        self.log.add(u, attrs[order], bases[order] * _STEPS, out)

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
        orders = bases * _STEPS
        # push: the depth, then the element; pop: the element (nulled), then the depth
        self.log.add(u, np.concatenate([np.where(push, attrs, elements), np.where(push, elements, attrs)]),
                     np.concatenate([orders, orders + 1]),
                     np.concatenate([np.where(push, depth_values, 0), np.where(push, values, depth_values)]))

    # ------------------------------------------------------------------ the state system
    def _state_system(self, classes: list[EventClassRows], span: tuple[int, int]) -> StateSystem:
        start, end = span
        parts = list(self.log.parts.values())
        attrs = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        orders = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        values = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
        ts_of = _timestamps(classes)
        times = ts_of[orders // (self._k * _STEPS)] if len(orders) else orders
        order = np.lexsort((orders, attrs))
        attrs, times, values = attrs[order], times[order], values[order]
        self._check_types(attrs, times, values)
        # groups of writes to one attribute at one time; only the last write's value stays
        new_group = np.ones(len(attrs), dtype=bool)
        new_group[1:] = (attrs[1:] != attrs[:-1]) | (times[1:] != times[:-1])
        firsts = np.flatnonzero(new_group)
        lasts = np.append(firsts[1:] - 1, len(attrs) - 1) if len(firsts) else firsts
        group_attr, group_time, group_value = attrs[firsts], times[firsts], values[lasts]
        previous = np.zeros(len(firsts), dtype=np.int64)  # the value held before the group
        same_attr = np.zeros(len(firsts), dtype=bool)
        same_attr[1:] = group_attr[1:] == group_attr[:-1]
        previous[1:] = np.where(same_attr[1:], group_value[:-1], 0)
        differs = values != np.repeat(previous, np.diff(np.append(firsts, len(attrs))))
        effective = np.logical_or.reduceat(differs, firsts) if len(firsts) else np.zeros(0, dtype=bool)
        e_attr, e_time, e_value = group_attr[effective], group_time[effective], group_value[effective]
        ss = StateSystem(start)
        ss.end = end
        bounds = np.searchsorted(e_attr, np.arange(len(self.attrs.paths) + 1))
        items = self.values.items
        for a in range(1, len(self.attrs.paths)):
            path = self.attrs.paths[a]
            t = e_time[bounds[a]:bounds[a + 1]]
            v = e_value[bounds[a]:bounds[a + 1]]
            if not len(t) or t[0] > start:  # null from the state system's start until the first change
                t, v = np.concatenate([[start], t]), np.concatenate([[0], v])
            ends = np.append(t[1:] - 1, end)
            attribute = Attribute(path, end + 1, items[int(v[-1])])
            attribute.starts = array("q", t.astype(np.int64).tobytes())
            attribute.ends = array("q", ends.astype(np.int64).tobytes())
            attribute.values = [items[i] for i in v.tolist()]
            kinds = [x.kind for x in attribute.values if x is not None]
            attribute.kind = kinds[0] if kinds else None
            ss._attributes[path] = attribute
            ss._children.setdefault(path[:-1], []).append(path)
        return ss

    def _check_types(self, attrs: IntArray, times: IntArray, values: IntArray) -> None:
        """The first value of an attribute locks its type; a value of another type fails the analysis."""
        kind_ids = {"int": 1, "long": 2, "double": 3, "string": 4}
        kinds = np.array([0] + [kind_ids[v.kind] for v in self.values.items[1:] if v is not None], dtype=np.int64)
        written = np.flatnonzero(values != 0)
        if not len(written):
            return
        a, k = attrs[written], kinds[values[written]]
        _, first = np.unique(a, return_index=True)
        locked = k[first][np.searchsorted(a[first], a)]
        bad = np.flatnonzero(k != locked)
        if len(bad):
            at = written[bad[0]]
            value = self.values.items[int(values[at])]
            held = [name for name, i in kind_ids.items() if i == locked[bad[0]]][0]
            assert value is not None
            raise StateTypeError(f"attribute {'/'.join(self.attrs.paths[int(attrs[at])])} holds {held} values, "
                                 f"cannot take a {value.kind} ({value.value!r}) at t={int(times[at])}")


def _dotted(value: Any, parts: list[str]) -> Any:
    for part in parts:
        value = content_field(value, part) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


def _unify(a: Template, b: Template) -> bool:
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _under(prefix: Template, path: Template) -> bool:
    """Whether `path` may be `prefix` or below it."""
    return len(path) >= len(prefix) and _unify(prefix, path[:len(prefix)])


def _ordered(units: list[_Unit], reads: list[list[Template]]) -> list[_Unit]:
    """The units in an order where each comes after every unit whose writes it reads."""
    def hits(reader: int, writer: int) -> bool:
        unit = units[writer]
        match = _under if unit.kind == "stack" else _unify
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


def _timestamps(classes: list[EventClassRows]) -> IntArray:
    """Each global position's timestamp."""
    total = max((int(r.positions.max()) + 1 for r in classes if len(r)), default=0)
    ts = np.zeros(total, dtype=np.int64)
    for rows in classes:
        ts[rows.positions] = rows.ts
    return ts


def run_columnar(provider: StateProvider, classes: list[EventClassRows], span: tuple[int, int]) -> StateSystem:
    """The provider's state system, on columns; NotColumnar when it uses what needs the interpreter."""
    return ColumnarProvider(provider).run(classes, span)
