"""A state system with Trace Compass's semantics: an attribute tree whose values change over time.

Rules (../shared/docs/tracecompass-xml.md §6): intervals are inclusive ``[start, end]`` in ns;
a change at t ends the ongoing interval at t-1; assigning the value already held creates
nothing; several changes at the same t keep the last; a new attribute is null from the start
of the state system; the first non-null value locks the attribute's type and a value of
another type fails the analysis; at the end every ongoing interval closes at the last event, or
later when a change queued for the future (futureTime) ended an interval beyond it.

Storage is columnar: each attribute keeps its ended intervals as two 64-bit arrays (starts, ends)
and a list of values, and equal values are one object per state system, so an interval costs
about 24 bytes instead of two Python objects. :meth:`StateSystem.query_at` and
:meth:`StateSystem.query_range` answer from the arrays; :meth:`StateSystem.intervals` makes
:class:`Interval` objects for the callers that want them, one attribute at a time.
"""

from __future__ import annotations

import bisect
import mmap
import os
import tempfile
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal, NamedTuple, Sequence

import numpy as np

from tc_analyses.engine.grouping import unique_inverse
from tc_analyses.errors import DfcompassError
from tc_analyses.model.tables import MadeOnRead


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


class ValueColumn(MadeOnRead["Value | None"]):
    """An attribute's interval values as ids into a shared value table (the columnar engine's): four
    bytes an interval, and a Value object only for the value asked for."""

    def __init__(self, ids: array[int] | memoryview, item: Callable[[int], "Value | None"]) -> None:
        self.ids, self._item = ids, item

    def __len__(self) -> int:
        return len(self.ids)

    def _make(self, i: int) -> Value | None:
        return self._item(self.ids[i])

    def __iter__(self) -> Iterator[Value | None]:
        return map(self._item, self.ids)  # no index arithmetic: this is how the summary reads


@dataclass
class Attribute:
    path: tuple[str, ...]
    start: int  # start of the ongoing interval
    value: Value | None = None
    kind: str | None = None  # locked type
    # the ended intervals, columnar; read-only views of a mapped file once spilled (StateSystem.spill)
    starts: array[int] | memoryview = field(default_factory=lambda: array("q"))
    ends: array[int] | memoryview = field(default_factory=lambda: array("q"))
    values: list[Value | None] = field(default_factory=list)  # built event by event
    column: ValueColumn | None = None  # built by the columnar engine, instead of `values`

    def end_interval(self, end: int) -> None:
        assert isinstance(self.starts, array) and isinstance(self.ends, array), "a spilled attribute is closed"
        self.starts.append(self.start)
        self.ends.append(end)
        self.values.append(self.value)

    def ended_values(self) -> Sequence[Value | None]:
        """The value of each ended interval."""
        return self.column if self.column is not None else self.values


@dataclass
class Block:
    """Closed attributes held together: their intervals in three arrays, sorted by attribute, and
    a row per attribute (the columnar engine's storage). A million attributes (one per scenario
    or correlation id) cost their intervals and a dict entry each, not a million objects."""

    paths: list[tuple[str, ...]]  # by row
    offsets: np.ndarray[Any, Any]  # int64, rows + 1: the intervals of row i are offsets[i]:offsets[i + 1]
    starts: np.ndarray[Any, Any]  # int64
    ends: np.ndarray[Any, Any]  # int64
    ids: np.ndarray[Any, Any]  # int32 value ids
    kinds: list[str | None]  # by row: the locked type
    item: Callable[[int], "Value | None"]  # value id -> value
    rows: dict[tuple[str, ...], int] = field(init=False)
    spilled: bool = field(init=False, default=False)
    sorted_paths: list[tuple[str, ...]] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.rows = {path: row for row, path in enumerate(self.paths)}

    def attribute(self, row: int, end: int) -> Attribute:
        """Row `row` as an :class:`Attribute` whose columns are views of the block's arrays."""
        lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
        attr = Attribute(self.paths[row], end + 1, self.item(int(self.ids[hi - 1])) if hi > lo else None,
                         self.kinds[row])
        attr.starts, attr.ends = (_view(a, "q")[lo:hi] for a in (self.starts, self.ends))
        attr.column = ValueColumn(_view(self.ids, "i")[lo:hi], self.item)
        return attr


def _view(values: np.ndarray[Any, Any], code: Literal["q", "i"]) -> memoryview:
    """A flat memoryview of a numpy array with the struct code the columns use ('q', 'i')."""
    return np.ascontiguousarray(values).data.cast("B").cast(code)


class StateSystem:
    def __init__(self, start: int) -> None:
        self.start = start
        self.end = start  # the end of the latest interval ended so far (Trace Compass's backend end time)
        self._attributes: dict[tuple[str, ...], Attribute] = {}
        self._children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        self._values: dict[Value, Value] = {}  # one object per distinct value
        self._block: Block | None = None  # closed attributes built as columns, made into objects on read

    def adopt(self, block: Block) -> None:
        """Hold the closed attributes of `block` (a state system built as columns)."""
        self._block = block
        for path in block.paths:
            self._children.setdefault(path[:-1], []).append(path)

    def _get(self, path: tuple[str, ...]) -> Attribute:
        """The attribute at `path`; KeyError when there is none."""
        found = self._attributes.get(path)
        if found is None:
            if self._block is None or path not in self._block.rows:
                raise KeyError(path)
            found = self._block.attribute(self._block.rows[path], self.end)
        return found

    def _has(self, path: tuple[str, ...]) -> bool:
        return path in self._attributes or (self._block is not None and path in self._block.rows)

    def attribute(self, path: tuple[str, ...]) -> Attribute:
        """The attribute at `path`, created (with its parents) when missing, as Trace Compass does."""
        found = self._attributes.get(path)
        if found is None:
            for depth in range(1, len(path) + 1):
                node = path[:depth]
                if node not in self._attributes:
                    if self._has(node):  # held in the block: made an object to be written
                        self._attributes[node] = self._get(node)
                        continue
                    self._attributes[node] = Attribute(node, self.start)
                    self._children.setdefault(node[:-1], []).append(node)
            found = self._attributes[path]
        return found

    def subtree(self, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        """`path` and every attribute below it (the ones that exist)."""
        out, todo = [], [path] if self._has(path) else []
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
            attr.end_interval(t - 1)
            attr.start = t
            self.end = max(self.end, t - 1)
        attr.value = value if value is None else self._values.setdefault(value, value)  # same t: the last wins

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
                attr.end_interval(self.end)
            attr.start = self.end + 1

    def paths(self) -> list[tuple[str, ...]]:
        if self._block is None:
            return sorted(self._attributes)
        if self._block.sorted_paths is None:  # read often (by every report); the block does not change
            self._block.sorted_paths = sorted(self._block.paths)
        if not self._attributes.keys() - self._block.rows.keys():
            return list(self._block.sorted_paths)
        return sorted(self._attributes.keys() | self._block.rows.keys())

    def intervals(self, path: tuple[str, ...]) -> list[Interval]:
        """The ended intervals of `path`, as objects (made on each call)."""
        attr = self._get(path)
        return [Interval(s, e, v) for s, e, v in zip(attr.starts, attr.ends, attr.ended_values())]

    def items(self) -> Iterator[tuple[tuple[str, ...], list[Interval]]]:
        for path in self.paths():
            yield path, self.intervals(path)

    def interval_count(self) -> int:
        rows = self._block.rows if self._block is not None else {}
        held = len(self._block.starts) if self._block is not None else 0
        return held + sum(len(a.starts) for p, a in self._attributes.items() if p not in rows)

    def spill(self, folder: str | os.PathLike[str] | None = None) -> int:
        """Move the ended intervals' columns (times, and value ids where the columnar engine built
        them) to a file in `folder` (default: the system's temporary folder), read back through a
        memory map: the pages are the file's, which the OS reads in and drops as memory requires.
        The file is unlinked at once and lives as long as the mapping. Call after :meth:`close`.
        Returns the bytes moved."""
        attributes = [a for a in self._attributes.values() if len(a.starts) and isinstance(a.starts, array)]
        block = self._block if self._block is not None and not self._block.spilled and len(self._block.starts) \
            else None
        if not attributes and block is None:
            return 0
        fd, name = tempfile.mkstemp(prefix="dfc-states-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                for a in attributes:
                    f.write(a.starts)
                    f.write(a.ends)
                    if a.column is not None:
                        f.write(a.column.ids)
                block_at = f.tell()
                if block is not None:
                    for column in (block.starts, block.ends, block.ids):
                        f.write(np.ascontiguousarray(column).tobytes())
                size = f.tell()
            with open(name, "rb") as f:
                mapped = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        finally:
            os.unlink(name)
        at = 0
        for a in attributes:
            n = len(a.starts)
            a.starts, a.ends = mapped[at:at + 8 * n].cast("q"), mapped[at + 8 * n:at + 16 * n].cast("q")
            at += 16 * n
            if a.column is not None:
                a.column.ids = mapped[at:at + 4 * n].cast("i")
                at += 4 * n
        if block is not None:  # the arrays become read-only views of the mapped file
            n = len(block.starts)
            block.starts = np.frombuffer(mapped, dtype=np.int64, count=n, offset=block_at)
            block.ends = np.frombuffer(mapped, dtype=np.int64, count=n, offset=block_at + 8 * n)
            block.ids = np.frombuffer(mapped, dtype=np.int32, count=n, offset=block_at + 16 * n)
            block.spilled = True
        return size

    def columns(self, path: tuple[str, ...]) -> tuple[Sequence[int], Sequence[int], Sequence[Value | None]]:
        """The ended intervals of `path` as (starts, ends, values), without making interval objects."""
        attr = self._get(path)
        return attr.starts, attr.ends, attr.ended_values()

    def arrays(self, path: tuple[str, ...]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any],
                                                     Callable[[int], Value | None]]:
        """The ended intervals of `path` as numpy arrays (starts, ends, value ids) and the function
        that gives the value of an id: no object is made per interval. The columnar engine's ids
        are its value table's; for a state system built event by event they are made here."""
        attr = self._get(path)
        starts, ends = (np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64)
                        for c in (attr.starts, attr.ends))
        if attr.column is not None:
            ids = np.frombuffer(attr.column.ids, dtype=np.int32) if len(attr.column.ids) else np.zeros(0, np.int32)
            return starts, ends, ids, attr.column._item
        table: dict[Value | None, int] = {}
        ids = np.fromiter((table.setdefault(v, len(table)) for v in attr.values), np.int64, len(attr.values))
        values = list(table)
        return starts, ends, ids, values.__getitem__

    def block_counts(self, paths: list[tuple[str, ...]]) -> np.ndarray[Any, Any] | None:
        """How many ended intervals each of `paths` has, when all are held in the block alone (the
        columnar engine's state systems); None otherwise (see :meth:`gather`)."""
        block = self._block
        if block is None or any(p in self._attributes or p not in block.rows for p in paths):
            return None
        rows = np.fromiter((block.rows[p] for p in paths), np.int64, len(paths))
        return np.asarray(block.offsets[rows + 1] - block.offsets[rows], dtype=np.int64)

    def gather(self, paths: list[tuple[str, ...]]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any],
                                                            np.ndarray[Any, Any], np.ndarray[Any, Any],
                                                            Callable[[int], Value | None]]:
        """The intervals of several attributes held in the block (:meth:`block_counts` not None) as
        one set of columns, in the order of `paths`: (each interval's index into `paths`, starts,
        ends, value ids) and the value of an id. What :meth:`arrays` gives for each, concatenated."""
        block = self._block
        assert block is not None
        rows = np.fromiter((block.rows[p] for p in paths), np.int64, len(paths))
        lo = np.asarray(block.offsets[rows], dtype=np.int64)
        counts = np.asarray(block.offsets[rows + 1], dtype=np.int64) - lo
        which = np.repeat(np.arange(len(paths), dtype=np.int64), counts)
        at = np.arange(len(which), dtype=np.int64) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
        return which, np.asarray(block.starts)[at], np.asarray(block.ends)[at], np.asarray(block.ids)[at], block.item

    def ranges_where(self, path: tuple[str, ...], holds: Callable[[Any], bool]
                     ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The half-open ``[start, end + 1)`` of the intervals of `path` whose value is not null and
        whose raw value passes `holds`, called once per distinct value."""
        starts, ends, ids, item = self.arrays(path)
        distinct, inverse = unique_inverse(ids)
        passes = np.array([v is not None and bool(holds(v.value)) for v in map(item, distinct.tolist())], dtype=bool)
        keep = passes[inverse.reshape(-1)] if len(ids) else np.zeros(0, dtype=bool)
        return starts[keep], ends[keep] + 1

    def distinct_values(self, path: tuple[str, ...]) -> list[Value]:
        """The values (not null) the intervals of `path` hold, each once, in the order first held."""
        _, _, ids, item = self.arrays(path)
        distinct, first = np.unique(ids, return_index=True)
        found = (item(int(i)) for i in distinct[np.argsort(first)].tolist())
        return [v for v in found if v is not None]

    def query_at(self, path: tuple[str, ...], t: int) -> Value | None:
        """The value `path` holds at time `t` (Trace Compass's querySingleState); None outside the history."""
        attr = self._get(path)
        at = bisect.bisect_right(attr.starts, t) - 1
        return attr.ended_values()[at] if at >= 0 and t <= attr.ends[at] else None

    def query_range(self, path: tuple[str, ...], t0: int, t1: int) -> list[Interval]:
        """The intervals of `path` that intersect [t0, t1] (Trace Compass's query2D, one attribute)."""
        attr = self._get(path)
        lo = max(bisect.bisect_right(attr.starts, t0) - 1, 0)
        hi = bisect.bisect_right(attr.starts, t1)
        values = attr.ended_values()[lo:hi]
        return [Interval(s, e, v) for s, e, v in zip(attr.starts[lo:hi], attr.ends[lo:hi], values) if e >= t0]
