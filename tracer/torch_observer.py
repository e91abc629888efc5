"""PyTorch ops without torch.profiler: the native op observer, and its windows walked into nodes.

:mod:`tracer.native`'s ``op_observer`` is a RecordFunction callback that keeps, per thread, a begin
row per op (name, overload, thread, parent, record scope, autograd sequence number, input tensors),
an end row, and a row per allocation and free (with the innermost op open on the thread). The
program's thread pays for that and for the drain at a window cut, nothing else: on the LSTM loop of
time_sequence_prediction it costs 1.3-1.4x untraced where torch.profiler with ``record_shapes`` and
``profile_memory`` costs 6x (docs/benchmarks.md).

:class:`ObservedWalk` turns drained windows into the :class:`~tracer.torch_events._Collector` that
the profiler's tree walk fills (the same nodes, scopes, reads and allocations), so
:mod:`tracer.torch_convert` writes both alike; tests/test_tracer/test_torch_observer.py checks the
two traces equal. Ops still open at a cut (another thread's, or the program's own scopes) are carried
to the window where they end. CPU only: GPU activity needs the profiler (Kineto's CUPTI).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from array import array
from typing import Any, Callable, Iterator, NamedTuple

from tracer import schema
from tracer.torch_events import (_COMPILE_SCOPES, _COMPILED_CALL, _COMPILED_FUNCTIONS, _NODE_PREFIXES,
                                 _SPARSE_BUILDERS, COMPILED_GRAPH_OP, InnerTensor, _Collector, _Node)
from tracer.torch_scopes import MODULE_MARK, THREAD_MARK

# c10::ScalarType, c10::Layout and c10::DeviceType by code (append-only enums: torch serialises them).
_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
           "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16", "quint4x2", "quint2x4",
           "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float8_e5m2", "float8_e4m3fn",
           "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16", "uint32", "uint64")
_LAYOUTS = ("strided", "sparse_coo", "sparse_csr", "_mkldnn", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged")
_DEVICE_TYPES = ("cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "fpga", "maia", "xla", "vulkan",
                 "metal", "xpu", "mps", "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone")
_BACKWARD_SCOPE, _USER_SCOPE = 1, 7  # at::RecordScope
ENGINE_ENV = "DFCOMPASS_TORCH_ENGINE"  # auto | profiler | observer: what records a TorchRecorder's CPU ops
BEGIN_COLUMNS, END_COLUMNS, VALUE_COLUMNS, ALLOC_COLUMNS = 12, 3, 12, 9  # per row, as in op_observer.cpp


class ObservedWindow(NamedTuple):
    """One drain's rows, flat int64 arrays (the recorder loads no numpy: the program may have none).
    Per thread, rows are in the order the ops began; an op's input tensors are value rows
    ``first .. first + count`` of its begin row."""

    begins: array  # tid, serial, parent serial, depth, t0, name id, overload id, scope, seq nr, inputs, first, count
    ends: array    # tid, serial, t1
    values: array  # tid, op serial, arg, list pos, storage ptr, impl ptr, dtype, device type, index, layout,
    #                ndim, first size
    sizes: array   # the tensors' sizes, flat
    allocs: array  # tid, time, ptr, bytes (< 0: free), total, device type, index, innermost op, allocation id


def device_name(kind: int, index: int) -> str:
    """A device as the trace names it, from the observer's c10::DeviceType code and index."""
    name = _DEVICE_TYPES[kind] if 0 <= kind < len(_DEVICE_TYPES) else f"device{kind}"
    return name if index < 0 or name == "cpu" else f"{name}:{index}"


def _rows(flat: list[int], width: int) -> Iterator[tuple[int, ...]]:
    """A flat list as rows of `width`."""
    items = iter(flat)
    return zip(*[items] * width)


class OpObserver:
    """The native observer (one per process, as the library is): start, drain a window at each cut, stop."""

    _made: dict[int, "OpObserver"] = {}

    @classmethod
    def of(cls, library: ctypes.CDLL) -> "OpObserver":
        """The observer of this library: its name table lives as long as the library."""
        found = cls._made.get(id(library))
        if found is None:
            found = cls._made[id(library)] = cls(library)
        return found

    def __init__(self, library: ctypes.CDLL) -> None:
        self._lib = library
        library.dfc_observer_taken.restype = ctypes.c_void_p
        library.dfc_observer_columns.restype = ctypes.c_int
        self.names: list[str] = []  # op names by id; a drain adds the new ones
        self._pid = os.getpid()
        self.op_ns: float | None = None  # what it adds to an op (calibrate_ops), once per process

    def start(self, memory: bool) -> None:
        """Start observing; raises when it cannot (one observer per process, and none under a profiler)."""
        if os.getpid() != self._pid:  # a fork child starts afresh (the library forgets the parent's names)
            self._pid, self.names, self.op_ns = os.getpid(), [], None
        status = self._lib.dfc_observer_start(int(memory))
        if status == -1:
            raise RuntimeError("the op observer is on already (one per process)")
        if status == -2:
            raise RuntimeError("a torch profiler is on in this thread: the op observer cannot start under it")

    def stop(self) -> None:
        """Stop. A memory reporter that cannot come off (stopped on another thread than the one that
        started, or under a profiler of the program's) stays in place, inert."""
        self._lib.dfc_observer_stop()

    def drain(self) -> ObservedWindow:
        """What every thread recorded since the last drain, copied out of the observer."""
        counts = (ctypes.c_int64 * 6)()
        self._lib.dfc_observer_drain(counts)
        arrays: list[array] = []
        for which in range(5):
            taken = array("q")
            words = counts[which] * self._lib.dfc_observer_columns(which)
            if words:  # one copy, straight from the library's buffer (a cut runs on the program's thread)
                taken.frombytes((ctypes.c_char * (words * taken.itemsize)).from_address(
                    self._lib.dfc_observer_taken(which)))
            arrays.append(taken)
        if counts[5]:
            text = ctypes.string_at(self._lib.dfc_observer_taken(5), counts[5])
            self.names += text[:-1].decode("utf-8", "replace").split("\0")
        return ObservedWindow(*arrays)


class _Context(NamedTuple):
    scope: str
    backward: str  # the scope label of the backward function being run, or "" in forward
    node: _Node | None  # the node this op is inside (or is)
    skip: bool  # compile time: its ops trace fake tensors
    compiled_inputs: list[Any]  # the inputs of the compiled function being run (CompiledFunction)


_ROOT = _Context("", "", None, False, [])


class ObservedWalk:
    """Drained windows into a :class:`_Collector`, as :meth:`_Collector.walk` reads the profiler's
    tree. What outlives a window: the ops begun and not yet ended (their context, and the nodes and
    annotations among them)."""

    def __init__(self, torch: Any) -> None:
        self._dtypes = [getattr(torch, name, torch.uint8) for name in _DTYPES]
        self._layouts = [getattr(torch, name, torch.strided) for name in _LAYOUTS]
        self._open: dict[int, _Context] = {}
        self._open_nodes: dict[int, _Node] = {}
        self._open_annotations: dict[int, tuple[int, int, str, int]] = {}  # key -> begin, tid, name, id (-1: not begun)
        self._devices: dict[tuple[int, int], str] = {}

    def chain_state(self) -> dict[str, Any]:
        return {"open": self._open, "open_nodes": self._open_nodes, "open_annotations": self._open_annotations}

    def begun(self, key: int, annotation_id: int) -> None:
        """An open annotation's begin was written, with this id: its end will use it."""
        begin, tid, name, _ = self._open_annotations[key]
        self._open_annotations[key] = (begin, tid, name, annotation_id)

    def take_chain_state(self, state: dict[str, Any]) -> None:
        self._open, self._open_nodes = state["open"], state["open_nodes"]
        self._open_annotations = state["open_annotations"]

    @staticmethod
    def _device(kind: int, index: int) -> str:
        return device_name(kind, index)

    def collect(self, window: ObservedWindow, names: list[str], collector: _Collector) -> None:
        """Fill `collector` with the window's nodes (those that ended), memory and annotations."""
        # An op is known by one int: (thread << 40) | serial (OS thread ids fit 22 bits, serials 40).
        ended = {(tid << 40) | serial: end for tid, serial, end in _rows(window.ends.tolist(), END_COLUMNS)}
        values, sizes = window.values.tolist(), window.sizes.tolist()
        pointers = values[4::VALUE_COLUMNS]  # storage pointers: the first read of each is kept
        contexts = self._open
        seq_scope = collector.seq_scope
        metas: dict[int, InnerTensor] = {}
        dtypes, layouts, devices = self._dtypes, self._layouts, self._devices

        def meta(row: int) -> InnerTensor:
            found = metas.get(row)
            if found is None:
                at = row * VALUE_COLUMNS
                _, _, _, _, ptr, impl, dtype, kind, index, layout, ndim, first_size = values[at:at + VALUE_COLUMNS]
                device = devices.get((kind, index)) or devices.setdefault((kind, index), self._device(kind, index))
                # tuple.__new__: a NamedTuple's own constructor costs 3x more, and metas are made per read
                found = metas[row] = tuple.__new__(InnerTensor, (
                    ptr, impl, dtypes[dtype] if dtype < len(dtypes) else dtypes[0],
                    tuple(sizes[first_size:first_size + ndim]), device,
                    layouts[layout] if layout < len(layouts) else layouts[0]))
            return found

        def inputs(first: int, count: int, arity: int, read: set[int] | None = None) -> list[Any]:
            """The op's inputs as the profiler lists them; `read` gets their storages."""
            given: list[Any] = [None] * max(arity, 0)
            for at in range(first, first + count):
                arg, pos = values[at * VALUE_COLUMNS + 2], values[at * VALUE_COLUMNS + 3]
                if read is not None:
                    read.add(pointers[at])
                while arg >= len(given):
                    given.append(None)
                if pos < 0:
                    given[arg] = meta(at)
                else:
                    items = given[arg] if isinstance(given[arg], list) else []
                    items += [None] * (pos + 1 - len(items))
                    items[pos] = meta(at)
                    given[arg] = items
            return given

        for row in _rows(window.begins.tolist(), BEGIN_COLUMNS):
            tid, serial, parent, _depth, start, name_id, overload_id, scope_kind, sequence, arity, first, count = row
            key = (tid << 40) | serial
            context = contexts.get((tid << 40) | parent, _ROOT) if parent >= 0 else _ROOT
            name = names[name_id]
            node = context.node
            if context.skip or node is not None:
                if node is not None and not context.skip:
                    self._inner(node, context, first, count, start, name, sequence, pointers, meta, seq_scope)
                contexts[key] = context
                continue
            contexts[key] = self._above(collector, context, key, tid, start, name, names, overload_id,
                                        scope_kind, sequence, lambda read=None: inputs(first, count, arity, read))
        for tid, at, ptr, size, total, kind, index, innermost, allocation in _rows(window.allocs.tolist(), ALLOC_COLUMNS):
            device = self._device(kind, index)
            owner = contexts.get((tid << 40) | innermost) if innermost >= 0 else None
            if owner is not None and owner.skip:
                continue  # compile time, as the profiler's walk: not a step's memory
            collector.memory.append((at, tid, device, ptr, size, total))
            if owner is not None and owner.node is not None and not owner.skip and allocation >= 0:
                collector._node_allocation(owner.node, allocation, None, ptr, size, at, device)
        for key, end in ended.items():
            contexts.pop(key, None)
            node = self._open_nodes.pop(key, None)
            if node is not None:
                node.end = end
                collector.nodes.append(node)
            annotation = self._open_annotations.pop(key, None)
            if annotation is not None and annotation[3] < 0:
                collector.annotations.append((annotation[0], end, annotation[1], annotation[2]))
            elif annotation is not None:  # its begin was written when a window was cut inside it
                collector.annotation_ends.append((end, annotation[1], annotation[3]))
        # Still open at the cut: annotations begin in this window, nodes have their strings defined in it.
        begun = sorted((begin, key, tid, name) for key, (begin, tid, name, given) in self._open_annotations.items()
                       if given < 0)
        collector.annotations_begun = [(key, begin, tid, name) for begin, key, tid, name in begun]
        collector.open_nodes = sorted((node for node in self._open_nodes.values() if not node.predefined),
                                      key=lambda node: (node.start, node.ptid))

    @staticmethod
    def _inner(node: _Node, context: _Context, first: int, count: int, start: int, name: str, sequence: int,
               pointers: list[int], meta: Any, seq_scope: dict[int, str]) -> None:
        """An op inside a node: its autograd sequence takes the node's forward scope; its inputs are
        the node's inner reads, read when it starts. Only a storage's first read counts (the
        conversion skips a storage it has seen, the node's own inputs first): the others are skipped
        before a tensor description is made for them."""
        if not context.backward and context.scope and sequence >= 0:
            seq_scope.setdefault(sequence, context.scope)
        begin, end = first, first + count
        if begin == end:
            return
        if name in _SPARSE_BUILDERS:
            node.sparse_built.append(meta(end - 1).dtype)  # the values tensor comes last
        seen = node.read_storages
        reads = node.inner_reads
        for at in range(begin, end):
            ptr = pointers[at]
            if ptr:
                if ptr in seen:
                    continue
                seen.add(ptr)
            reads.append((start, ptr, meta(at)))

    def _above(self, collector: _Collector, context: _Context, key: int, tid: int, start: int, name: str,
               names: list[str], overload_id: int, scope_kind: int, sequence: int,
               inputs: Callable[..., list[Any]]) -> _Context:
        """An op above the nodes: a scope, a mark, a backward function, or a node. Its context."""
        scope, backward = context.scope, context.backward
        if name in _COMPILE_SCOPES:
            return _Context(scope, backward, None, True, [])
        if name.startswith(_COMPILED_CALL):
            graph = name[len(_COMPILED_CALL):].rstrip("# ")[:12]
            label = f"{backward or scope or 'compiled'} [graph {graph}]"
            node = _Node(start, start, tid, COMPILED_GRAPH_OP, "", label, schema.NO_STEP, context.compiled_inputs)
            self._open_nodes[key] = node
            return _Context("" if backward else scope, backward, node, False, [])
        compiled = inputs() if name in _COMPILED_FUNCTIONS else context.compiled_inputs
        if name.startswith(MODULE_MARK):
            scope = name[len(MODULE_MARK):]
        elif name.startswith(THREAD_MARK):
            collector.os_tids[tid] = tid  # the observer knows each thread's OS id
            return _Context(scope, backward, None, True, [])
        elif scope_kind == _BACKWARD_SCOPE:
            forward = collector.seq_scope.get(sequence) if sequence >= 0 else None
            backward = (forward or name) + " (backward)"
        elif name.startswith(_NODE_PREFIXES):
            overload = names[overload_id] if overload_id >= 0 else ""
            read: set[int] = set()
            node = _Node(start, start, tid, name, overload, backward or scope or name, schema.NO_STEP,
                         inputs(read), read_storages=read)
            self._open_nodes[key] = node
            if not backward and scope and sequence >= 0:
                collector.seq_scope.setdefault(sequence, scope)
            return _Context("" if backward else scope, backward, node, False, [])
        elif scope_kind == _USER_SCOPE and not name.startswith("##"):
            scope = name  # a record_function of the user's, e.g. Optimizer.step#SGD.step
            self._open_annotations[key] = (start, tid, name, -1)
        if not backward and scope and sequence >= 0:
            collector.seq_scope.setdefault(sequence, scope)
        return _Context(scope, backward, None, False, compiled)


class ObservedCut(NamedTuple):
    """What a window cut hands to the conversion: the drained rows, the op names so far (a list that
    only grows: a fork child sees those of its fork), and the step marks of the window."""

    window: ObservedWindow
    names: list[str]
    steps: list[tuple[int, int, int, int]]  # begin, end, step, OS tid
    user_steps: bool = True  # whether the steps are the user's (set by the recorder at the cut)


_CALIBRATION_OPS = 200  # per timing; 5 timings each way, alternated: about 2 ms, once per process


def calibrate_ops(torch: Any, observer: OpObserver, memory: bool) -> float:
    """What the observer adds to one op, in ns: a small op timed with the observer on and off,
    alternately, the fastest of each way. Runs before the recording starts; what the observer
    recorded here is drained and dropped. An estimate for the cost line (the ops' real inputs
    vary), checked against the measured overhead in bench/torch_overhead.py."""
    a, b = torch.ones(4), torch.ones(4)
    on: list[int] = []
    off: list[int] = []
    for _ in range(5):
        for timings in (on, off):
            if timings is on:
                observer.start(memory)
            started = time.perf_counter_ns()
            for _ in range(_CALIBRATION_OPS):
                torch.add(a, b)
            timings.append(time.perf_counter_ns() - started)
            if timings is on:
                observer.stop()
    observer.drain()  # the calibration's rows, dropped
    return max(0.0, (min(on) - min(off)) / _CALIBRATION_OPS)


class ObservedProfile:
    """The part of ``torch.profiler.profile`` that the recorder drives (enter, step, exit, one
    callback per window), on the op observer. Steps are numbered from 0 at enter, as the profiler's
    ``ProfilerStep#N`` marks are."""

    def __init__(self, torch: Any, observer: OpObserver, memory: bool,
                 on_window: Callable[[ObservedCut], None]) -> None:
        self._autograd_profiler = torch.autograd.profiler
        self._profiler_flag = False
        self._observer = observer
        self._memory = memory
        self._on_window = on_window
        self._step = 0
        self._begin = 0
        self._torch = torch

    def __enter__(self) -> "ObservedProfile":
        if self._observer.op_ns is None or os.getpid() != self._observer._pid:
            self._observer.op_ns = calibrate_ops(self._torch, self._observer, self._memory)
        self._observer.start(self._memory)
        # What torch's Python side checks before it marks its work with record functions, as under
        # a profiler: a compiled graph's call ("## Call CompiledFxGraph"), dynamo's compile scopes.
        self._profiler_flag = self._autograd_profiler._is_profiler_enabled
        self._autograd_profiler._set_is_profiler_enabled(True)
        self._begin = time.monotonic_ns()
        return self

    def _cut(self) -> ObservedCut:
        end = time.monotonic_ns()
        steps = [(self._begin, end, self._step, threading.get_native_id())]
        self._step += 1
        self._begin = end
        return ObservedCut(self._observer.drain(), self._observer.names, steps)

    def step(self) -> None:
        self._on_window(self._cut())

    def __exit__(self, *exc: object) -> None:
        self._observer.stop()
        self._autograd_profiler._set_is_profiler_enabled(self._profiler_flag)
        self._on_window(self._cut())
