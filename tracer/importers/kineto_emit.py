"""The fast path's conversion: Kineto columns to dfcompass records, a table per event class.

:class:`ColumnConverter` has the interface of the checked path's
:class:`~tracer.importers.kineto_convert.Converter` (``scan``, ``convert`` and the counts the
import summary reads) and gives the same trace byte for byte: the same records in each stream in
the same order, the same string ids (strings are numbered in the order the checked path first
adds them: by event, then by field) and the same device indices. Tables go to the builder whole
(:meth:`~tracer.builder.TraceBuilder.add_columns`), never an event at a time.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tracer import schema
from tracer.builder import TraceBuilder
from tracer.collectives import DTYPE_BYTES
from tracer.importers.kineto_columns import API, KERNEL, MEMCPY, MEMSET, NODE, SYNC, KinetoColumns
from tracer.importers.kineto_decode import NotFast
from tracer.importers.kineto_fields import DEVICE_WIDE_STREAM, copy_ends, measured_end, memory_device
from tracer.importers.kineto_source import U32_MAX, U64_MAX, IdMap, as_int, copy_kind, unsigned
from tracer.importers.kineto_write import SLOTS as _SLOTS
from tracer.importers.kineto_write import Device, Rows, StreamKeys, Text, Writer



def _full(n: int, value: Any) -> np.ndarray[Any, Any]:
    return np.full(n, value, dtype=np.int64)


class ColumnConverter:
    """Kineto file -> builder, with columns (see the module doc)."""

    def __init__(self, path: Path, advance: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.columns = KinetoColumns(path, advance)
        self.doc = self.columns.doc
        self._advance = advance
        self.tids = self.pids = self.streams = IdMap(())
        self.first: int | None = None
        self.last: int | None = None
        self.first_use: dict[str, int] = {}
        self.first_thread: dict[tuple[int, int], int] = {}
        self.gpu_streams: dict[str, set[int]] = {}
        self.step_numbers: set[int] = set()
        self.gpu_corr: np.ndarray[Any, Any] = np.zeros(0, np.uint64)
        self.gpu_without_corr = 0
        self.with_launch = 0
        self.joined = {"api": 0, "gpu": 0}
        self.rank = U32_MAX
        self.rows: list[Rows] = []

    @property
    def source_events(self) -> int:
        return self.columns.source_events

    @property
    def skipped(self) -> dict[str, int]:
        return self.columns.skipped

    @property
    def gpu_skipped(self) -> dict[str, int]:
        return self.columns.gpu_skipped

    @property
    def ac2g(self) -> int:
        return self.columns.ac2g

    # ------------------------------------------------------------------ pass 1
    def scan(self) -> None:
        """Read the file (raises NotFast where the checked path must take it) and check it all."""
        c = self.columns
        c.read()
        c.join_flows()
        cpu = [c.tables[NODE], c.tables[API], c.steps, c.annotations]
        gpu = [c.tables[KERNEL], c.tables[MEMCPY], c.tables[MEMSET], c.gpu_annotations]
        self.tids = IdMap(_distinct([t["tid"] for t in cpu], [m["tid"] for m in c.memory]))
        self.pids = IdMap(_distinct([t["pid"] for t in cpu], [m["pid"] for m in c.memory]))
        self.streams = IdMap(_distinct([t["stream"] for t in gpu],
                                       [s["stream"] for s in c.syncs if s["stream"] != DEVICE_WIDE_STREAM]))
        _measure_copies(c)
        for record in c.memory:
            _memory_fields(record)
        begins = [c.tables[k]["begin"] for k in c.tables] + [t["begin"] for t in (c.steps, c.annotations,
                                                                                  c.gpu_annotations)]
        ends = [c.tables[k]["end"] for k in c.tables] + [t["end"] for t in (c.steps, c.annotations,
                                                                            c.gpu_annotations)]
        begins += [np.array([s["begin"] for s in c.syncs], np.int64), np.array([m["ts"] for m in c.memory
                                                                                 if m["delta"] != 0], np.int64)]
        ends += [np.array([s["end"] for s in c.syncs], np.int64), begins[-1]]
        begin, end = np.concatenate(begins), np.concatenate(ends)
        if len(begin):
            self.first, self.last = int(begin.min()), int(end.max())
        info = self.doc.get("distributedInfo")
        given = as_int(info.get("rank")) if isinstance(info, dict) else None
        self.rank = given if given is not None and 0 <= given <= 0xFFFFFFFE else U32_MAX

    # ------------------------------------------------------------------ pass 2
    def convert(self, builder: TraceBuilder, shift: int, models: dict[str, str],
                device_order: Callable[[str], Any] | None = None) -> None:
        c = self.columns
        self._threads = _Threads()
        self._keys = StreamKeys()
        nodes = self._nodes()
        self._cpu_steps()
        self._apis()
        gpu_corr = [self._gpu(kind) for kind in (KERNEL, MEMCPY, MEMSET)]
        self.gpu_corr = np.concatenate(gpu_corr)
        self._syncs()
        self._annotations()
        self._memory()
        end_seq = c.source_events
        end_seq = self._links(nodes, end_seq)
        self._launches(end_seq)
        self._describe_threads(end_seq + 1)
        self.columns.tables.clear()  # what the records need is in self.rows now
        self.first_use = Writer(builder, shift, models, device_order, self._keys.names).write(self.rows)
        if self._advance is not None:  # the checked path reads the file twice; the bar counts two reads
            self._advance(self.path.stat().st_size)

    def _add(self, rows: Rows) -> None:
        if len(rows.ts):
            self.rows.append(rows)

    def _joined(self, kind: int, corr: np.ndarray[Any, Any], side: str) -> tuple[np.ndarray[Any, Any],
                                                                            np.ndarray[Any, Any]]:
        """(correlation ids, whether each has one): the file's, else its ac2g flow's (a join, counted
        on `side`), else none (0)."""
        given = np.ones(len(corr), dtype=bool)
        missing = self.columns.missing.get(kind, [])
        if missing:
            corr = corr.copy()
            for row, point in missing:
                flow = self.columns.flows.get(point) if point is not None else None
                if flow is None:
                    given[row] = False
                else:
                    corr[row] = flow
                    self.joined[side] += 1
        return corr, given

    def _nodes(self) -> dict[str, Any]:
        t = self.columns.tables[NODE]
        idx, begin, end, raw_pid, raw_tid = t["idx"], t["begin"], t["end"], t["pid"], t["tid"]
        pid, tid = _mapped(self.pids, raw_pid), _mapped(self.tids, raw_tid)
        n = len(idx)
        # numbered in start order, an enclosing op before the ops it contains, then in file order
        rank = np.empty(n, np.int64)
        rank[np.lexsort((idx, -end, begin))] = np.arange(n)
        node_id = rank & 0xFFFFFFFF
        order = node_id + 1
        steps = self._step_table()
        step = _step_of(steps, raw_pid, begin)
        seq = idx * _SLOTS
        self._threads.touch(idx, pid, tid, begin)
        keys = self._keys.tids(tid)
        ops, names = t.list("op"), t.list("name")
        self._add(Rows("node_begin", seq, keys, begin, order,
                       [node_id, Text(ops, 0), Text(names, 1), Device("cpu"), tid, step]))
        self._add(Rows("node_end", seq, keys, end, order, [node_id, Device("cpu"), tid]))
        shapes = t.list("shapes")
        has = np.array([s is not None for s in shapes], dtype=bool)
        if has.any():
            w = np.flatnonzero(has)
            picked = [shapes[i] for i in w.tolist()]
            self._add(Rows("node_args", seq[w], keys[w], begin[w], order[w],
                           [node_id[w], Text([s[0] for s in picked], 2), Text([s[1] for s in picked], 3)]))
        self._collectives(t.list("collective"), seq, keys, begin, end, node_id, raw_pid, raw_tid)
        own = t["step"]
        w = np.flatnonzero(own != schema.NO_STEP)
        if len(w):
            self.step_numbers.update(own[w].tolist())
            self._add(Rows("step_begin", seq[w], keys[w], begin[w], order[w], [own[w], tid[w]]))
            self._add(Rows("step_end", seq[w], keys[w], end[w], order[w], [own[w], tid[w]]))
        return dict(idx=idx, begin=begin, end=end, pid=raw_pid, tid=raw_tid, node_id=node_id, key=keys)

    def _step_table(self) -> dict[int, tuple[np.ndarray[Any, Any], ...]]:
        """pid -> the ProfilerStep slices (begin, end, step) sorted, from ops and annotations."""
        c = self.columns
        t, s = c.tables[NODE], c.steps
        own = t["step"]
        w = np.flatnonzero(own != schema.NO_STEP)
        pid = np.concatenate([t["pid"][w], s["pid"]])
        begin = np.concatenate([t["begin"][w], s["begin"]])
        end = np.concatenate([t["end"][w], s["end"]])
        step = np.concatenate([own[w], s["step"]])
        table: dict[int, tuple[np.ndarray[Any, Any], ...]] = {}
        for p in np.unique(pid).tolist():
            sel = np.flatnonzero(pid == p)
            order = np.lexsort((step[sel], end[sel], begin[sel]))
            rows = sel[order]
            table[p] = (begin[rows], end[rows], step[rows])
        return table

    def _collectives(self, kinds: list[Any], seq: np.ndarray[Any, Any], keys: np.ndarray[Any, Any],
                     begin: np.ndarray[Any, Any], end: np.ndarray[Any, Any], node_id: np.ndarray[Any, Any],
                     pid: np.ndarray[Any, Any], tid: np.ndarray[Any, Any]) -> None:
        w = [i for i, kind in enumerate(kinds) if kind is not None]
        if not w:
            return
        params: dict[tuple[int, int], list[tuple[int, int, dict[str, Any]]]] = {}
        for p, t_, ts, idx, args in self.columns.comms:
            params.setdefault((p, t_), []).append((ts, idx, args))
        for found in params.values():
            found.sort(key=lambda r: (r[0], r[1]))
        seqs = {k: s for s, k in enumerate(sorted(w, key=lambda i: int(node_id[i])))}
        groups, sizes, nbytes = [], [], []
        for i in w:
            group, size, count = "", 0, 0
            found = params.get((int(pid[i]), int(tid[i])), [])
            at = bisect_right([r[0] for r in found], int(begin[i]) - 1)
            if at < len(found) and found[at][0] <= end[i]:
                args = found[at][2]
                group = str(args.get("Process Group Name", ""))[:200]
                size = min(max(as_int(args.get("Group size")) or 0, 0), 0xFFFFFFFF)
                elements = as_int(args.get("In msg nelems")) or 0
                count = min(max(elements, 0) * DTYPE_BYTES.get(str(args.get("dtype")), 0), U64_MAX)
            groups.append(group)
            sizes.append(size)
            nbytes.append(count)
        a = np.array(w)
        self._add(Rows("collective", seq[a], keys[a], begin[a], node_id[a] + 1,
                       [node_id[a], _full(len(a), self.rank), Text([kinds[i] for i in w], 4), Text(groups, 5),
                        np.array(sizes, np.int64), np.array([seqs[i] for i in w], np.uint64),
                        np.array(nbytes, np.uint64)]))

    def _cpu_steps(self) -> None:
        s = self.columns.steps
        if not len(s):
            return
        idx, begin, end, step = s["idx"], s["begin"], s["end"], s["step"]
        pid, tid = _mapped(self.pids, s["pid"]), _mapped(self.tids, s["tid"])
        self._threads.touch(idx, pid, tid, begin)
        self.step_numbers.update(step.tolist())
        keys = self._keys.tids(tid)
        self._add(Rows("step_begin", idx * _SLOTS, keys, begin, _full(len(idx), 0), [step, tid]))
        self._add(Rows("step_end", idx * _SLOTS, keys, end, _full(len(idx), 0), [step, tid]))

    def _apis(self) -> None:
        t = self.columns.tables[API]
        idx, begin, end = t["idx"], t["begin"], t["end"]
        corr, given = self._joined(API, t["corr"], "api")
        pid, tid = _mapped(self.pids, t["pid"]), _mapped(self.tids, t["tid"])
        self._threads.touch(idx, pid, tid, begin)
        keys, names, zero = self._keys.tids(tid), t.list("name"), _full(len(idx), 0)
        self._add(Rows("api_enter", idx * _SLOTS, keys, begin, zero, [tid, Text(names, 0), corr]))
        self._add(Rows("api_exit", idx * _SLOTS, keys, end, zero, [tid, Text(names, 1), corr]))
        self._api = (idx[given], begin[given], tid[given], corr[given], keys[given])  # the calls with an id

    def _gpu(self, kind: int) -> np.ndarray[Any, Any]:
        t = self.columns.tables[kind]
        idx, begin, end, device = t["idx"], t["begin"], t["end"], t["device"]
        corr, given = self._joined(kind, t["corr"], "gpu")
        self.gpu_without_corr += int((~given).sum())
        stream = _mapped(self.streams, t["stream"])
        n = len(idx)
        if not n:
            return np.zeros(0, np.uint64)
        names = np.array([f"cuda:{d}" for d in range(int(device.max()) + 1)], dtype=object)[device]
        for d, q in set(zip(device.tolist(), stream.tolist())):
            self.gpu_streams.setdefault(f"cuda:{d}", set()).add(q)
        keys = self._keys.queues(device, stream)
        seq, zero, short = idx * _SLOTS, _full(n, 0), {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}[kind]
        head = [Device(names), stream, corr]
        text = t.list("name")
        if kind == KERNEL:
            dims = t["dims"]
            self._add(Rows("kernel_begin", seq, keys, begin, zero, head + [Text(text, 0)] + list(dims.T)))
            a = np.flatnonzero(t["has_config"])
            if len(a):
                values = t["config"][a]
                self._add(Rows("kernel_info", seq[a], keys[a], begin[a], zero[a],
                               [Device(names[a]), stream[a], corr[a]] + list(values.T)))
        else:
            nbytes = np.array([unsigned(b, U64_MAX) for b in t.list("bytes")], dtype=np.uint64)
            if kind == MEMCPY:
                directions = [copy_kind(name) for name in text]
                ends = [copy_ends(d, dev, *raw) for d, dev, raw in zip(directions, names.tolist(), t.list("ends"))]
                self._add(Rows("memcpy_begin", seq, keys, begin, zero,
                               head + [nbytes, Text(directions, 0), Device([e[0] for e in ends]),
                                       Device([e[1] for e in ends])]))
            else:
                self._add(Rows("memset_begin", seq, keys, begin, zero, head + [nbytes]))
        self._add(Rows(f"{short}_end", seq, keys, end, zero, list(head)))
        return corr[given]

    def _syncs(self) -> None:
        s = self.columns.syncs
        if not s:
            return
        corr, _ = self._joined(SYNC, np.array([r["corr"] for r in s], np.uint64), "gpu")
        col = {name: [r[name] for r in s] for name in s[0]}
        n, names = len(s), [f"cuda:{d}" for d in col["device"]]
        waited = [as_int(v) for v in col["waited"]]
        wait_queue = [v if v is not None and 0 <= v < U32_MAX else U32_MAX for v in waited]
        recorded = [unsigned(v, U64_MAX) for v in col["recorded"]]
        seq, zero = np.array(col["idx"], np.int64) * _SLOTS, _full(n, 0)
        keys = self._keys.named([f"{d}.sync" for d in names])
        raw = np.array(col["stream"], np.int64)
        device_wide = raw == DEVICE_WIDE_STREAM  # a context or event sync: the whole device, no queue
        stream = np.full(n, U32_MAX, np.int64)
        stream[~device_wide] = _mapped(self.streams, raw[~device_wide])
        self._add(Rows("sync_begin", seq, keys, np.array(col["begin"], np.int64), zero,
                       [Device(names), stream, corr, Text(col["kind"], 0), np.array(wait_queue, np.int64),
                        np.array(recorded, np.uint64)]))
        self._add(Rows("sync_end", seq, keys, np.array(col["end"], np.int64), zero, [Device(names), stream, corr]))

    def _annotations(self) -> None:
        cpu, gpu = self.columns.annotations, self.columns.gpu_annotations
        if not len(cpu) and not len(gpu):
            return
        cpu_tid, gpu_stream = _mapped(self.tids, cpu["tid"]), _mapped(self.streams, gpu["stream"])
        self._threads.touch(cpu["idx"], _mapped(self.pids, cpu["pid"]), cpu_tid, cpu["begin"])
        idx = np.concatenate([cpu["idx"], gpu["idx"]])
        devices = np.concatenate([np.array(["cpu"] * len(cpu), dtype=object),
                                  np.array([f"cuda:{d}" for d in gpu["device"].tolist()], dtype=object)])
        track = np.concatenate([cpu_tid, gpu_stream])
        keys = np.concatenate([self._keys.tids(cpu_tid), self._keys.queues(gpu["device"], gpu_stream)])
        begin, end = np.concatenate([cpu["begin"], gpu["begin"]]), np.concatenate([cpu["end"], gpu["end"]])
        names = cpu.list("name") + gpu.list("name")
        o = np.argsort(idx, kind="stable")  # annotation ids count both kinds in file order
        ident = np.arange(len(o), dtype=np.int64) & 0xFFFFFFFF
        seq, zero = idx[o] * _SLOTS, _full(len(o), 0)
        picked = [names[i] for i in o.tolist()]
        self._add(Rows("annotation_begin", seq, keys[o], begin[o], zero,
                       [Device(devices[o]), track[o], ident, Text(picked, 0)]))
        self._add(Rows("annotation_end", seq, keys[o], end[o], zero, [Device(devices[o]), track[o], ident]))

    def _memory(self) -> None:
        kept = [m for m in self.columns.memory if m["delta"] != 0]
        zero = len(self.columns.memory) - len(kept)
        if zero:
            self.skipped["[memory] of 0 bytes"] = self.skipped.get("[memory] of 0 bytes", 0) + zero
        if not kept:
            return
        at = np.array([m["idx"] for m in kept], np.int64)
        pid = _mapped(self.pids, np.array([m["pid"] for m in kept], np.int64))
        tid = _mapped(self.tids, np.array([m["tid"] for m in kept], np.int64))
        ts = np.array([m["ts"] for m in kept], np.int64)
        self._threads.touch(at, pid, tid, ts)
        keys = self._keys.tids(tid)
        alloc = np.array([m["delta"] > 0 for m in kept], dtype=bool)
        for short, w in (("mem_alloc", np.flatnonzero(alloc)), ("mem_free", np.flatnonzero(~alloc))):
            if len(w):
                picked = [kept[i] for i in w.tolist()]
                self._add(Rows(short, at[w] * _SLOTS, keys[w], ts[w], _full(len(w), 0),
                               [Device([m["device"] for m in picked]),
                                np.array([m["addr"] for m in picked], np.uint64),
                                np.array([min(abs(m["delta"]), U64_MAX) for m in picked], np.uint64),
                                np.array([m["in_use"] for m in picked], np.uint64)]))

    def _links(self, nodes: dict[str, Any], seq: int) -> int:
        """dfc:node_link for each fwdbwd flow whose two ends sit at the start of a node."""
        flows = self.columns.fwdbwd
        if not flows:
            return seq
        points = {point for ends in flows.values() for point in ends.values()}
        node_at: dict[tuple[Any, Any, int], tuple[int, int, int]] = {}
        for p, t, b, e, nid, key in zip(nodes["pid"].tolist(), nodes["tid"].tolist(), nodes["begin"].tolist(),
                                        nodes["end"].tolist(), nodes["node_id"].tolist(), nodes["key"].tolist()):
            at = (p, t, b)
            if at in points:
                known = node_at.get(at)
                if known is None or e < known[0]:  # a flow binds to the deepest slice starting there
                    node_at[at] = (e, nid, key)
        found = []
        for ends in flows.values():
            start, finish = ends.get("s"), ends.get("f")
            source = node_at.get(start) if start is not None else None
            target = node_at.get(finish) if finish is not None else None
            if source is None or target is None or finish is None:
                self.skipped["fwdbwd"] = self.skipped.get("fwdbwd", 0) + len(ends)
                continue
            found.append((target[2], finish[2], source[1], target[1]))
        if found:
            keys, ts, src, dst = zip(*found)
            n = len(found)
            self._add(Rows("node_link", (seq + np.arange(n, dtype=np.int64)) * _SLOTS, np.array(keys, np.int64),
                           np.array(ts, np.int64), _full(n, 0),
                           [np.array(src, np.int64), np.array(dst, np.int64), Text(["fwdbwd"] * n, 0)]))
            seq += n
        return seq

    def _launches(self, seq: int) -> None:
        """Calls whose GPU work is in the file; the activities whose call is."""
        idx, begin, tid, corr, keys = self._api
        launched = np.isin(corr, self.gpu_corr)
        self.with_launch = int(np.isin(self.gpu_corr, corr).sum())
        w = np.flatnonzero(launched)
        self._add(Rows("launch", _full(len(w), seq * _SLOTS), keys[w], begin[w], _full(len(w), 0), [tid[w], corr[w]]))

    def _describe_threads(self, seq: int) -> None:
        """Process and thread descriptions at their first events; at one time, by pid (and tid)."""
        c, th = self.columns, self._threads
        raw_pid, raw_tid = self.pids.inverse(), self.tids.inverse()
        firsts = th.first_threads()
        self.first_thread = {(p, t): ts for p, t, ts in firsts}
        processes = th.first_processes()
        n = len(processes)
        if n:
            pid, ts = (np.array(v, np.int64) for v in zip(*processes))
            self._add(Rows("process_info", (seq + np.arange(n)) * _SLOTS, self._keys.named(["process"] * n), ts, pid,
                           [pid, Text([c.process_names.get(raw_pid[p], "") for p in pid.tolist()], 0), Text([""] * n, 1)]))
        m = len(firsts)
        if m:
            pid, tid, ts = (np.array(v, np.int64) for v in zip(*firsts))
            self._add(Rows("thread_info", (seq + n + np.arange(m)) * _SLOTS, self._keys.tids(tid), ts, pid,
                           [pid, tid, Text([c.thread_names.get((raw_pid[p], raw_tid[t]), "") for p, t in zip(pid.tolist(), tid.tolist())],
                                           0)]))


def _measure_copies(c: KinetoColumns) -> None:
    """Copies' and memsets' ends as Kineto measured them (:func:`measured_end`), in place."""
    queues: dict[tuple[int, int], list[int]] = {}  # the sorted starts of a queue's GPU work
    work = [c.tables[k] for k in (KERNEL, MEMCPY, MEMSET)]
    for t in (c.tables[MEMCPY], c.tables[MEMSET]):
        if not len(t):
            continue
        ends, begins, devices, streams = t["end"], t["begin"], t["device"], t["stream"]
        for i, (nbytes, gbps) in enumerate(zip(t.list("bytes"), t.list("gbps"))):
            if measured_end(int(begins[i]), int(ends[i]), nbytes, gbps) == ends[i]:
                continue
            queue = (int(devices[i]), int(streams[i]))
            if queue not in queues:
                queues[queue] = np.sort(np.concatenate([w["begin"][(w["device"] == queue[0]) & (w["stream"] == queue[1])]
                                                        for w in work])).tolist()
            ends[i] = measured_end(int(begins[i]), int(ends[i]), nbytes, gbps, queues[queue])


class _Threads:
    """The first event of each thread and process, in the order the checked path meets them."""

    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray[Any, Any], ...]] = []

    def touch(self, idx: np.ndarray[Any, Any], pid: np.ndarray[Any, Any], tid: np.ndarray[Any, Any],
              ts: np.ndarray[Any, Any]) -> None:
        if len(idx):
            self._parts.append((idx, pid, tid, ts))

    def _joined(self) -> tuple[np.ndarray[Any, Any], ...]:
        if not self._parts:
            return tuple(np.zeros(0, np.int64) for _ in range(4))
        return tuple(np.concatenate([p[k] for p in self._parts]) for k in range(4))

    def first_threads(self) -> list[tuple[int, int, int]]:
        idx, pid, tid, ts = self._joined()
        key = (pid.astype(np.uint64) << np.uint64(32)) | tid.astype(np.uint64)  # pids past 2**31 too
        return _firsts(idx, key, ts, lambda k: (k >> 32, k & U32_MAX))

    def first_processes(self) -> list[tuple[int, int]]:
        idx, pid, _, ts = self._joined()
        return [(p, t) for p, t in _firsts(idx, pid, ts, lambda key: (key,))]


def _firsts(idx: np.ndarray[Any, Any], key: np.ndarray[Any, Any], ts: np.ndarray[Any, Any],
            split: Callable[[int], tuple[int, ...]]) -> list[Any]:
    """Per key, in the order of its first event (by idx): (*split(key), earliest ts)."""
    if not len(key):
        return []
    uniq, inverse = np.unique(key, return_inverse=True)
    first_idx = np.full(len(uniq), np.iinfo(np.int64).max)
    np.minimum.at(first_idx, inverse, idx)
    earliest = np.full(len(uniq), np.iinfo(np.int64).max)
    np.minimum.at(earliest, inverse, ts)
    return [(*split(int(uniq[k])), int(earliest[k])) for k in np.argsort(first_idx, kind="stable").tolist()]


def _step_of(table: dict[int, tuple[np.ndarray[Any, Any], ...]], pid: np.ndarray[Any, Any],
             ts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The step each (pid, ts) falls in: the last step slice starting at or before it, if it covers it."""
    out = np.full(len(ts), schema.NO_STEP, dtype=np.int64)
    for p, (begin, end, step) in table.items():
        sel = np.flatnonzero(pid == p)
        if not len(sel):
            continue
        at = np.searchsorted(begin, ts[sel], side="right") - 1
        inside = at >= 0
        a = np.where(inside, at, 0)
        inside &= (begin[a] <= ts[sel]) & (ts[sel] < np.maximum(end[a], begin[a] + 1))
        out[sel[inside]] = step[a[inside]]
    return out


def _distinct(arrays: list[np.ndarray[Any, Any]], more: list[int]) -> set[int]:
    """The distinct raw ids of some columns and a list."""
    found: set[int] = set(more)
    for a in arrays:
        found.update(np.unique(a).tolist())
    return found


def _mapped(ids: IdMap, raw: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Raw ids mapped to 32 bits (a lookup per distinct id)."""
    if not len(raw):
        return np.zeros(0, np.int64)
    uniq, inverse = np.unique(raw, return_inverse=True)
    return np.array([ids[u] for u in uniq.tolist()], dtype=np.int64)[inverse]


def _memory_fields(m: dict[str, Any]) -> None:
    """A [memory] event's delta, device, address and bytes in use, checked as the checked path
    checks them (its errors make the fast path decline, so they are found before converting)."""
    m["delta"] = delta = as_int(m["delta"])
    if delta is None:
        raise NotFast("a [memory] event without an integer Bytes")
    if delta == 0:
        return
    dtype, ordinal = as_int(m["device_type"]), as_int(m["device_id"])
    if (dtype is not None and not 0 <= dtype <= 0xFFFF) or (ordinal is not None and ordinal > 0xFFFF):
        raise NotFast("a [memory] device out of range")
    m["device"] = memory_device(dtype, ordinal)
    m["addr"] = (as_int(m["addr"]) or 0) & U64_MAX  # a signed print of an address still names it
    m["in_use"] = unsigned(m["total"], U64_MAX)
