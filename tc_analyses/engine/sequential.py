"""A sequential unit run on precomputed columns: only the reads of state happen event by event.

Changes that read each other's writes (GPU sub-lanes: the first free lane is chosen by reading
the lanes, the lane is written by reading the choice) cannot run a class at a time, so the
columnar engine runs them event by event. The interpreter's compiled changes do that with a
Value object, a path tuple and a dict walk for every element of every path (60 µs an event on
gpu.xml: 17 s for the 283 k activity events of a 1M-event Kineto import). Here, before the loop, everything that does not depend on state is computed for all
rows of a class with the engine's array expressions: each path becomes a key into its distinct
paths, each value a value id, each condition on fields a boolean. The loop left per event is
integer lookups: resolve a path key to its attribute (made the first time, in the order the
interpreter makes it), read or write the attribute's current value id, compare two value ids
(each distinct pair compared once with Trace Compass's rules).

What it covers: if/then/else trees of conditions (and, or, not; an attribute's value or a field
against a value; any operator), plain changes and increments whose paths read no state, and
values that are constants, fields or a query of what *other* units wrote (a string table): all of
those units ran before this one, so the query is an as-of read of their log, made without making
attributes; the query's attribute is made in the loop, when the interpreter would make it. A
query of this unit's own writes, a query in a path, a peek or a stack action raises
:class:`Unsupported`, and the unit runs on the interpreter's changes as before; so does a change
whose values or field conditions fail when computed ahead for every row (a row the interpreter
might never evaluate them for). tests/test_engine/test_sequential.py and test_sequential_fuzz.py
hold both routes to the interpreter's state systems.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from tc_analyses.engine.columns import STEPS, Evaluator, Frame, IntArray, Template
from tc_analyses.engine.grouping import unique_inverse
from tc_analyses.engine.state_system import Value
from tc_analyses.engine.xml_provider import XmlAnalysisError, _compare

Run = Callable[[int], None]
Test = Callable[[int], bool]
_NUMERIC = ("int", "long", "double")


class Unsupported(Exception):
    """A construct this runner leaves to the interpreter's compiled changes."""


class _Paths:
    """A path expression over a class's rows: per row a key into the distinct paths it resolves to."""

    def __init__(self, keys: list[int], names: list[list[int]], skip: list[bool], texts: list[str],
                 matrix: IntArray) -> None:
        self.keys = keys
        self.names = names  # each distinct path's name ids, -1 from a null element on
        self.skip = skip  # a null element: the change is skipped (the part before it is still made)
        self.texts = texts
        self.matrix = matrix  # `names` as one array (distinct paths x elements)
        self.attr = [-1] * len(names)  # the attribute of each distinct path, once made

    def path(self, key: int) -> tuple[str, ...]:
        """The attribute the key makes: the path, or the part before its null element."""
        return tuple(self.texts[n] for n in self.names[key] if n >= 0)


class SequentialRunner:
    """The changes of one sequential unit, compiled for one frame (event class) at a time."""

    def __init__(self, evaluator: Evaluator, own_write: Callable[[Template], bool]) -> None:
        self.ev = evaluator
        self.own_write = own_write  # whether this unit may write an attribute of the template
        self.current: dict[int, int] = {}  # attribute -> value id held now
        self.written: tuple[array[int], array[int], array[int]] = (array("q"), array("q"), array("q"))
        self.order = 0  # of the change running; its writes take the next steps
        self.step = 0
        self._compared: dict[str, dict[int, bool]] = {}  # operator -> (held << 31 | other) -> outcome
        self._sums: dict[tuple[int, int], int] = {}
        # the same expressions recur in a provider's branches (gpu.xml: the lane path in every
        # one): each is computed once per frame, keyed by its shape
        self._cache: dict[tuple[int, str, Any], Any] = {}
        # what each compiled function does, for tc_analyses.engine.speculative (which runs the
        # unit with array passes where it can): a tuple per function, see _spec
        self.specs: dict[Callable[..., Any], tuple[Any, ...]] = {}
        self.arrays: dict[int, IntArray] = {}  # id of a list the loop reads -> the array it was made from

    def _listed(self, column: IntArray) -> list[Any]:
        """The column as the list the loop indexes, its array kept for the array passes."""
        listed: list[Any] = column.tolist()
        self.arrays[id(listed)] = column
        return listed

    def _spec(self, function: Any, *spec: Any) -> Any:
        """Keep what `function` does: ("if", test, then, else), ("write", paths, values, queried,
        adder or None), ("attribute", paths, values, queried, operator), ("fields", outcomes),
        ("and" | "or", parts), ("not", inner)."""
        self.specs[function] = spec
        return function

    def _cached(self, frame: Frame, kind: str, shape: Any, make: Callable[[], Any]) -> Any:
        key = (id(frame), kind, shape)
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # ------------------------------------------------------------------ compiling
    def compile(self, change: Any, frame: Frame) -> Run:
        """The stateChange element as a function of a row of the frame. Unsupported if it reads
        state other than through an attribute condition, or if computing it ahead for every row
        fails (on a row the interpreter might never evaluate it for)."""
        rows = np.arange(len(frame.rows), dtype=np.int64)
        try:
            return self._change(change, frame, rows)
        except Unsupported:
            raise
        except Exception as exc:  # noqa: BLE001 - computed for every row, also rows whose branch never
            # runs (a NaN forced to a long, an unknown operator): the interpreter's changes decide
            raise Unsupported(f"{type(exc).__name__} computing ahead: {exc}") from None

    def _change(self, element: Any, frame: Frame, rows: IntArray) -> Run:
        condition = element.find("if")
        if condition is not None:
            parts = [c for c in condition if isinstance(c.tag, str)]
            if len(parts) != 1:
                raise Unsupported("an <if> without exactly one condition")
            test = self._condition(parts[0], frame, rows)
            then = self._change(element.find("then"), frame, rows)
            otherwise = element.find("else")
            other = self._change(otherwise, frame, rows) if otherwise is not None else None

            def conditional(row: int) -> None:
                if test(row):
                    then(row)
                elif other is not None:
                    other(row)

            return self._spec(conditional, "if", test, then, other)
        value_element = element.find("stateValue")
        if value_element is None or element.find("futureTime") is not None:
            raise Unsupported("no stateValue, or a futureTime")
        if value_element.get("stack") or value_element.get("update") == "true":
            raise Unsupported("a stack action or an update")
        paths = self._paths(element.findall("stateAttribute"), frame, rows)
        values, queried = self._value(value_element, frame, rows)
        add = self._adder(value_element) if value_element.get("increment") == "true" else None
        keys, skip, made, attr_of = paths.keys, paths.skip, paths.attr, self._attribute
        current, write = self.current, self._write

        def change(row: int) -> None:
            key = keys[row]
            attr = made[key]
            if attr < 0:  # made the first time it is resolved
                attr = attr_of(paths, key)
            if skip[key]:
                return
            if queried is not None and queried.attr[queried.keys[row]] < 0:  # the query's attribute, made
                attr_of(queried, queried.keys[row])
            value = values[row]
            if add is not None and value:
                value = add(current.get(attr, 0), value, attr)
            current[attr] = value
            write(attr, value)

        if queried is not None or add is not None or any(skip):
            return self._spec(change, "write", paths, values, queried, add)

        def plain(row: int) -> None:  # the usual change (gpu.xml's): no query, increment or null element
            key = keys[row]
            attr = made[key]
            if attr < 0:
                attr = attr_of(paths, key)
            value = current[attr] = values[row]
            write(attr, value)

        return self._spec(plain, "write", paths, values, queried, None)

    def _adder(self, element: Any) -> Callable[[int, int, int], int]:
        """An increment's new value id from the held one and the increment's (each pair once)."""
        item, intern, sums = self.ev.values.item, self.ev.values.intern, self._sums

        def add(old: int, new: int, attr: int) -> int:
            total = sums.get((old, new))
            if total is None:
                by, held = item(new), item(old)
                assert by is not None
                if by.kind not in _NUMERIC:
                    total = new
                elif held is not None and held.kind != by.kind:
                    raise XmlAnalysisError(element, f"increment of a {held.kind} attribute "
                                           f"{'/'.join(self.ev.attrs.paths[attr])} by a {by.kind}: the analysis fails")
                else:
                    base: Any = held.value if held is not None else 0  # numeric: _NUMERIC kinds only
                    total = intern(Value(by.kind, base + by.value))
                sums[(old, new)] = total
            return total

        return add

    def _condition(self, element: Any, frame: Frame, rows: IntArray) -> Test:
        tag = element.tag
        if tag in ("and", "or", "not"):
            parts = [self._condition(c, frame, rows) for c in element if isinstance(c.tag, str)]
            if tag == "not":
                inner = parts[0]
                return self._spec(lambda row: not inner(row), "not", inner)
            if len(parts) == 2:  # the usual shape (gpu.xml: null or idle); and/or short-circuit as all/any
                left, right = parts
                if tag == "and":
                    return self._spec(lambda row: left(row) and right(row), tag, parts)
                return self._spec(lambda row: left(row) or right(row), tag, parts)
            if tag == "and":
                return self._spec(lambda row: all(p(row) for p in parts), tag, parts)
            return self._spec(lambda row: any(p(row) for p in parts), tag, parts)
        attributes = self.ev._inline(element.findall("stateAttribute"))
        values = element.findall("stateValue")
        if not attributes:  # on fields and constants only: decided for every row at once
            if any(_reads_state(self.ev, v) for v in values):
                raise Unsupported("a condition on fields and a query")
            outcome = self._cached(frame, "condition", _shape(element),
                                   lambda: self._listed(self.ev._condition(element, frame, rows)))
            return self._spec(outcome.__getitem__, "fields", outcome)
        if element.find("field") is not None or len(values) != 1:
            raise Unsupported("a condition of another shape")
        paths = self._paths(attributes, frame, rows)
        second, queried = self._value(values[0], frame, rows)
        operator = element.get("operator", "eq")
        keys, skip, made, attr_of = paths.keys, paths.skip, paths.attr, self._attribute
        current = self.current
        compared = self._compared.setdefault(operator, {})  # (held, other) as one int: ids are below 2^31
        item = self.ev.values.item

        def test(row: int) -> bool:
            key = keys[row]
            attr = made[key]
            if attr < 0:  # made the first time it is resolved
                attr = attr_of(paths, key)
            first = 0 if skip[key] else current.get(attr, 0)
            if queried is not None and queried.attr[queried.keys[row]] < 0:  # the query's attribute, made
                attr_of(queried, queried.keys[row])
            other = second[row]
            found = compared.get(first << 31 | other)
            if found is None:
                found = compared[first << 31 | other] = _compare(item(first), item(other), operator)
            return found

        if queried is not None or any(skip):
            return self._spec(test, "attribute", paths, second, queried, operator)

        def plain(row: int) -> bool:  # no query to make and no null element: gpu.xml's lane tests
            key = keys[row]
            attr = made[key]
            if attr < 0:
                attr = attr_of(paths, key)
            pair = current.get(attr, 0) << 31 | second[row]
            found = compared.get(pair)
            if found is None:
                found = compared[pair] = _compare(item(pair >> 31), item(pair & 0x7FFFFFFF), operator)
            return found

        return self._spec(plain, "attribute", paths, second, queried, operator)

    def _value(self, element: Any, frame: Frame, rows: IntArray) -> tuple[list[int], _Paths | None]:
        """A stateValue's value id per row, and for a query the paths whose attributes reading
        it makes."""
        found: tuple[list[int], _Paths | None] = self._cached(
            frame, "value", _shape(element), lambda: self._value_of(element, frame, rows))
        return found

    def _value_of(self, element: Any, frame: Frame, rows: IntArray) -> tuple[list[int], _Paths | None]:
        if element.get("type") != "query" or element.get("stack") == "peek":
            if _reads_state(self.ev, element):
                raise Unsupported("a peek, or a mapping group that reads the state")
            return self._listed(self.ev._value(element, frame, rows)), None
        if any(_reads_state(self.ev, v) for entry in self.ev._scope.mappings.get(element.get("mappingGroup", ""), [])
               for v in entry):
            raise Unsupported("a mapping group that reads the state")
        inner = self.ev._inline(element.findall("stateAttribute"))
        if self.own_write(self.ev._template(inner)):
            raise Unsupported("a query of what the unit itself writes")
        queried = self._paths(inner, frame, rows)
        self.ev.creating = False  # the attributes are made in the loop, for the rows that read them
        try:
            return self._listed(self.ev._value(element, frame, rows)), queried
        finally:
            self.ev.creating = True

    def _paths(self, elements: list[Any], frame: Frame, rows: IntArray) -> _Paths:
        path = self.ev._inline(elements)
        if any(e.get("type") == "query" for e in path):
            raise Unsupported("a path with a query")
        found: _Paths = self._cached(frame, "path", tuple(_shape(e) for e in path),
                                     lambda: self._paths_of(path, frame, rows))
        return found

    def _paths_of(self, path: list[Any], frame: Frame, rows: IntArray) -> _Paths:
        columns: list[IntArray] = []
        for element in path:
            columns += self._cached(frame, "names", _shape(element), partial(self.ev._elements, element, frame, rows))
        if not columns:
            return _Paths([0] * len(rows), [[]], [False], [], np.zeros((1, 0), dtype=np.int64))
        # the distinct paths, an element at a time: (path so far, next name) pairs numbered densely
        widths = [int(names.max(initial=0)) + 2 for names in columns]  # names + 1 run from 0 to width - 1
        keys = np.zeros(len(rows), dtype=np.int64)
        pairs: list[IntArray] = []  # per element: each distinct prefix as (its parent's key, name + 1)
        null = np.zeros(len(rows), dtype=bool)
        for names, width in zip(columns, widths):
            null |= names < 0  # from the first null element on, the path stays its prefix
            distinct, keys = unique_inverse(keys * width + np.where(null, -1, names) + 1)
            keys = keys.reshape(-1)
            pairs.append(distinct)
        levels = []  # each distinct path's name ids (-1: null), walked back from its last element
        key = np.arange(len(pairs[-1]), dtype=np.int64)
        for level in range(len(columns) - 1, -1, -1):
            key, name = np.divmod(pairs[level][key], widths[level])
            levels.append(name - 1)
        matrix = np.stack(levels[::-1], axis=1)
        skip: list[bool] = np.any(matrix < 0, axis=1).tolist()
        return _Paths(self._listed(keys), matrix.tolist(), skip, self.ev.names.texts, matrix)

    # ------------------------------------------------------------------ running
    def _attribute(self, paths: _Paths, key: int) -> int:
        """The key's attribute, made as the interpreter makes it: when the path is first resolved
        (for a skipped change, the part before its null element, if any)."""
        attr = paths.attr[key]
        if attr < 0:
            path = paths.path(key)
            attr = paths.attr[key] = self.ev.attrs.id_of(path)  # the empty path: the root, nothing made
        return attr

    def _write(self, attr: int, value: int) -> None:
        attrs, orders, values = self.written
        attrs.append(attr)
        step = self.step
        orders.append(self.order + (step if step < STEPS - 1 else STEPS - 1))
        values.append(value)
        self.step = step + 1


def _shape(element: Any) -> Any:
    """An expression's structure without its text and layout: equal shapes compute equal columns."""
    return (element.tag, tuple(sorted(element.attrib.items())),
            tuple(_shape(c) for c in element if isinstance(c.tag, str)))


def _reads_state(evaluator: Evaluator, element: Any) -> bool:
    """Whether a stateValue (with its mapping group's entries) reads the state system."""
    if any(e.get("type") in ("query", "peek") or e.get("stack") == "peek" for e in element.iter()):
        return True
    group = element.get("mappingGroup")
    return bool(group) and any(_reads_state(evaluator, v) for entry in evaluator._scope.mappings.get(group, [])
                               for v in entry)
