"""PyTorch source: every aten op, exact tensor edges, memory and GPU activity, into a dfcompass trace.

Mechanism, chosen by measurement (docs/pytorch.md, ``make bench``): torch.profiler's C++ collection
with ``record_shapes`` and ``profile_memory``, turned into dfcompass events after each active window.

* **Nodes** are the outermost ``aten::`` ops (an op called from Python, not from another op),
  forward, backward and optimizer alike, with input shapes and dtypes.
* **Edges are exact.** A tensor is known by its storage pointer, which views share (not by the
  profiler's TensorID, which is one for every tensor that ever had a null data pointer). An op
  *writes* a tensor when the tensor's storage is allocated inside the op
  and survives it, or when the op's schema marks that argument as written (in-place ops,
  ``out=``). A consumer links to the last writer of each tensor it reads: views add no edge,
  in-place ops become the new writer, and edges always point forward in time, so no cycles.
  Backward ops link to the saved forward tensors they read, by the same rule.
* **Module scope** comes from global ``nn.Module`` hooks that open a cheap C++ record function per
  forward call; backward ops take the scope of their forward op (autograd sequence number).
* **Collectives**: ``c10d::`` ops (all_reduce, broadcast, barrier, send/recv...) are nodes with a
  ``dfc:collective`` event: kind, bytes, and ``seq``, the op's place in this process's issue
  order, which is the same on every rank (ranks must issue collectives in one order). The
  profiler does not name the process group, so ``group`` is empty and ``seq`` counts the
  collectives of all groups together. The backend's communication spans (``gloo:*`` on its worker
  threads) are nodes too. ``dfc:process_rank`` gives rank, world size and backend once
  ``torch.distributed`` is initialised.
* **Memory**: every allocation and free with bytes in use per device.
* **GPU** (when CUDA is available): runtime API calls, kernels, memcpy and memset on their
  (device, stream), joined by correlation id.

torch is imported lazily: the rest of ``tracer`` still needs only the standard library.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tracer import schema
from tracer.batch import Batch
from tracer.collectives import collective_kind
from tracer.copy_kinds import copy_ends, copy_kind_of
from tracer.importers.kineto_convert import kernel_config, kernel_dims
from tracer.importers.kineto_source import U32_MAX, U64_MAX, as_int, unsigned
from tracer.session import Session, active_session
from tracer.torch_foreign import ForeignProfilers

MODULE_MARK = "dfc.module::"
THREAD_MARK = "dfc.thread::"
_STEP_MARK = "ProfilerStep#"
# Ops that become nodes: aten ops, c10d collectives (on the calling thread) and the backend's
# own communication spans (gloo's worker threads, NCCL's record functions).
_NODE_PREFIXES = ("aten::", "c10d::", "gloo:", "nccl:")
_MAX_SEQ_SCOPES = 200_000
# torch.compile: dynamo and inductor compiling a graph (record functions around the work, whose
# aten ops run on fake tensors: no data flows), and a compiled graph's call, the node that stands
# for the kernels inductor generated (the profiler sees none of the ops they fused).
_COMPILE_SCOPES = frozenset({"dynamo", "entire_frame_compile", "entire_backward_compile", "compile_fx_inner",
                             "backend_compile"})
_COMPILED_CALL = "## Call CompiledFxGraph "
COMPILED_GRAPH_OP = "inductor::compiled_graph"
# The autograd functions that run a compiled graph: the forward one lists the graph's inputs.
_COMPILED_FUNCTIONS = ("CompiledFunction", "CompiledFunctionBackward")


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"dfcompass's PyTorch source needs torch ({exc}); install torch==2.13.0") from None
    return torch


# Lines that torch writes on stderr at every profiler start and stop; with one window per step
# they would flood the program's stderr.
_KINETO_NOISE = (b"USDT:", b"Memory block of unknown size was allocated before the profiling started")


@contextlib.contextmanager
def _kineto_log_filtered() -> Iterator[None]:
    """Hold back torch's per-window log lines on stderr (fd 2); pass every other line on."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().splitlines(keepends=True)
                    if not any(noise in line for noise in _KINETO_NOISE)]
            if kept:
                os.write(2, b"".join(kept))


def _compiling() -> bool:
    """Whether dynamo is tracing this call into a graph (torch.compile). Dynamo folds this test to
    True while it traces, so a hook that returns on it adds nothing to the graph and no graph
    break, and ``fullgraph=True`` still holds; at run time it is False and costs a call."""
    return _is_compiling()


def _never_compiling() -> bool:
    return False


_is_compiling: Callable[[], bool] = _never_compiling


def _bind_compiling(torch: Any) -> None:
    global _is_compiling
    compiler = getattr(torch, "compiler", None)
    _is_compiling = getattr(compiler, "is_compiling", _never_compiling)


class _ModuleScopes:
    """Global module hooks: each forward call becomes a ``dfc.module::<path>`` record function."""

    def __init__(self, torch: Any, on_outermost: Callable[[Any], None] | None = None, record: bool = True) -> None:
        _bind_compiling(torch)
        self._torch = torch
        self._record = torch._C._profiler._RecordFunctionFast
        self._on_outermost = on_outermost  # called before an outermost forward opens its scope
        self._recording = record
        self._names: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._roots: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._local = threading.local()
        self._handles: list[Any] = []

    def install(self) -> None:
        hooks = self._torch.nn.modules.module
        self._handles = [hooks.register_module_forward_pre_hook(self._pre),
                         hooks.register_module_forward_hook(self._post, always_call=True)]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def path(self, module: Any, outermost: bool = False) -> str:
        """The module's dotted path under the outermost module that contains it when called."""
        if outermost and module not in self._roots:
            # Called from no other module: it names its whole tree, even submodules that ran
            # on their own earlier and were named as roots then.
            self._roots.add(module)
            self._name_tree(module, overwrite=True)
        name = self._names.get(module)
        if name is None:  # created after its root was named, or called under a foreign root
            self._name_tree(module, overwrite=False)
            name = self._names[module]
        return name

    def _name_tree(self, root: Any, overwrite: bool) -> None:
        label = type(getattr(root, "_orig_mod", root)).__name__  # torch.compile's wrapper: the model's own name
        for sub_name, sub in root.named_modules():
            if overwrite or sub not in self._names:
                self._names[sub] = f"{label}.{sub_name}" if sub_name else label

    def mark_thread(self) -> None:
        """Tell the profile this thread's OS id (the profiler numbers threads its own way)."""
        with self._record(THREAD_MARK + str(threading.get_native_id())):
            pass

    def _pre(self, module: Any, args: Any) -> None:
        if _compiling():  # dynamo traces global hooks into the graph: ours must leave it as it is
            return
        stack = getattr(self._local, "stack", None)
        if not stack and self._on_outermost is not None:
            self._on_outermost(module)  # no scope of ours is open here: a point where a window may end
        if not self._recording:
            return
        if stack is None:
            stack = self._local.stack = []
            self.mark_thread()
        scope = self._record(MODULE_MARK + self.path(module, outermost=not stack))
        scope.__enter__()
        stack.append(scope)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self._recording or _compiling():
            return
        stack = getattr(self._local, "stack", None)
        if stack:
            stack.pop().__exit__(None, None, None)
            if not stack:
                self._mark_backward_thread(output)

    def _mark_backward_thread(self, output: Any) -> None:
        """Have the thread that runs this output's backward tell its OS id too: with CUDA tensors
        backward runs on autograd's own device thread, which no forward ever runs on."""
        values = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else (output,)
        for value in values:
            if isinstance(value, self._torch.Tensor) and value.grad_fn is not None:
                if value.device.type != "cpu":  # a CPU backward runs on the calling thread, already told
                    value.register_hook(self._on_backward)
                return

    def _on_backward(self, grad: Any) -> None:
        self.mark_thread()


_DATA_LOADER_FILE = os.path.join("torch", "utils", "data", "dataloader.py")


def _may_end_window_at(module: Any) -> bool:
    """Whether an outermost forward of `module` may end a profiling window. Not a module without
    parameters (a torchvision transform such as Normalize), and not inside a DataLoader's fetch:
    the loader's own record_function is open there, and stopping the profiler under it crashed
    torch (a segfault in pytorch/examples' MNIST, one run in two)."""
    if next(module.parameters(), None) is None:
        return False
    frame: Any = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            return True
        if frame.f_code.co_filename.endswith(_DATA_LOADER_FILE):
            return False
        frame = frame.f_back
    return True


@dataclass
class _Node:
    start: int
    end: int
    ptid: int  # the profiler's thread number
    op: str
    overload: str
    name: str
    step: int
    inputs: list[Any]
    allocations: dict[int, list[int]] = field(default_factory=dict)  # allocation id -> [tensor id, net bytes, ptr, time of its last allocation]
    # Tensors the op's inner ops read, with when: the profiler describes no tensor inside a list of
    # optional tensors (index's and index_put_'s indices), but the inner ops that use them get them.
    inner_reads: list[tuple[int, Any]] = field(default_factory=list)
    sparse_built: list[Any] = field(default_factory=list)  # value dtypes of sparse tensors built inside
    device: str = "cpu"


class _Collector:
    """Walks one profile's event tree into nodes, memory events, steps and thread names.

    `os_tids` and `seq_scope` are passed in to outlive the window: a thread announces its OS id
    once, and a backward op may run a window after its forward op.
    `step_marks`: whether ``ProfilerStep#N`` marks are the user's steps (False when the recorder
    ends windows itself; the marks are then only its window boundaries).
    """

    def __init__(self, torch: Any, os_tids: dict[int, int] | None = None,
                 seq_scope: dict[int, str] | None = None, step_marks: bool = True) -> None:
        profiler = torch._C._profiler
        self.torch_op = profiler._EventType.TorchOp
        self.allocation = profiler._EventType.Allocation
        self.backward = profiler.RecordScope.BACKWARD_FUNCTION
        self.user_scope = profiler.RecordScope.USER_SCOPE
        self.nodes: list[_Node] = []
        self.memory: list[tuple[int, int, str, int, int, int]] = []  # ts, ptid, device, ptr, bytes, total
        self.steps: list[tuple[int, int, int, int]] = []  # begin, end, step, ptid
        self.os_tids: dict[int, int] = {} if os_tids is None else os_tids
        self.seq_scope: dict[int, str] = {} if seq_scope is None else seq_scope  # autograd seq -> forward scope
        self.step_marks = step_marks
        self.compiled_inputs: list[Any] = []  # the inputs of the compiled graph being run (CompiledFunction)
        # The program's record_function scopes (and torch's own: Optimizer.step#..., the DataLoader's
        # enumerate(DataLoader)#...__next__, whose time is the step's wait for data): begin, end, ptid, name
        self.annotations: list[tuple[int, int, int, str]] = []

    def walk(self, event: Any, scope: str, step: int, backward: str) -> None:
        """Above the outermost aten ops. `backward`: the scope label of the backward function
        being run, or "" in forward."""
        tag = event.tag
        if tag == self.torch_op:
            name: str = event.name
            extra = event.extra_fields
            if name in _COMPILE_SCOPES:
                return  # compile time: its ops trace fake tensors
            if name.startswith(_COMPILED_CALL):
                self._compiled_call(event, scope, step, backward)
                return
            if name in _COMPILED_FUNCTIONS:
                self.compiled_inputs = list(extra.inputs)
            if name.startswith(MODULE_MARK):
                scope = name[len(MODULE_MARK):]
            elif name.startswith(THREAD_MARK):
                self.os_tids[event.start_tid] = int(name[len(THREAD_MARK):])
                return
            elif name.startswith(_STEP_MARK):
                if self.step_marks:
                    step = int(name[len(_STEP_MARK):])
                    self.steps.append((event.start_time_ns, event.end_time_ns, step, event.start_tid))
            elif extra.scope == self.backward:
                forward = self.seq_scope.get(extra.sequence_number) if extra.sequence_number >= 0 else None
                backward = (forward or name) + " (backward)"
            elif name.startswith(_NODE_PREFIXES):
                node = _Node(event.start_time_ns, event.end_time_ns, event.start_tid, name,
                             event.overload_name, backward or scope or name, step, list(extra.inputs))
                self.nodes.append(node)
                if not backward and scope and extra.sequence_number >= 0:
                    self.seq_scope.setdefault(extra.sequence_number, scope)
                self._inside(event, node, "" if backward else scope)
                return
            elif extra.scope == self.user_scope and not name.startswith("##"):
                scope = name  # a record_function of the user's, e.g. Optimizer.step#SGD.step
                self.annotations.append((event.start_time_ns, event.end_time_ns, event.start_tid, name))
            if not backward and scope and extra.sequence_number >= 0:
                self.seq_scope.setdefault(extra.sequence_number, scope)
        elif tag == self.allocation:
            self._allocation(event, None)
        for child in event.children:
            self.walk(child, scope, step, backward)

    def _compiled_call(self, event: Any, scope: str, step: int, backward: str) -> None:
        """A compiled graph's call: one node that reads the graph's inputs (those its autograd
        function lists; else what its inner aten ops read) and writes the buffers it allocates
        and keeps. The aten ops inside (inductor's extern kernels: mm, convolution) are its inner ops."""
        key = event.name[len(_COMPILED_CALL):].rstrip("# ")[:12]
        label = f"{backward or scope or 'compiled'} [graph {key}]"
        node = _Node(event.start_time_ns, event.end_time_ns, event.start_tid, COMPILED_GRAPH_OP, "", label, step,
                     self.compiled_inputs)
        self.compiled_inputs = []
        self.nodes.append(node)
        self._inside(event, node, "" if backward else scope)

    def _inside(self, event: Any, node: _Node, forward_scope: str) -> None:
        """Below a node, in time order: its allocations, and (in forward) the autograd sequence
        numbers of its inner ops, whose backward functions take the node's scope."""
        allocation, torch_op, seq_scope = self.allocation, self.torch_op, self.seq_scope
        stack = event.children[::-1]
        while stack:
            child = stack.pop()
            if child.tag == allocation:
                self._allocation(child, node)
                continue
            if child.tag == torch_op:  # not a runtime call (Kineto): those have no sequence or inputs
                extra = child.extra_fields
                if forward_scope and extra.sequence_number >= 0:
                    seq_scope.setdefault(extra.sequence_number, forward_scope)
                at = child.start_time_ns
                metas = [meta for value in extra.inputs for meta in _tensors(value)]
                node.inner_reads += [(at, meta) for meta in metas]
                if child.name in _SPARSE_BUILDERS and metas:
                    node.sparse_built.append(metas[-1].dtype)  # the values tensor comes last
            children = child.children
            if children:
                stack += children[::-1]

    def _allocation(self, event: Any, node: _Node | None) -> None:
        extra = event.extra_fields
        device = str(extra.device)
        size = extra.alloc_size
        self.memory.append((event.start_time_ns, event.start_tid, device, extra.ptr, size, extra.total_allocated))
        if node is not None and extra.allocation_id is not None:
            entry = node.allocations.setdefault(extra.allocation_id, [extra.id, 0, extra.ptr, 0])
            entry[1] += size
            if size > 0:
                entry[3] = event.start_time_ns  # when: a buffer freed earlier in the op may have had this address
                node.device = device

    def steps_by_time(self) -> None:
        """Give ops outside every step tree the step whose window contains their start.

        Ops of inter-op pool threads (``torch.jit.fork``) and of other threads are roots of their
        own trees, so :meth:`walk` cannot reach them from the ``ProfilerStep#N`` slice of the thread
        that marked the step; they still ran in that step. NO_STEP stays only outside every window.
        """
        windows = sorted((begin, end, step) for begin, end, step, _ in self.steps)
        begins = [w[0] for w in windows]
        marking = {ptid for *_, ptid in self.steps}
        for node in self.nodes:
            # On another thread than the one that marked the steps, the tree is no guide: torch
            # put all of CUDA autograd's device-thread ops under the first step's mark (torch 2.11).
            if node.step != schema.NO_STEP and node.ptid in marking:
                continue
            node.step = schema.NO_STEP
            at = bisect.bisect_right(begins, node.start) - 1  # the last window begun by the op's start
            if at >= 0 and node.start <= windows[at][1]:
                node.step = windows[at][2]


# Ops handed a new tensor by torch.tensor / as_tensor: made by an op just before (Python data) or
# outside any op (numpy's buffer).
FRESH_INPUT_OPS = frozenset({"aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"})


class _Writes:
    """Which arguments an op writes, from its schema (cached)."""

    def __init__(self, torch: Any) -> None:
        self._schemas = torch._C._jit_get_schemas_for_operator
        self._cache: dict[tuple[str, str, int], tuple[int, ...]] = {}

    def __call__(self, op: str, overload: str, arity: int) -> tuple[int, ...]:
        key = (op, overload, arity)
        found = self._cache.get(key)
        if found is None:
            try:
                schemas = self._schemas(op)
            except RuntimeError:
                schemas = []
            exact = [s for s in schemas if s.overload_name == overload]
            candidates = exact or [s for s in schemas if len(s.arguments) == arity]
            found = tuple(sorted({i for s in candidates for i, a in enumerate(s.arguments)
                                  if a.alias_info is not None and a.alias_info.is_write}))
            self._cache[key] = found
        return found


def _made_outside_ops(writes: dict[int, "_StorageWrites"], frees: dict[int, list[int]], at: int,
                      metas: list[Any], fresh: set[int]) -> list[int]:
    """`torch.tensor` and `as_tensor` hand `lift_fresh` a new tensor: the storages of those that
    no op wrote (numpy's buffers). A buffer whose last writer took it so is numpy's too (numpy
    frees and reuses its buffers unseen), so it is new again. `fresh`: the trace tensor ids of
    such writes."""
    made = []
    for meta in metas:
        ptr = meta.storage_data_ptr
        history = writes.get(ptr) if ptr else None
        found = history.last_at(at) if history is not None else None
        if ptr and (found is None or found[1][2] in fresh or _freed_between(frees.get(ptr), found[0], at)):
            made.append(ptr)
    return made


@dataclass
class _StorageWrites:
    """The writes of one storage address in time order."""

    times: list[int]
    entries: list[tuple[int, int, int]]  # (node id, device, trace tensor id)

    def last_at(self, at: int) -> tuple[int, tuple[int, int, int]] | None:
        """The last write dated at or before `at`: (time, entry)."""
        k = bisect.bisect_right(self.times, at)
        return (self.times[k - 1], self.entries[k - 1]) if k else None


def _record_write(writes: dict[int, _StorageWrites], ptr: int, at: int, entry: tuple[int, int, int]) -> None:
    history = writes.get(ptr)
    if history is None:
        writes[ptr] = _StorageWrites([at], [entry])
        return
    k = bisect.bisect_right(history.times, at)  # almost always the end
    history.times.insert(k, at)
    history.entries.insert(k, entry)


def _freed_between(frees: list[int] | None, after: float, before: float) -> bool:
    """Whether a storage freed at the times `frees` (sorted) was freed in (after, before]."""
    if not frees:
        return False
    at = bisect.bisect_right(frees, after)
    return at < len(frees) and frees[at] <= before


# Inner ops that build a sparse tensor from index and value tensors (their result is not seen).
_SPARSE_BUILDERS = frozenset({"aten::_sparse_coo_tensor_with_dims_and_tensors", "aten::_sparse_csr_tensor_unsafe",
                              "aten::_sparse_compressed_tensor_unsafe"})
_MAX_PENDING_SPARSE = 64
_MAX_REBOUND = 100_000


def _is_sparse(meta: Any) -> bool:
    return not meta.storage_data_ptr and "sparse" in str(getattr(meta, "layout", ""))


class _SparseTensors:
    """Who made each sparse tensor. A sparse tensor has no data pointer: it is known by its
    TensorImpl address. Its maker is the op whose inner ops use it first (``to_sparse`` coalesces
    its result, ``t`` reads its clone's values). An op that builds one and never shows it
    (``sparse_coo_tensor``, ``to``) is pending: the next sparse tensor of its value dtype read
    with no known maker is its result, the oldest builder first. (A sparse tensor made before
    recording and read after such a builder takes it as its maker: the profiler gives nothing
    to tell them apart.)"""

    def __init__(self) -> None:
        self.made: dict[int, tuple[int, tuple[int, int, int, int]]] = {}  # impl -> (time, (node, device, tensor, bytes))
        self.pending: list[tuple[int, Any, tuple[int, int, int, int]]] = []  # (time, dtype, entry)

    def maker(self, meta: Any, at: int) -> tuple[int, int, int, int] | None:
        known = self.made.get(meta.impl_ptr)
        if known is not None:
            return known[1]
        for index, (time, dtype, entry) in enumerate(self.pending):  # built first, read first
            if time < at and dtype == meta.dtype:
                del self.pending[index]
                self.made[meta.impl_ptr] = (time, entry)
                return entry
        return None

    def add(self, node: "_Node", own: set[int], entry: tuple[int, int, int, int]) -> None:
        inner = {meta.impl_ptr for _, meta in node.inner_reads if _is_sparse(meta)} - own
        for impl in inner:
            self.made[impl] = (node.start, entry)
        if node.sparse_built and not inner:
            self.pending += [(node.start, dtype, entry) for dtype in node.sparse_built]
            del self.pending[:-_MAX_PENDING_SPARSE]


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [v for v in value if hasattr(v, "storage_data_ptr")]
    return [value] if hasattr(value, "storage_data_ptr") else []


class TorchRecorder:
    """Record PyTorch execution into a dfcompass trace, like ``torch.profiler.profile``.

    ``with TorchRecorder("out/trace", wait=1, warmup=1, active=3) as rec:`` then call
    ``rec.step()`` after each step: steps in ``active`` windows are recorded (``repeat`` windows,
    0 = until the end). With ``active=None`` everything between enter and exit is recorded.
    Given a path, the recorder runs its own :class:`Session`; given a session (or with one
    already active), it records into it.

    Streaming: with ``active=None`` the profile is cut into windows that are converted and
    written while the program runs, so a killed program loses at most the window in progress.
    A window ends at each ``rec.step()``; without those calls, at the first outermost
    ``nn.Module`` forward (of a module with parameters, outside a DataLoader fetch) after an
    optimizer step, or after ``flush_interval`` seconds (checked at outermost forwards). Memory
    then holds one window's profiler events, not the run's.

    Threads: by default the profiler covers the thread that starts the recorder and the threads
    that inherit its state (autograd engine threads, ``at::launch``). ``all_threads=True`` adds
    every other Python thread, but torch 2.13 then reports no allocations, so that mode records
    ops without memory events and without tensor edges.
    """

    def __init__(self, trace: "str | Session | None" = None, *, wait: int = 0, warmup: int = 0,
                 active: int | None = None, repeat: int = 0, record_memory: bool = True,
                 record_modules: bool = True, cuda: bool | None = None, all_threads: bool = False,
                 flush_interval: float = 0.2, **session_options: Any) -> None:
        self._torch = _import_torch()
        self._own_session = isinstance(trace, str) or hasattr(trace, "__fspath__")
        self._session_arg = trace
        self._session_options = session_options  # for the Session made from a path (overwrite=...)
        self._schedule = (wait, warmup, active, repeat) if active is not None else None
        # torch 2.13 records allocations only without profile_all_threads, and edges need them.
        self._all_threads = all_threads
        self._record_memory = record_memory and not all_threads
        self._streaming = active is None
        self._flush_interval = flush_interval
        self._record_modules = record_modules
        self._scopes: _ModuleScopes | None = None
        # A fork child of a process that used CUDA cannot use it (torch raises on any CUDA call).
        usable = self._torch.cuda.is_available() and not self._torch.cuda._is_in_bad_fork()
        self._cuda = usable if cuda is None else cuda and usable
        self._writes = _Writes(self._torch)
        self._itemsize: dict[Any, int] = {}
        self._args_cache: dict[tuple[Any, ...], tuple[str, str]] = {}
        self._profiler: Any = None
        self._profiler_options: dict[str, Any] = {}
        self._foreign: ForeignProfilers | None = None  # the program's own profilers, which we step aside for
        self._optimizer_hook: Any = None
        self._owner_thread = 0
        self._user_steps = False  # rec.step() was called: windows follow the user's steps
        self._optimizer_stepped = False
        self._window_start = 0.0
        self._converting = False
        # Outlive one window: thread names, forward scopes, and each live tensor's last writer.
        self._os_tids: dict[int, int] = {}
        self._seq_scope: dict[int, str] = {}
        self._carried: dict[int, tuple[int, int, int]] = {}  # storage ptr -> (node id, device, trace tensor)
        self._fresh: set[int] = set()  # trace tensor ids of buffers made outside any op (_made_outside_ops)
        self._sparse = _SparseTensors()
        # TensorImpl address -> (time, writer) of a tensor given a storage in place, before its
        # first read shows which storage: what set_ binds comes from outside any op.
        self._rebound: dict[int, tuple[int, tuple[int, int, int], int]] = {}  # ... and the window it was in
        self._collectives = 0  # c10d ops issued so far: the next one's seq
        self._rank: tuple[int, int, str] | None = None  # rank, world size, backend, once distributed is up
        self._rank_written = False
        self._destroy_original: Any = None
        self.session: Session | None = None
        self.nodes_recorded = 0
        self.edges_recorded = 0
        self.windows_written = 0
        self.windows_lost = 0
        self._window_ops = 0  # op executions of the window being converted (lost with it on an error)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "TorchRecorder":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "TorchRecorder":
        torch = self._torch
        if self._own_session:
            # The thread settings go into the metadata: the roofline's thread advice reads them.
            options = dict(self._session_options)
            options["env"] = {"torch_num_threads": torch.get_num_threads(),
                              "torch_interop_threads": torch.get_num_interop_threads(), **options.get("env", {})}
            self.session = Session(self._session_arg, **options).start()  # type: ignore[arg-type]
        else:
            self.session = self._session_arg or active_session()  # type: ignore[assignment]
            if self.session is None:
                raise RuntimeError("TorchRecorder needs a trace path or an active dfcompass session")
        self.session.device("cpu")
        if self._cuda:
            for index in range(torch.cuda.device_count()):
                self.session.device(f"cuda:{index}", torch.cuda.get_device_name(index))
        profiler = torch.profiler
        activities = [profiler.ProfilerActivity.CPU] + ([profiler.ProfilerActivity.CUDA] if self._cuda else [])
        # Streaming is a schedule of one-step windows: each step() ends one and starts the next.
        wait, warmup, active, repeat = self._schedule or (0, 0, 1, 0)
        with warnings.catch_warnings():  # torch advises a warmup; with wait=warmup=0 we accept the cost
            warnings.filterwarnings("ignore", message=".*warmup.*")
            schedule = profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
        config = _experimental_config(torch, profile_all_threads=self._all_threads, capture_overload_names=True,
                                      enable_cuda_sync_events=self._cuda)
        self._profiler_options = dict(activities=activities, record_shapes=True, profile_memory=self._record_memory,
                                      schedule=schedule, on_trace_ready=self._convert, experimental_config=config)
        self._profiler = profiler.profile(**self._profiler_options)
        self._foreign = ForeignProfilers(torch, self._step_aside, self._come_back)
        self._foreign.install()
        if self._record_modules or self._streaming:
            self._scopes = _ModuleScopes(torch, self._at_outermost_forward if self._streaming else None,
                                         record=self._record_modules)
            self._scopes.install()
        if self._streaming:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._optimizer_hook = register_optimizer_step_post_hook(self._after_optimizer_step)
        self._watch_destroy()
        self._owner_thread = threading.get_ident()
        self._window_start = time.monotonic()
        with _kineto_log_filtered(), self._foreign.own():
            self._profiler.__enter__()
        if self._scopes is not None and self._record_modules:
            self._scopes.mark_thread()
        self.session.add_stop_hook(self.stop)  # a SIGTERM or exit that stops the session converts first
        return self

    def step(self) -> None:
        """End one step (as ``torch.profiler.profile.step``)."""
        self._user_steps = True
        self._end_window()

    def _end_window(self) -> None:
        if self._profiler is None or self._converting or self._foreign is None or self._foreign.active:
            return
        self._optimizer_stepped = False
        self._window_start = time.monotonic()
        assert self.session is not None
        with self.session.sigterm_deferred(), warnings.catch_warnings(), _kineto_log_filtered(), self._foreign.own():
            # "Profiler clears events at the end of each cycle": we convert each cycle as it ends.
            warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
            self._profiler.step()
        if self._scopes is not None and self._record_modules:
            self._scopes.mark_thread()

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # Inside Optimizer.step's own record function: ending the window here would close a
        # profile under an open scope. The next outermost forward ends it instead.
        self._optimizer_stepped = True

    def _at_outermost_forward(self, module: Any) -> None:
        if self._user_steps or threading.get_ident() != self._owner_thread:
            return  # the profiler is stopped and started only by the thread that started it
        due = self._optimizer_stepped or time.monotonic() - self._window_start >= self._flush_interval
        if due and _may_end_window_at(module):  # the frame walk only when a window is due
            self._end_window()

    def _step_aside(self) -> None:
        """The program starts a profiler of its own: end our window (its ops are converted) and
        stop ours until the program's stops. torch runs one profiler at a time."""
        if self._profiler is None or self._converting:
            return
        if self._foreign is not None and self._foreign.blocks == 1:
            print(f"dfcompass: process {os.getpid()}: the program started its own torch profiler; dfcompass "
                  "records no PyTorch op while it runs (they are in the program's own profile)", file=sys.stderr)
        profiler, self._profiler = self._profiler, None
        with _kineto_log_filtered():
            profiler.__exit__(None, None, None)

    def _come_back(self) -> None:
        """The program's profiler stopped: profile again, in a new window."""
        if self._profiler is not None or self.session is None or not self.session.active:
            return
        self._profiler = self._torch.profiler.profile(**self._profiler_options)
        self._window_start = time.monotonic()
        with _kineto_log_filtered():
            self._profiler.__enter__()
        if self._scopes is not None and self._record_modules:
            self._scopes.mark_thread()

    def stop(self) -> None:
        foreign, self._foreign = self._foreign, None
        if foreign is None:
            return  # never started, or stopped already
        foreign.remove()
        profiler, self._profiler = self._profiler, None  # None while stepped aside for the program's profiler
        if self.session is not None:
            self.session.discard_stop_hook(self.stop)
        try:
            # Not mid-conversion (a signal interrupted one: the profiler is mid-step).
            if profiler is not None and not self._converting:
                with _kineto_log_filtered():
                    profiler.__exit__(None, None, None)  # runs on_trace_ready for the last window
        finally:
            if self._scopes is not None:
                self._scopes.remove()
            if self._optimizer_hook is not None:
                self._optimizer_hook.remove()
                self._optimizer_hook = None
            self._unwatch_destroy()
            if self._own_session and self.session is not None:
                self.session.stop()

    # ------------------------------------------------------------------ conversion
    def _convert(self, prof: Any) -> None:
        """on_trace_ready: write one window. A failure loses that window, never the program."""
        try:
            self._convert_window(prof)
        except Exception as exc:  # the profiler calls this inside the user's step() or forward
            self.windows_lost += 1
            lost = max(1, self._window_ops)  # the window's op executions, when they were counted
            session = self.session
            if session is not None and session.trace is not None:  # shown as discarded events (dfcompass info)
                session.trace.stream(schema.BY_SHORT["node_begin"], f"torch-{threading.get_native_id()}").discard(lost)
            print(f"dfcompass: error: process {os.getpid()}: a PyTorch profile window ({lost} ops) was not "
                  f"recorded: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _convert_window(self, prof: Any) -> None:
        session = self.session
        if session is None or not session.active or session.trace is None:
            return
        self._converting = True
        self._window_ops = 0
        try:
            results = prof.profiler.kineto_results
            collector = _Collector(self._torch, self._os_tids, self._seq_scope,
                                   step_marks=self._user_steps or not self._streaming)
            for root in results.experimental_event_tree():
                collector.walk(root, "", schema.NO_STEP, "")
            self._window_ops = len(collector.nodes)
            collector.steps_by_time()
            batch = Batch(session, session.trace.origin_ts, self._clock_offset(session))
            self._note_rank()
            if self._rank is not None and not self._rank_written:
                self._write_rank(batch)
            self._write_nodes(batch, collector)
            if self._record_memory:
                self._write_memory(batch, collector)
            for begin, end, step, ptid in collector.steps:
                tid = collector.os_tids.get(ptid, ptid)
                batch.add("step_begin", f"torch-{tid}", begin, step, tid)
                batch.add("step_end", f"torch-{tid}", end, step, tid)
            if collector.annotations:
                cpu = batch.device("cpu")
                for begin, end, ptid, name in collector.annotations:
                    tid = collector.os_tids.get(ptid, ptid)
                    annotation = session.new_annotation_id()
                    batch.add("annotation_begin", f"torch-{tid}", begin, cpu, tid, annotation, name)
                    batch.add("annotation_end", f"torch-{tid}", end, cpu, tid, annotation)
            if self._cuda:
                self._write_gpu(batch, results.events(), collector)
            batch.flush()
            self.windows_written += 1
            if len(self._seq_scope) > _MAX_SEQ_SCOPES:  # a long run: keep the newest forward scopes
                for seq in sorted(self._seq_scope)[: len(self._seq_scope) // 2]:
                    del self._seq_scope[seq]
        finally:
            self._converting = False

    @staticmethod
    def _clock_offset(session: Session) -> int:
        # The profiler stamps events in ns since the Unix epoch; the trace clock is monotonic.
        return session.clock.offset_to_wall_ns()

    def _nbytes(self, meta: Any) -> int:
        size = self._itemsize.get(meta.dtype)
        if size is None:
            size = self._itemsize[meta.dtype] = self._torch.empty((), dtype=meta.dtype).element_size()
        count = 1
        for dim in meta.sizes:
            count *= dim
        return count * size

    def _write_nodes(self, batch: "Batch", collector: _Collector) -> None:
        """Nodes and their exact input edges; see the module docstring for the writer rule.

        A tensor is known by its storage pointer, not by the profiler's TensorID: the profiler gives
        one id to every tensor that ever had a null data pointer (empty and sparse tensors, and
        outputs made empty and then resized, such as arange's and randperm's), so ids would join
        unrelated ops. A write is an allocation inside the op that it outlives, or an argument the
        op's schema marks as written; a read takes the last write of its storage unless that storage
        was freed in between. A tensor with no data pointer (sparse, zero-size) has no identity
        here: it gets no edge rather than a false one. Writes carry over to the next window in
        ``self._carried``, unless the storage is freed before the read.
        """
        session = batch.session
        # storage ptr -> its writes in time order: (time, (node id, device, trace tensor id)). Nodes are
        # visited by start time, but a write is dated by its allocation, which may come later than
        # the start of an op on another thread that read the same address before it was reused.
        writes: dict[int, _StorageWrites] = {}
        # storage ptr -> times it was freed or allocated, in order: either ends what was written there
        # before (an allocation also where its free was not seen: in a gap between windows, or
        # on a thread the profiler does not cover).
        frees: dict[int, list[int]] = {}
        for ts, _ptid, _device, ptr, size, _total in collector.memory:
            if size:
                frees.setdefault(ptr, []).append(ts)
        for times in frees.values():
            times.sort()
        carried = self._carried
        for ptr, entry in carried.items():
            writes[ptr] = _StorageWrites([-1], [entry])  # written before this window
        for node in sorted(collector.nodes, key=lambda n: (n.start, n.ptid)):
            tid = collector.os_tids.get(node.ptid, node.ptid)
            key = f"torch-{tid}"
            tensors = [_tensors(v) for v in node.inputs]
            device_name = next((str(t[0].device) for t in tensors if t), node.device)
            device = batch.device(device_name)
            node_id = session.new_node_id()
            batch.add("node_begin", key, node.start, node_id, node.op, node.name, device, tid, node.step)
            batch.add("node_args", key, node.start, node_id, *self._args_text(tensors))
            kind = collective_kind(node.op)
            if kind is not None:
                self._write_collective(batch, key, node, node_id, kind, tensors)
            # A buffer made outside any op enters the graph at the op that takes it: read from no op.
            outside = _made_outside_ops(writes, frees, node.start, tensors[0], self._fresh) if (
                node.op in FRESH_INPUT_OPS and tensors) else []
            seen: set[int] = set(outside)
            # Its own inputs, read at its start; then its inner ops' inputs, read when those run
            # (a buffer freed and reused inside the op is then not taken for an input).
            reads = [(node.start, meta) for metas in tensors for meta in metas] + node.inner_reads
            own_sparse = {meta.impl_ptr for metas in tensors for meta in metas if _is_sparse(meta)}
            for at, meta in reads:
                ptr = meta.storage_data_ptr
                if not ptr and meta.impl_ptr in own_sparse and -meta.impl_ptr not in seen:
                    seen.add(-meta.impl_ptr)
                    made = self._sparse.maker(meta, at)
                    if made is not None:
                        batch.add("tensor_edge", key, node.start, made[0], node_id, made[2], made[3], made[1], device)
                        self.edges_recorded += 1
                    continue
                if not ptr or ptr in seen:
                    continue
                seen.add(ptr)
                history = writes.get(ptr)
                found = history.last_at(at) if history is not None else None
                if found is None or _freed_between(frees.get(ptr), found[0], at):
                    rebound = self._rebound.pop(meta.impl_ptr, None)
                    # TensorImpl addresses are reused once a window's events are gone: the next window at most.
                    if rebound is None or rebound[0] > at or self.windows_written - rebound[2] > 1:
                        continue
                    found = rebound[:2]
                    _record_write(writes, ptr, *found)  # the storage it was given is now known
                producer = found[1]
                batch.add("tensor_edge", key, node.start, producer[0], node_id, producer[2],
                          self._nbytes(meta), producer[1], device)
                self.edges_recorded += 1
            for ptr in outside:
                entry = (node_id, device, session.new_tensor_id())
                self._fresh.add(entry[2])
                _record_write(writes, ptr, node.start, entry)
            for _tensor_id, net_bytes, ptr, allocated_at in node.allocations.values():
                if net_bytes > 0 and ptr:  # allocated here and still alive: an output
                    _record_write(writes, ptr, allocated_at, (node_id, device, session.new_tensor_id()))
            if node.sparse_built or any(_is_sparse(meta) for _, meta in node.inner_reads):
                kept = sum(entry[1] for entry in node.allocations.values() if entry[1] > 0)  # indices + values
                self._sparse.add(node, own_sparse, (node_id, device, session.new_tensor_id(), kept))
            for index in self._writes(node.op, node.overload, len(node.inputs)):
                if index < len(node.inputs):
                    for meta in _tensors(node.inputs[index]):
                        if meta.storage_data_ptr:  # written in place: this op holds the new value
                            _record_write(writes, meta.storage_data_ptr, node.start,
                                          (node_id, device, session.new_tensor_id()))
                        elif node.op == "aten::set_":  # given a storage (torch.load rebuilds parameters so)
                            self._rebound[meta.impl_ptr] = (node.start, (node_id, device, session.new_tensor_id()),
                                                            self.windows_written)
            batch.add("node_end", key, node.end, node_id, device, tid)
            self.nodes_recorded += 1
        if len(self._rebound) > _MAX_REBOUND:  # never read: keep the newest
            for impl in list(self._rebound)[: len(self._rebound) // 2]:
                del self._rebound[impl]
        # What the next window may read: storages not freed since their last write here.
        carried.clear()
        for ptr, history in writes.items():
            if not _freed_between(frees.get(ptr), history.times[-1], float("inf")):
                carried[ptr] = history.entries[-1]
        self._fresh &= {entry[2] for entry in carried.values()}

    def _note_rank(self) -> None:
        """Keep this process's rank while torch.distributed is up: the window that holds the last
        collectives is often converted after destroy_process_group."""
        if self._rank is not None:
            return
        dist = getattr(self._torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            self._rank = (dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))

    def _watch_destroy(self) -> None:
        """Just before the program tears its process group down, note the rank and (streaming, on
        the owner thread) write the window so far: the job's collectives are then in the trace even
        if the teardown kills the process."""
        dist = getattr(self._torch, "distributed", None)
        if dist is None or not dist.is_available() or self._destroy_original is not None:
            return
        original = dist.destroy_process_group

        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            self._note_rank()
            if self._streaming and not self._user_steps and threading.get_ident() == self._owner_thread:
                self._end_window()
            return original(*args, **kwargs)

        self._destroy_original = original
        dist.destroy_process_group = destroy_process_group

    def _unwatch_destroy(self) -> None:
        if self._destroy_original is not None:
            self._torch.distributed.destroy_process_group = self._destroy_original
            self._destroy_original = None

    def _write_rank(self, batch: "Batch") -> None:
        """dfc:process_rank, once."""
        assert self._rank is not None
        rank, world, backend = self._rank
        local = os.environ.get("LOCAL_RANK", "")
        batch.add("process_rank", f"torch-{threading.get_native_id()}", time.time_ns(), rank,
                  int(local) if local.isdigit() else 0xFFFFFFFF, world, backend)
        self._rank_written = True

    def _write_collective(self, batch: "Batch", key: str, node: _Node, node_id: int, kind: str,
                          tensors: list[list[Any]]) -> None:
        payload = sum(self._nbytes(meta) for meta in tensors[0]) if tensors else 0
        rank, size = (self._rank[0], self._rank[1]) if self._rank is not None else (0xFFFFFFFF, 0)
        batch.add("collective", key, node.start, node_id, rank, kind, "", size, self._collectives, payload)
        self._collectives += 1

    def _args_text(self, tensors: list[list[Any]]) -> tuple[str, str]:
        """(shapes, dtypes) text of a node's inputs; cached, as steps repeat the same shapes."""
        firsts = [t[0] if t else None for t in tensors]
        key = tuple((tuple(t.sizes), t.dtype) if t is not None else None for t in firsts)
        found = self._args_cache.get(key)
        if found is None:
            shapes = str([list(k[0]) if k is not None else [] for k in key])
            dtypes = ",".join(str(k[1]).removeprefix("torch.") if k is not None else "" for k in key)
            found = self._args_cache[key] = (shapes, dtypes)
        return found

    def _write_memory(self, batch: "Batch", collector: _Collector) -> None:
        for ts, ptid, device_name, ptr, size, total in collector.memory:
            tid = collector.os_tids.get(ptid, ptid)
            device = batch.device(device_name)
            kind = "mem_alloc" if size > 0 else "mem_free"
            batch.add(kind, f"torch-{tid}", ts, device, ptr & 0xFFFFFFFFFFFFFFFF, abs(size), max(total, 0))

    def _write_gpu(self, batch: "Batch", events: Any, collector: _Collector) -> None:
        """Runtime and driver API calls, kernels, copies, memsets and syncs from Kineto's events.

        Kineto's event list also holds allocations (``[memory]``) and user annotations replayed on
        the GPU's streams with the GPU's device type: those are not GPU work and are left out.
        """
        cuda_type = self._torch.autograd.DeviceType.CUDA
        launched: set[int] = set()
        calls: list[tuple[int, int, int]] = []  # (tid, start, correlation id) of runtime calls
        gpu_events = []
        for event in events:
            activity = gpu_activity(event, cuda_type)
            if activity == "api":
                name, corr, start = event.name(), event.correlation_id(), event.start_ns()
                tid = collector.os_tids.get(event.start_thread_id(), event.start_thread_id())
                batch.add("api_enter", f"torch-api-{tid}", start, tid, name, corr)
                batch.add("api_exit", f"torch-api-{tid}", event.end_ns(), tid, name, corr)
                calls.append((tid, start, corr))
            elif activity:
                gpu_events.append((activity, event))
        copy_bytes = _CopyBytes(self, collector, calls)
        for activity, event in gpu_events:
            name, corr = event.name(), event.correlation_id()
            start, end = event.start_ns(), event.end_ns()
            meta = event_metadata(event)
            index = event.device_index()
            device = batch.device(f"cuda:{index}")
            queue = unsigned(meta.get("stream"), U32_MAX, event.device_resource_id() & 0xFFFFFFFF)
            key = f"torch-gpu{index}-q{queue}"
            if activity == "sync":
                waited = as_int(meta.get("wait_on_stream"))
                batch.add("sync_begin", f"torch-gpu{index}-sync", start, device, queue, corr,
                          str(meta.get("cuda_sync_kind", name))[:200],
                          waited if waited is not None and 0 <= waited < U32_MAX else U32_MAX,
                          unsigned(meta.get("wait_on_cuda_event_record_corr_id"), U64_MAX))
                batch.add("sync_end", f"torch-gpu{index}-sync", end, device, queue, corr)
                continue
            launched.add(corr)
            size = unsigned(meta.get("bytes"), U64_MAX, event.nbytes() if hasattr(event, "nbytes") else 0)
            if activity == "memcpy":
                size = size or copy_bytes(corr)
                kind = copy_kind_of(name)  # "HtoD pageable", "DtoD"... (tracer.copy_kinds)
                src, dst = (batch.device(side) for side in copy_ends(kind, f"cuda:{index}"))
                batch.add("memcpy_begin", key, start, device, queue, corr, size, kind, src, dst)
            elif activity == "memset":
                batch.add("memset_begin", key, start, device, queue, corr, size)
            else:
                batch.add("kernel_begin", key, start, device, queue, corr, name,
                          *kernel_dims(meta.get("grid")), *kernel_dims(meta.get("block")))
                config = kernel_config(meta)
                if config is not None:
                    batch.add("kernel_info", key, start, device, queue, corr, *config)
            batch.add(f"{activity}_end", key, end, device, queue, corr)
        for tid, start, corr in calls:  # the calls whose GPU work is in this window
            if corr in launched:
                batch.add("launch", f"torch-api-{tid}", start, tid, corr)


class _CopyBytes:
    """A copy's size where torch does not give it (torch < 2.13 has no Kineto metadata): the bytes
    of the first tensor of the outermost op around the runtime call that launched it (``to``,
    ``copy_``, ``item``: source and destination have the same size)."""

    def __init__(self, recorder: "TorchRecorder", collector: _Collector, calls: list[tuple[int, int, int]]) -> None:
        self._recorder, self._collector = recorder, collector
        self._calls = {corr: (tid, start) for tid, start, corr in calls}
        self._by_tid: dict[int, tuple[list[int], list[_Node]]] | None = None

    def __call__(self, corr: int) -> int:
        call = self._calls.get(corr)
        if call is None:
            return 0
        if self._by_tid is None:
            by_tid: dict[int, list[_Node]] = {}
            for node in self._collector.nodes:
                by_tid.setdefault(self._collector.os_tids.get(node.ptid, node.ptid), []).append(node)
            self._by_tid = {tid: ([n.start for n in nodes], nodes)
                            for tid, nodes in ((t, sorted(ns, key=lambda n: n.start)) for t, ns in by_tid.items())}
        tid, at = call
        starts, nodes = self._by_tid.get(tid, ([], []))
        index = bisect.bisect_right(starts, at) - 1
        if index < 0 or nodes[index].end < at:
            return 0
        for value in nodes[index].inputs:
            if hasattr(value, "sizes") and hasattr(value, "dtype"):
                return self._recorder._nbytes(value)
        return 0


_SYNC_NAMES = frozenset({"Event Sync", "Stream Sync", "Context Sync", "Stream Wait Event"})


def _experimental_config(torch: Any, **options: bool) -> Any:
    """The profiler's experimental config with the options this torch knows (an older one lacks
    overload names and CUDA sync events; without overload names, writes are not told per overload)."""
    while True:
        try:
            return torch._C._profiler._ExperimentalConfig(**options)
        except TypeError:
            if not options:
                raise
            options.popitem()


_GPU_ACTIVITIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "cuda_sync": "sync",
                   "cuda_runtime": "api", "cuda_driver": "api"}


def gpu_activity(event: Any, cuda_type: Any) -> str:
    """What a Kineto event is to us: kernel, memcpy, memset, sync, api, or "" (not GPU work).

    Uses the event's activity type where torch gives it; else its name and device type.
    """
    name = event.name()
    if hasattr(event, "activity_type"):
        activity = _GPU_ACTIVITIES.get(event.activity_type(), "")
        # Kineto names some driver records INVALID; a call launches work only with a correlation.
        if activity == "api" and (not name.startswith("cu") or not event.correlation_id()):
            return ""
        return activity
    if event.device_type() == cuda_type:
        if (name == "[memory]" or not event.correlation_id()  # GPU work always has a correlation id
                or (hasattr(event, "is_user_annotation") and event.is_user_annotation())):
            return ""
        if name in _SYNC_NAMES:  # CUPTI's synchronisation records (cuda_sync)
            return "sync"
        lower = name.lower()
        return "memcpy" if lower.startswith("memcpy") else "memset" if lower.startswith("memset") else "kernel"
    return "api" if event.correlation_id() and name.startswith("cu") else ""


def event_metadata(event: Any) -> dict[str, Any]:
    """A Kineto event's metadata (Kineto's ``"key": value, ...`` text), {} when it has none."""
    text = event.metadata_json().strip() if hasattr(event, "metadata_json") else ""
    if not text:
        return {}
    try:
        value = json.loads(text if text.startswith("{") else "{" + text + "}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
