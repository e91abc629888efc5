"""A state system with Trace Compass's semantics: an attribute tree whose values change over time.

Rules (../shared/docs/tracecompass-xml.md §6): intervals are inclusive ``[start, end]`` in ns;
a change at t ends the ongoing interval at t-1; assigning the value already held creates
nothing; several changes at the same t keep the last; a new attribute is null from the start
of the state system; the first non-null value locks the attribute's type and a value of
another type fails the analysis; at the end every ongoing interval closes at the last event, or
later when a change queued for the future (futureTime) ended an interval beyond it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

from tc_analyses.errors import DfcompassError


class Value(NamedTuple):
    """A typed state value, as Trace Compass's Java types: int, long, double or string."""

    kind: str
    value: int | float | str

    def __str__(self) -> str:  # String.valueOf, as attribute names and comparisons use it
        if self.kind == "double":
            return repr(float(self.value))
        return str(self.value)


class StateTypeError(DfcompassError):
    """A value of another type than the attribute's first one: Trace Compass fails the analysis."""


@dataclass(frozen=True)
class Interval:
    start: int
    end: int
    value: Value | None


@dataclass
class Attribute:
    path: tuple[str, ...]
    start: int  # start of the ongoing interval
    value: Value | None = None
    kind: str | None = None  # locked type
    intervals: list[Interval] = field(default_factory=list)


class StateSystem:
    def __init__(self, start: int) -> None:
        self.start = start
        self.end = start  # the end of the latest interval ended so far (Trace Compass's backend end time)
        self._attributes: dict[tuple[str, ...], Attribute] = {}
        self._children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}

    def attribute(self, path: tuple[str, ...]) -> Attribute:
        """The attribute at `path`, created (with its parents) when missing, as Trace Compass does."""
        found = self._attributes.get(path)
        if found is None:
            for depth in range(1, len(path) + 1):
                node = path[:depth]
                if node not in self._attributes:
                    self._attributes[node] = Attribute(node, self.start)
                    self._children.setdefault(node[:-1], []).append(node)
            found = self._attributes[path]
        return found

    def subtree(self, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        """`path` and every attribute below it (the ones that exist)."""
        out, todo = [], [path] if path in self._attributes else []
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(self._children.get(node, ()))
        return out

    def ongoing(self, path: tuple[str, ...]) -> Value | None:
        return self.attribute(path).value

    def modify(self, path: tuple[str, ...], value: Value | None, t: int) -> None:
        attr = self.attribute(path)
        if value is not None:
            if attr.kind is None:
                attr.kind = value.kind
            elif attr.kind != value.kind:
                raise StateTypeError(f"attribute {'/'.join(path)} holds {attr.kind} values, "
                                     f"cannot take a {value.kind} ({value.value!r}) at t={t}")
        if value == attr.value:
            return
        if t > attr.start:
            attr.intervals.append(Interval(attr.start, t - 1, attr.value))
            attr.start = t
            self.end = max(self.end, t - 1)
        attr.value = value  # same timestamp: the last change wins

    def update_ongoing(self, path: tuple[str, ...], value: Value | None) -> None:
        """Overwrite the ongoing interval's value from its start (``update="true"``)."""
        attr = self.attribute(path)
        if value is not None and attr.kind is not None and attr.kind != value.kind:
            raise StateTypeError(f"attribute {'/'.join(path)} holds {attr.kind} values, cannot take {value.kind}")
        if value is not None and attr.kind is None:
            attr.kind = value.kind
        attr.value = value

    def close(self, t: int) -> None:
        """End every ongoing interval at `t` (the last event's timestamp), as closeHistory does.

        When a future change (futureTime after the last event) ended an interval later than `t`,
        the history ends there instead, and a state that only starts after that end (the value the
        latest future change set) is never stored: Trace Compass's TransientState skips it.
        """
        self.end = max(self.end, t)
        for attr in self._attributes.values():
            if attr.start <= self.end:
                attr.intervals.append(Interval(attr.start, self.end, attr.value))
            attr.start = self.end + 1

    def paths(self) -> list[tuple[str, ...]]:
        return sorted(self._attributes)

    def intervals(self, path: tuple[str, ...]) -> list[Interval]:
        return list(self._attributes[path].intervals)

    def items(self) -> Iterator[tuple[tuple[str, ...], list[Interval]]]:
        for path in self.paths():
            yield path, self._attributes[path].intervals
