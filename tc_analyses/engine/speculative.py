"""A sequential unit solved with array passes: guess the state, run every event at once, repeat.

A sequential unit's changes read each other's writes (gpu.xml: the first free lane is chosen by
reading the lanes, which the chosen lane's writes fill), so :mod:`tc_analyses.engine.sequential`
runs it event by event. Most of the time the answer is plain (a queue's work rarely overlaps, so
lane 0 is free), and the loop spends a Python call per change finding that out.

Here every change of every event runs at once, as array operations, with each read of the state
answered from a *guess* of the unit's writes (first: none). The writes that come out are the next
guess. When a round's writes equal its guess, they are the loop's writes exactly: a read at order
t sees only writes before t, so by induction on t every read, outcome and write equals the
loop's (the loop's run is the only guess that reproduces itself). Each round settles at least the
first write it got wrong, and a round costs a few array passes, so a unit with little overlap
settles in two or three rounds; after :data:`ROUNDS` rounds the loop runs instead.

The attributes the loop would make (a path made when first resolved, also by a condition that only
reads it, and the part before a null element) are made at the end, from the resolutions of the
last round's evaluated branches, with their parents, as the loop makes them (the state system
sorts its paths, and a type clash is reported by time and path, not by attribute id, so the
order they are made in is not seen). An increment is a read too (of what
the attribute holds before it). Anything that fails in a round (an increment of the wrong kind that
a wrong guess made) leaves the unit to the loop, which fails or not as it would have.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tc_analyses.engine.columns import STEPS, IntArray
from tc_analyses.engine.grouping import search_sorted, unique_inverse
from tc_analyses.engine.sequential import SequentialRunner, Unsupported, _Paths
from tc_analyses.engine.xml_provider import _compare
from tc_analyses.errors import DfcompassError

ROUNDS = 8  # a unit that has not settled by then (long chains of overlapping work) runs event by event

Writes = tuple[IntArray, IntArray, IntArray]  # (attribute, order, value), sorted by order


class _Round:
    """One pass of every change over every row, reads answered from a guess of the unit's writes."""

    def __init__(self, solver: "_Solver", guess: "_Guess") -> None:
        self.solver, self.guess = solver, guess
        self.written: list[tuple[IntArray, IntArray, IntArray]] = []
        self.resolved = np.zeros(len(solver.matrix), dtype=bool)  # path ids resolved (attributes the loop makes)

    def change(self, function: Callable[..., Any], rows: IntArray, orders: IntArray) -> None:
        spec = self.solver.specs[function]
        if spec[0] == "if":
            _, test, then, other = spec
            taken = self.test(test, rows, orders)
            self.change(then, rows[taken], orders[taken])
            if other is not None:
                self.change(other, rows[~taken], orders[~taken])
            return
        _, paths, values, queried, add = spec
        ids, skip = self.solver.path_ids(paths, rows)
        self.resolved[ids] = True
        live = ~skip
        rows, orders, ids = rows[live], orders[live], ids[live]
        if queried is not None:  # the query's attribute, made when the change runs
            self.resolved[self.solver.path_ids(queried, rows)[0]] = True
        new = self.solver.column(values)[rows]
        if add is not None:  # an increment reads what the attribute holds (a null increment assigns null)
            new = self.solver.added(add, self.guess.read(ids, orders), new)
        self.written.append((ids, orders, new))

    def test(self, function: Callable[..., Any], rows: IntArray, orders: IntArray) -> IntArray:
        spec = self.solver.specs[function]
        kind = spec[0]
        if kind == "fields":
            return self.solver.column(spec[1])[rows].astype(bool)
        if kind == "not":
            return ~self.test(spec[1], rows, orders)
        if kind in ("and", "or"):  # each part only where the ones before did not decide (as Java)
            out = np.full(len(rows), kind == "and")
            open_ = np.ones(len(rows), dtype=bool)
            for part in spec[1]:
                at = np.flatnonzero(open_)
                got = self.test(part, rows[at], orders[at])
                out[at] = got
                open_[at] = got if kind == "and" else ~got
            return out
        _, paths, second, queried, operator = spec
        ids, skip = self.solver.path_ids(paths, rows)
        self.resolved[ids] = True
        if queried is not None:
            self.resolved[self.solver.path_ids(queried, rows)[0]] = True
        held = self.guess.read(ids, orders)
        held[skip] = 0  # a path cut by a null element reads null
        return self.solver.compare(held, self.solver.column(second)[rows], operator)

    def writes(self) -> Writes:
        if not self.written:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        ids, orders, values = (np.concatenate([w[i] for w in self.written]) for i in range(3))
        order = np.argsort(orders, kind="stable")
        return ids[order], orders[order], values[order]


class _Solver:
    """The unit's compiled changes with their paths numbered across shapes (path ids)."""

    def __init__(self, runner: SequentialRunner) -> None:
        self.runner = runner
        self.specs = runner.specs
        self._columns: dict[int, IntArray] = {}
        self._path_ids: dict[int, tuple[IntArray, IntArray]] = {}  # per _Paths: path id and skip per key
        self.matrix = np.zeros((0, 0), dtype=np.int64)  # each path id's name ids, -1 past its end

    def column(self, values: list[Any]) -> IntArray:
        found = self._columns.get(id(values))
        if found is None:
            found = self.runner.arrays.get(id(values))
            found = self._columns[id(values)] = np.asarray(values if found is None else found, dtype=np.int64)
        return found

    def number(self, all_paths: list[_Paths]) -> None:
        """Give every distinct path of the unit's path expressions one id (a path cut by a null
        element is the part before it, as the loop makes it), an element at a time."""
        depth = max([p.matrix.shape[1] for p in all_paths] + [0])
        blocks = []
        for paths in all_paths:
            matrix = np.full((len(paths.matrix), depth), -1, dtype=np.int64)
            matrix[:, :paths.matrix.shape[1]] = paths.matrix
            matrix[np.cumsum(matrix < 0, axis=1) > 0] = -1  # everything from the null element on
            blocks.append(matrix)
        stacked = np.concatenate(blocks) if blocks else np.zeros((0, depth), dtype=np.int64)
        ids = np.zeros(len(stacked), dtype=np.int64)
        width = int(stacked.max(initial=0)) + 2
        for level in range(depth):  # (the path so far, the next name) numbered densely
            ids = unique_inverse(ids * width + stacked[:, level] + 1)[1]
        first = np.zeros(int(ids.max(initial=-1)) + 1, dtype=np.int64)
        first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1, dtype=np.int64)  # each id's first row
        self.matrix = stacked[first]
        at = 0
        for paths in all_paths:
            skip = np.any(paths.matrix < 0, axis=1) if paths.matrix.shape[1] else np.zeros(len(paths.matrix), bool)
            self._path_ids[id(paths)] = (ids[at:at + len(paths.matrix)], skip)
            at += len(paths.matrix)

    def path_ids(self, paths: _Paths, rows: IntArray) -> tuple[IntArray, IntArray]:
        ids, skip = self._path_ids[id(paths)]
        keys = self.column(paths.keys)[rows]
        return ids[keys], skip[keys]

    def compare(self, held: IntArray, other: IntArray, operator: str) -> IntArray:
        """Each (held, other) pair of value ids compared once, with Trace Compass's rules."""
        if not len(held):
            return np.zeros(0, dtype=bool)
        pairs, inverse = unique_inverse(held << 31 | other)
        compared = self.runner._compared.setdefault(operator, {})
        item = self.runner.ev.values.item
        outcome = []
        for pair in pairs.tolist():
            found = compared.get(pair)
            if found is None:
                found = compared[pair] = _compare(item(pair >> 31), item(pair & 0x7FFFFFFF), operator)
            outcome.append(found)
        return np.array(outcome, dtype=bool)[inverse.reshape(-1)]

    def added(self, add: Callable[[int, int, int], int], held: IntArray, by: IntArray) -> IntArray:
        """The value ids of increments by `by` of the values held (each distinct pair once)."""
        out = by.copy()
        at = np.flatnonzero(by)
        if len(at):
            pairs, inverse = unique_inverse(held[at] << 31 | by[at])
            sums = [add(pair >> 31, pair & 0x7FFFFFFF, 0) for pair in pairs.tolist()]
            out[at] = np.array(sums, dtype=np.int64)[inverse.reshape(-1)]
        return out

    def attributes(self, wanted: IntArray, create: bool = True) -> IntArray:
        """The attribute of each path id (by id), for the distinct ids `wanted`, made with their
        parents as the loop's resolution makes them; with `create` false only those that exist
        (-1 for the others)."""
        ev = self.runner.ev
        out = np.full(len(self.matrix), -1, dtype=np.int64)
        attrs = np.zeros(len(wanted), dtype=np.int64)
        matrix = self.matrix[wanted]
        for level in range(matrix.shape[1]):
            names = matrix[:, level]
            deeper = (names >= 0) & (attrs >= 0)
            attrs[deeper] = ev.attrs.child(attrs[deeper], names[deeper], ev.names.texts, create)
        out[wanted] = attrs
        return out


class _Guess:
    """The state a round reads: the units before's writes and the guessed writes of this unit,
    sorted once; a read is the last write to the path before the order."""

    def __init__(self, span: int, writes: list[Writes]) -> None:
        ids, orders, values = (np.concatenate([w[i] for w in writes]) if writes else np.zeros(0, np.int64)
                               for i in range(3))
        keys = ids * span + orders
        order = np.argsort(keys, kind="stable")
        self.span, self.keys, self.values = span, keys[order], values[order].astype(np.int64)

    def read(self, ids: IntArray, orders: IntArray) -> IntArray:
        if not len(self.keys):
            return np.zeros(len(ids), dtype=np.int64)
        at = search_sorted(self.keys, ids * self.span + orders) - 1
        safe = np.maximum(at, 0)
        hit = (at >= 0) & (self.keys[safe] // self.span == ids)
        return np.where(hit, self.values[safe], 0)


def _expressions(specs: dict[Callable[..., Any], tuple[Any, ...]], roots: list[Callable[..., Any]]
                 ) -> list[_Paths]:
    """The path expressions the functions use."""
    found: dict[int, _Paths] = {}
    todo = list(roots)
    while todo:
        spec = specs[todo.pop()]
        if spec[0] == "if":
            todo += [f for f in spec[1:] if f is not None]
        elif spec[0] in ("and", "or"):
            todo += spec[1]
        elif spec[0] == "not":
            todo.append(spec[1])
        elif spec[0] in ("write", "attribute"):
            for paths in (spec[1], spec[3]):
                if paths is not None:
                    found[id(paths)] = paths
    return list(found.values())


def solve(runner: SequentialRunner, programs: list[Callable[[int], None]], bases: list[IntArray],
          replay: tuple[list[int], list[int], list[int]]) -> Writes | None:
    """The unit's writes (real attributes, in order) as the event loop would log them, or None
    where the loop must run: no settled guess after ROUNDS rounds, or a failure in a round. `programs[n]` runs on the rows of a frame whose change orders are
    `bases[n] * STEPS`; `replay` is what the units before wrote that this one reads."""
    paths = _expressions(runner.specs, programs)
    solver = _Solver(runner)
    solver.number(paths)
    span = runner.ev.log.span
    if len(solver.matrix) >= (2**62) // span:
        return None
    before: list[Writes] = []
    if replay[0]:  # only the writes to paths this unit reads or writes matter
        path_of_attr = np.full(len(runner.ev.attrs.paths), -1, dtype=np.int64)
        existing = solver.attributes(np.arange(len(solver.matrix), dtype=np.int64), create=False)
        path_of_attr[existing[existing >= 0]] = np.flatnonzero(existing >= 0)
        ids = path_of_attr[np.asarray(replay[0], dtype=np.int64)]
        kept = ids >= 0
        before.append((ids[kept], np.asarray(replay[1], dtype=np.int64)[kept],
                       np.asarray(replay[2], dtype=np.int64)[kept]))
    previous: Writes | None = None
    guess = _Guess(span, before)
    for _ in range(ROUNDS):
        attempt = _Round(solver, guess)
        try:
            for program, base in zip(programs, bases):
                attempt.change(program, np.arange(len(base), dtype=np.int64), base * STEPS)
        except (DfcompassError, Unsupported, ArithmeticError):
            # a guess can take branches the loop never takes (an increment of a string, a type
            # clash): the loop decides. Anything else is a fault of this module and is raised
            return None
        writes = attempt.writes()
        if previous is not None and all(np.array_equal(a, b) for a, b in zip(writes, previous)):
            attrs = solver.attributes(np.flatnonzero(attempt.resolved))
            return attrs[writes[0]], writes[1], writes[2]
        previous = writes
        guess = _Guess(span, before + [writes])
    return None
