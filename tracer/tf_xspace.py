"""TensorFlow profiles (XSpace protobuf) into dfcompass events: the conversion, without TensorFlow.

The TF profiler (``tf.profiler.experimental``) writes one ``XSpace``: planes (``/host:CPU``, one
``/device:GPU:N`` per GPU, ``/host:CUPTI`` for the driver calls), each with lines (threads, GPU
streams) of timed events whose names and stats live in the plane's metadata tables. What becomes
what (docs/tensorflow.md):

* a **graph op** (an event named ``<node>:<OpType>`` inside an ``ExecutorState::Process`` whose
  ``id`` stat is the function run) is a node, named after its node in the graph that ran;
* an **eager op** (``EagerExecute`` with stat ``eager_op``) is a node spanning its kernel run
  (``KernelAndDeviceFunc::Run``), and an annotation ``tf.eager <op>`` spanning the whole dispatch,
  so the host cost around the kernel is in the trace (``eager_overhead`` reads both);
* a **tf.function call** (``EagerExecute`` with ``is_func``) is an annotation ``tf.function <name>``;
* GPU kernels, copies and memsets (events with ``correlation_id`` on a GPU plane) go on their
  (device, stream) queues, and the driver calls with the same correlation id are API calls;
* ``MemoryAllocation`` / ``MemoryDeallocation`` events, where the allocator emits them (TF's BFC
  allocator does; the default CPU allocator emits none), are allocations and frees.

Edges come from the graph each function run executed (:class:`GraphSet`): the post-optimisation
partition graphs from the runtime's run metadata, whose node names are the profile's and whose
nodes carry their placed devices. The bytes of a tensor come from :class:`TensorSizes` where its
shape is static.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

from tracer.batch import Batch
from tracer.copy_kinds import copy_ends, copy_kind_of
from tracer.xspace_reading import (CUPTI_PLANE, GPU_PLANE_PREFIX, HOST_PLANE, device_name, is_graph_op,
                                   line_events, profile_start_ns, stat_names, stat_values, thread_id)

_U32 = 0xFFFFFFFF
_SIZE = re.compile(r"\bsize:(\d+)")
_COPY_ENDS = re.compile(r"kind_src:(\w+) kind_dst:(\w+)")
_TF_COPY = {"H2D": "HtoD", "D2H": "DtoH", "D2D": "DtoD", "H2H": "HtoH", "P2P": "PtoP"}
_GPU_ALLOCATOR = re.compile(r"GPU_(\d+)")
# What _host_line does with each host event it reads, by name (every other one, ThreadpoolListener::*
# and the like, is skipped); graph ops (``<node>:<OpType>``) are _GRAPH_OP.
_PROCESS, _EAGER, _FUNCTION_RUN, _KERNEL_RUN, _DONE, _MEMORY, _GRAPH_OP = range(7)
_HOST_ROLES = {"ExecutorState::Process": _PROCESS, "EagerExecute": _EAGER, "FunctionRun": _FUNCTION_RUN,
               "KernelAndDeviceFunc::Run": _KERNEL_RUN, "ExecutorDoneCallback": _DONE,
               "MemoryAllocation": _MEMORY, "MemoryDeallocation": _MEMORY}
_RUN_ROLES = frozenset({_PROCESS, _FUNCTION_RUN, _DONE})  # events with a function run's id: they span the run
_UNSEEN = object()
_START_THEN_LONGEST = operator.itemgetter(0, 1)  # (start, -end)
_END = operator.attrgetter("end")


def _host_role(meta: Any) -> tuple[int, str, str, Any] | None:
    """A host event kind's role, its name (a graph op's: its node's), op type and stats; None: skipped."""
    role = _HOST_ROLES.get(meta.name)
    if role is not None:
        return role, meta.name, meta.display_name, meta.stats
    if is_graph_op(meta.name, meta.display_name):
        return _GRAPH_OP, meta.name[: -len(meta.display_name) - 1], meta.display_name, meta.stats
    return None


class GraphSet:
    """The graphs that ran: one ``{node name: NodeDef}`` per function graph (its partitions merged).

    A function run is matched to the smallest graph that holds every node name it executed: names
    are unique within one function graph, and a run of a function whose graph the runtime did
    not give (a nested call it did not inline) must not borrow its caller's.
    """

    def __init__(self, function_graphs: Iterable[Iterable[Any]] = ()) -> None:
        self.graphs: list[dict[str, Any]] = []
        self._cache: dict[Any, dict[str, Any] | None] = {}
        self._inputs: dict[tuple[int, str], tuple[tuple[str, int, bool], ...]] = {}
        self.add(function_graphs)

    def add(self, function_graphs: Iterable[Iterable[Any]]) -> None:
        """More graphs (the runtime reports a function's graphs once, when it instantiates it)."""
        for partitions in function_graphs:
            nodes: dict[str, Any] = {}
            for partition in partitions:
                for node in partition.node:
                    nodes[node.name] = node
            if nodes:
                self.graphs.append(nodes)
                self._cache.clear()  # a run that matched nothing, or a larger graph, may match this one

    def match(self, names: frozenset[str], function: str = "") -> dict[str, Any] | None:
        key = function or names
        if key in self._cache:
            return self._cache[key]
        best: dict[str, Any] | None = None
        for graph in self.graphs:
            if names and all(n in graph for n in names) and (best is None or len(graph) < len(best)):
                best = graph
        self._cache[key] = best
        return best

    def inputs(self, graph: Mapping[str, Any], name: str) -> tuple[tuple[str, int, bool], ...] | None:
        """Node `name`'s inputs in `graph` (one of :attr:`graphs`) as (producer, output slot, control?),
        parsed once: every run of a function reads the same NodeDefs."""
        key = (id(graph), name)
        found = self._inputs.get(key)
        if found is None:
            node = graph.get(name)
            if node is None:
                return None
            parsed = []
            for text in node.input:
                source, _, slot = text.lstrip("^").partition(":")
                parsed.append((source, int(slot) if slot.isdigit() else 0, text.startswith("^")))
            found = self._inputs[key] = tuple(parsed)
        return found


class TensorSizes(Protocol):
    def nbytes(self, function: str, node: str, slot: int) -> int:
        """Bytes of output `slot` of `node` in the function run `function`; 0 when unknown."""
        ...


class NoSizes:
    def nbytes(self, function: str, node: str, slot: int) -> int:
        return 0


@dataclass(slots=True)
class _Exec:
    node_id: int
    name: str
    op: str
    start: int
    end: int
    tid: int
    call: int | None  # the function run (ExecutorState::Process id); None for eager ops
    graph_op: bool = False  # a graph op (its run may be found by time: see _runs_by_time)
    iteration: int | None = None  # the while-loop iteration (iter_num of its executor frame)
    device: str = "cpu"
    step: int = 0xFFFFFFFF


@dataclass(slots=True)
class _Frame:
    end: int
    kind: str  # process | eager | function
    value: Any = None
    iteration: int | None = None
    exec_: _Exec | None = None


@dataclass
class Converted:
    nodes: int = 0
    edges: int = 0
    control_edges: int = 0
    eager_ops: int = 0
    graph_ops: int = 0
    function_calls: int = 0
    gpu_ops: int = 0
    unmatched_runs: int = 0  # function runs with no graph in the run metadata: nodes without edges
    devices: set[str] = field(default_factory=set)
    windows: int = 0  # the profiles converted (TFRecorder cuts one at a step end, see tracer/tf_source.py)
    windows_lost: int = 0  # cut windows whose conversion failed

    def add(self, other: "Converted") -> None:
        """Count `other` (a later window's) in."""
        for name in ("nodes", "edges", "control_edges", "eager_ops", "graph_ops", "function_calls", "gpu_ops",
                     "unmatched_runs", "windows", "windows_lost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.devices |= other.devices


class XSpaceConverter:
    """Writes one XSpace into a :class:`Batch`; the session's counters number nodes, tensors and
    annotations, and `steps` ((begin, end, step), epoch ns) give each node its step."""

    def __init__(self, batch: Batch, graphs: GraphSet, sizes: TensorSizes, new_node_id: Callable[[], int],
                 new_tensor_id: Callable[[], int], steps: list[tuple[int, int, int]] | None = None, pid: int = 0,
                 new_annotation_id: Callable[[], int] | None = None) -> None:
        self.batch = batch
        self.pid = pid
        self.graphs = graphs
        self.sizes = sizes
        self.new_node_id = new_node_id
        self.new_tensor_id = new_tensor_id
        self.steps = sorted(steps or [])
        self._step_begins = [begin for begin, _, _ in self.steps]
        self.result = Converted()
        self._execs: list[_Exec] = []
        self._call_function: dict[int, str] = {}  # function run id -> the tf.function that ran
        self._run_span: dict[int, tuple[int, int]] = {}  # function run id -> its executor events' extent
        self.new_annotation_id = new_annotation_id or itertools.count(1).__next__
        self.origin = 0

    # ------------------------------------------------------------------ entry
    def convert(self, space: Any) -> Converted:
        self.origin = profile_start_ns(space)
        launched: set[int] = set()
        for plane in space.planes:
            if plane.name == HOST_PLANE:
                names, roles = stat_names(plane), dict[int, Any]()
                for line in plane.lines:
                    self._host_line(plane, line, names, roles)
            elif plane.name.startswith(GPU_PLANE_PREFIX):
                launched |= self._gpu_plane(plane)
        for plane in space.planes:
            if plane.name == CUPTI_PLANE:
                self._driver_calls(plane, launched)
        self._write_nodes_and_edges()
        return self.result

    # ------------------------------------------------------------------ host threads
    def _host_line(self, plane: Any, line: Any, names: Mapping[int, str], roles: dict[int, Any]) -> None:
        """One host thread's events, in start order (longest first at equal starts: parents first).
        `roles`: the plane's event kinds seen so far (:func:`_host_role`, found once per kind)."""
        tid = thread_id(line)
        key = f"tf-{tid}"
        origin = self.origin + line.timestamp_ns
        if len(line.events):
            self.batch.add("thread_info", key, origin, self.pid, tid, line.display_name or line.name)
        metadata = plane.event_metadata
        kept = []
        for event in line.events:  # 3-5 of 6 events are skipped here: this loop is the hot one
            meta_id = event.metadata_id
            role = roles.get(meta_id, _UNSEEN)
            if role is _UNSEEN:
                role = roles[meta_id] = _host_role(metadata[meta_id])
            if role is not None:
                start_ps = origin * 1000 + event.offset_ps
                kept.append((start_ps // 1000, -((start_ps + event.duration_ps) // 1000), role, event))
        kept.sort(key=_START_THEN_LONGEST)
        stack: list[_Frame] = []
        processes: list[_Frame] = []  # the executor frames in `stack`, innermost last
        functions: list[_Frame] = []  # the tf.function calls in `stack`
        execs, graph_ops = self._execs, 0
        for start, minus_end, (role, name, op, kind_stats), event in kept:
            end = -minus_end
            while stack and stack[-1].end <= start:
                popped = stack.pop()
                if popped.kind == "process":
                    processes.pop()
                elif popped.kind == "function":
                    functions.pop()
            if role == _GRAPH_OP:
                frame = processes[-1] if processes else None
                execs.append(_Exec(0, name, op, start, end, tid, frame.value if frame else None, True,
                                   frame.iteration if frame else None))
                graph_ops += 1
                continue
            stats: dict[str, Any] = {}
            stat_values(names, kind_stats, stats)
            stat_values(names, event.stats, stats)
            if role in _RUN_ROLES:
                self._extend_run(stats.get("id"), start, end)
            if role == _PROCESS:
                iteration = stats.get("iter_num")
                frame = _Frame(end, "process", stats.get("id"), iteration=int(iteration) if iteration else None)
                stack.append(frame)
                processes.append(frame)
            elif role == _EAGER and "eager_op" in stats:
                eager = str(stats["eager_op"])
                if stats.get("is_func"):
                    self._annotation(key, tid, start, end, f"tf.function {eager}")
                    self.result.function_calls += 1
                    frame = _Frame(end, "function", eager)
                    stack.append(frame)
                    functions.append(frame)
                else:
                    self._annotation(key, tid, start, end, f"tf.eager {eager}")
                    node = _Exec(0, eager, eager, start, end, tid, None)
                    execs.append(node)
                    self.result.eager_ops += 1
                    stack.append(_Frame(end, "eager", eager, exec_=node))
            elif role == _FUNCTION_RUN and "id" in stats:
                self._call_function[stats["id"]] = functions[-1].value if functions else ""
            elif role == _KERNEL_RUN:
                top = stack[-1] if stack else None
                if top is not None and top.kind == "eager" and top.exec_ is not None:
                    top.exec_.start, top.exec_.end = start, end  # the kernel, not the dispatch
            elif role == _MEMORY:
                self._memory(key, name, start, stats)
        self.result.graph_ops += graph_ops

    def _extend_run(self, run: Any, start: int, end: int) -> None:
        """A function run spans its launch (FunctionRun) to its executor's last event."""
        if run is not None:
            begin, finish = self._run_span.get(run, (start, end))
            self._run_span[run] = (min(begin, start), max(finish, end))

    def _annotation(self, key: str, tid: int, start: int, end: int, label: str) -> None:
        annotation = self.new_annotation_id()
        device = self.batch.device("cpu")
        self.batch.add("annotation_begin", key, start, device, tid, annotation, label)
        self.batch.add("annotation_end", key, end, device, tid, annotation)

    def _memory(self, key: str, name: str, start: int, stats: Mapping[str, Any]) -> None:
        found = _GPU_ALLOCATOR.search(str(stats.get("allocator_name", "")))
        device = self.batch.device(f"cuda:{found.group(1)}" if found else "cpu")
        address = int(stats.get("addr", stats.get("address", 0)) or 0) & 0xFFFFFFFFFFFFFFFF
        size = int(stats.get("allocation_bytes", stats.get("requested_bytes", 0)) or 0)
        in_use = int(stats.get("bytes_allocated", 0) or 0)
        kind = "mem_alloc" if name == "MemoryAllocation" else "mem_free"
        self.batch.add(kind, key, start, device, address, max(size, 0), max(in_use, 0))

    # ------------------------------------------------------------------ nodes and edges
    def _step_of(self, start: int) -> int:
        at = bisect.bisect_right(self._step_begins, start) - 1
        if at >= 0 and start < self.steps[at][1]:
            return self.steps[at][2]
        return 0xFFFFFFFF

    def _runs_by_time(self, runs: dict[int, list[_Exec]]) -> None:
        """A graph op the executor ran outside any ``ExecutorState::Process`` on its thread (an op
        handed to another thread of the pool) joins a run whose events (from its launch on the
        calling thread to its executor's last event) span its start:
        of those whose graph has a node of its name (other functions, tf.data's, may run at the
        same time), the one that began last."""
        spans = sorted((begin, end, run) for run, (begin, end) in self._run_span.items())
        graphs = {run: self.graphs.match(frozenset(n.name for n in nodes), self._call_function.get(run, ""))
                  for run, nodes in runs.items()}
        for node in self._execs:
            if node.graph_op and node.call is None:
                around = [run for begin, end, run in spans if begin <= node.start <= end]
                fitting = [run for run in around if node.name in (graphs.get(run) or {})]
                if fitting:
                    node.call = fitting[-1]
                    runs[node.call].append(node)

    def _write_nodes_and_edges(self) -> None:
        runs: dict[int, list[_Exec]] = {}
        new_node_id, step_of = self.new_node_id, self._step_of
        for node in self._execs:
            node.node_id = new_node_id()
            node.step = step_of(node.start)
            if node.call is not None:
                runs.setdefault(node.call, []).append(node)
        self._runs_by_time(runs)
        edges: list[tuple[_Exec, _Exec, int, int, bool]] = []  # producer, consumer, tensor, bytes, control
        for call, nodes in runs.items():
            function = self._call_function.get(call, "")
            graph = self.graphs.match(frozenset(n.name for n in nodes), function)
            if graph is None:
                self.result.unmatched_runs += 1
                continue
            for node in nodes:
                found = graph.get(node.name)
                if found is not None and found.device:
                    node.device = device_name(found.device)
            self._run_edges(function, graph, nodes, edges)
        add = self.batch.add
        keys: dict[int, str] = {}  # thread -> its stream
        devices: dict[str, int] = {}
        for node in self._execs:
            key = keys.get(node.tid) or keys.setdefault(node.tid, f"tf-{node.tid}")
            device = devices.get(node.device)
            if device is None:
                device = devices[node.device] = self.batch.device(node.device)
            add("node_begin", key, node.start, node.node_id, node.op, node.name, device, node.tid, node.step)
            add("node_end", key, max(node.end, node.start), node.node_id, device, node.tid)
        self.result.nodes += len(self._execs)
        self.result.devices.update(devices)
        for producer, consumer, tensor, nbytes, control in edges:
            key = keys[consumer.tid]
            add("tensor_edge", key, consumer.start, producer.node_id, consumer.node_id, tensor, nbytes,
                devices[producer.device], devices[consumer.device])
            if control:
                add("node_link", key, consumer.start, producer.node_id, consumer.node_id, "control")
                self.result.control_edges += 1
        self.result.edges += len(edges)

    def _run_edges(self, function: str, graph: Mapping[str, Any], nodes: list[_Exec],
                   edges: list[tuple[_Exec, _Exec, int, int, bool]]) -> None:
        """One function run's edges into `edges`: each input of each node executed, from an
        execution of its producer that ended before it started (loops run a node more than once):
        the last one of the same loop iteration, else the last one."""
        by_name: dict[str, _Exec | _Runs] = {}  # most nodes run once per function run: no _Runs for them
        for node in sorted(nodes, key=_END):
            seen = by_name.get(node.name)
            if seen is None:
                by_name[node.name] = node
            elif isinstance(seen, _Runs):
                seen.add(node)
            else:
                runs = by_name[node.name] = _Runs()
                runs.add(seen)
                runs.add(node)
        tensors: dict[tuple[int, int], int] = {}
        inputs_of, nbytes, new_tensor_id = self.graphs.inputs, self.sizes.nbytes, self.new_tensor_id
        for consumer in nodes:
            inputs = inputs_of(graph, consumer.name)
            if inputs is None:
                continue
            start = consumer.start
            data: dict[int, tuple[_Exec, int, int]] = {}
            control: list[_Exec] = []
            for source, slot, is_control in inputs:
                found = by_name.get(source)
                if found is None:
                    continue
                if isinstance(found, _Runs):
                    producer = found.before(consumer)
                    if producer is None:
                        continue
                elif found is consumer or (found.end > start and found.start >= start):
                    continue  # what _Runs.before says for one execution
                else:
                    producer = found
                if is_control:
                    control.append(producer)
                    continue
                tensor = tensors.get((producer.node_id, slot))
                if tensor is None:
                    tensor = tensors[(producer.node_id, slot)] = new_tensor_id()
                if tensor not in data:
                    data[tensor] = (producer, tensor, nbytes(function, source, slot))
            for producer, tensor, size in data.values():
                edges.append((producer, consumer, tensor, size, False))
            if control:
                fed = {p.node_id for p, _, _ in data.values()}
                for producer in {p.node_id: p for p in control}.values():
                    if producer.node_id not in fed:  # a data edge already orders the pair
                        edges.append((producer, consumer, 0, 0, True))

    # ------------------------------------------------------------------ GPU
    def _gpu_plane(self, plane: Any) -> set[int]:
        ordinal = plane.name[len(GPU_PLANE_PREFIX):]
        gpu = f"cuda:{int(ordinal) if ordinal.isdigit() else 0}"
        device = self.batch.device(gpu)
        launched: set[int] = set()
        for line in plane.lines:
            queue = int(line.id) & _U32
            key = f"tf-{gpu.replace(':', '')}-q{queue}"
            for event in line_events(plane, line, self.origin):
                corr = event.stats.get("correlation_id")
                if corr is None:
                    continue  # a derived line (steps, op names): not GPU activity
                corr = int(corr)
                launched.add(corr)
                self.result.gpu_ops += 1
                if "memcpy_details" in event.stats or event.name.startswith("Memcpy"):
                    details = str(event.stats.get("memcpy_details", ""))
                    found = _SIZE.search(details)
                    direction = next((v for k, v in _TF_COPY.items() if k in event.name), event.name)
                    ends = _COPY_ENDS.search(details)  # "(Pageable -> Device)", as Kineto names it
                    memory = f" ({ends.group(1).title()} -> {ends.group(2).title()})" if ends else ""
                    kind = copy_kind_of(f"Memcpy {direction}{memory}")
                    src, dst = (self.batch.device(side) for side in copy_ends(kind, gpu))
                    self.batch.add("memcpy_begin", key, event.start, device, queue, corr,
                                   int(found.group(1)) if found else 0, kind, src, dst)
                    self.batch.add("memcpy_end", key, event.end, device, queue, corr)
                elif event.name.startswith("Memset"):
                    self.batch.add("memset_begin", key, event.start, device, queue, corr, 0)
                    self.batch.add("memset_end", key, event.end, device, queue, corr)
                else:
                    self.batch.add("kernel_begin", key, event.start, device, queue, corr, event.name, 0, 0, 0, 0, 0, 0)
                    self.batch.add("kernel_end", key, event.end, device, queue, corr)
        return launched

    def _driver_calls(self, plane: Any, launched: set[int]) -> None:
        for line in plane.lines:
            tid = thread_id(line)
            key = f"tf-api-{tid}"
            for event in line_events(plane, line, self.origin):
                corr = event.stats.get("correlation_id")
                if corr is None:
                    continue
                self.batch.add("api_enter", key, event.start, tid, event.name, int(corr))
                self.batch.add("api_exit", key, event.end, tid, event.name, int(corr))
                if int(corr) in launched:
                    self.batch.add("launch", key, event.start, tid, int(corr))


class _Runs:
    """The executions of one node in one function run, by end time."""

    _SAME_ITERATION_LOOKBACK = 64  # how far back to look for the consumer's own loop iteration

    def __init__(self) -> None:
        self.ends: list[int] = []
        self.nodes: list[_Exec] = []

    def add(self, node: _Exec) -> None:  # in end order
        self.ends.append(node.end)
        self.nodes.append(node)

    def before(self, consumer: _Exec) -> _Exec | None:
        at = bisect.bisect_right(self.ends, consumer.start)
        if at == 0:
            # None ended before the consumer started. The profiler stamps an op's end when its
            # thread leaves the op's scope, which on a busy machine can come after the consumer it
            # fed has started on another thread: take the last one that started before it.
            started = [node for node in self.nodes if node.start < consumer.start and node is not consumer]
            return max(started, key=lambda node: node.start) if started else None
        if consumer.iteration is not None:
            for back in range(at - 1, max(-1, at - 1 - self._SAME_ITERATION_LOOKBACK), -1):
                if self.nodes[back].iteration == consumer.iteration and self.nodes[back] is not consumer:
                    return self.nodes[back]
        found = self.nodes[at - 1]
        return None if found is consumer else found
