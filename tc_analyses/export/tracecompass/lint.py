"""dfcompass's lint of Trace Compass XML analyses: what the XSD lets through but Trace Compass only
notices when it loads the file (logs an error and drops the analysis) or runs it (fails it, or
draws states invisible).

Each problem is one line, ``FILE:LINE: what is wrong; how to fix it``. Rules:

- references: ``location``, ``mappingGroup`` and ``$definedValue`` names, FSM ids (initial FSMs,
  states, transition targets, tests, actions, scheduled FSMs), int/long constants that do not
  parse, and view ``head/analysis`` ids. A view's analysis id is only checked in a file that
  defines analyses itself: a file of views alone may target analyses of other files or Java ones.
- type lock: one attribute written with both int and long values. CTF integer fields are Long
  (except the CPU aspect, Integer), so an int constant next to an event field is a mix too.
- invisible ints: int values a time-graph view displays with no definedValue for them.
- regex paths: literal view-path segments with regex characters (segments are regexes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from lxml import etree

_Element: TypeAlias = etree._Element  # lxml has no type hints here: Any to the checker
# Elements whose `value` Trace Compass passes through its $definedValue substitution.
_VALUE_TAGS = frozenset({"stateValue", "stateAttribute", "futureTime", "begin", "end", "duration", "segField"})
_REGEX_CHARS = frozenset(".()[]{}+?|^$\\")
_PLACEHOLDER = re.compile(r"\$\d+")  # `$1` in a child view path: the parent's first wildcard
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
_LIMITS = {"int": 2**31, "long": 2**63}


@dataclass(frozen=True)
class Write:
    """A value one stateChange writes to an attribute."""

    path: tuple[str, ...]  # constants, with `*` for levels named by event data
    kind: str  # "int", "long", "field" (an event field: Long for CTF integers) or "other"
    number: int | None  # the value the attribute takes, when a constant gives it
    line: int
    what: str  # for messages: 'int 1 (increment)', 'eventField "bytes"'
    depth: bool = False  # a stack depth (Integer) that Trace Compass writes itself


@dataclass
class _Scope:
    """A stateProvider or pattern: its ids and the names it defines."""

    element: _Element
    id: str
    defined: dict[str, str] = field(default_factory=dict)
    locations: dict[str, _Element] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    writes: list[Write] = field(default_factory=list)

    def resolve(self, value: str) -> str:
        return self.defined.get(value[1:], value) if value.startswith("$") else value


def lint(path: Path) -> list[str]:
    """Problems Trace Compass would only find at load or run time, as ``FILE:LINE: message`` lines."""
    try:
        root = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
    except etree.XMLSyntaxError as exc:
        return [f"{path}:{exc.lineno}: not well-formed XML: {exc.msg}"]
    problems: list[tuple[int, str]] = []
    scopes = [_scope(el) for el in root if el.tag in ("stateProvider", "pattern")]
    for scope in scopes:
        problems += _check_references(scope)
        problems += _check_type_lock(scope)
        if scope.element.tag == "pattern":
            problems += _check_fsm(scope.element)
    by_id = {scope.id: scope for scope in scopes}
    for view in (el for el in root if el.tag in ("timeGraphView", "xyView")):
        problems += _check_view(view, by_id)
    return [f"{path}:{line}: {message}" for line, message in sorted(problems, key=lambda p: p[0])]


# ------------------------------------------------------------------ analyses
def _scope(element: _Element) -> _Scope:
    scope = _Scope(element, element.get("id", ""))
    for child in element:
        if child.tag == "definedValue":
            scope.defined[child.get("name", "")] = child.get("value", "")
        elif child.tag == "location":
            scope.locations[child.get("id", "")] = child
        elif child.tag == "mappingGroup":
            scope.groups.add(child.get("id", ""))
    for change in element.iter("stateChange", "then", "else"):
        scope.writes += _writes(change, scope)
    return scope


def _writes(change: _Element, scope: _Scope) -> list[Write]:
    """What an assignment (a stateChange, then or else with a direct stateValue) writes."""
    value = change.find("stateValue")
    if value is None:
        return []
    path = _path(change.findall("stateAttribute"), scope, ())
    stack = value.get("stack")
    if stack in ("pop", "popAll", "peek"):
        return []
    kind, number, what = _value_kind(value, scope)
    if value.get("increment") == "true":
        number = None  # a counter: the states are sums, not this constant
    if stack == "push":  # the value goes to child "<depth>"; the attribute holds the Integer depth
        depth = Write(path, "int", None, value.sourceline, "a stack depth (push)", depth=True)
        return [depth] + ([Write(path + ("*",), kind, number, value.sourceline, what)] if kind else [])
    return [Write(path, kind, number, value.sourceline, what)] if kind else []


def _path(attributes: list[_Element], scope: _Scope, seen: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for attribute in attributes:
        kind, value = attribute.get("type"), attribute.get("value", "")
        if kind == "constant":
            out.append(scope.resolve(value))
        elif kind == "location":
            location = scope.locations.get(scope.resolve(value))
            if location is None or value in seen:  # unknown (reported elsewhere) or cyclic
                out.append("*")
            else:
                out += _path(location.findall("stateAttribute"), scope, seen + (value,))
        elif kind != "null":  # eventField, query, eventName, pool: named by the data
            out.append("*")
    return tuple(out)


def _value_kind(value: _Element, scope: _Scope) -> tuple[str, int | None, str]:
    """("int" | "long" | "field" | "other", constant, description); kind "" for null."""
    kind, forced = value.get("type", ""), value.get("forcedType")
    raw = scope.resolve(value.get("value", ""))
    suffix = " (increment)" if value.get("increment") == "true" else ""
    if kind in ("null", "delete"):
        return "", None, ""
    if value.get("mappingGroup"):  # the group's values are written, not this one
        return "other", None, ""
    number = int(raw) if kind in ("int", "long") and _JAVA_INTEGER.fullmatch(raw) else None
    if forced in ("int", "long"):
        return forced, number, f'{kind} "{raw}" forced to {forced}{suffix}'
    if forced:
        return "other", None, ""
    if kind in ("int", "long"):
        return kind, number, f"{kind} {raw}{suffix}"
    if kind == "eventField":
        name = raw.lower()
        if name == "cpu":  # no content field: the CPU aspect, an Integer
            return "int", None, f'eventField "{raw}" (the CPU aspect, an Integer){suffix}'
        if name == "hostid":
            return "other", None, ""
        return "field", None, f'eventField "{raw}" (Long for CTF integers){suffix}'
    return "other", None, ""


def _check_references(scope: _Scope) -> list[tuple[int, str]]:
    problems = []
    kind = scope.element.tag
    for el in scope.element.iter():
        if not isinstance(el.tag, str):
            continue
        line = el.sourceline or 0
        group = el.get("mappingGroup")
        if group is not None and group not in scope.groups:
            problems.append((line, f'unknown mappingGroup "{group}" in {kind} "{scope.id}": '
                                   f'declare <mappingGroup id="{group}"> in it or fix the name'))
        if el.tag == "stateAttribute" and el.get("type") == "location":
            name = scope.resolve(el.get("value", ""))
            if name not in scope.locations:
                problems.append((line, f'unknown location "{name}" in {kind} "{scope.id}": '
                                       f'declare <location id="{name}"> in it or fix the name'))
        texts = [el.get("value", "")] if el.tag in _VALUE_TAGS and el.get("type") != "script" else []
        texts += [el.get("name", "")] if el.tag == "field" else []
        for text in texts:
            if text.startswith("$") and text[1:] not in scope.defined:
                problems.append((line, f'unknown definedValue "{text}" in {kind} "{scope.id}": '
                                       f'declare <definedValue name="{text[1:]}" value="..."/> in it or fix the name'))
        if el.tag in _VALUE_TAGS - {"stateAttribute"} and el.get("type") in _LIMITS and el.get("value") is not None:
            problems += _check_number(el, scope)
    return problems


def _check_number(el: _Element, scope: _Scope) -> list[tuple[int, str]]:
    kind, raw = el.get("type", ""), el.get("value", "")
    text = scope.resolve(raw)
    if raw.startswith("$") and raw[1:] not in scope.defined:
        return []  # reported as an unknown definedValue
    limit = _LIMITS[kind]
    if _JAVA_INTEGER.fullmatch(text) and -limit <= int(text) < limit:
        return []
    shown = f'"{raw}" (= "{text}")' if raw != text else f'"{raw}"'
    return [(el.sourceline or 0, f"{kind} value {shown} is not a Java {kind}: Trace Compass cannot parse it; "
                                 f"write a whole number in range, or use type=\"string\"")]


def _check_type_lock(scope: _Scope) -> list[tuple[int, str]]:
    problems = []
    by_path: dict[tuple[str, ...], list[Write]] = {}
    for write in scope.writes:
        by_path.setdefault(write.path, []).append(write)
    for path, writes in by_path.items():
        ints = [w for w in writes if w.kind == "int"]
        longs = [w for w in writes if w.kind in ("long", "field")]
        if ints and longs:
            i, j = ints[0], longs[0]
            problems.append((i.line, f'attribute "{"/".join(path)}" of {scope.element.tag} "{scope.id}" gets '
                                     f"{i.what} here and {j.what} at line {j.line}: Trace Compass locks an "
                                     "attribute's type on its first value and fails the analysis on the other "
                                     'type; write long constants (type="long") or use forcedType'))
    return problems


def _check_fsm(pattern: _Element) -> list[tuple[int, str]]:
    handler = pattern.find("patternHandler")
    if handler is None:
        return []
    pid = pattern.get("id", "")
    tests = {t.get("id") for t in handler.findall("test")}
    actions = {a.get("id") for a in handler.findall("action")}
    fsms = {f.get("id") for f in handler.findall("fsm")}
    problems = []

    def need(ids: str | None, known: set[str | None], what: str, el: _Element, where: str = "") -> None:
        for ref in filter(None, (ids or "").split(":")):  # Trace Compass splits lists on ':'
            if ref not in known:
                names = ", ".join(sorted(map(str, known))) or "none"
                problems.append((el.sourceline or 0, f'unknown {what} "{ref}" in {where}pattern "{pid}": Trace '
                                                     f"Compass drops the pattern; define it or fix the name (known: {names})"))

    need(handler.get("initial"), fsms, "fsm", handler)
    for action in handler.iter("action"):
        if action.getparent() is not handler and len(action) == 0:  # a call of another action
            need(action.get("id"), actions, "action", action)
    for schedule in handler.iter("fsmScheduleAction"):
        need(schedule.get("id"), fsms, "fsm", schedule)
    for fsm in handler.findall("fsm"):
        states = {s.get("id") for s in fsm.iter("state", "final")}
        where = f'fsm "{fsm.get("id")}" of '
        need(fsm.get("initial"), states, "initial state", fsm, where)
        for el in fsm.iter("transition", "precondition", "onentry", "onexit"):
            if el.tag == "transition" and not el.get("target"):
                problems.append((el.sourceline or 0, f'transition without target in {where}pattern "{pid}": '
                                                     'Trace Compass drops the pattern; add target="..."'))
            elif el.tag == "transition":
                need(el.get("target"), states, "target state", el, where)
            need(el.get("cond"), tests, "test", el, where)
            need(el.get("action"), actions, "action", el, where)
    return problems


# ------------------------------------------------------------------ views
def _check_view(view: _Element, analyses: dict[str, _Scope]) -> list[tuple[int, str]]:
    problems = []
    vid = view.get("id", "")
    ids = [a.get("id", "") for a in view.findall("head/analysis")]
    for analysis in view.findall("head/analysis"):
        if analyses and analysis.get("id") not in analyses:
            problems.append((analysis.sourceline or 0,
                             f'view "{vid}" targets analysis "{analysis.get("id")}", which this file does not define '
                             f"(it defines {', '.join(sorted(analyses))}): fix the id, or keep views of analyses "
                             "defined elsewhere in a file of their own"))
    defined = {d.get("name", ""): d.get("value", "") for d in view.findall("definedValue")}
    for el in view.iter("display", "id", "parent", "name", "stateAttribute"):
        value = el.get("value", "")
        if value.startswith("$") and not _PLACEHOLDER.fullmatch(value) and value[1:] not in defined:
            problems.append((el.sourceline or 0, f'unknown definedValue "{value}" in view "{vid}": declare '
                                                 f'<definedValue name="{value[1:]}" .../> in the view or fix the name'))
    for entry in view.iter("entry"):
        for segment in entry.get("path", "").split("/"):
            bad = sorted(set(segment) & _REGEX_CHARS)
            if bad and segment != "*" and not _PLACEHOLDER.fullmatch(segment):
                problems.append((entry.sourceline or 0,
                                 f'view "{vid}": path segment "{segment}" of "{entry.get("path")}" is matched as a '
                                 f"regex (after * -> (.*)) and holds {' '.join(bad)}: use * for levels named by "
                                 "trace data, or a name without regex characters"))
    if view.tag == "timeGraphView":
        targets = [analyses[i] for i in ids if i in analyses] if ids else list(analyses.values())
        problems += _check_invisible_ints(view, defined, [w for s in targets for w in s.writes])
    return problems


def _displayed(entries: list[_Element], base: tuple[str, ...]) -> list[tuple[tuple[str, ...], _Element]]:
    """(attribute path pattern, entry) for every `display` of a view's entries."""
    out = []
    for entry in entries:
        path = tuple(s for s in entry.get("path", "").split("/") if s)
        here = path if entry.get("analysisId") else base + path
        display = entry.find("display")
        if display is not None:
            kind, value = display.get("type"), display.get("value", "")
            if kind == "self":
                out.append((here, entry))
            elif kind == "constant":
                start = () if display.get("reference") == "absolute" else here
                out.append((start + tuple(s for s in value.split("/") if s), entry))
        out += _displayed(entry.findall("entry"), here)
    return out


def _matches(view_path: tuple[str, ...], written: tuple[str, ...]) -> bool:
    if len(view_path) != len(written):
        return False
    for pattern, name in zip(view_path, written):
        if name == "*" or pattern == "*" or _PLACEHOLDER.fullmatch(pattern):
            continue
        try:
            if not re.fullmatch(pattern.replace("*", "(.*)"), name):
                return False
        except re.error:
            if pattern != name:
                return False
    return True


def _check_invisible_ints(view: _Element, defined: dict[str, str], writes: list[Write]) -> list[tuple[int, str]]:
    """Integer states are drawn only if a (non-negative) definedValue of the view has their value."""
    numbers = {int(v) for v in defined.values() if _JAVA_INTEGER.fullmatch(v) and int(v) >= 0}
    problems, seen = [], set()
    for view_path, entry in _displayed(view.findall("entry"), ()):
        for write in writes:
            if write.kind != "int" or write.depth or not _matches(view_path, write.path):
                continue
            if write.number is not None and write.number in numbers:
                continue
            if write.number is None and numbers:
                continue  # values only known at run time: trust the view's declared ones
            key = (write.path, write.number)
            if key in seen:
                continue
            seen.add(key)
            value = f"int value {write.number}" if write.number is not None else f"int values ({write.what})"
            problems.append((entry.sourceline or 0,
                             f'timeGraphView "{view.get("id")}" shows "{"/".join(write.path)}", where line '
                             f"{write.line} writes {value} with no definedValue in the view: Trace Compass draws "
                             "such states invisible; add <definedValue name=\"...\" value=\"N\" color=\"#RRGGBB\"/> "
                             "(N >= 0) for each value, or write strings"))
    return problems
