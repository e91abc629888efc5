"""Tables of records (the fast Kineto path's) into a :class:`~tracer.builder.TraceBuilder`.

Strings and devices are given their ids here, all at once, the way the builder would have given
them event by event: a string's id is its rank in the order the checked path first adds it
(event index, then the field's slot), and is defined at its earliest use; devices are described
at their earliest use, in the builder's device order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tracer.builder import TraceBuilder

SLOTS = 8  # string fields one event adds, at most: the seq of a use is event index x SLOTS + slot


@dataclass
class Text:
    """A sid field: the strings, and the slot that orders them within their event."""

    values: list[str]
    slot: int


@dataclass
class Device:
    """A device field: a device name per row, or one name for every row."""

    names: str | list[str] | np.ndarray[Any, Any]


@dataclass
class Rows:
    """Records of one class, in the order the checked path adds them (by `seq`)."""

    short: str
    seq: np.ndarray[Any, Any]  # event index x SLOTS (events after the file's last get larger ones)
    key: np.ndarray[Any, Any]  # stream key per row, as its code in StreamKeys
    ts: np.ndarray[Any, Any]  # Kineto ns
    order: np.ndarray[Any, Any]  # places equal times within a stream (lower first)
    fields: list[Any] = field(default_factory=list)  # per class field: an int array, Text or Device


class StreamKeys:
    """Stream keys (a thread's tid, a GPU queue's "cuda:0.s7"...) as int codes, made per distinct id."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._codes: dict[str, int] = {}

    def code(self, name: str) -> int:
        found = self._codes.get(name)
        if found is None:
            found = self._codes[name] = len(self.names)
            self.names.append(name)
        return found

    def named(self, names: list[str]) -> np.ndarray[Any, Any]:
        return np.array([self.code(n) for n in names], dtype=np.int64)

    def tids(self, tid: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A thread's stream key is its tid."""
        uniq, inverse = np.unique(tid, return_inverse=True)
        return self.named([str(t) for t in uniq.tolist()])[inverse]

    def queues(self, device: np.ndarray[Any, Any], stream: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A GPU queue's stream key is "cuda:<ordinal>.s<stream>"."""
        uniq, inverse = np.unique(device * (1 << 32) + stream, return_inverse=True)
        return self.named([f"cuda:{u >> 32}.s{u & 0xFFFFFFFF}" for u in uniq.tolist()])[inverse]


class Writer:
    """Gives strings and devices their ids, then hands each class's streams to the builder."""

    def __init__(self, builder: TraceBuilder, shift: int, models: dict[str, str],
                 device_order: Callable[[str], Any] | None, key_names: list[str]) -> None:
        self.builder, self.shift, self.models, self.device_order = builder, shift, models, device_order
        self.key_names = key_names

    def write(self, rows: list[Rows]) -> dict[str, int]:
        """Add every record, emptying `rows` as it goes (each class's tables are let go once added);
        the devices used, each with its first Kineto time."""
        sids = self._strings(rows)
        devices, first_use = self._devices(rows)
        by_class: dict[str, list[Rows]] = {}
        for r in rows:
            by_class.setdefault(r.short, []).append(r)
        rows.clear()
        while by_class:
            short, parts = by_class.popitem()
            self._add_class(short, parts, sids, devices)
            for r in parts:
                for f in r.fields:
                    sids.pop(id(f), None)
            del parts
        return first_use

    def _strings(self, rows: list[Rows]) -> dict[int, np.ndarray[Any, Any]]:
        """id(Text) -> the sids of its rows."""
        texts = [(r, f) for r in rows for f in r.fields if isinstance(f, Text)]
        if not texts:
            return {}
        seq = np.concatenate([r.seq + f.slot for r, f in texts])
        ts = np.concatenate([r.ts for r, _ in texts])
        values = [v for _, f in texts for v in f.values]
        # Strings are numbered in the order of their first use (by seq, ties by place): each text
        # gets a number in one pass over the rows, and only the distinct texts are put in order.
        seen: dict[str, int] = {}
        found = np.fromiter(map(lambda v: seen.setdefault(v, len(seen)), values), dtype=np.int64, count=len(values))
        first = np.full(len(seen), len(values), dtype=np.int64)
        np.minimum.at(first, found[np.argsort(seq, kind="stable")], np.arange(len(values), dtype=np.int64))
        by_first = np.argsort(first)
        renumber = np.empty(len(seen), dtype=np.int64)
        renumber[by_first] = np.arange(len(seen), dtype=np.int64)
        codes = renumber[found]
        distinct = list(seen)
        index = {distinct[k]: sid for sid, k in enumerate(by_first.tolist())}
        earliest = np.full(len(index), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(earliest, codes, ts)
        for text, sid in index.items():
            given = self.builder.intern(text, int(earliest[sid]) - self.shift)
            if given != sid:
                raise RuntimeError("the builder had strings before the import: ids would not match")
        out, start = {}, 0
        for _, f in texts:
            out[id(f)] = codes[start:start + len(f.values)]
            start += len(f.values)
        return out

    def _devices(self, rows: list[Rows]) -> tuple[dict[str, int], dict[str, int]]:
        """Each device's index (the builder's order: by `device_order`, ties in order of first use
        as the checked path adds them, by event then field) and earliest use."""
        earliest: dict[str, int] = {}
        first_use: dict[str, tuple[int, int]] = {}
        for r in rows:
            for position, f in enumerate(r.fields):
                if not isinstance(f, Device):
                    continue
                if isinstance(f.names, str):
                    uses = [(f.names, r.ts, r.seq)]
                else:
                    names = np.asarray(f.names, dtype=object)
                    uses = [(name, r.ts[names == name], r.seq[names == name]) for name in set(names.tolist())]
                for name, ts, seq in uses:
                    first, at = int(ts.min()), (int(seq.min()), position)
                    earliest[name] = min(first, earliest.get(name, first))
                    first_use[name] = min(at, first_use.get(name, at))
        ordered = sorted(earliest, key=first_use.__getitem__)  # the order the checked path meets them
        if self.device_order is not None:
            ordered.sort(key=self.device_order)  # stable: equal keys ("cuda", "cuda:0") keep that order
        index = {name: self.builder.device(name, earliest[name] - self.shift, self.models.get(name, ""))
                 for name in ordered}
        return index, earliest

    def _add_class(self, short: str, parts: list[Rows], sids: dict[int, np.ndarray[Any, Any]],
                   devices: dict[str, int]) -> None:
        seq = np.concatenate([r.seq for r in parts])
        add_order = np.argsort(seq, kind="stable")
        keys = np.concatenate([r.key for r in parts])[add_order]
        ts = (np.concatenate([r.ts for r in parts]) - self.shift)[add_order]
        order = np.concatenate([r.order for r in parts])[add_order]
        columns = []
        for position in range(len(parts[0].fields)):
            values = []
            for r in parts:
                f = r.fields[position]
                if isinstance(f, Text):
                    values.append(sids[id(f)])
                elif isinstance(f, Device) and isinstance(f.names, str):
                    values.append(np.full(len(r.ts), devices[f.names], dtype=np.int64))
                elif isinstance(f, Device):
                    values.append(np.array([devices[n] for n in np.asarray(f.names, dtype=object).tolist()],
                                           dtype=np.int64))
                else:
                    values.append(np.asarray(f))
            columns.append(np.concatenate(values)[add_order])
        by_key = np.argsort(keys, kind="stable")
        bounds = np.flatnonzero(np.diff(keys[by_key])) + 1
        for rows in np.split(by_key, bounds):
            if len(rows):
                self.builder.add_columns(short, self.key_names[int(keys[rows[0]])], ts[rows], order[rows],
                                         [c[rows] for c in columns])
