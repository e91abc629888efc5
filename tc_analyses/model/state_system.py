"""A state system with Trace Compass's semantics: an attribute tree whose values change over time.

Rules (../shared/docs/tracecompass-xml.md §6): intervals are inclusive ``[start, end]`` in ns;
a change at t ends the ongoing interval at t-1; assigning the value already held creates
nothing; several changes at the same t keep the last; a new attribute is null from the start
of the state system; the first non-null value locks the attribute's type and a value of
another type fails the analysis; at the end every ongoing interval closes at the last event.
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
        self.end = start
        self._attributes: dict[tuple[str, ...], Attribute] = {}

    def attribute(self, path: tuple[str, ...]) -> Attribute:
        """The attribute at `path`, created (with its parents) when missing, as Trace Compass does."""
        found = self._attributes.get(path)
        if found is None:
            for depth in range(1, len(path)):
                parent = path[:depth]
                if parent not in self._attributes:
                    self._attributes[parent] = Attribute(parent, self.start)
            found = self._attributes[path] = Attribute(path, self.start)
        return found

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
        attr.value = value  # same timestamp: the last change wins
        self.end = max(self.end, t)

    def update_ongoing(self, path: tuple[str, ...], value: Value | None) -> None:
        """Overwrite the ongoing interval's value from its start (``update="true"``)."""
        attr = self.attribute(path)
        if value is not None and attr.kind is not None and attr.kind != value.kind:
            raise StateTypeError(f"attribute {'/'.join(path)} holds {attr.kind} values, cannot take {value.kind}")
        if value is not None and attr.kind is None:
            attr.kind = value.kind
        attr.value = value

    def close(self, t: int) -> None:
        """End every ongoing interval at `t` (the last event's timestamp)."""
        self.end = max(self.end, t)
        for attr in self._attributes.values():
            attr.intervals.append(Interval(attr.start, max(self.end, attr.start), attr.value))
            attr.start = self.end + 1

    def paths(self) -> list[tuple[str, ...]]:
        return sorted(self._attributes)

    def intervals(self, path: tuple[str, ...]) -> list[Interval]:
        return list(self._attributes[path].intervals)

    def items(self) -> Iterator[tuple[tuple[str, ...], list[Interval]]]:
        for path in self.paths():
            yield path, self._attributes[path].intervals
