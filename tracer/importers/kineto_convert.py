"""The conversion proper: Kineto events to dfcompass events (see docs/import-kineto.md).

Two passes over the file, each reading it as a stream (:class:`KinetoFile`), so memory does not
grow with the file: :meth:`Converter.scan` gathers what converting an event needs from the rest
of the file (names, flows, steps, ids, the start order of the ops, the time span);
:meth:`Converter.convert` then converts each event as it is read and hands it to a
:class:`~tracer.builder.TraceBuilder`, rebased to the trace clock, with device names for the
builder to index.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from decimal import Decimal
from pathlib import Path
from typing import Any

from tracer import schema
from tracer.builder import TraceBuilder
from tracer.collectives import DTYPE_BYTES, collective_kind
from tracer.importers.kineto_fields import (
    DEVICE_WIDE_STREAM,
    CATEGORY_ALIASES,
    MAX_TIME_NS,
    MTIA_DEVICE_CATEGORIES,
    MTIA_QUEUE_WAIT,
    STEP,
    STREAM_NAME,
    copy_ends,
    input_args,
    is_id,
    is_mtia_transfer,
    kernel_config,
    kernel_dims,
    measured_end,
    memory_device,
    mtia_copy_kind,
    step_number,
)
from tracer.importers.kineto_source import (
    U32_MAX,
    U64_MAX,
    IdMap,
    KinetoFile,
    KinetoImportError,
    as_int,
    copy_kind,
    describe,
    unsigned,
    us_to_ns,
)

_API_CATS = frozenset({"cuda_runtime", "cuda_driver"})
_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_FLOW_PHASES = frozenset({"s", "t", "f"})
_CPU_KINDS = frozenset({"node", "step", "api", "memory", "annotation"})
_GPU_WORK = frozenset({"kernel", "memcpy", "memset"})  # what runs on a queue, one at a time
_CORRELATED = frozenset({"api", "sync", "kernel", "memcpy", "memset"})  # kinds whose events carry a correlation id
DEVICE_FIELDS = {c.short: c.device_positions for c in schema.CATALOGUE}


def _short(value: Any) -> str:
    text = str(value) if isinstance(value, (int, Decimal)) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(event: dict[str, Any]) -> str | None:
    """What an event becomes: node, step, api, kernel, memcpy, memset, memory; None if skipped."""
    ph, cat = event.get("ph"), event.get("cat")
    if not isinstance(ph, (str, type(None))) or not isinstance(cat, (str, type(None))):
        return None  # a list or object where a string belongs: skipped, and counted by _skip_key
    if ph == "X":
        cat = CATEGORY_ALIASES.get(cat, cat) if cat is not None else None
        if cat == "cpu_op":
            return "node"
        if cat in _API_CATS:
            return "api"
        if cat == "user_annotation":
            return "step" if STEP.match(str(event.get("name", ""))) else "annotation"
        if cat == "gpu_user_annotation":
            return "gpu_annotation"
        if cat == "cuda_sync":
            return "sync"
        if cat in MTIA_DEVICE_CATEGORIES:
            name = str(event.get("name", ""))
            return "sync" if name == MTIA_QUEUE_WAIT else "memcpy" if is_mtia_transfer(name) else "kernel"
        return _GPU_KINDS.get(str(cat))
    if ph in ("i", "I") and event.get("name") == "[memory]":
        return "memory"
    return None


def _step_number(event: dict[str, Any]) -> int | None:
    """N for a slice named ProfilerStep#N (the profiler's step marker), else None."""
    return step_number(str(event.get("name", "")))


def _skip_key(event: dict[str, Any]) -> str:
    cat, ph = event.get("cat"), event.get("ph")
    if not isinstance(cat, (str, type(None))) or not isinstance(ph, (str, type(None))):
        return "malformed (a 'cat' or 'ph' that is not a string)"
    if cat:
        return str(cat)
    return "instant" if ph in ("i", "I") else f"ph={ph}"


_COMMS_ARGS = ("Process Group Name", "Group size", "In msg nelems", "dtype")


class Converter:
    """Two passes over traceEvents: :meth:`scan` (metadata, flows, steps, ids, op order, span),
    then :meth:`convert` (each event to dfcompass events, straight into a builder)."""

    def __init__(self, source: KinetoFile) -> None:
        self.path, self.source = source.path, source
        self.doc = source.doc
        self.source_events = 0
        self.process_names: dict[Any, str] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.flows: dict[tuple[Any, Any, int], int] = {}  # (pid, tid, ts ns) -> ac2g flow id
        self.wanted_flows: set[tuple[Any, Any, int]] = set()  # slices that need one (no args.correlation)
        self.steps: dict[Any, list[tuple[int, int, int]]] = {}  # pid -> sorted (begin, end, step)
        self.first: int | None = None  # Kineto ns of the first and last converted event
        self.last: int | None = None
        self.node_ids = array("I")  # the n-th op of the file -> its node id (ops numbered in start order)
        self.collective_seq: dict[int, int] = {}  # the n-th op of the file, a c10d op -> its seq
        self.fwdbwd: dict[Any, dict[str, tuple[Any, Any, int]]] = {}  # flow id -> {"s"|"f": (pid, tid, ts)}
        self.node_at: dict[tuple[Any, Any, int], tuple[int, int, str]] = {}  # flow point -> deepest (end, id, key)
        # (raw pid, raw tid) -> sorted (ts ns, the args that size it) of record_param_comms: a collective's
        # size and process group, in newer Kineto files
        self.comms_params: dict[tuple[Any, Any], list[tuple[int, int]]] = {}  # -> (ts, index in comms_args)
        self.comms_args: list[dict[str, Any]] = []
        self.fwdbwd_points: set[tuple[Any, Any, int]] = set()
        self.tids = self.pids = self.streams = IdMap(())
        self.rank = 0xFFFFFFFF  # distributedInfo.rank, once scan() has read the file
        # pass 2
        self.builder: TraceBuilder | None = None
        self.shift = 0
        self.models: dict[str, str] = {}
        self.skipped: dict[str, int] = {}
        self.gpu_skipped: dict[str, int] = {}  # of skipped: slices with a device and a stream (GPU work)
        self.queue_starts: dict[tuple[str, Any], list[int]] = {}  # (device, raw stream) -> sorted GPU work starts
        self.first_use: dict[str, int] = {}  # device name -> first ts
        self.first_pid: dict[int, int] = {}
        self.first_thread: dict[tuple[int, int], int] = {}
        self.raw_pid: dict[int, Any] = {}  # mapped id -> id as in the file, to find metadata names
        self.raw_thread: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.gpu_streams: dict[str, set[int]] = {}
        self.step_numbers: set[int] = set()
        # runtime calls with a correlation id, and the GPU activities' ids: launches are the calls
        # whose id an activity has; kept as arrays, not objects
        self.api_begin, self.api_tid, self.api_corr = array("q"), array("I"), array("Q")
        self.gpu_corr = array("Q")
        self.gpu_without_corr = 0
        self.with_launch = 0
        self.joined = {"api": 0, "gpu": 0}
        self.ac2g = 0
        self.nodes_seen = 0
        self.annotation_id = 0

    # ------------------------------------------------------------------ checked access
    def fail(self, index: int, event: dict[str, Any], problem: str) -> KinetoImportError:
        return KinetoImportError(self.path, f"{describe(index, event)}: {problem}")

    def time(self, index: int, event: dict[str, Any]) -> tuple[int, int]:
        """(ts, end) in ns; end == ts for instants."""
        if "ts" not in event:
            raise self.fail(index, event, "missing 'ts'")
        ts = us_to_ns(event["ts"])
        if ts is None:
            numeric = isinstance(event["ts"], (int, Decimal)) and not isinstance(event["ts"], bool)
            raise self.fail(index, event, f"'ts' is {'out of range' if numeric else 'not a number'}: "
                                          f"{_short(event['ts'])}")
        if not -MAX_TIME_NS <= ts <= MAX_TIME_NS:
            raise self.fail(index, event, f"'ts' is out of range: {_short(event['ts'])} us")
        if event.get("ph") != "X":
            return ts, ts
        if "dur" not in event:
            raise self.fail(index, event, "missing 'dur'")
        dur = us_to_ns(event["dur"])
        if dur is None or not 0 <= dur <= MAX_TIME_NS:
            raise self.fail(index, event, f"'dur' is not a duration: {_short(event['dur'])}")
        return ts, ts + dur

    def raw_id(self, index: int, event: dict[str, Any], key: str) -> Any:
        """A pid or tid as the file has it (int, string or missing); IdMap makes it a u32."""
        value = event.get(key)
        if isinstance(value, (bool, list, dict)):
            raise self.fail(index, event, f"'{key}' is not an id: {value!r}")
        return value

    def args(self, event: dict[str, Any]) -> dict[str, Any]:
        args = event.get("args")
        return args if isinstance(args, dict) else {}

    def stream_of(self, index: int, event: dict[str, Any]) -> Any:
        raw = self.args(event).get("stream", event.get("tid"))
        if event.get("cat") in MTIA_DEVICE_CATEGORIES and is_mtia_transfer(str(event.get("name", ""))):
            # DMA requests run while their kernel runs: on a queue of their own, not the kernel's
            return f"dma {raw}"
        match = STREAM_NAME.match(raw) if isinstance(raw, str) else None
        if match:  # older Kineto writes GPU tids as "stream 7"
            return int(match.group(1))
        if raw is None or isinstance(raw, (bool, list, dict)):
            raise self.fail(index, event, "no 'args.stream' (or tid) to name the GPU stream")
        return raw

    def gpu_device(self, index: int, event: dict[str, Any]) -> str:
        device = as_int(self.args(event).get("device", event.get("pid")))
        if device is None or not 0 <= device <= 0xFFFF:
            raise self.fail(index, event, "no 'args.device' (or integer pid) to name the GPU")
        return f"{'mtia' if event.get('cat') in MTIA_DEVICE_CATEGORIES else 'cuda'}:{device}"

    # ------------------------------------------------------------------ pass 1
    def scan(self) -> None:
        """Read the whole file once (every parse error surfaces here) and gather what pass 2 needs."""
        tids, pids, streams = set(), set(), set()
        begins, ends = array("q"), array("q")  # of the file's ops, in file order
        collectives: list[int] = []  # the file-order numbers of the c10d ops
        comms_args: list[dict[str, Any]] = []
        for index, event in enumerate(self.source.events()):
            self.source_events = index + 1
            if not isinstance(event, dict):
                raise KinetoImportError(self.path, f"traceEvents[{index}] is a JSON {type(event).__name__}, "
                                        "not an object")
            ph = event.get("ph")
            if ph == "M":
                self.metadata(event)
            elif ph in ("s", "f") and event.get("cat") == "fwdbwd" and self.usable_fwdbwd(event):
                point = (event.get("pid"), event.get("tid"), us_to_ns(event.get("ts")) or 0)
                self.fwdbwd.setdefault(event.get("id"), {})[str(ph)] = point
            kind = _kind(event)
            if kind is None:
                continue
            if kind in _CPU_KINDS:
                tids.add(self.raw_id(index, event, "tid"))
                pids.add(self.raw_id(index, event, "pid"))
            else:
                stream = self.stream_of(index, event)
                if kind != "sync" or as_int(stream) != DEVICE_WIDE_STREAM:  # a device-wide sync has no queue
                    streams.add(stream)
            begin, end = self.time(index, event)
            if kind in _GPU_WORK:
                self.queue_starts.setdefault((self.gpu_device(index, event), stream), []).append(begin)
            if kind in _CORRELATED and self.given_correlation(event) is None and is_id(event.get("pid")) \
                    and is_id(event.get("tid")):
                self.wanted_flows.add((event.get("pid"), event.get("tid"), begin))
            if kind != "memory" or as_int(self.args(event).get("Bytes")) != 0:  # a 0-byte [memory] gives no event
                self.first = begin if self.first is None else min(self.first, begin)
                self.last = end if self.last is None else max(self.last, end)
            if kind == "node":
                if collective_kind(str(event.get("name", ""))) is not None:
                    collectives.append(len(begins))
                if event.get("name") == "record_param_comms":
                    thread = (event.get("pid"), event.get("tid"))
                    self.comms_params.setdefault(thread, []).append((begin, len(comms_args)))
                    args = self.args(event)
                    comms_args.append({k: args[k] for k in _COMMS_ARGS if k in args})
                begins.append(begin)
                ends.append(end)
            step = _step_number(event) if kind in ("node", "step") else None
            if step is not None:
                if step >= schema.NO_STEP:
                    raise self.fail(index, event, "step number does not fit 32 bits")
                self.steps.setdefault(event.get("pid"), []).append((begin, end, step))
        for intervals in self.steps.values():
            intervals.sort()
        for params in self.comms_params.values():
            params.sort()
        self.comms_args = comms_args
        if self.wanted_flows:
            self.scan_flows()
        # Ops are numbered in start order, an enclosing op before the ops it contains: by begin, then
        # by end descending, then in file order (two stable sorts of plain ints: no tuple per op).
        order = sorted(range(len(begins)), key=ends.__getitem__, reverse=True)
        order.sort(key=begins.__getitem__)
        self.node_ids = array("I", bytes(4 * len(order)))
        for rank, k in enumerate(order):
            self.node_ids[k] = rank & 0xFFFFFFFF
        for seq, k in enumerate(sorted(collectives, key=self.node_ids.__getitem__)):
            self.collective_seq[k] = seq
        self.fwdbwd_points = {point for ends_ in self.fwdbwd.values() for point in ends_.values()}
        self.tids, self.pids, self.streams = IdMap(tids), IdMap(pids), IdMap(streams)
        for starts in self.queue_starts.values():
            starts.sort()
        info = self.doc.get("distributedInfo")
        given = as_int(info.get("rank")) if isinstance(info, dict) else None
        self.rank = given if given is not None and 0 <= given <= 0xFFFFFFFE else 0xFFFFFFFF

    def scan_flows(self) -> None:
        """The ac2g flow points at the slices that lack args.correlation: another read of the file,
        made only when some do (Kineto writes the id into args nowadays, and there are as many flow
        points as GPU activities and their calls)."""
        for event in self.source.events():
            ph = event.get("ph")
            if isinstance(ph, str) and ph in _FLOW_PHASES and event.get("cat") == "ac2g":
                # Kineto's flow id is the correlation id; the flow point sits at its slice's ts.
                flow_id, ts = as_int(event.get("id")), us_to_ns(event.get("ts"))
                pid, tid = event.get("pid"), event.get("tid")
                if flow_id is not None and ts is not None and 0 <= flow_id <= U64_MAX and is_id(pid) and is_id(tid):
                    key = (pid, tid, ts)
                    if key in self.wanted_flows:
                        self.flows.setdefault(key, flow_id)

    def metadata(self, event: dict[str, Any]) -> None:
        name = self.args(event).get("name")
        if not isinstance(name, str) or not is_id(event.get("pid")) or not is_id(event.get("tid")):
            return  # names only: a malformed one is left out
        if event.get("name") == "process_name":
            self.process_names[event.get("pid")] = name
        elif event.get("name") == "thread_name":  # Kineto may rename a thread: the last name wins
            self.thread_names[(event.get("pid"), event.get("tid"))] = name

    @staticmethod
    def usable_fwdbwd(event: dict[str, Any]) -> bool:
        """A fwdbwd flow point (Kineto links a forward op to its backward op) with a time and ids."""
        return (us_to_ns(event.get("ts")) is not None and is_id(event.get("pid")) and is_id(event.get("tid"))
                and is_id(event.get("id")))

    # ------------------------------------------------------------------ pass 2
    def convert(self, builder: TraceBuilder, shift: int, models: dict[str, str]) -> None:
        """Convert every event into `builder`, at Kineto time - `shift`; `models` names the GPUs."""
        self.builder, self.shift, self.models = builder, shift, models
        for index, event in enumerate(self.source.events()):
            self.convert_event(index, event)
        self.fwdbwd_links()
        launched = set(self.gpu_corr)
        for begin, tid, corr in zip(self.api_begin, self.api_tid, self.api_corr):  # calls whose GPU work is in the file
            if corr in launched:
                self.add("launch", str(tid), begin, tid, corr)
        api_ids = set(self.api_corr)
        self.with_launch = sum(1 for corr in self.gpu_corr if corr in api_ids)
        self.describe_threads()

    def convert_event(self, index: int, event: dict[str, Any]) -> None:
        kind = _kind(event)
        if kind is None:
            ph, cat = event.get("ph"), event.get("cat")
            if ph == "M":
                return
            if isinstance(ph, str) and ph in _FLOW_PHASES and cat == "ac2g":
                self.ac2g += 1
                return
            if ph in ("s", "f") and cat == "fwdbwd" and self.usable_fwdbwd(event):
                return
            key = _skip_key(event)
            self.skipped[key] = self.skipped.get(key, 0) + 1
            args = event.get("args")
            if ph == "X" and isinstance(args, dict) and "device" in args and "stream" in args:
                self.gpu_skipped[key] = self.gpu_skipped.get(key, 0) + 1
        elif kind == "node":
            self.node(index, event)
        elif kind == "step":
            self.step(index, event)
        elif kind == "api":
            self.api(index, event)
        elif kind == "memory":
            self.memory(index, event)
        elif kind == "sync":
            self.sync(index, event)
        elif kind in ("annotation", "gpu_annotation"):
            self.annotation(index, event, on_gpu=kind == "gpu_annotation")
        else:
            self.gpu(kind, index, event)

    def cpu_ids(self, event: dict[str, Any], ts: int) -> tuple[int, int]:
        raw_pid, raw_tid = event.get("pid"), event.get("tid")
        pid, tid = self.pids[raw_pid], self.tids[raw_tid]
        thread = (pid, tid)
        first = self.first_thread.get(thread)
        if first is None:  # ids map one to one, so a thread's raw ids are those of its first event
            self.first_thread[thread] = ts
            self.raw_thread[thread] = (raw_pid, raw_tid)
            self.raw_pid[pid] = raw_pid
        elif ts < first:
            self.first_thread[thread] = ts
        if ts < self.first_pid.get(pid, ts + 1):
            self.first_pid[pid] = ts
        return pid, tid

    def add(self, short: str, key: str, ts: int, *values: Any, order: int = 0) -> None:
        """One dfcompass event into the builder: time rebased, device names given to the builder."""
        builder = self.builder
        assert builder is not None, "convert() sets the builder"
        positions = DEVICE_FIELDS[short]
        if positions:
            row = list(values)
            for position in positions:
                name = row[position]
                if ts < self.first_use.get(name, ts + 1):
                    self.first_use[name] = ts
                row[position] = builder.device(name, ts - self.shift, self.models.get(name, ""))
            values = tuple(row)
        builder.add(short, key, ts - self.shift, *values, order=order)

    def step_of(self, raw_pid: Any, ts: int) -> int:
        intervals = self.steps.get(raw_pid)
        if intervals:
            at = bisect_right(intervals, (ts, 1 << 64, 1 << 32)) - 1
            if at >= 0 and intervals[at][0] <= ts < max(intervals[at][1], intervals[at][0] + 1):
                return intervals[at][2]
        return schema.NO_STEP

    def node(self, index: int, event: dict[str, Any]) -> None:
        begin, end = self.time(index, event)
        _, tid = self.cpu_ids(event, begin)
        op = str(event.get("name", ""))
        scope = self.args(event).get("Module Hierarchy")
        name = scope if isinstance(scope, str) and scope else op
        nth = self.nodes_seen
        self.nodes_seen += 1
        node_id = self.node_ids[nth]
        order = node_id + 1  # a stream's events at one time: in start order, after those of other kinds
        key = str(tid)
        at = (event.get("pid"), event.get("tid"), begin)
        if at in self.fwdbwd_points:
            known = self.node_at.get(at)
            if known is None or end < known[0]:  # a flow binds to the deepest slice starting there
                self.node_at[at] = (end, node_id, key)
        self.add("node_begin", key, begin, node_id, op, name, "cpu", tid, self.step_of(event.get("pid"), begin),
                 order=order)
        self.add("node_end", key, end, node_id, "cpu", tid, order=order)
        shapes = input_args(self.args(event))
        if shapes is not None:
            self.add("node_args", key, begin, node_id, *shapes, order=order)
        kind = collective_kind(op)
        if kind is not None:
            self.collective(key, begin, end, node_id, kind, event, self.collective_seq[nth])
        if _step_number(event) is not None:
            self.step(index, event, order=order)

    def fwdbwd_links(self) -> None:
        """dfc:node_link for each fwdbwd flow whose two ends sit at the start of a node."""
        for ends in self.fwdbwd.values():
            start, finish = ends.get("s"), ends.get("f")
            source = self.node_at.get(start) if start is not None else None
            target = self.node_at.get(finish) if finish is not None else None
            if source is None or target is None or finish is None:
                self.skipped["fwdbwd"] = self.skipped.get("fwdbwd", 0) + len(ends)
                continue
            self.add("node_link", target[2], finish[2], source[1], target[1], "fwdbwd")

    def sync(self, index: int, event: dict[str, Any]) -> None:
        """CUPTI's cuda_sync: a queue (or, for a context sync, the whole device) waits."""
        begin, end = self.time(index, event)
        device, args = self.gpu_device(index, event), self.args(event)
        stream = self.stream_of(index, event)
        queue = U32_MAX if as_int(stream) == DEVICE_WIDE_STREAM else self.streams[stream]
        corr = self.correlation(event, begin, "gpu") or 0
        kind = str(args.get("cuda_sync_kind", event.get("name", "")))[:200]
        waited = as_int(args.get("wait_on_stream"))
        wait_queue = waited if waited is not None and 0 <= waited < U32_MAX else U32_MAX
        recorded = unsigned(args.get("wait_on_cuda_event_record_corr_id"), U64_MAX)
        key = f"{device}.sync"
        self.add("sync_begin", key, begin, device, queue, corr, kind, wait_queue, recorded)
        self.add("sync_end", key, end, device, queue, corr)

    def annotation(self, index: int, event: dict[str, Any], on_gpu: bool) -> None:
        """A user annotation: on its thread (user_annotation) or its GPU queue (gpu_user_annotation)."""
        begin, end = self.time(index, event)
        if on_gpu:
            device = self.gpu_device(index, event)
            track = self.streams[self.stream_of(index, event)]
            key = f"{device}.s{track}"
        else:
            device, (_, track) = "cpu", self.cpu_ids(event, begin)
            key = str(track)
        name = str(event.get("name", ""))
        self.add("annotation_begin", key, begin, device, track, self.annotation_id, name)
        self.add("annotation_end", key, end, device, track, self.annotation_id)
        self.annotation_id = (self.annotation_id + 1) & 0xFFFFFFFF

    def collective(self, key: str, begin: int, end: int, node_id: int, kind: str, event: dict[str, Any],
                   seq: int) -> None:
        """dfc:collective of a c10d op, sized from the record_param_comms inside it when the file has one."""
        group, size, nbytes = "", 0, 0
        params = self.comms_params.get((event.get("pid"), event.get("tid")), [])
        at = bisect_right(params, (begin, -1))
        if at < len(params) and params[at][0] <= end:
            args = self.comms_args[params[at][1]]
            group = str(args.get("Process Group Name", ""))[:200]
            size = min(max(as_int(args.get("Group size")) or 0, 0), 0xFFFFFFFF)
            elements = as_int(args.get("In msg nelems")) or 0
            nbytes = min(max(elements, 0) * DTYPE_BYTES.get(str(args.get("dtype")), 0), U64_MAX)
        self.add("collective", key, begin, node_id, self.rank, kind, group, size, seq, nbytes, order=node_id + 1)

    def step(self, index: int, event: dict[str, Any], order: int = 0) -> None:
        begin, end = self.time(index, event)
        _, tid = self.cpu_ids(event, begin)
        step = _step_number(event)
        assert step is not None, "only ProfilerStep#N slices are steps"
        self.step_numbers.add(step)
        self.add("step_begin", str(tid), begin, step, tid, order=order)
        self.add("step_end", str(tid), end, step, tid, order=order)

    def given_correlation(self, event: dict[str, Any]) -> int | None:
        value = as_int(self.args(event).get("correlation"))
        return value if value is not None and 0 <= value <= U64_MAX else None

    def correlation(self, event: dict[str, Any], ts: int, side: str) -> int | None:
        """args.correlation, else the id of the ac2g flow point on this slice (counted as a join)."""
        value = self.given_correlation(event)
        if value is not None:
            return value
        pid, tid = event.get("pid"), event.get("tid")
        flow = self.flows.get((pid, tid, ts)) if is_id(pid) and is_id(tid) else None
        if flow is not None:
            self.joined[side] += 1
        return flow

    def api(self, index: int, event: dict[str, Any]) -> None:
        begin, end = self.time(index, event)
        _, tid = self.cpu_ids(event, begin)
        corr = self.correlation(event, begin, "api")
        name, key = str(event.get("name", "")), str(tid)
        self.add("api_enter", key, begin, tid, name, corr or 0)
        self.add("api_exit", key, end, tid, name, corr or 0)
        if corr is not None:
            self.api_begin.append(begin)
            self.api_tid.append(tid)
            self.api_corr.append(corr)

    def gpu(self, kind: str, index: int, event: dict[str, Any]) -> None:
        begin, end = self.time(index, event)
        device, args = self.gpu_device(index, event), self.args(event)
        stream = self.streams[self.stream_of(index, event)]
        self.gpu_streams.setdefault(device, set()).add(stream)
        corr = self.correlation(event, begin, "gpu")
        if corr is None:
            self.gpu_without_corr += 1
        else:
            self.gpu_corr.append(corr)
        key, name, cid = f"{device}.s{stream}", str(event.get("name", "")), corr or 0
        if kind != "kernel":
            end = measured_end(begin, end, args.get("bytes"), args.get("memory bandwidth (GB/s)"),
                               self.queue_starts[(device, self.stream_of(index, event))])
            self.last = end if self.last is None else max(self.last, end)
        if kind == "kernel":
            dims = kernel_dims(args.get("grid")) + kernel_dims(args.get("block"))
            self.add("kernel_begin", key, begin, device, stream, cid, name, *dims)
            config = kernel_config(args)
            if config is not None:
                self.add("kernel_info", key, begin, device, stream, cid, *config)
        elif kind == "memcpy" and event.get("cat") in MTIA_DEVICE_CATEGORIES:
            direction = mtia_copy_kind(args.get("direction"))
            self.add("memcpy_begin", key, begin, device, stream, cid, unsigned(args.get("size"), U64_MAX),
                     direction, *copy_ends(direction, device, None, None))
        elif kind == "memcpy":
            direction = copy_kind(name)
            if direction == "PtoP" and any((as_int(args.get(k)) or 0) > 0xFFFF for k in ("fromDevice", "toDevice")):
                raise self.fail(index, event, f"copy device out of range: fromDevice {_short(args.get('fromDevice'))}, "
                                              f"toDevice {_short(args.get('toDevice'))}")
            src, dst = copy_ends(direction, device, args.get("fromDevice"), args.get("toDevice"))
            self.add("memcpy_begin", key, begin, device, stream, cid, unsigned(args.get("bytes"), U64_MAX),
                     direction, src, dst)
        else:
            self.add("memset_begin", key, begin, device, stream, cid, unsigned(args.get("bytes"), U64_MAX))
        self.add(f"{kind}_end", key, end, device, stream, cid)

    def memory(self, index: int, event: dict[str, Any]) -> None:
        ts, _ = self.time(index, event)
        args = self.args(event)
        delta = as_int(args.get("Bytes"))
        if delta is None:
            raise self.fail(index, event, "[memory] event without an integer 'args.Bytes'")
        if delta == 0:
            self.skipped["[memory] of 0 bytes"] = self.skipped.get("[memory] of 0 bytes", 0) + 1
            return
        _, tid = self.cpu_ids(event, ts)
        dtype, ordinal = as_int(args.get("Device Type")), as_int(args.get("Device Id"))
        if (dtype is not None and not 0 <= dtype <= 0xFFFF) or (ordinal is not None and ordinal > 0xFFFF):
            raise self.fail(index, event, f"[memory] device out of range: type {dtype}, id {ordinal}")
        device = memory_device(dtype, ordinal)
        addr = (as_int(args.get("Addr")) or 0) & U64_MAX  # a signed print of an address still names it
        in_use = unsigned(args.get("Total Allocated"), U64_MAX)
        short = "mem_alloc" if delta > 0 else "mem_free"
        self.add(short, str(tid), ts, device, addr, min(abs(delta), U64_MAX), in_use)

    def describe_threads(self) -> None:
        """Process and thread descriptions at their first events; at one time, by pid (and tid)."""
        for pid, ts in self.first_pid.items():
            self.add("process_info", "process", ts, pid, self.process_names.get(self.raw_pid[pid], ""), "", order=pid)
        for (pid, tid), ts in self.first_thread.items():
            name = self.thread_names.get(self.raw_thread[(pid, tid)], "")
            self.add("thread_info", str(tid), ts, pid, tid, name, order=pid)
