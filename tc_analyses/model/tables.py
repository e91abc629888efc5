"""Intervals held as columns, with an object made only for the row that is read.

A trace's activity has one row per interval: a node run, an API call, a GPU operation. Held as
Python objects, a million intervals cost a few hundred MB and every analysis loops over them one
by one. :class:`RunTable` keeps them as numpy columns instead (int64 numbers, text as codes into
a label array), so the analyses select, group and sum with array operations. It is still a
read-only sequence of the row dataclass (:class:`MadeOnRead`): code that wants ``NodeRun``
objects iterates and gets them, one at a time.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Span:
...     name: str
...     start: int
...     end: int
>>> class Spans(RunTable[Span]):
...     row = Span
...     texts = ("name",)
>>> spans = Spans.from_rows([Span("a", 0, 5), Span("b", 2, 3), Span("a", 4, 9)])
>>> spans.column("end").tolist(), spans.text("name").tolist()
([5, 3, 9], ['a', 'b', 'a'])
>>> spans.take(spans.text("name") == "a")[1]
Span(name='a', start=4, end=9)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar, overload

import numpy as np

T = TypeVar("T")
R = TypeVar("R")
Array = np.ndarray[Any, Any]


class MadeOnRead(Sequence[T]):
    """A read-only sequence held as columns, whose items are made when read (:meth:`_make`); equal
    to any sequence of the same items, a list too."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _make(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, at: int) -> T: ...

    @overload
    def __getitem__(self, at: slice) -> list[T]: ...

    def __getitem__(self, at: int | slice) -> T | list[T]:
        if isinstance(at, slice):
            return [self._make(i) for i in range(len(self))[at]]
        return self._make(range(len(self))[at])

    def __iter__(self) -> Iterator[T]:
        return map(self._make, range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class RunTable(MadeOnRead[R], Generic[R]):
    """Rows of the dataclass :attr:`row` as columns: one int64 array per numeric field, and for
    each field named in :attr:`texts` an int32 code array into an object array of labels.

    Subclasses name the row type and its text fields; every other field is an integer (a bool
    field is stored as 0/1 and read back as a bool).
    """

    row: ClassVar[Callable[..., Any]]
    texts: ClassVar[tuple[str, ...]] = ()

    def __init__(self, columns: Mapping[str, Array], labels: Mapping[str, Array] | None = None) -> None:
        self._fields = tuple(f.name for f in dataclasses.fields(self.row))  # type: ignore[arg-type]
        self._bools = {f.name for f in dataclasses.fields(self.row)  # type: ignore[arg-type]
                       if f.type in ("bool", bool)}
        self._columns = dict(columns)
        self._labels = dict(labels or {})
        self._length = len(next(iter(self._columns.values()))) if self._columns else 0
        missing = [f for f in self._fields if f not in self._columns]
        if missing:
            raise ValueError(f"{type(self).__name__}: no column for {', '.join(missing)}")

    # ---------------------------------------------------------------- making tables
    @classmethod
    def empty(cls: type[TableT]) -> TableT:
        return cls.from_rows([])

    @classmethod
    def from_rows(cls: type[TableT], rows: Iterable[R]) -> TableT:
        """The table of these row objects (tests and small inputs; the reader builds columns)."""
        items = list(rows)
        fields = [f.name for f in dataclasses.fields(cls.row)]  # type: ignore[arg-type]
        columns: dict[str, Array] = {}
        labels: dict[str, Array] = {}
        for name in fields:
            values = [getattr(r, name) for r in items]
            if name in cls.texts:
                columns[name], labels[name] = encode(values)
            else:
                columns[name] = np.asarray(values, dtype=np.int64).reshape(len(values))
        return cls(columns, labels)

    @classmethod
    def of(cls: type[TableT], rows: Sequence[R] | TableT) -> TableT:
        """`rows` as a table: a table as it is, a sequence of row objects converted."""
        return rows if isinstance(rows, cls) else cls.from_rows(rows)

    def take(self: TableT, which: Array | Sequence[int]) -> TableT:
        """The rows selected by an index array or a boolean mask, in that order."""
        index = np.asarray(which)
        return type(self)({k: v[index] for k, v in self._columns.items()}, self._labels)

    def with_columns(self: TableT, **columns: Array) -> TableT:
        """The same rows with some numeric columns replaced."""
        return type(self)({**self._columns, **columns}, self._labels)

    @classmethod
    def concat(cls: type[TableT], tables: Sequence[TableT]) -> TableT:
        """The rows of every table, one table after the other (text codes re-encoded)."""
        if not tables:
            return cls.empty()
        columns, labels = {}, {}
        for name in tables[0]._columns:
            if name in cls.texts:
                columns[name], labels[name] = encode(np.concatenate([t.text(name) for t in tables]))
            else:
                columns[name] = np.concatenate([t._columns[name] for t in tables])
        return cls(columns, labels)

    # ---------------------------------------------------------------- reading columns
    def __len__(self) -> int:
        return self._length

    def column(self, name: str) -> Array:
        """A numeric column (int64), or the codes of a text column (int32)."""
        return self._columns[name]

    def labels(self, name: str) -> Array:
        """The distinct texts of a text column, indexed by its codes."""
        return self._labels[name]

    def text(self, name: str) -> Array:
        """A text column as an object array of str."""
        return self._labels[name][self._columns[name]] if self._length else np.zeros(0, dtype=object)

    def codes_where(self, name: str, test: Callable[[str], bool]) -> Array:
        """Mask of the rows whose text `name` passes `test` (called once per distinct text)."""
        passes = np.fromiter((test(label) for label in self._labels[name]), dtype=bool,
                             count=len(self._labels[name]))
        return passes[self._columns[name]] if self._length else np.zeros(0, dtype=bool)

    # ---------------------------------------------------------------- objects, on read
    def _values(self, name: str) -> list[Any]:
        values = self.text(name).tolist() if name in self.texts else self._columns[name].tolist()
        return [bool(v) for v in values] if name in self._bools else values

    def _make(self, i: int) -> R:
        return self.row(*(self._labels[f][self._columns[f][i]] if f in self.texts
                          else bool(self._columns[f][i]) if f in self._bools
                          else int(self._columns[f][i]) for f in self._fields))

    def __iter__(self) -> Iterator[R]:
        if not self._length:
            return iter(())
        return map(self.row, *(self._values(f) for f in self._fields))

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, (int, np.integer)):
            return self._make(range(self._length)[int(at)])
        return super().__getitem__(at)


TableT = TypeVar("TableT", bound=RunTable[Any])


def encode_keys(keys: Array, labels_of: Callable[[Array], Sequence[Any] | Array]) -> tuple[Array, Array]:
    """encode() of a text column given as integer keys (string ids, device indexes), `labels_of`
    naming the distinct keys: a text per distinct key, not per row; the same codes and labels."""
    if not len(keys):
        return encode([])
    unique, inverse = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
    codes, labels = encode(labels_of(unique))
    return codes[inverse.reshape(-1)], labels


def encode(values: Sequence[Any] | Array) -> tuple[Array, Array]:
    """(int32 codes, object array of labels) of a sequence of texts; labels sorted."""
    if not len(values):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=object)
    # np.unique on objects sorts every row with Python comparisons; a dict finds the few distinct
    # texts in one pass, and only those are sorted (the same labels and codes as np.unique gives).
    index: dict[Any, int] = {}
    first = np.fromiter(map(lambda v: index.setdefault(v, len(index)), values.tolist() if isinstance(values, np.ndarray)
                            else values), dtype=np.int64, count=len(values))
    distinct = list(index)
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    labels = np.empty(len(order), dtype=object)
    for at, k in enumerate(order):  # one by one: a tuple label must stay one object
        labels[at] = distinct[k]
    return rank[first], labels
