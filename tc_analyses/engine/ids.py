"""The columnar engines' tables of ids: state values, path element names and attributes.

Everything the columnar engines compute is an integer: a value id (:class:`Values`, 0 is null),
a name id (:class:`Names`) or an attribute id (:class:`Attributes`, made with its parents as Trace
Compass makes them). The tables turn them back into values and paths.
"""

from __future__ import annotations

from array import array
from typing import Any, Callable

import numpy as np

from tc_analyses.engine.state_system import Value
from tc_analyses.engine.xml_provider import typed_value

IntArray = np.ndarray[Any, Any]


class Values:
    """Every distinct state value gets an id; 0 is null.

    Held as columns, not objects: a kind code (:attr:`KINDS`) and a payload per id, the number itself
    for a long (most values: fields and every time), else an index into the few other values'
    objects. :meth:`item` makes a long's Value when it is asked for. Longs also have a sorted numpy
    index, so a column of them is interned with array operations."""

    KINDS = {"int": 1, "long": 2, "double": 3, "string": 4}
    _LONG = KINDS["long"]

    def __init__(self) -> None:
        self.kinds = array("b", [0])  # KINDS of each id
        self._payload = array("q", [0])
        self._objects: list[Value] = []  # values other than int64 longs
        self._boxed: set[int] = set()  # ids of longs past 64 bits: among the objects
        self._ids: dict[Value, int] = {}
        self._long_keys: IntArray | None = np.zeros(0, dtype=np.int64)  # sorted numbers
        self._long_ids: IntArray | None = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.kinds)

    def item(self, i: int) -> Value | None:
        """The value of id `i`."""
        kind = self.kinds[i]
        if kind == self._LONG and i not in self._boxed:
            return Value("long", self._payload[i])
        return self._objects[self._payload[i]] if kind else None

    def intern(self, value: Value | None) -> int:
        if value is None:
            return 0
        found = self._ids.get(value)
        if found is not None:
            return found
        if value.kind == "long" and isinstance(value.value, int) and -2**63 <= value.value < 2**63:
            found = self._ids[value] = int(self.longs(np.array([value.value], dtype=np.int64))[0])
            return found
        found = self._ids[value] = len(self.kinds)
        self.kinds.append(self.KINDS[value.kind])
        self._payload.append(len(self._objects))
        self._objects.append(value)
        if value.kind == "long":
            self._boxed.add(found)
        return found

    def payloads(self, ids: IntArray) -> IntArray:
        """Each id's payload: a long's number (an index into the other values otherwise)."""
        return np.frombuffer(self._payload, dtype=np.int64)[ids]

    def boxed(self, ids: IntArray) -> IntArray:
        """Whether each id is a long past 64 bits (held as an object, its payload no number)."""
        if not self._boxed:
            return np.zeros(len(ids), dtype=bool)
        return np.isin(ids, np.fromiter(self._boxed, np.int64, len(self._boxed)))

    def texts(self, ids: IntArray) -> list[str | None]:
        """String.valueOf of each id's value (None for null); the numbers of longs as one array
        conversion, not a Value each."""
        kinds = np.frombuffer(self.kinds, dtype=np.int8)[ids]
        plain = (kinds == self._LONG) & ~self.boxed(ids)
        out: list[str | None] = [None if not k else str(self.item(i)) for i, k in
                                 zip(ids.tolist(), (~plain & (kinds != 0)).tolist())]
        numbers = self.payloads(ids[plain]).astype(str).tolist()
        for at, text in zip(np.flatnonzero(plain).tolist(), numbers):
            out[at] = text
        return out

    def seal(self) -> None:
        """Drop the index that interning uses (16 bytes a long) once the state systems are built; a
        later :meth:`longs` builds it again."""
        self._long_keys = self._long_ids = None

    def _long_index(self) -> tuple[IntArray, IntArray]:
        if self._long_keys is None or self._long_ids is None:
            kinds = np.frombuffer(self.kinds, dtype=np.int8)
            ids = np.flatnonzero(kinds == self._LONG)
            ids = ids[~np.isin(ids, np.fromiter(self._boxed, np.int64, len(self._boxed)))]
            numbers = np.frombuffer(self._payload, dtype=np.int64)[ids]
            order = np.argsort(numbers, kind="stable")
            self._long_keys, self._long_ids = numbers[order], ids[order].astype(np.int64)
        return self._long_keys, self._long_ids

    def longs(self, numbers: IntArray) -> IntArray:
        """The ids of Value("long", n) for each n of an int64 array."""
        if not len(numbers):
            return np.zeros(0, dtype=np.int64)
        self._long_keys, self._long_ids = self._long_index()
        unique, inverse = np.unique(numbers, return_inverse=True)
        at = np.searchsorted(self._long_keys, unique)
        known = at < len(self._long_keys)
        known[known] = self._long_keys[at[known]] == unique[known]
        ids = np.empty(len(unique), dtype=np.int64)
        ids[known] = self._long_ids[at[known]]
        new = unique[~known]
        if len(new):
            ids[~known] = np.arange(len(self.kinds), len(self.kinds) + len(new), dtype=np.int64)
            self._payload.frombytes(new.astype(np.int64).tobytes())
            self.kinds.frombytes(np.full(len(new), self._LONG, dtype=np.int8).tobytes())
            where = np.searchsorted(self._long_keys, new)  # both sorted: an insert, not a sort
            self._long_keys = np.insert(self._long_keys, where, new)
            self._long_ids = np.insert(self._long_ids, where, ids[~known])
        return ids[inverse.reshape(-1)]

    def map(self, ids: IntArray, fn: Callable[[Value | None], Value | None]) -> IntArray:
        """fn applied to each distinct value of `ids` once."""
        if not len(ids):
            return ids
        unique, inverse = np.unique(ids, return_inverse=True)
        mapped_ids: list[int] = []
        for i in unique.tolist():
            value = self.item(i)
            mapped = fn(value)
            mapped_ids.append(i if mapped is value else self.intern(mapped))  # the same value keeps its id
        return np.array(mapped_ids, dtype=np.int64)[inverse]

    def of_raw(self, column: np.ndarray[Any, Any]) -> IntArray:
        """A field column as Trace Compass types it (typed_value), as value ids."""
        if column.dtype.kind in "iub":  # integers are Java longs: 64-bit two's complement
            return self.longs(column.astype(np.uint64).view(np.int64) if column.dtype.kind == "u"
                              else column.astype(np.int64))
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
        self.children: dict[int, list[int]] = {}
        self._by_path: dict[tuple[str, ...], int] = {}  # id_of's cache, for event-by-event callers

    def child(self, parents: IntArray, names: list[str] | IntArray, texts: list[str], create: bool = True
              ) -> IntArray:
        """The attribute `texts[name]` below each parent: made when missing, or with `create`
        false -1 (and -1 below a parent of -1)."""
        if not len(parents):
            return np.zeros(0, dtype=np.int64)
        names = np.asarray(names, dtype=np.int64)
        width = int(names.max()) + 1
        unique, inverse = np.unique((parents + 1) * width + names, return_inverse=True)  # one int key per pair
        out = np.empty(len(unique), dtype=np.int64)
        for i, key in enumerate(unique.tolist()):
            parent, name = divmod(key, width)
            parent -= 1
            found = self._child.get((parent, texts[name]))
            if found is None and (not create or parent < 0):
                found = -1
            elif found is None:
                found = self._make(parent, texts[name])
            out[i] = found
        return out[inverse.reshape(-1)]

    def _make(self, parent: int, name: str) -> int:
        made = self._child[(parent, name)] = len(self.paths)
        self.paths.append(self.paths[parent] + (name,))
        self.children.setdefault(parent, []).append(made)
        return made

    def id_of(self, path: tuple[str, ...]) -> int:
        """The attribute at `path`, made (with its parents) when missing."""
        node = self._by_path.get(path)
        if node is None:
            node = self.ROOT
            for name in path:
                found = self._child.get((node, name))
                node = self._make(node, name) if found is None else found
            self._by_path[path] = node
        return node

    def find(self, path: tuple[str, ...]) -> int | None:
        """The attribute at `path` if it exists."""
        node: int | None = self.ROOT
        for name in path:
            node = self._child.get((node, name))  # type: ignore[arg-type]
            if node is None:
                return None
        return node

    def subtree(self, attr: int) -> list[int]:
        """`attr` and every attribute below it."""
        out, todo = [], [attr]
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(self.children.get(node, ()))
        return out


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
