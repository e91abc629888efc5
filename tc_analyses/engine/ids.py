"""The columnar engines' tables of ids: state values, path element names and attributes.

Everything the columnar engines compute is an integer: a value id (:class:`Values`, 0 is null),
a name id (:class:`Names`) or an attribute id (:class:`Attributes`, made with its parents as Trace
Compass makes them). The tables turn them back into values and paths.
"""

from __future__ import annotations

from array import array
from typing import Any, Callable

import numpy as np

from tc_analyses.engine.grouping import pair_keys, unique_inverse
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
        unique, inverse = unique_inverse(numbers)
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
        unique, inverse = unique_inverse(ids)
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
    """The attribute tree: ids for paths, made with their parents as Trace Compass makes them.

    Children are found by one integer key, (parent + 1) << 32 | the name's id in `names` (the
    evaluator's table, which every column of names is numbered in), so a column of (parent, name)
    pairs is looked up without making a tuple or hashing a string per pair."""

    ROOT = 0

    def __init__(self, names: "Names | None" = None) -> None:
        self.names = names if names is not None else Names()
        self.paths: list[tuple[str, ...]] = [()]
        self._parents = array("q", [-1])
        self._child_key: dict[int, int] = {}  # (parent + 1) << 32 | name id -> child
        self._children: dict[int, list[int]] = {}  # built when asked, from _parents
        self._children_made = 1  # the number of attributes _children was built for
        self._by_path: dict[tuple[str, ...], int] = {}  # id_of's cache, for event-by-event callers

    def child(self, parents: IntArray, names: list[str] | IntArray, texts: list[str], create: bool = True
              ) -> IntArray:
        """The attribute `texts[name]` below each parent: made when missing, or with `create`
        false -1 (and -1 below a parent of -1). `texts` is the name table's list (names are its ids)."""
        if not len(parents):
            return np.zeros(0, dtype=np.int64)
        assert texts is self.names.texts, "names must be ids of the attribute tree's name table"
        keys = (np.asarray(parents, dtype=np.int64) + 1) << 32 | np.asarray(names, dtype=np.int64)
        low = keys.min()
        if low == keys.max():  # one (parent, name) pair for every row: a constant below a constant
            return np.full(len(keys), self._child_of(int(low), create), dtype=np.int64)
        above, below, inverse = pair_keys(np.asarray(parents, dtype=np.int64) + 1, np.asarray(names, dtype=np.int64))
        get = self._child_key.get
        keys_list = (above << 32 | below).tolist()
        found = [get(key, -1) for key in keys_list]
        if create:
            missing = [i for i, f in enumerate(found) if f < 0 and keys_list[i] >= 1 << 32]  # not below a missing parent
            if missing:
                for at, made in zip(missing, self._make([keys_list[i] for i in missing])):
                    found[at] = made
        return np.array(found, dtype=np.int64)[inverse.reshape(-1)]

    def _child_of(self, key: int, create: bool) -> int:
        found = self._child_key.get(key)
        if found is None:
            found = self._make([key])[0] if create and key >= 1 << 32 else -1
        return found

    def _make(self, keys: list[int]) -> range:
        """The children of the keys, numbered in the keys' order (sorted keys: as Trace Compass makes
        them, one (parent, name) after the other)."""
        start = len(self.paths)
        made = range(start, start + len(keys))
        parents = [(key >> 32) - 1 for key in keys]
        texts, paths = self.names.texts, self.paths
        paths.extend([paths[parent] + (texts[key & 0xFFFFFFFF],) for parent, key in zip(parents, keys)])
        self._parents.extend(parents)
        self._child_key.update(zip(keys, made))
        return made

    def id_of(self, path: tuple[str, ...]) -> int:
        """The attribute at `path`, made (with its parents) when missing."""
        node = self._by_path.get(path)
        if node is None:
            node = self.ROOT
            intern = self.names.intern
            for name in path:
                node = self._child_of((node + 1) << 32 | intern(name), True)
            self._by_path[path] = node
        return node

    def find(self, path: tuple[str, ...]) -> int | None:
        """The attribute at `path` if it exists."""
        node: int | None = self.ROOT
        ids = self.names._ids
        for name in path:
            name_id = ids.get(name)
            if name_id is None:
                return None
            node = self._child_key.get((node + 1) << 32 | name_id)  # type: ignore[operator]
            if node is None:
                return None
        return node

    def children_of(self, attr: int) -> list[int]:
        """The attributes directly below `attr`, in the order they were made."""
        if self._children_made != len(self.paths):
            parents = np.frombuffer(self._parents, dtype=np.int64)[1:]
            order = np.argsort(parents, kind="stable")
            grouped = parents[order]
            cuts = [0, *(np.flatnonzero(np.diff(grouped)) + 1).tolist(), len(order)]
            self._children = {int(grouped[a]): (order[a:b] + 1).tolist() for a, b in zip(cuts, cuts[1:]) if b > a}
            self._children_made = len(self.paths)
        return self._children.get(attr, [])

    def subtree(self, attr: int) -> list[int]:
        """`attr` and every attribute below it."""
        out, todo = [], [attr]
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(self.children_of(node))
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
