"""What the columnar engines share: the write log of every change made (in the ids of
:mod:`tc_analyses.engine.ids`), the expressions of Trace Compass's XML (paths, values,
conditions) evaluated over the rows of an event class, and the state system built from the log.

A change's *order* is its place in the interpreter's run: (global event position * K + the
change's step in the event) * STEPS + the write's step within the change. A read at a change sees
the writes of lower order, so reads and writes can be computed in any order as long as every
write an expression reads is logged before it reads (the engines plan for that).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tc_analyses.engine.events import EventClassRows
from tc_analyses.engine.grouping import search_sorted, unique_inverse
from tc_analyses.engine.ids import Attributes, IntArray, Names, Values
from tc_analyses.engine.state_system import Block, StateSystem, StateTypeError, Value
from tc_analyses.engine.xml_provider import Compiler, _compare, content_field, force_type, typed_value

Template = tuple["str | None", ...]  # a path's constants, None where a field or a query names the element
_CHUNK = 1 << 20  # writes turned into intervals at a time
STEPS = 4  # writes of one change: a stack change writes twice; reads come before all of them
CURRENT_SCENARIO = "#CurrentScenario"


class NotColumnar(Exception):
    """A construct the columnar engine leaves to the event-by-event interpreter."""


# ---------------------------------------------------------------------- the write log
def _search_grouped(haystack: IntArray, needles: IntArray, group: IntArray, groups: int) -> IntArray:
    """``np.searchsorted(haystack, needles)`` for (attribute, order) keys whose rows come in time
    order: grouped by attribute with a radix sort (16-bit group numbers), the needles are sorted
    already when each attribute's come in order, and a search of sorted needles is cache-friendly.
    Otherwise :func:`search_sorted` sorts them."""
    if groups < 1 << 16 and len(needles) >= 4096:
        by_group = np.argsort(group.astype(np.uint16), kind="stable")
        candidate = needles[by_group]
        if not (candidate[1:] < candidate[:-1]).any():
            out = np.empty(len(needles), dtype=np.int64)
            out[by_group] = np.searchsorted(haystack, candidate)
            return out
    return search_sorted(haystack, needles)


class WriteLog:
    """Every change made so far, per unit of changes, and the as-of reads over them."""

    def __init__(self, span: int) -> None:
        self.span = span  # orders are below this
        self.parts: dict[int, tuple[IntArray, IntArray, IntArray]] = {}  # unit -> (attr, order, value)

    def add(self, unit: int, attrs: IntArray, orders: IntArray, values: IntArray) -> None:
        if len(attrs) and max(int(attrs.max()), int(values.max())) >= 2**31:
            raise NotColumnar("more than 2^31 attributes or values")
        self.parts[unit] = (attrs.astype(np.int32), orders.astype(np.int64), values.astype(np.int32))  # ids fit 32 bits

    def read(self, units: tuple[int, ...], attrs: IntArray, before: IntArray) -> IntArray:
        """The value each attribute held just before each order: the last write with a lower order.
        Only the writes to the attributes asked for are sorted."""
        if not len(attrs):
            return np.zeros(0, dtype=np.int64)
        wanted, attr_index = unique_inverse(attrs)
        parts = []
        for unit in units:
            if unit in self.parts:
                a, o, v = self.parts[unit]
                hit = np.isin(a, wanted)
                parts.append((a[hit], o[hit], v[hit]))
        if not parts or not sum(len(p[0]) for p in parts):
            return np.zeros(len(attrs), dtype=np.int64)
        keys = self._keys(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        values = np.concatenate([p[2] for p in parts])
        order = np.argsort(keys, kind="stable")  # equal keys: the later write last
        keys, values = keys[order], values[order]
        at = _search_grouped(keys, self._keys(attrs, before), attr_index, len(wanted)) - 1
        hit = (at >= 0) & (keys[np.maximum(at, 0)] // self.span == attrs)
        return np.where(hit, values[np.maximum(at, 0)], 0)

    def _keys(self, attrs: IntArray, orders: IntArray) -> IntArray:
        """(attribute, order) as one sortable int64, made in place of one copy."""
        if len(attrs) and int(attrs.max()) >= (2**62) // self.span:
            raise NotColumnar("too many attributes and events for one 64-bit key")
        keys = attrs.astype(np.int64)
        keys *= self.span
        keys += orders
        return keys


@dataclass
class Frame:
    """One event class's rows, with the place of the change being run for each row."""

    rows: EventClassRows
    base: IntArray  # (position * K + k): the change's place, per row
    fields: dict[str, IntArray] = field(default_factory=dict)  # field name -> value ids, all rows
    scenario: IntArray | None = None  # patterns: the scenario slot #CurrentScenario names, per row


class Evaluator:
    """Trace Compass's XML expressions over rows of an event class, with as-of reads of the log."""

    scenario_fsm: str | None = None  # patterns: the FSM whose scenario #CurrentScenario names

    def __init__(self, compiler: Compiler, span: int) -> None:
        self.compiler = compiler
        self._scope = compiler._scope
        self.values, self.names = Values(), Names()
        self.attrs = Attributes(self.names)
        self._value_names = np.zeros(0, dtype=np.int64)  # value id -> its name id (-1 null, -2 not yet)
        self.log = WriteLog(span)
        self.creating = True  # paths make their attributes, as Trace Compass's do; off for look-ahead
        self.missed = False  # a look-ahead met a path that does not exist yet (it would have made it)

    def _writers(self, template: Template) -> tuple[int, ...]:
        """The log units a read of `template` must see (all of them, unless a planner knows better)."""
        return tuple(self.log.parts)

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
                text = self.compiler._defined(element.get("value"), element)
                if text == CURRENT_SCENARIO:
                    if self.scenario_fsm is None:
                        raise NotColumnar("#CurrentScenario outside a pattern")
                    out.extend(("scenarios", self.scenario_fsm, None))
                else:
                    out.append(text)
            elif kind in ("eventField", "eventName", "query"):
                out.append(None)
            elif kind != "null":
                raise NotColumnar(f"stateAttribute type {kind}")
        return tuple(out)

    # ------------------------------------------------------------------ expressions
    def _field(self, frame: Frame, name: str) -> IntArray:
        found = frame.fields.get(name)
        if found is None:
            found = frame.fields[name] = self._field_ids(frame.rows, name)
        return found

    def _field_ids(self, rows: EventClassRows, name: str) -> IntArray:
        """A field's value ids by field_value's rules, row by row: the field, else (where a row's
        is missing) the dotted path, else the event's time for "timestamp"."""
        columns = rows.columns
        out = np.zeros(len(rows), dtype=np.int64)
        missing = np.ones(len(rows), dtype=bool)  # rows whose raw field is still None
        column = columns["_" + name] if "_" + name in columns else \
            (columns.get(name) if not name.startswith("_") else None)
        if column is not None:
            out = self.values.of_raw(column)
            # rows the later rules may fill; without such a rule, none (no scan of the column)
            fallback = "." in name or name.lower() == "timestamp"
            missing = _nones(column) if fallback else np.zeros(len(rows), dtype=bool)
        if missing.any() and "." in name:
            head = name.split(".")[0]
            column = columns.get("_" + head, columns.get(head) if not head.startswith("_") else None)
            if column is not None and column.dtype == object:
                at = np.flatnonzero(missing)
                found = [_dotted(x, name.split(".")[1:]) for x in column[at].tolist()]
                out[at] = [self.values.intern(typed_value(x)) for x in found]
                missing[at] = [x is None for x in found]
        if missing.any() and name.lower() == "timestamp":
            out[missing] = self.values.of_raw(rows.ts[missing])
        return out

    def _path(self, path: list[Any], frame: Frame, rows: IntArray) -> tuple[IntArray, IntArray]:
        """The rows whose path has no null element, and their attributes (made as they resolve)."""
        attrs = np.zeros(len(rows), dtype=np.int64)
        for element in path:
            for names in self._elements(element, frame, rows):
                ok = names >= 0
                if not ok.all():
                    rows, attrs, names = rows[ok], attrs[ok], names[ok]
                attrs = self.attrs.child(attrs, names, self.names.texts, self.creating)
        if not self.creating and not self.missed and (attrs < 0).any():  # -1 below a missing parent too
            self.missed = True
        return rows, attrs

    def _elements(self, element: Any, frame: Frame, rows: IntArray) -> list[IntArray]:
        """Name ids of the path elements one stateAttribute gives, per row (-1: null, the change
        is skipped): none for type null, three for #CurrentScenario."""
        kind = element.get("type")
        if kind == "constant":
            text = self.compiler._defined(element.get("value"), element)
            if text == CURRENT_SCENARIO:
                if frame.scenario is None or self.scenario_fsm is None:
                    raise NotColumnar("#CurrentScenario outside a pattern")
                slots = self._as_names(frame.scenario[rows], text=True)
                return [np.full(len(rows), self.names.intern("scenarios"), dtype=np.int64),
                        np.full(len(rows), self.names.intern(self.scenario_fsm), dtype=np.int64), slots]
            return [np.full(len(rows), self.names.intern(text), dtype=np.int64)]
        if kind == "eventName":
            return [np.full(len(rows), self.names.intern(frame.rows.name), dtype=np.int64)]
        if kind == "null":
            return []
        if kind == "eventField":
            values = self._field(frame, element.get("value"))[rows]
        else:  # query
            values = self._query(self._inline(element.findall("stateAttribute")), frame, rows)
        return [self._as_names(values)]

    def _as_names(self, values: IntArray, text: bool = False) -> IntArray:
        """Value ids (or with `text` plain integers) as path elements: String.valueOf, null -1."""
        if not len(values):
            return values
        if text:
            unique, inverse = unique_inverse(values)
            return np.array([self.names.intern(str(i)) for i in unique.tolist()], dtype=np.int64)[inverse]
        # a value's name never changes: each value id is named once per engine run, the same field
        # columns making the paths of many changes
        known = self._value_names
        if len(known) < len(self.values):
            known = self._value_names = np.concatenate(
                [known, np.full(len(self.values) - len(known), -2, dtype=np.int64)])
        out = known[values]
        missing = out == -2
        if missing.any():
            unique = np.unique(values[missing])
            intern = self.names.intern
            known[unique] = [-1 if t is None else intern(t) for t in self.values.texts(unique)]
            out = known[values]
        return out

    def _query(self, path: list[Any], frame: Frame, rows: IntArray) -> IntArray:
        """The value each row's path holds when the change runs (null where the path is null)."""
        alive, attrs = self._path(path, frame, rows)
        out = np.zeros(len(rows), dtype=np.int64)
        if len(alive):
            got = self.log.read(self._writers(self._template(path)), attrs, frame.base[alive] * STEPS)
            out[np.searchsorted(rows, alive)] = got
        return out

    def _value(self, element: Any, frame: Frame, rows: IntArray) -> IntArray:
        kind, raw = element.get("type"), element.get("value")
        if element.get("stack") == "peek":
            raise NotColumnar("a peek outside a sequential unit")
        if kind in ("int", "long"):
            ids = np.full(len(rows), self.values.intern(Value(kind, int(self.compiler._defined(raw, element)))))
        elif kind == "string":
            ids = np.full(len(rows), self.values.intern(Value("string", self.compiler._defined(raw, element))))
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

    def _mapped(self, ids: IntArray, group: str, frame: Frame, rows: IntArray) -> IntArray:
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
            value: Value | None = Value(kind, int(self.compiler._defined(raw, element)))
        elif kind == "string":
            value = Value("string", self.compiler._defined(raw, element))
        else:
            value = None
        return force_type(value, element.get("forcedType"), element)

    def _condition(self, element: Any, frame: Frame, rows: IntArray) -> np.ndarray[Any, Any]:
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
        width = int(second.max()) + 1
        pairs, inverse = unique_inverse(first * width + second)  # one key per pair
        item = self.values.item
        outcome = np.array([_compare(item(a), item(b), operator) for a, b in
                            (divmod(pair, width) for pair in pairs.tolist())], dtype=bool)
        return outcome[inverse.reshape(-1)]

    def state_system(self, ts_of: IntArray, span: tuple[int, int], k: int,
                     kind: type[StateSystem] = StateSystem, at_history_end: int | None = None) -> StateSystem:
        """The state system the logged writes make, closed at the span's end as Trace Compass closes
        it; `ts_of` gives each global position's timestamp. The writes logged at position
        `at_history_end` are made once every other write is, at the history's end time as Trace
        Compass's getCurrentEndTime gives it (the end of the latest interval stored: the latest
        change - 1, not the last event), where a pattern abandons its scenarios still in progress."""
        start, end = span
        # The log is spent: each column is joined, then its pieces let go, to keep the peak low.
        columns: list[list[IntArray]] = [[], [], []]
        for part in self.log.parts.values():
            for column, piece in zip(columns, part):
                column.append(piece)
        self.log.parts.clear()
        attrs, orders, values = (_joined(columns, i, dtype) for i, dtype in ((0, np.int32), (1, np.int64), (2, np.int32)))
        keys = self.log._keys(attrs, orders)  # (attribute, order) as one int64: one sort
        order = np.argsort(keys, kind="stable")  # equal keys (one change writing twice): in log order
        del keys
        orders = orders[order]
        orders //= k * STEPS
        at_end = orders == at_history_end if at_history_end is not None else np.zeros(len(orders), dtype=bool)
        times = np.take(ts_of, orders, out=orders) if len(orders) else orders
        attrs, values = attrs[order], values[order]
        del order
        self._check_types(attrs, times, values)
        ss = kind(start)
        ss.end = end
        # Attributes are independent: build them a chunk of writes at a time (cut where an
        # attribute ends) so the temporaries stay small however long the log is.
        cuts = np.append(np.flatnonzero(attrs[1:] != attrs[:-1]) + 1, len(attrs))  # where an attribute ends
        chunks = []
        begin = 0
        while begin < len(attrs):
            stop = int(cuts[min(int(np.searchsorted(cuts, begin + _CHUNK)), len(cuts) - 1)])
            chunks.append((begin, stop))
            begin = stop
        history_end = start  # a first pass, only when some writes wait for it
        for begin, stop in chunks if at_end.any() else []:  # the history's end, from the other writes
            keep = ~at_end[begin:stop]
            changed = _effective_changes(attrs[begin:stop][keep], times[begin:stop][keep], values[begin:stop][keep])[1]
            history_end = max(history_end, int(changed.max(initial=start + 1)) - 1)
        block = _BlockWriter(len(self.attrs.paths), np.asarray(self.values.kinds, dtype=np.int8))
        late = bool(at_end.any())
        for begin, stop in chunks:
            if not late:  # no masks to copy through: the common case
                block.add(*self._intervals_from(attrs[begin:stop], times[begin:stop], values[begin:stop], start))
                continue
            keep = ~at_end[begin:stop]
            chunk = self._intervals_from(attrs[begin:stop][keep], times[begin:stop][keep], values[begin:stop][keep],
                                         start)
            if not keep.all():
                chunk = _written_late(chunk, attrs[begin:stop][~keep], values[begin:stop][~keep], history_end)
            block.add(*chunk)
        ss.adopt(block.finish(self.attrs.paths, start, end, self.values))
        self.values.seal()  # the state system keeps the values, not the index that interned them
        return ss

    def _intervals_from(self, attrs: IntArray, times: IntArray, values: IntArray, start: int
                        ) -> tuple[IntArray, IntArray, IntArray]:
        """(attribute, start, value id) of the intervals these writes make (sorted by attribute,
        then order), with the null interval from the state system's start before a later first change."""
        e_attr, e_time, e_value = _effective_changes(attrs, times, values)
        first = np.flatnonzero(np.append(True, e_attr[1:] != e_attr[:-1])) if len(e_attr) else e_attr
        late = first[e_time[first] > start]  # null from the state system's start until the first change
        return (np.insert(e_attr, late, e_attr[late]), np.insert(e_time, late, start),
                np.insert(e_value, late, 0))

    def types_agree(self) -> bool:
        """Whether every attribute's non-null writes in the log are of one kind: then the state system
        can be built later, the type check (:meth:`_check_types`) having nothing to report. A pass
        over the log, no sort."""
        kinds = np.array(self.values.kinds, dtype=np.int8).astype(np.int64)
        width = int(kinds.max(initial=0)) + 1
        seen = np.zeros((len(self.attrs.paths), width), dtype=bool)  # (attribute, kind) pairs written
        for attrs, _, values in self.log.parts.values():
            written = values != 0
            seen[attrs[written], kinds[values[written]]] = True  # a scatter: no ufunc.at over millions of writes
        return bool((np.count_nonzero(seen, axis=1) <= 1).all())

    def _check_types(self, attrs: IntArray, times: IntArray, values: IntArray) -> None:
        """The first value of an attribute locks its type; a value of another type fails the analysis."""
        kind_ids = Values.KINDS
        kinds = np.array(self.values.kinds, dtype=np.int64)
        written = np.flatnonzero(values != 0)
        if not len(written):
            return
        a, k = attrs[written], kinds[values[written]]  # sorted by attribute, then order
        first = np.flatnonzero(np.append(True, a[1:] != a[:-1]))
        locked = np.repeat(k[first], np.diff(np.append(first, len(a))))
        bad = np.flatnonzero(k != locked)
        if len(bad):
            # the earliest clash, as the interpreter meets it (at one time: the first path by name),
            # not the lowest attribute id: ids depend on the order the engine made the attributes
            when = times[written[bad]]
            tied = bad[when == when.min()]
            first_bad = min(tied.tolist(), key=lambda i: self.attrs.paths[int(attrs[written[i]])])
            at = written[first_bad]
            value = self.values.item(int(values[at]))
            held = [name for name, i in kind_ids.items() if i == locked[first_bad]][0]
            assert value is not None
            raise StateTypeError(f"attribute {'/'.join(self.attrs.paths[int(attrs[at])])} holds {held} values, "
                                 f"cannot take a {value.kind} ({value.value!r}) at t={int(times[at])}")


class _BlockWriter:
    """A state system's intervals gathered a chunk at a time into growing buffers (starts, value
    ids, and a row per attribute), so building the block adds one chunk to the peak, not a copy."""

    def __init__(self, attributes: int, kinds: IntArray) -> None:
        self.starts, self.ids = array("q"), array("i")
        self.rows, self.counts = array("i"), array("q")  # attribute and interval count of each row
        self.kinds = array("b")  # the kind code of each row's first non-null value (0: none)
        self._kind_of = kinds  # value id -> kind code
        self.written = np.zeros(attributes, dtype=bool)
        self.written[0] = True  # the root is no attribute

    def add(self, attrs: IntArray, starts: IntArray, ids: IntArray) -> None:
        """Intervals sorted by attribute (every attribute's intervals in one call)."""
        if not len(attrs):
            return
        first = np.flatnonzero(np.append(True, attrs[1:] != attrs[:-1]))
        self.rows.frombytes(attrs[first].astype(np.int32).tobytes())
        self.counts.frombytes(np.diff(np.append(first, len(attrs))).astype(np.int64).tobytes())
        self.starts.frombytes(starts.astype(np.int64).tobytes())
        self.ids.frombytes(ids.astype(np.int32).tobytes())
        self.written[attrs[first]] = True
        # the locked type: the kind of each row's first non-null value
        position = np.where(ids != 0, np.arange(len(ids)), len(ids))
        first_set = np.minimum.reduceat(position, first)
        held = first_set < len(ids)
        codes = np.zeros(len(first), dtype=np.int8)
        codes[held] = self._kind_of[ids[first_set[held]]]
        self.kinds.frombytes(codes.tobytes())

    def finish(self, paths: list[tuple[str, ...]], start: int, end: int, values: Values) -> Block:
        """The block; attributes made but never written are null throughout (one interval each)."""
        missing = np.flatnonzero(~self.written)
        self.add(missing, np.full(len(missing), start, dtype=np.int64), np.zeros(len(missing), dtype=np.int32))
        starts = np.frombuffer(self.starts, dtype=np.int64) if len(self.starts) else np.zeros(0, np.int64)
        ids = np.frombuffer(self.ids, dtype=np.int32) if len(self.ids) else np.zeros(0, np.int32)
        offsets = np.zeros(len(self.rows) + 1, dtype=np.int64)
        if len(self.counts):
            np.cumsum(np.frombuffer(self.counts, dtype=np.int64), out=offsets[1:])
        ends = np.empty(len(starts), dtype=np.int64)
        ends[:-1] = starts[1:] - 1
        ends[offsets[1:] - 1] = end  # each attribute's last interval closes at the end
        names: dict[int, str | None] = {code: name for name, code in Values.KINDS.items()}
        names[0] = None
        kinds = [names[code] for code in self.kinds]
        rows = [paths[a] for a in self.rows]
        return Block(rows, offsets, starts, ends, ids, kinds, values.item)


def _effective_changes(attrs: IntArray, times: IntArray, values: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """(attribute, time, value id) of the writes that change a value (sorted by attribute, then
    order): per attribute and time, the last write's value, where some write differs from the value
    held before (Trace Compass stores an interval for it even when the last write restores it)."""
    if not len(attrs):
        return attrs, times, values
    new_group = np.ones(len(attrs), dtype=bool)
    new_group[1:] = (attrs[1:] != attrs[:-1]) | (times[1:] != times[:-1])
    firsts = np.flatnonzero(new_group)
    lasts = np.append(firsts[1:] - 1, len(attrs) - 1)
    group_attr, group_time, group_value = attrs[firsts], times[firsts], values[lasts]
    previous = np.zeros(len(firsts), dtype=values.dtype)  # the value held before the group
    same_attr = group_attr[1:] == group_attr[:-1]
    previous[1:] = np.where(same_attr, group_value[:-1], 0)
    differs = values != np.repeat(previous, np.diff(np.append(firsts, len(attrs))))
    effective = np.logical_or.reduceat(differs, firsts)
    return group_attr[effective], group_time[effective], group_value[effective]


def _written_late(intervals: tuple[IntArray, IntArray, IntArray], attrs: IntArray, values: IntArray, t: int
                  ) -> tuple[IntArray, IntArray, IntArray]:
    """`intervals` (attribute, start, value id; sorted) once each attribute of `attrs` (each the
    last write of its attribute) is set to its value at `t`, as TransientState.processStateChange
    does: no change for an equal value; a new interval when the ongoing one started before `t`;
    else the ongoing interval takes the value (a history tree cannot insert backwards)."""
    i_attr, i_start, i_value = (np.array(c) for c in intervals)
    attrs, unique = np.unique(attrs, return_index=True)
    values = values[unique]
    last = np.searchsorted(i_attr, attrs, side="right") - 1  # each attribute's ongoing interval
    written = last >= 0
    written[written] = i_attr[last[written]] == attrs[written]
    # only removals (null) wait for the end: one of an attribute never written changes nothing
    change = written.copy()
    change[written] = i_value[last[written]] != values[written]
    last, attrs, values = last[change], attrs[change], values[change]
    overwrite = i_start[last] >= t
    i_value[last[overwrite]] = values[overwrite]
    after = last[~overwrite] + 1
    return (np.insert(i_attr, after, attrs[~overwrite]), np.insert(i_start, after, t),
            np.insert(i_value, after, values[~overwrite]))


def _joined(columns: list[list[IntArray]], index: int, dtype: Any) -> IntArray:
    """One column of the log's parts as one array; the parts' pieces are dropped as it goes."""
    pieces, columns[index] = columns[index], []
    return np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.zeros(0, dtype=dtype)


def _nones(column: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Which rows of a field column hold no value (None: the event lacks the field)."""
    if column.dtype != object:
        return np.zeros(len(column), dtype=bool)
    return np.fromiter((x is None for x in column.tolist()), dtype=bool, count=len(column))


def _dotted(value: Any, parts: list[str]) -> Any:
    for part in parts:
        value = content_field(value, part) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


def unify(a: Template, b: Template) -> bool:
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def under(prefix: Template, path: Template) -> bool:
    """Whether `path` may be `prefix` or below it."""
    return len(path) >= len(prefix) and unify(prefix, path[:len(prefix)])


def timestamps_by_position(classes: list[EventClassRows]) -> IntArray:
    """Each global position's timestamp."""
    total = max((int(r.positions.max()) + 1 for r in classes if len(r)), default=0)
    ts = np.zeros(total, dtype=np.int64)
    for rows in classes:
        ts[rows.positions] = rows.ts
    return ts


