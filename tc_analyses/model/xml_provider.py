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

from tc_analyses.errors import ConfigurationError, DfcompassError
from tc_analyses.model.state_system import StateSystem, Value

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


def field_value(event: Event, name: str) -> Any:
    """An event field by Trace Compass's lookup rules (exact, dotted, then special names)."""
    _, ts, fields = event
    if name in fields:
        return fields[name]
    if name.startswith("_") and name[1:] in fields:  # payload fields lose one leading underscore
        return fields[name[1:]]
    if "." in name:
        current: Any = fields
        for part in name.split("."):
            if not isinstance(current, Mapping) or part not in current:
                break
            current = current[part]
        else:
            return current
    if name.lower() == "timestamp":
        return ts
    return None


def _typed(raw: Any) -> Value | None:
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


def _force(value: Value | None, kind: str | None, element: Any) -> Value | None:
    if value is None or kind is None or value.kind == kind:
        return value
    try:
        if kind == "string":
            return Value("string", str(value))
        if kind in ("int", "long"):
            return Value(kind, int(float(value.value)) if value.kind == "string" and "." in str(value.value)
                         else int(value.value))
        if kind == "double":
            return Value("double", float(value.value))
    except ValueError:
        raise XmlAnalysisError(element, f"forcedType {kind} of non-numeric value {value.value!r}") from None
    raise XmlAnalysisError(element, f"unknown forcedType {kind!r}")


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
        increment = value_element.get("increment") == "true"
        update = value_element.get("update") == "true"
        future_element = element.find("futureTime")
        future = self._value(future_element) if future_element is not None else None

        def apply(event: Event, ss: StateSystem, t: int) -> None:
            where = path(event, ss)
            if where is None:  # a null path element: the change is skipped
                return
            if stack is not None:
                _stack(ss, where, stack, value(event, ss) if stack == "push" else None, t, value_element)
                return
            new = value(event, ss)
            if increment and new is not None:
                old = ss.ongoing(where)
                if new.kind in ("int", "long", "double"):
                    if old is not None and old.kind != new.kind:
                        raise XmlAnalysisError(value_element, f"increment of a {old.kind} attribute "
                                               f"{'/'.join(where)} by a {new.kind}: the analysis fails")
                    base = old.value if old is not None else 0
                    new = Value(new.kind, base + new.value)  # type: ignore[operator]
            if update:
                ss.update_ongoing(where, new)
            else:
                ss.modify(where, new, t)

        def change(event: Event, ss: StateSystem, queued: list) -> None:
            t = event[1]
            if future is not None:
                when = future(event, ss)
                if when is not None and int(when.value) > t:
                    frozen = (event[0], int(when.value), event[2])
                    queued.append((int(when.value), lambda ss2: apply(frozen, ss2, frozen[1])))
                    return
            apply(event, ss, t)

        return change

    def _path(self, elements: list[Any]) -> PathFn:
        parts = [self._segment(e) for e in elements]

        def resolve(event: Event, ss: StateSystem) -> Path_ | None:
            out: list[str] = []
            for part in parts:
                got = part(event, ss, tuple(out))
                if got is None:
                    return None
                out.extend(got)
            return tuple(out)

        return resolve

    def _segment(self, element: Any) -> Callable[[Event, StateSystem, Path_], "list[str] | None"]:
        kind, raw = element.get("type"), element.get("value")
        if kind == "constant":
            text = self._defined(raw, element)
            if text == "#CurrentScenario":  # patterns: the path of the scenario being run
                return lambda e, ss, prefix: list(getattr(ss, "scenario_path", ()))
            return lambda e, ss, prefix: [text]
        if kind == "eventField":
            return lambda e, ss, prefix: None if (v := _typed(field_value(e, raw))) is None else [str(v)]
        if kind == "eventName":
            return lambda e, ss, prefix: [e[0]]
        if kind == "null":
            return lambda e, ss, prefix: []
        if kind == "location":
            if raw not in self._scope.locations:
                raise XmlAnalysisError(element, f"unknown location {raw!r}")
            inner = self._path(self._scope.locations[raw])
            return lambda e, ss, prefix: None if (p := inner(e, ss)) is None else list(p)
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
        base = self._base_value(element, kind, raw)
        group = element.get("mappingGroup")
        mapping = self._mapping(element, group) if group else None

        def value(event: Event, ss: StateSystem) -> Value | None:
            got = base(event, ss)
            if mapping is not None:
                got = mapping(event, ss, got)
            return _force(got, forced, element)

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
            return lambda e, ss: _typed(field_value(e, raw or ""))
        if kind == "eventName":
            return lambda e, ss: Value("string", e[0])
        if kind == "query":
            path = self._path(element.findall("stateAttribute"))
            if element.get("stack") == "peek":
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
            return value

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
            first: ValueFn = lambda e, ss: _typed(field_value(e, name))  # noqa: E731
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
        self._handlers: list[tuple[re.Pattern[str], list[ChangeFn]]] = []
        for handler in element.iterfind("eventHandler"):
            pattern = re.compile(re.escape(handler.get("eventName")).replace(r"\*", ".*"))
            self._handlers.append((pattern, [self._change(c) for c in handler.iterfind("stateChange")]))
        self._matches: dict[str, list[list[ChangeFn]]] = {}

    # ------------------------------------------------------------------ running
    def run(self, events: Iterable[Event]) -> StateSystem:
        ss: StateSystem | None = None
        future: list[tuple[int, int, Callable[[StateSystem], None]]] = []
        last = 0
        order = 0
        for event in events:
            name, ts, _ = event
            if ss is None:
                ss = StateSystem(ts)
            while future and future[0][0] <= ts:  # queued futureTime changes land before this event
                future.pop(0)[2](ss)
            last = ts
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
        for when, _, apply in future:  # leftovers apply after the last event
            apply(ss)
            last = max(last, when)
        ss.close(last)
        return ss

def _compare(a: Value | None, b: Value | None, operator: str) -> bool:
    """DataDrivenCondition: numbers numerically when the first is an integer; else as text."""
    if a is not None and b is not None and a.kind in ("int", "long") and b.kind in ("int", "long", "double"):
        x: Any = a.value
        y: Any = b.value
    else:
        x, y = ("null" if a is None else str(a)), ("null" if b is None else str(b))
    return {"eq": x == y, "ne": x != y, "ge": x >= y, "gt": x > y, "le": x <= y, "lt": x < y}[operator]


def _stack(ss: StateSystem, path: Path_, action: str, value: Value | None, t: int, element: Any) -> None:
    depth_value = ss.ongoing(path)
    depth = int(depth_value.value) if depth_value is not None else 0
    if action == "push":
        depth += 1
        ss.modify(path, Value("int", depth), t)
        ss.modify(path + (str(depth),), value, t)
    elif action in ("pop", "popAll"):
        for _ in range(depth if action == "popAll" else min(depth, 1)):
            _null_subtree(ss, path + (str(depth),), t)
            depth -= 1
            ss.modify(path, Value("int", depth) if depth else None, t)
    else:
        raise XmlAnalysisError(element, f"stack={action!r} is for queries (peek) or push/pop/popAll")


def _null_subtree(ss: StateSystem, path: Path_, t: int) -> None:
    for candidate in ss.paths():
        if candidate[: len(path)] == path:
            ss.modify(candidate, None, t)


def _peek(ss: StateSystem, path: Path_) -> Value | None:
    depth = ss.ongoing(path)
    return None if depth is None else ss.ongoing(path + (str(depth.value),))


def _only_child(element: Any) -> Any:
    children = [c for c in element if isinstance(c.tag, str)]
    if len(children) != 1:
        raise XmlAnalysisError(element, "expects exactly one child condition")
    return children[0]


def load_providers(path: str | Path) -> list[StateProvider]:
    """Every stateProvider in an XML analysis file, compiled."""
    try:
        tree = etree.parse(str(path))
    except (OSError, etree.XMLSyntaxError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from None
    return [StateProvider(e) for e in tree.getroot().iterfind("stateProvider")]
