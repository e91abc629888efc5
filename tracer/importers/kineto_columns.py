"""The fast path's one read: Kineto events routed by kind into column tables.

Each chunk that :func:`~tracer.importers.kineto_decode.read_events` yields is split by kind
(cpu_op, runtime call, kernel...) and each kind's fields become arrays: times in ns, ids,
correlation ids, interned names. The rules are those of the checked path
(:mod:`tracer.importers.kineto_convert`); where that path would remap an id, join a flow or
raise an error, this one raises :class:`~tracer.importers.kineto_decode.NotFast` and the checked
path takes the file. Rare kinds (metadata, syncs, [memory] events, fwdbwd flows) keep one small
Python record each: they are a few per thousand events.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from itertools import repeat
from pathlib import Path
from operator import attrgetter
from typing import Any, Callable

import numpy as np

from tracer import schema
from tracer.collectives import collective_kind
from tracer.importers.kineto_fields import (
    CATEGORY_ALIASES,
    MAX_TIME_NS,
    MTIA_DEVICE_CATEGORIES,
    STEP,
    STREAM_NAME,
    input_args,
    is_id,
    kernel_config,
    kernel_dims,
    step_number,
)
from tracer.importers.kineto_decode import UNSET, Args, Event, NotFast, read_events, us_to_ns
from tracer.importers.kineto_source import U64_MAX, as_int
from tracer.importers.kineto_source import us_to_ns as exact_us_to_ns


# What a (ph, cat) pair makes; user annotations and instants also depend on the name.
NODE, API, USER, GPU_ANNOTATION, SYNC, KERNEL, MEMCPY, MEMSET, INSTANT, META, AC2G, FWDBWD, OTHER = range(13)
_X_CATS = {"cpu_op": NODE, "cuda_runtime": API, "cuda_driver": API, "user_annotation": USER,
           "gpu_user_annotation": GPU_ANNOTATION, "cuda_sync": SYNC, "kernel": KERNEL, "gpu_memcpy": MEMCPY,
           "gpu_memset": MEMSET}
_X_CATS.update({old: _X_CATS[new] for old, new in CATEGORY_ALIASES.items()})
_PAIRS: dict[tuple[Any, Any], int] = {("X", cat): code for cat, code in _X_CATS.items()}
for _cat in ("ac2g", "fwdbwd"):
    for _ph in ("s", "t", "f"):
        _PAIRS[(_ph, _cat)] = AC2G if _cat == "ac2g" else (FWDBWD if _ph != "t" else OTHER)
_TEXT_TYPES = (str, type(None), type(UNSET))
# (ph, cat) codes as a matrix: phs and cats are looked up on their own (no tuple per event)
_PHS = {ph: k for k, ph in enumerate(sorted({ph for ph, _ in _PAIRS}))}
_CATS = {cat: k for k, cat in enumerate(sorted({cat for _, cat in _PAIRS}))}
_CODES = np.full((len(_PHS) + 1, len(_CATS) + 1), -1, dtype=np.int8)  # the last row/column: others
for (_ph, _cat), _code in _PAIRS.items():
    _CODES[_PHS[_ph], _CATS[_cat]] = _code
_get_ph, _get_cat = attrgetter("ph"), attrgetter("cat")
_NAME, _TS, _DUR, _PID, _TID, _ARGS = (attrgetter(f) for f in ("name", "ts", "dur", "pid", "tid", "args"))
_CORRELATION, _SCOPE = attrgetter("args.correlation"), attrgetter("args.scope")
_GPU_KINDS = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}


def _pair_code(ph: Any, cat: Any) -> int:
    code = _PAIRS.get((ph, cat))
    if code is not None:
        return code
    if ph in ("i", "I"):
        return INSTANT
    return META if ph == "M" else OTHER


_WIDTHS = {"dims": 6, "config": 5}  # columns of several numbers per row


class Table:
    """One kind's columns, appended chunk by chunk, joined once at the end."""

    def __init__(self) -> None:
        self._parts: dict[str, list[Any]] = {}

    def add(self, **columns: Any) -> None:
        for name, values in columns.items():
            self._parts.setdefault(name, []).append(np.asarray(values) if not isinstance(values, list) else values)

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        parts = self._parts.get(name, [])
        if not parts:
            return np.zeros((0, _WIDTHS.get(name, 1)) if name in _WIDTHS else 0, np.int64)
        if isinstance(parts[0], list):
            raise TypeError(f"{name} is a list column: use Table.list")
        if len(parts) > 1:
            parts[:] = [np.concatenate(parts)]  # joined once, and the pieces let go
        return parts[0]

    def list(self, name: str) -> list[Any]:
        """A column of Python values (names, shapes, args), in file order."""
        return [v for part in self._parts.get(name, []) for v in part]

    def __len__(self) -> int:
        parts = self._parts.get("idx", [])
        return sum(len(p) for p in parts)


class KinetoColumns:
    """Everything the conversion needs from one Kineto file, as columns (see the module doc)."""

    def __init__(self, path: Path, advance: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.doc: dict[str, Any] = {}
        self.source_events = 0
        self.tables = {kind: Table() for kind in (NODE, API, KERNEL, MEMCPY, MEMSET)}
        self.steps = Table()  # ProfilerStep user annotations
        self.annotations = Table()  # user annotations on threads
        self.gpu_annotations = Table()
        self.syncs: list[dict[str, Any]] = []
        self.memory: list[dict[str, Any]] = []
        self.comms: list[tuple[int, int, int, int, dict[str, Any]]] = []  # (pid, tid, ts, idx, args)
        self.process_names: dict[Any, str] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.fwdbwd: dict[Any, dict[str, tuple[Any, Any, int]]] = {}
        self.skipped: dict[str, int] = {}
        self.gpu_skipped: dict[str, int] = {}  # of skipped: slices with a device and a stream (GPU work)
        self.ac2g = 0
        self.missing: dict[int, list[tuple[int, Any]]] = {}  # kind -> (row, flow point) lacking args.correlation
        self.flows: dict[tuple[Any, Any, int], int] = {}  # flow point -> ac2g flow id (join_flows)
        self.names: dict[str, str] = {}  # one str object per distinct name
        self._advance = advance

    # ------------------------------------------------------------------ the read
    def read(self) -> None:
        for chunk in read_events(self.path, self.doc, self._advance):
            base = self.source_events
            self.source_events += len(chunk)
            try:
                ph = np.fromiter(map(_PHS.get, map(_get_ph, chunk), repeat(len(_PHS))), np.int64, len(chunk))
                cat = np.fromiter(map(_CATS.get, map(_get_cat, chunk), repeat(len(_CATS))), np.int64, len(chunk))
                codes = _CODES[ph, cat]
                for k in np.flatnonzero(codes < 0).tolist():  # not a converted slice nor a flow
                    codes[k] = _pair_code(chunk[k].ph, chunk[k].cat)
            except TypeError:  # a list or object as ph or cat
                raise NotFast("an unhashable ph or cat") from None
            for code in np.unique(codes).tolist():
                where = np.flatnonzero(codes == code)
                if code == AC2G:  # counted; read again by join_flows when some correlation id is missing
                    self.ac2g += len(where)
                    continue
                events = [chunk[i] for i in where.tolist()]
                self._route(code, events, where + base)

    def _route(self, code: int, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        if code in _GPU_KINDS:
            self._gpu(code, events, idx)
        elif code == NODE:
            self._node(events, idx)
        elif code == API:
            self._api(events, idx)
        elif code == USER:
            names = self._names(events)
            is_step = np.array([STEP.match(n) is not None for n in names], dtype=bool)
            for flag, table in ((True, self.steps), (False, self.annotations)):
                keep = np.flatnonzero(is_step == flag).tolist()
                if keep:
                    self._cpu_slices(table, [events[i] for i in keep], idx[keep], [names[i] for i in keep])
        elif code == GPU_ANNOTATION:
            self._gpu_annotations(events, idx)
        elif code == SYNC:
            self._syncs(events, idx)
        elif code == INSTANT:
            self._instants(events, idx)
        elif code == META:
            for e in events:
                self._metadata(e)
        elif code == FWDBWD:
            self._fwdbwd(events, idx)
        else:
            self._skip_all(events)

    # ------------------------------------------------------------------ checked access
    def _names(self, events: list[Event]) -> list[str]:
        names = self.names
        raw = list(map(_NAME, events))
        if raw and set(map(type, raw)) != {str}:
            if not all(type(n) is str or n is UNSET for n in raw):
                raise NotFast("a name that is not a string")
            raw = ["" if n is UNSET else n for n in raw]
        return [names.setdefault(n, n) for n in raw]

    def _times(self, events: list[Event], slices: bool = True) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        begin = _ns(list(map(_TS, events)))
        if not np.all((begin >= -MAX_TIME_NS) & (begin <= MAX_TIME_NS)):
            raise NotFast("a time out of range")
        if not slices:
            return begin, begin
        dur = _ns(list(map(_DUR, events)))
        if not np.all((dur >= 0) & (dur <= MAX_TIME_NS)):
            raise NotFast("a duration out of range")
        return begin, begin + dur

    @staticmethod
    def _ids(values: list[Any]) -> np.ndarray[Any, Any]:
        """Raw ids (pids, tids, streams) that are integers; the converter maps them to 32 bits as
        the checked path's IdMap does. Strings and other types go the checked way."""
        if values and set(map(type, values)) != {int}:
            raise NotFast("an id that is not an integer")
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            raise NotFast("an id past 64 bits") from None

    def _pid_tid(self, events: list[Event]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        return self._ids(list(map(_PID, events))), self._ids(list(map(_TID, events)))

    def _correlations(self, events: list[Event], owner: int, begin: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """args.correlation of each event; 0 where the file does not give one, and the row is noted
        with its flow point (pid, tid, ts) for :meth:`join_flows`."""
        values = list(map(_CORRELATION, events))
        if values and set(map(type, values)) == {int}:
            try:
                return np.array(values, dtype=np.uint64)
            except OverflowError:
                pass
        first = len(self.syncs) if owner == SYNC else len(self.tables[owner])
        out = []
        for k, value in enumerate(values):
            corr = as_int(value) if value is not UNSET else None
            if corr is None or not 0 <= corr <= U64_MAX:
                pid, tid = _get(events[k].pid), _get(events[k].tid)
                point = (pid, tid, int(begin[k])) if is_id(pid) and is_id(tid) else None
                self.missing.setdefault(owner, []).append((first + k, point))
                corr = 0
            out.append(corr)
        return np.array(out, dtype=np.uint64)

    def join_flows(self) -> None:
        """The ac2g flow id at each noted flow point (Kineto's flow id is the correlation id, its
        point at its slice's start): another read of the file, made only when some call or
        activity lacks args.correlation, as the checked path does."""
        wanted = {point for rows in self.missing.values() for _, point in rows if point is not None}
        if not wanted:
            return
        for chunk in read_events(self.path, {}, self._advance):
            for e in chunk:
                if e.cat != "ac2g" or type(e.ph) is not str or e.ph not in ("s", "t", "f"):
                    continue
                flow, ts, pid, tid = as_int(_get(e.id)), _exact(e.ts), _get(e.pid), _get(e.tid)
                if flow is not None and ts is not None and 0 <= flow <= U64_MAX and is_id(pid) and is_id(tid):
                    point = (pid, tid, ts)
                    if point in wanted:
                        self.flows.setdefault(point, flow)

    @staticmethod
    def _streams(events: list[Event]) -> np.ndarray[Any, Any]:
        raws = []
        for e in events:
            raw = e.args.stream if e.args.stream is not UNSET else e.tid
            if type(raw) is str:
                match = STREAM_NAME.match(raw)
                raw = int(match.group(1)) if match else raw
            raws.append(raw)
        return KinetoColumns._ids(raws)

    @staticmethod
    def _devices(events: list[Event]) -> np.ndarray[Any, Any]:
        ordinals = [as_int(e.args.device if e.args.device is not UNSET else (None if e.pid is UNSET else e.pid))
                    for e in events]
        if not all(v is not None and 0 <= v <= 0xFFFF for v in ordinals):
            raise NotFast("no GPU ordinal")
        return np.array(ordinals, dtype=np.int64)

    def _skip_all(self, events: list[Event]) -> None:
        for e in events:
            ph, cat = _get(e.ph), _get(e.cat)
            if not isinstance(ph, (str, type(None))) or not isinstance(cat, (str, type(None))):
                raise NotFast("a ph or cat that is not a string")
            if ph == "M":
                continue
            key = str(cat) if cat else ("instant" if ph in ("i", "I") else f"ph={ph}")
            if key in MTIA_DEVICE_CATEGORIES:
                raise NotFast("MTIA device events (the checked path reads them)")
            self.skipped[key] = self.skipped.get(key, 0) + 1
            args = e.args
            if ph == "X" and isinstance(args, Args) and args.device is not UNSET and args.stream is not UNSET:
                self.gpu_skipped[key] = self.gpu_skipped.get(key, 0) + 1

    # ------------------------------------------------------------------ kinds
    def _node(self, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        begin, end = self._times(events)
        pid, tid = self._pid_tid(events)
        ops = self._names(events)
        scopes = [s if type(s) is str and s else op for s, op in zip(map(_SCOPE, events), ops)]
        shapes = [None if a.dims is UNSET else input_args(_present(a, ("dims", "Input Dims"), ("types", "Input type")))
                  for a in map(_ARGS, events)]
        by_name = self._by_name(ops)
        steps = [by_name[op][0] for op in ops]
        for k in (k for k, op in enumerate(ops) if op == "record_param_comms"):
            a = events[k].args
            self.comms.append((int(pid[k]), int(tid[k]), int(begin[k]), int(idx[k]),
                               _present(a, ("group", "Process Group Name"), ("group_size", "Group size"),
                                        ("elements", "In msg nelems"), ("dtype", "dtype"))))
        self.tables[NODE].add(idx=idx, begin=begin, end=end, pid=pid, tid=tid, op=ops,
                              name=[self.names.setdefault(s, s) for s in scopes], shapes=shapes,
                              step=np.array(steps, dtype=np.int64), collective=[by_name[op][1] for op in ops])

    def _by_name(self, ops: list[str]) -> dict[str, tuple[int, str | None]]:
        """Per distinct op name: its ProfilerStep number (NO_STEP if none) and collective kind."""
        found = {}
        for op in set(ops):
            step = step_number(op)
            if step is not None and step >= schema.NO_STEP:
                raise NotFast("a step number past 32 bits")
            found[op] = (schema.NO_STEP if step is None else step, collective_kind(op))
        return found

    def _api(self, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        begin, end = self._times(events)
        pid, tid = self._pid_tid(events)
        self.tables[API].add(idx=idx, begin=begin, end=end, pid=pid, tid=tid, name=self._names(events),
                             corr=self._correlations(events, API, begin))

    def _gpu(self, code: int, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        begin, end = self._times(events)
        columns: dict[str, Any] = dict(idx=idx, begin=begin, end=end, device=self._devices(events),
                                       stream=self._streams(events), corr=self._correlations(events, code, begin),
                                       name=self._names(events))
        if code == KERNEL:
            columns["dims"] = np.array([_dims(e.args.grid) + _dims(e.args.block) for e in events],
                                       dtype=np.int64).reshape(len(events), 6)
            configs = _configs(list(map(_ARGS, events)))
            columns["has_config"] = np.array([c is not None for c in configs], dtype=bool)
            columns["config"] = np.array([(0,) * 5 if c is None else c for c in configs], dtype=np.int64).reshape(
                len(events), 5)
        else:
            columns["bytes"] = [e.args.bytes for e in events]
            columns["gbps"] = [e.args.gbps for e in events]
            if code == MEMCPY:
                columns["ends"] = ends = [(_get(e.args.from_device), _get(e.args.to_device)) for e in events]
                if any((as_int(v) or 0) > 0xFFFF for pair in ends for v in pair):
                    raise NotFast("a copy device past 16 bits (the checked path says which, if it is a PtoP copy)")
        self.tables[code].add(**columns)

    def _cpu_slices(self, table: Table, events: list[Event], idx: np.ndarray[Any, Any], names: list[str]) -> None:
        begin, end = self._times(events)
        pid, tid = self._pid_tid(events)
        steps = [step_number(n) for n in names]
        if any(s is not None and s >= schema.NO_STEP for s in steps):
            raise NotFast("a step number past 32 bits")
        table.add(idx=idx, begin=begin, end=end, pid=pid, tid=tid, name=names,
                  step=np.array([0 if s is None else s for s in steps], dtype=np.int64))

    def _gpu_annotations(self, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        begin, end = self._times(events)
        self.gpu_annotations.add(idx=idx, begin=begin, end=end, device=self._devices(events),
                                 stream=self._streams(events), name=self._names(events))

    def _syncs(self, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        begin, end = self._times(events)
        devices, streams, corrs = self._devices(events), self._streams(events), self._correlations(events, SYNC, begin)
        names = self._names(events)
        for k, e in enumerate(events):
            kind = e.args.sync_kind
            self.syncs.append(dict(idx=int(idx[k]), begin=int(begin[k]), end=int(end[k]), device=int(devices[k]),
                                   stream=int(streams[k]), corr=int(corrs[k]),
                                   kind=str(names[k] if kind is UNSET else kind)[:200],
                                   waited=None if e.args.wait_on_stream is UNSET else e.args.wait_on_stream,
                                   recorded=None if e.args.wait_record is UNSET else e.args.wait_record))

    def _instants(self, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        if not all(type(e.cat) in _TEXT_TYPES for e in events):
            raise NotFast("a cat that is not a string")
        memory = [k for k, e in enumerate(events) if e.name == "[memory]"]
        others = [events[k] for k in sorted(set(range(len(events))) - set(memory))]
        self._skip_all(others)
        if not memory:
            return
        events = [events[k] for k in memory]
        begin, _ = self._times(events, slices=False)
        pid, tid = self._pid_tid(events)
        for k, e in enumerate(events):
            a = e.args
            self.memory.append(dict(idx=int(idx[memory[k]]), ts=int(begin[k]), pid=int(pid[k]), tid=int(tid[k]),
                                    delta=_get(a.delta), device_type=_get(a.device_type), device_id=_get(a.device_id),
                                    addr=_get(a.addr), total=_get(a.total)))

    def _metadata(self, e: Event) -> None:
        name, pid, tid = e.args.name, _get(e.pid), _get(e.tid)
        if not isinstance(name, str) or isinstance(pid, (bool, list, dict)) or isinstance(tid, (bool, list, dict)):
            return
        if e.name == "process_name":
            self.process_names[pid] = name
        elif e.name == "thread_name":
            self.thread_names[(pid, tid)] = name

    def _fwdbwd(self, events: list[Event], idx: np.ndarray[Any, Any]) -> None:
        for k, e in enumerate(events):
            ts = _exact(e.ts)
            pid, tid, flow = _get(e.pid), _get(e.tid), _get(e.id)
            if ts is None or any(isinstance(v, (bool, list, dict)) for v in (pid, tid, flow)):
                self.skipped["fwdbwd"] = self.skipped.get("fwdbwd", 0) + 1
                continue
            self.fwdbwd.setdefault(flow, {})[str(e.ph)] = (pid, tid, ts)


_CONFIG = (("registers", "registers per thread"), ("shared_memory", "shared memory"), ("blocks_per_sm", "blocks per SM"),
           ("warps_per_sm", "warps per SM"), ("occupancy", "est. achieved occupancy %"))


def _dims(value: Any) -> list[int]:
    """kernel_dims, without a call per number when the three are plain u32 ints."""
    if type(value) is list and len(value) == 3 and all(type(v) is int and 0 <= v <= 0xFFFFFFFF for v in value):
        return value
    return kernel_dims(None if value is UNSET else value)


def _configs(args: list[Args]) -> list[tuple[int, int, int, int, int] | None]:
    """kernel_config of each kernel's args (None without any of them): as columns when the file
    gives all five as plain numbers, else one by one."""
    columns = [[getattr(a, attribute) for a in args] for attribute, _ in _CONFIG]
    registers, shared, blocks, warps, occupancy = columns
    if all(type(v) is int for v in registers + shared + occupancy) and \
            all(type(v) is float or type(v) is Decimal or (type(v) is int and abs(v) < 1 << 1000)
                for v in blocks + warps):  # an int past a float's range: one by one, as _milli
        ints = np.array([registers, shared], dtype=object)
        in_u32 = (ints >= 0) & (ints <= 0xFFFFFFFF)
        regs, shm = np.where(in_u32, ints, 0).astype(np.int64)
        milli = np.array([blocks, warps], dtype=np.float64) * 1000
        blocks_m, warps_m = np.where((milli >= 0) & (milli < 0xFFFFFFFF), np.round(milli), 0).astype(np.int64)
        occ = np.array(occupancy, dtype=object)
        occ = np.where((occ >= 0) & (occ <= 100), occ, 0xFFFFFFFF).astype(np.int64)
        return list(zip(regs.tolist(), shm.tolist(), blocks_m.tolist(), warps_m.tolist(), occ.tolist()))
    return [None if all(a is UNSET for a in row) else kernel_config(_present(arg, *_CONFIG))
            for arg, row in zip(args, zip(*columns))]


def _present(args: Args, *fields: tuple[str, str]) -> dict[str, Any]:
    """The given args members as the dict the checked path reads: {file key: value}."""
    out = {}
    for attribute, key in fields:
        value = getattr(args, attribute)
        if value is not UNSET:
            out[key] = value
    return out


def _get(value: Any) -> Any:
    return None if value is UNSET else value


def _exact(raw: Any) -> int | None:
    """One time in ns the way the checked path reads it (the number as Decimal), None if none."""
    text = bytes(raw)
    if not text:
        return None
    try:
        return exact_us_to_ns(int(text) if text.lstrip(b"-").isdigit() else Decimal(text.decode()))
    except (InvalidOperation, ValueError, UnicodeDecodeError):
        return None


def _ns(raws: list[Any]) -> np.ndarray[Any, Any]:
    """Times in ns; the few the array parse declines are converted one by one, exactly."""
    ns, ok = us_to_ns(raws)
    for k in np.flatnonzero(~ok).tolist():
        value = _exact(raws[k])
        if value is None or not -MAX_TIME_NS <= value <= MAX_TIME_NS:
            raise NotFast("a time that is missing or not a number")
        ns[k] = value
    return ns
