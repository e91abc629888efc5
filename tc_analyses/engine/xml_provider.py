"""Run a Trace Compass XML state provider headless: compile it once, then feed it events.

Each ``stateChange``, ``stateAttribute``, ``stateValue`` and condition is compiled into a Python
closure when the provider is loaded, so events never walk the XML. Semantics follow
../shared/docs/tracecompass-xml.md §2 and §6. Supported: locations, definedValues, mappingGroups,
if/then/else with and/or/not and the three condition forms, every stateAttribute type but
``pool`` (patterns only), every stateValue type but ``script``, the increment / update / stack
push, pop, popAll, peek and forcedType modifiers, and futureTime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from lxml import etree

from tc_analyses.engine.event_names import NameMatcher, compile_event_name
from tc_analyses.engine.state_system import StateSystem, StateTypeError, Value
from tc_analyses.errors import ConfigurationError, DfcompassError

Event = tuple[str, int, Mapping[str, Any]]  # name, timestamp (ns), fields
Path_ = tuple[str, ...]
PathFn = Callable[[Event, StateSystem], "Path_ | None"]
ValueFn = Callable[[Event, StateSystem], "Value | None"]
ChangeFn = Callable[[Event, StateSystem, list], None]
CondFn = Callable[[Event, StateSystem], bool]

_SKIP = object()


class XmlAnalysisError(DfcompassError):
    """An XML analysis that cannot run: names the element and its line."""

    def __init__(self, element: Any, problem: str) -> None:
        where = f"{element.base or 'xml'}:{element.sourceline}: <{element.tag}>" if element is not None else "xml"
        super().__init__(f"{where}: {problem}")


def content_field(fields: Mapping[str, Any], name: str) -> Any:
    """The payload field Trace Compass names `name`, or None.

    CtfTmfEventField drops one leading underscore from every field name: the trace's ``_foo``
    is ``foo`` to an analysis, and ``_foo`` only finds a field the trace calls ``__foo``.
    """
    if "_" + name in fields:
        return fields["_" + name]
    if name in fields and not name.startswith("_"):
        return fields[name]
    return None


def field_value(event: Event, name: str) -> Any:
    """An event field by Trace Compass's lookup rules (exact, dotted, then special names)."""
    _, ts, fields = event
    found = content_field(fields, name)
    if found is not None:
        return found
    if "." in name:
        current: Any = fields
        for part in name.split("."):
            current = content_field(current, part) if isinstance(current, Mapping) else None
            if current is None:
                break
        else:
            return current
    if name.lower() == "timestamp":
        return ts
    return None


def typed_value(raw: Any) -> Value | None:
    """A CTF field value as Trace Compass types it: integers are Long, strings String."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        return Value("long", int(raw))
    if isinstance(raw, int):
        return Value("long", raw - (1 << 64) if raw >= 1 << 63 else raw)  # Java longs are signed
    if isinstance(raw, float):
        return Value("double", raw)
    return Value("string", str(raw))


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_FORCED_TYPES = ("int", "long", "string", "double")


def _wrap(number: int, bits: int) -> int:
    """Java's narrowing of an integer to `bits` bits (Long.intValue())."""
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >= 1 << (bits - 1) else number


def force_type(value: Value | None, kind: str | None, element: Any) -> Value | None:
    """forcedType: Integer.parseInt / Long.parseLong / Double.parseDouble for strings (a failure
    fails the analysis), narrowing or truncation for numbers, toString for strings."""
    if value is None or kind is None or value.kind == kind:
        return value
    if kind == "string":
        return Value("string", str(value))
    if value.kind == "string":
        text = str(value.value)
        number: Any = None
        if kind in ("int", "long") and _JAVA_INTEGER.fullmatch(text):
            number = int(text)
            if number != _wrap(number, 32 if kind == "int" else 64):
                number = None  # out of range: NumberFormatException
        elif kind == "double":
            try:
                number = float(text)
            except ValueError:
                number = None
        if number is None:
            raise XmlAnalysisError(element, f"forcedType {kind} of non-numeric value {text!r}: the analysis fails")
        return Value(kind, number)
    if kind == "double":
        return Value("double", float(value.value))
    whole = int(value.value)  # a double is truncated toward zero, as Java's casts do
    return Value(kind, _wrap(whole, 32) if kind == "int" else whole)


@dataclass
class _Scope:
    defined: dict[str, str]
    locations: dict[str, list[Any]]
    mappings: dict[str, list[tuple[Any, Any]]]


class Compiler:
    """Compiles the shared language of providers and patterns (paths, values, conditions, changes)."""

    def __init__(self, element: Any) -> None:
        self.element = element
        self.id = element.get("id")
        self._scope = _Scope(
            {d.get("name"): d.get("value") for d in element.iterfind("definedValue")},
            {loc.get("id"): list(loc.iterfind("stateAttribute")) for loc in element.iterfind("location")},
            {g.get("id"): [(e.findall("stateValue")[0], e.findall("stateValue")[1]) for e in g.iterfind("entry")]
             for g in element.iterfind("mappingGroup")},
        )


    # ------------------------------------------------------------------ compiling
    def _change(self, element: Any) -> ChangeFn:
        condition = element.find("if")
        if condition is not None:
            test = self._condition(_only_child(condition))
            then = self._change(element.find("then"))
            otherwise = element.find("else")
            other = self._change(otherwise) if otherwise is not None else None

            def conditional(event: Event, ss: StateSystem, queued: list) -> None:
                if test(event, ss):
                    then(event, ss, queued)
                elif other is not None:
                    other(event, ss, queued)

            return conditional
        path = self._path(element.findall("stateAttribute"))
        value_element = element.find("stateValue")
        if value_element is None:
            raise XmlAnalysisError(element, "a stateChange needs a stateValue")
        value = self._value(value_element)
        stack = value_element.get("stack")
        if stack == "peek":  # the value is the top of a stack; the change itself is a plain one
            stack = None
        if stack not in (None, "push", "pop", "popAll"):
            raise XmlAnalysisError(value_element, f"unknown stack action {stack!r}")
        increment = value_element.get("increment") == "true"
        update = value_element.get("update") == "true"
        future_element = element.find("futureTime")
        future = self._value(future_element) if future_element is not None else None

        def change(event: Event, ss: StateSystem, queued: list) -> None:
            # DataDrivenActionStateChange: the path, the value and the time are all taken at
            # this event; a future change only applies them later.
            t = event[1]
            where = path(event, ss)
            if where is None:  # a null path element: the change is skipped
                return
            new = value(event, ss)
            when = t if future is None else _time_of(future(event, ss), t)
            if stack in ("push", "pop"):  # a stack change at a past time is done now
                if when > t:
                    queued.append((when, lambda ss2: _stack(ss2, where, stack, new, when, value_element)))
                else:
                    _stack(ss, where, stack, new, t, value_element)
                return
            if stack == "popAll":
                depth = ss.ongoing(where)
                for _ in range(int(depth.value) if depth is not None and depth.kind == "int" else 0):
                    if when > t:
                        queued.append((when, lambda ss2: _stack(ss2, where, "pop", None, when, value_element)))
                    else:
                        _stack(ss, where, "pop", None, t, value_element)
                return
            if increment and new is not None:
                old = ss.ongoing(where)
                if new.kind in ("int", "long", "double"):
                    if old is not None and old.kind != new.kind:
                        raise XmlAnalysisError(value_element, f"increment of a {old.kind} attribute "
                                               f"{'/'.join(where)} by a {new.kind}: the analysis fails")
                    base = old.value if old is not None else 0
                    new = Value(new.kind, base + new.value)  # type: ignore[operator]
            if update:  # an update ignores futureTime
                ss.update_ongoing(where, new)
            elif when == t:
                ss.modify(where, new, t)
            elif when > t:
                queued.append((when, lambda ss2: ss2.modify(where, new, when)))
            # else: a time in the past, Trace Compass ignores the change (with a warning)

        return change

    def _path(self, elements: list[Any]) -> PathFn:
        parts = [self._segment(e) for e in elements]

        def resolve(event: Event, ss: StateSystem, base: Path_ = ()) -> Path_ | None:
            # Trace Compass adds each element to the tree as it resolves it, so the attributes
            # before a null element exist (all null) even though the change is skipped. Making the
            # deepest one makes its parents, and an attribute's history does not depend on when it
            # was made (it is null from the state system's start), so one call at the end will do.
            out: list[str] = list(base)
            for part in parts:
                got = part(event, ss, tuple(out))
                if got is None:
                    if len(out) > len(base):
                        ss.attribute(tuple(out))
                    return None
                out.extend(got)
            if len(out) > len(base):
                ss.attribute(tuple(out))
            return tuple(out[len(base):])

        return resolve

    def _segment(self, element: Any) -> Callable[[Event, StateSystem, Path_], "list[str] | None"]:
        kind, raw = element.get("type"), element.get("value")
        if kind == "constant":
            text = self._defined(raw, element)
            if text == "#CurrentScenario":  # patterns: the path of the scenario being run
                return lambda e, ss, prefix: list(getattr(ss, "scenario_path", ()))
            return lambda e, ss, prefix: [text]
        if kind == "eventField":
            return lambda e, ss, prefix: None if (v := typed_value(field_value(e, raw))) is None else [str(v)]
        if kind == "eventName":
            return lambda e, ss, prefix: [e[0]]
        if kind == "null":
            return lambda e, ss, prefix: []
        if kind == "location":
            if raw not in self._scope.locations:
                raise XmlAnalysisError(element, f"unknown location {raw!r}")
            inner: Any = self._path(self._scope.locations[raw])
            return lambda e, ss, prefix: None if (p := inner(e, ss, prefix)) is None else list(p)
        if kind == "query":
            inner = self._path(element.findall("stateAttribute"))

            def query(e: Event, ss: StateSystem, prefix: Path_) -> list[str] | None:
                where = inner(e, ss)
                found = None if where is None else ss.ongoing(where)
                return None if found is None else [str(found)]

            return query
        raise XmlAnalysisError(element, f"stateAttribute type {kind!r} is not supported here")

    def _defined(self, raw: str | None, element: Any) -> str:
        if raw is None:
            raise XmlAnalysisError(element, "missing value")
        if raw.startswith("$"):
            if raw[1:] not in self._scope.defined:
                raise XmlAnalysisError(element, f"unknown definedValue {raw!r}")
            return self._scope.defined[raw[1:]]
        return raw

    def _value(self, element: Any) -> ValueFn:
        kind, raw = element.get("type"), element.get("value")
        forced = element.get("forcedType")
        if forced is not None and forced not in _FORCED_TYPES:
            raise XmlAnalysisError(element, f"unknown forcedType {forced!r}")
        if element.get("stack") == "peek":  # a peek reads the top of the stack whatever the type says
            kind = "peek"
        base = self._base_value(element, kind, raw)
        group = element.get("mappingGroup")
        mapping = self._mapping(element, group) if group else None

        def value(event: Event, ss: StateSystem) -> Value | None:
            got = base(event, ss)
            if mapping is not None:
                got = mapping(event, ss, got)
            return force_type(got, forced, element)

        return value

    def _base_value(self, element: Any, kind: str | None, raw: str | None) -> ValueFn:
        if kind in ("int", "long"):
            text = self._defined(raw, element)
            try:
                number = int(text)
            except ValueError:
                raise XmlAnalysisError(element, f"{kind} constant {text!r} is not a number") from None
            constant = Value(kind, number)
            return lambda e, ss: constant
        if kind == "string":
            constant = Value("string", self._defined(raw, element))
            return lambda e, ss: constant
        if kind in ("null", "delete"):
            return lambda e, ss: None
        if kind == "eventField":
            return lambda e, ss: typed_value(field_value(e, raw or ""))
        if kind == "eventName":
            return lambda e, ss: Value("string", e[0])
        if kind in ("query", "peek"):
            path = self._path(element.findall("stateAttribute"))
            if kind == "peek":
                return lambda e, ss: None if (p := path(e, ss)) is None else _peek(ss, p)
            return lambda e, ss: None if (p := path(e, ss)) is None else ss.ongoing(p)
        if kind == "script":
            raise XmlAnalysisError(element, "script values are not supported by the headless engine")
        raise XmlAnalysisError(element, f"unknown stateValue type {kind!r}")

    def _mapping(self, element: Any, group: str) -> Callable[[Event, StateSystem, Value | None], Value | None]:
        if group not in self._scope.mappings:
            raise XmlAnalysisError(element, f"unknown mappingGroup {group!r}")
        pairs = [(self._value(a), self._value(b)) for a, b in self._scope.mappings[group]]

        def mapped(event: Event, ss: StateSystem, value: Value | None) -> Value | None:
            for source, target in pairs:
                if source(event, ss) == value:
                    return target(event, ss)
            return None  # DataDrivenMappingGroup.map: no entry matches -> null

        return mapped

    def _condition(self, element: Any) -> CondFn:
        tag = element.tag
        if tag in ("and", "or"):
            parts = [self._condition(c) for c in element if isinstance(c.tag, str)]
            return (lambda e, ss: all(p(e, ss) for p in parts)) if tag == "and" else \
                (lambda e, ss: any(p(e, ss) for p in parts))
        if tag == "not":
            inner = self._condition(_only_child(element))
            return lambda e, ss: not inner(e, ss)
        if tag != "condition":
            raise XmlAnalysisError(element, f"unsupported condition <{tag}>")
        operator = element.get("operator", "eq")
        values = element.findall("stateValue")
        field = element.find("field")
        attributes = element.findall("stateAttribute")
        if field is not None:
            name = field.get("name")
            first: ValueFn = lambda e, ss: typed_value(field_value(e, name))  # noqa: E731
        elif attributes:
            path = self._path(attributes)
            first = lambda e, ss: None if (p := path(e, ss)) is None else ss.ongoing(p)  # noqa: E731
        elif len(values) == 2:
            first = self._value(values.pop(0))
        else:
            raise XmlAnalysisError(element, "a condition compares a field, an attribute or two values")
        second = self._value(values[0])
        return lambda e, ss: _compare(first(e, ss), second(e, ss), operator)


class StateProvider(Compiler):
    """A compiled ``stateProvider``: ``run(events)`` builds its state system."""

    def __init__(self, element: Any) -> None:
        super().__init__(element)
        self._handlers: list[tuple[NameMatcher, list[ChangeFn]]] = []
        for handler in element.iterfind("eventHandler"):
            pattern = event_regex(handler, handler.get("eventName") or "")
            self._handlers.append((pattern, [self._change(c) for c in handler.iterfind("stateChange")]))
        self._matches: dict[str, list[list[ChangeFn]]] = {}

    def handled(self, names: Iterable[str]) -> set[str]:
        """The event names (of `names`) that some event handler takes."""
        return {name for name in names if any(p.fullmatch(name) for p, _ in self._handlers)}

    # ------------------------------------------------------------------ running
    def run(self, events: Iterable[Event], span: tuple[int, int] | None = None) -> StateSystem:
        """The state system built from `events`. With `span` (the whole trace's first and last
        timestamps), `events` may leave out the events no handler takes: the result is the same."""
        ss: StateSystem | None = None if span is None else StateSystem(span[0])
        future: list[tuple[int, int, Callable[[StateSystem], None]]] = []
        last = 0 if span is None else span[1]
        order = 0
        for event in events:
            name, ts, _ = event
            if ss is None:
                ss = StateSystem(ts)
            while future and future[0][0] <= ts:  # queued futureTime changes land before this event
                future.pop(0)[2](ss)
            last = max(last, ts)
            handlers = self._matches.get(name)
            if handlers is None:
                handlers = self._matches[name] = [changes for p, changes in self._handlers if p.fullmatch(name)]
            for changes in handlers:
                for change in changes:
                    queued: list = []
                    change(event, ss, queued)
                    for when, apply in queued:
                        order += 1
                        future.append((when, order, apply))
                        future.sort(key=lambda item: (item[0], item[1]))
        if ss is None:
            raise DfcompassError(f"analysis {self.id}: the trace has no events")
        for _, _, apply in future:  # leftovers apply after the last event
            apply(ss)
        ss.close(last)  # ends later if a leftover ended an interval after the last event
        return ss

def _compare(a: Value | None, b: Value | None, operator: str) -> bool:
    """DataDrivenCondition: numbers numerically when the first is an integer; else as text."""
    if a is not None and b is not None and a.kind in ("int", "long") and b.kind in ("int", "long", "double"):
        x: Any = a.value
        y: Any = int(b.value)  # Number.intValue() / longValue(): 5 eq 5.7 holds
        if a.kind == "int":
            y = _wrap(y, 32)
    else:
        x, y = ("null" if a is None else str(a)), ("null" if b is None else str(b))
    return {"eq": x == y, "ne": x != y, "ge": x >= y, "gt": x > y, "le": x <= y, "lt": x < y}[operator]


def _stack(ss: StateSystem, path: Path_, action: str, value: Value | None, t: int, element: Any) -> None:
    depth_value = ss.ongoing(path)
    if depth_value is not None and depth_value.kind != "int":
        raise StateTypeError(f"attribute {'/'.join(path)} is used as a stack but holds a {depth_value.kind} "
                             f"({depth_value.value!r}) at t={t}")
    depth = int(depth_value.value) if depth_value is not None else 0
    if action == "push":
        depth += 1
        ss.modify(path, Value("int", depth), t)
        ss.modify(path + (str(depth),), value, t)
    elif action in ("pop", "popAll"):
        for _ in range(depth if action == "popAll" else min(depth, 1)):
            null_subtree(ss, path + (str(depth),), t)
            depth -= 1
            ss.modify(path, Value("int", depth) if depth else None, t)
    else:
        raise XmlAnalysisError(element, f"stack={action!r} is for queries (peek) or push/pop/popAll")


def _time_of(value: Value | None, now: int) -> int:
    """A futureTime value as a timestamp: a number, or a string that parses as one; else now."""
    if value is None:
        return now
    if value.kind != "string":
        return _java_long(value.value)
    text = str(value.value)
    if _JAVA_INTEGER.fullmatch(text):
        number = int(text)
        return number if _LONG_MIN <= number <= _LONG_MAX else now  # Long.parseLong fails past 64 bits
    try:
        return _java_long(float(text))
    except ValueError:
        return now


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _java_long(number: Any) -> int:
    """Java's (long) cast: NaN is 0, a value past the range is its end (1e999 is Long.MAX_VALUE)."""
    if isinstance(number, float):
        if number != number:
            return 0
        if number >= 2.0**63:
            return _LONG_MAX
        if number <= -(2.0**63):
            return _LONG_MIN
    return max(_LONG_MIN, min(_LONG_MAX, int(number)))


def event_regex(element: Any, text: str) -> NameMatcher:
    """An event name pattern as Trace Compass compiles it: a regex in which ``*`` becomes ``.*``
    (matched in linear time, :mod:`tc_analyses.engine.event_names`)."""
    try:
        return compile_event_name(text)
    except ValueError as exc:
        raise XmlAnalysisError(element, f"event name {text!r} is not a valid regex: {exc}") from None


def null_subtree(ss: StateSystem, path: Path_, t: int) -> None:
    """StateSystem.removeAttribute: the attribute and everything below it become null at t."""
    for candidate in ss.subtree(path):
        ss.modify(candidate, None, t)


def _peek(ss: StateSystem, path: Path_) -> Value | None:
    depth = ss.ongoing(path)
    return None if depth is None else ss.ongoing(path + (str(depth.value),))


def _only_child(element: Any) -> Any:
    children = [c for c in element if isinstance(c.tag, str)]
    if len(children) != 1:
        raise XmlAnalysisError(element, "expects exactly one child condition")
    return children[0]


def analysis_elements(path: str | Path, tag: str) -> list[Any]:
    """The `tag` elements (stateProvider, pattern) of an XML analysis file; one-line error if unreadable."""
    try:
        tree = etree.parse(str(path))
    except (OSError, etree.XMLSyntaxError) as exc:
        raise ConfigurationError(f"{path}: {' '.join(str(exc).split())}") from None
    return list(tree.getroot().iterfind(tag))


def load_providers(path: str | Path) -> list[StateProvider]:
    """Every stateProvider in an XML analysis file, compiled."""
    return [StateProvider(e) for e in analysis_elements(path, "stateProvider")]
