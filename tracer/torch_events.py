"""PyTorch event tree: one profile window's events, collected into nodes, memory, steps and scopes.

* **Nodes** are the outermost ``aten::`` ops (an op called from Python, not from another op),
  forward, backward and optimizer alike, with input shapes and dtypes. ``c10d::`` collectives
  (all_reduce, broadcast, barrier, send/recv...) are nodes too, and so are the backend's
  communication spans (``gloo:*`` on its worker threads, NCCL's record functions).
* Each node's **scope** is the innermost ``dfc.module::`` scope around it
  (:mod:`tracer.torch_scopes`) or record function of the user's; backward ops take the scope of
  their forward op (autograd sequence number).
* Below a node: its allocations (what it writes, :mod:`tracer.torch_edges`) and its inner ops'
  inputs, read when those run.
* torch.compile: compile-time ops (fake tensors) are left out; a compiled graph's call is one node.

The collector only reads the profiler's objects; :mod:`tracer.torch_convert` writes what it holds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tracer import schema
from tracer.torch_scopes import MODULE_MARK, THREAD_MARK

_STEP_MARK = "ProfilerStep#"
# Ops that become nodes: aten ops, c10d collectives (on the calling thread) and the backend's
# own communication spans (gloo's worker threads, NCCL's record functions).
_NODE_PREFIXES = ("aten::", "c10d::", "gloo:", "nccl:")
# torch.compile: dynamo and inductor compiling a graph (record functions around the work, whose
# aten ops run on fake tensors: no data flows), and a compiled graph's call, the node that stands
# for the kernels inductor generated (the profiler sees none of the ops they fused).
_COMPILE_SCOPES = frozenset({"dynamo", "entire_frame_compile", "entire_backward_compile", "compile_fx_inner",
                             "backend_compile"})
_COMPILED_CALL = "## Call CompiledFxGraph "
COMPILED_GRAPH_OP = "inductor::compiled_graph"
# The autograd functions that run a compiled graph: the forward one lists the graph's inputs.
_COMPILED_FUNCTIONS = ("CompiledFunction", "CompiledFunctionBackward")

# Inner ops that build a sparse tensor from index and value tensors (their result is not seen).
_SPARSE_BUILDERS = frozenset({"aten::_sparse_coo_tensor_with_dims_and_tensors", "aten::_sparse_csr_tensor_unsafe",
                              "aten::_sparse_compressed_tensor_unsafe"})


# Runtime calls that replay a captured CUDA graph.
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "cudaGraphLaunch_v10000"})


def _tensors(value: Any) -> list[Any]:
    """The tensors (the profiler's tensor metadata) in one op input: a tensor, a list, or none."""
    if isinstance(value, list):
        return [v for v in value if hasattr(v, "storage_data_ptr")]
    return [value] if hasattr(value, "storage_data_ptr") else []


class InnerTensor(NamedTuple):
    """A tensor an inner op read, as tracer.native reads it: the attributes of the profiler's tensor
    metadata that the conversion uses."""

    storage_data_ptr: int
    impl_ptr: int
    dtype: Any
    sizes: tuple[int, ...]
    device: str
    layout: Any


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
    inner_reads: list[tuple[int, int, Any]] = field(default_factory=list)  # (time, storage ptr, tensor)
    read_storages: set[int] = field(default_factory=set)  # those read so far (the op observer keeps the first)
    sparse_built: list[Any] = field(default_factory=list)  # value dtypes of sparse tensors built inside
    device: str = "cpu"
    replays: bool = False  # it launched a CUDA graph (torch.compile's reduce-overhead): writes unseen
    predefined: bool = False  # its strings were defined in the window where it began (still open then)


class _Collector:
    """Walks one profile's event tree into nodes, memory events, steps and thread names.

    `os_tids` and `seq_scope` are passed in to outlive the window: a thread announces its OS id
    once, and a backward op may run a window after its forward op.
    `step_marks`: whether ``ProfilerStep#N`` marks are the user's steps (False when the recorder
    ends windows itself; the marks are then only its window boundaries).
    """

    def __init__(self, torch: Any, os_tids: dict[int, int] | None = None,
                 seq_scope: dict[int, str] | None = None, step_marks: bool = True, native: Any = None) -> None:
        profiler = torch._C._profiler
        self.torch_op = profiler._EventType.TorchOp
        self.allocation = profiler._EventType.Allocation
        self.backward = profiler.RecordScope.BACKWARD_FUNCTION
        self.user_scope = profiler.RecordScope.USER_SCOPE
        self.meta_type = profiler._TensorMetadata
        self.native = native  # tracer.native's profile_walk: the inside of each op read in C++ (same result)
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
        # Windows cut while ops run (the op observer's): annotations whose begin was written in an
        # earlier window end here, (end, ptid, annotation id); annotations still open are begun here,
        # (key, begin, ptid, name), their id kept for their end; nodes still open have their strings
        # defined here, at their start (a definition written later would go back in time).
        self.annotation_ends: list[tuple[int, int, int]] = []
        self.annotations_begun: list[tuple[int, int, int, str]] = []
        self.open_nodes: list[_Node] = []

    def walk(self, event: Any, scope: str, step: int, backward: str) -> None:
        """Above the outermost aten ops. `backward`: the scope label of the backward function
        being run, or "" in forward."""
        # Each attribute of the profiler's objects is a pybind call: each is read once, and only
        # where the branch taken needs it.
        tag = event.tag
        name = ""
        if tag == self.torch_op:
            name = event.name
            if name in _COMPILE_SCOPES:
                return  # compile time: its ops trace fake tensors
            if name.startswith(_COMPILED_CALL):
                self._compiled_call(event, scope, step, backward)
                return
            extra = event.extra_fields
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
            else:
                record_scope = extra.scope
                if record_scope == self.backward:
                    sequence = extra.sequence_number
                    forward = self.seq_scope.get(sequence) if sequence >= 0 else None
                    backward = (forward or name) + " (backward)"
                elif name.startswith(_NODE_PREFIXES):
                    node = _Node(event.start_time_ns, event.end_time_ns, event.start_tid, name,
                                 event.overload_name, backward or scope or name, step, list(extra.inputs))
                    self.nodes.append(node)
                    if not backward and scope:
                        sequence = extra.sequence_number
                        if sequence >= 0:
                            self.seq_scope.setdefault(sequence, scope)
                    if self.native is not None:
                        self._inside_native(event, node, "" if backward else scope)
                    else:
                        self._inside(event, node, "" if backward else scope)
                    return
                elif record_scope == self.user_scope and not name.startswith("##"):
                    scope = name  # a record_function of the user's, e.g. Optimizer.step#SGD.step
                    self.annotations.append((event.start_time_ns, event.end_time_ns, event.start_tid, name))
            if not backward and scope:
                sequence = extra.sequence_number
                if sequence >= 0:
                    self.seq_scope.setdefault(sequence, scope)
        elif tag == self.allocation:
            self._allocation(event, None)
        for child in event.children:
            self.walk(child, scope, step, backward)
        if name in _COMPILED_FUNCTIONS:
            self.compiled_inputs = []  # a function without a graph call of its own lends its inputs to none

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
        allocation, torch_op, seq_scope, meta_type = self.allocation, self.torch_op, self.seq_scope, self.meta_type
        reads = node.inner_reads
        stack = event.children[::-1]
        while stack:
            child = stack.pop()
            tag = child.tag
            if tag == allocation:
                self._allocation(child, node)
                continue
            if tag == torch_op:
                extra = child.extra_fields
                if forward_scope:
                    sequence = extra.sequence_number
                    if sequence >= 0:
                        seq_scope.setdefault(sequence, forward_scope)
                metas: list[Any] = []
                for value in extra.inputs:  # a tensor, a list (of tensors), or no tensor
                    kind = type(value)
                    if kind is meta_type:
                        metas.append(value)
                    elif kind is list:
                        metas += [v for v in value if type(v) is meta_type]
                if metas:
                    at = child.start_time_ns
                    reads += [(at, meta.storage_data_ptr, meta) for meta in metas]
                    if child.name in _SPARSE_BUILDERS:
                        node.sparse_built.append(metas[-1].dtype)  # the values tensor comes last
            elif child.name in GRAPH_LAUNCHES:  # a runtime call (Kineto): no sequence, no inputs
                node.replays = True  # a CUDA graph replay writes its outputs into its pool, unallocated
            children = child.children
            if children:
                stack += children[::-1]

    def _inside_native(self, event: Any, node: _Node, forward_scope: str) -> None:
        """:meth:`_inside`, read by tracer.native's profile_walk: each storage's first inner read
        only (a later one adds no edge: torch_convert skips a storage it has seen)."""
        allocations, reads, sequences, sparse_built, replays = self.native.inside(event, _SPARSE_BUILDERS,
                                                                                  GRAPH_LAUNCHES)
        for at, tid, device, ptr, size, total, allocation_id, tensor_id in allocations:
            self.memory.append((at, tid, device, ptr, size, total))
            if allocation_id is not None:
                self._node_allocation(node, allocation_id, tensor_id, ptr, size, at, device)
        if forward_scope:
            for sequence in sequences:
                self.seq_scope.setdefault(sequence, forward_scope)
        node.inner_reads += [(at, ptr, InnerTensor(ptr, impl, dtype, sizes, device, layout))
                             for at, ptr, impl, dtype, sizes, device, layout in reads]
        node.sparse_built += sparse_built
        node.replays = node.replays or replays

    @staticmethod
    def _node_allocation(node: _Node, allocation_id: int, tensor_id: Any, ptr: int, size: int, at: int,
                         device: str) -> None:
        entry = node.allocations.get(allocation_id)
        if entry is None:
            entry = node.allocations[allocation_id] = [tensor_id, 0, ptr, 0]
        entry[1] += size
        if size > 0:
            entry[3] = at  # when: a buffer freed earlier in the op may have had this address
            node.device = device

    def _allocation(self, event: Any, node: _Node | None) -> None:
        extra = event.extra_fields
        device = str(extra.device)
        size, ptr, at = extra.alloc_size, extra.ptr, event.start_time_ns
        self.memory.append((at, event.start_tid, device, ptr, size, extra.total_allocated))
        if node is not None:
            allocation_id = extra.allocation_id
            if allocation_id is not None:
                self._node_allocation(node, allocation_id, extra.id, ptr, size, at, device)

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

