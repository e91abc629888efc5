"""A trace's tensor edges against PyTorch's execution trace of the same run: precision and recall.

PyTorch's ExecutionTraceObserver (Chakra's execution trace, "ET") records every op's input and
output tensors with their storage ids, from another hook than the profiler dfcompass records
with, so it is an independent graph. From it, per top-level aten op in order:

* an op *writes* a storage it outputs without having read it (a new tensor), or the one it takes
  in place (``op_`` writes its first argument, ``self``);
* an op *reads* the storages of its inputs (a storage of zero bytes is no buffer: left out);
* ``lift_fresh`` (what ``torch.tensor`` and ``as_tensor`` call) takes a new tensor: one an op
  just output (``torch.tensor`` of Python data: ``empty``, then ``to``), read as usual, or one made
  outside any op (numpy's buffer), which reads no op's output: ``lift_fresh`` writes it.

The observer keys storages by address and records no free, so a buffer made outside any op at a
freed tensor's address looks like that tensor's. A one-element read with another dtype than the
last write (a Python number wrapped as a double) is such a buffer, not the writer's.

An edge of ours is *right* when its producer wrote and its consumer read one storage (at any
time: a storage can be written twice). *Recall* counts the last-writer edges (the writer a read
sees) that we found. The ops of the two graphs are aligned by name and order.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar

import ijson

from tc_analyses.errors import DfcompassError
from tc_analyses.analyses.op_alignment import align



@dataclass(frozen=True)
class EtGraph:
    names: list[str]  # top-level aten ops, in order
    wrote: list[tuple[int, ...]]  # per op: the buffers it wrote (its inner ops' outputs included)
    read: list[tuple[int, ...]]  # per op: the buffers it read (with those a sparse input keeps)
    last: set[tuple[int, int]]  # (last writer, reader) pairs
    truncated: bool = False  # the file ends early (its program died): the ops up to there
    # storage -> the ops that wrote it, in order; for compiled graphs, whose kernels' writes the
    # observer does not see (inductor allocates their outputs past the dispatcher)
    writes_of: dict[int, list[int]] = field(default_factory=dict)
    # compiled graph -> buffers it read and used again (freed, its output may be there: one address)
    rewritten: dict[int, frozenset[int]] = field(default_factory=dict)

    def allows(self, writer: int, reader: int) -> bool:
        """Whether `writer` wrote, before `reader` ran, a buffer that `reader` read."""
        if writer >= reader:
            return False
        return not set(self.wrote[writer]).isdisjoint(self.read[reader]) or self.unseen_write(writer, reader)

    def unseen_write(self, writer: int, reader: int) -> bool:
        """Whether `writer` is a compiled graph that may have written a buffer `reader` read: one no
        op the observer saw wrote between them (the graph's generated kernels write unseen)."""
        if self.names[writer] != COMPILED_GRAPH_OP:
            return False
        for storage in self.read[reader]:
            history = self.writes_of.get(storage, [])
            at = bisect.bisect_left(history, reader) - 1  # the last seen write before the reader
            if at < 0 or history[at] <= writer:
                return True
        return False


@dataclass
class EdgeCheck:
    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("precision", "recall")  # derived, added to --format json

    ops_ours: int
    ops_et: int
    ops_matched: int
    edges: int  # our edges between matched ops (distinct producer, consumer pairs)
    false_edges: int
    last_writer_edges: int  # the observer's, between matched ops
    found: int
    duplicates: int  # edges with the same producer, consumer and tensor as another
    unmatched_edges: int  # our edges with an op the observer lacks (not counted either way)
    et_truncated: bool = False  # the execution trace ends early: ops after its end are unmatched
    notices: list[str] = field(default_factory=list)  # what the numbers do not say by themselves
    false_examples: list[tuple[str, str, int]] = field(default_factory=list)  # producer op, consumer op, count
    missing_examples: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return (self.edges - self.false_edges) / self.edges if self.edges else None

    @property
    def recall(self) -> float | None:
        return self.found / self.last_writer_edges if self.last_writer_edges else None


def _tensors(value: Any) -> list[list[Any]]:
    """ET tensor values ([id, storage id, offset, numel, itemsize, device]), nested lists flattened."""
    if isinstance(value, list) and len(value) == 6 and isinstance(value[5], str) and all(
            isinstance(v, int) for v in value[:5]):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _tensors(v)]
    return []


def _storages(values: list[Any], types: list[Any] | None = None) -> dict[int, str]:
    """Buffer key -> kind of the tensors on it: ``dtype:itemsize`` (``:itemsize`` where the types
    do not say; see :func:`_same_kind`), ``!`` appended for a tensor of at most one element. A
    dense tensor's key is its storage id (numel x itemsize > 0: a real buffer); a sparse tensor,
    which the observer gives no storage (id 0, no device), is known by its tensor id (negative
    keys); an undefined tensor looks the same but has no dtype and is left out."""
    keys: dict[int, str] = {}
    for position, value in enumerate(values):
        tensors = _tensors(value)
        dtypes = _DTYPE.findall(types[position]) if types and position < len(types) and isinstance(
            types[position], str) else []
        for k, t in enumerate(tensors):
            dtype = dtypes[k] if len(dtypes) == len(tensors) else ""
            kind = sys.intern(f"{dtype}:{t[4]}" + ("!" if t[3] <= 1 else ""))
            if t[3] * t[4] > 0:
                keys[t[1]] = kind
            elif t[1] == 0 and t[5] == "" and t[0] > 0 and not dtype.startswith(_UNDEFINED):
                keys[-t[0]] = kind
    return keys


def _same_kind(written: str, read: str) -> bool:
    """Whether a read sees the last write of its buffer. The observer keys storages by address and
    sees no free: a Python number wrapped as a tensor of one element (SGD's momentum, a double)
    that lands where a freed tensor of another dtype was is not that tensor. A read of more
    elements with another dtype is a view of the writer's buffer (``view(torch.int32)``); where
    one side has no dtype, the item sizes decide."""
    if not read.endswith("!"):
        return True
    written_dtype, _, written_size = written.rstrip("!").partition(":")
    read_dtype, _, read_size = read.rstrip("!").partition(":")
    if written_dtype and read_dtype:
        return written_dtype == read_dtype
    return written_size == read_size


_DTYPE = re.compile(r"Tensor\(([^()]*(?:\([^)]*\))?)\)")
_UNDEFINED = "nullptr"  # an undefined tensor (an absent grad_input, weight=None): no buffer
# The same ops as tracer.torch_edges.FRESH_INPUT_OPS, written out here: the reference graph uses
# nothing of the recorder it checks.
FRESH_INPUT_OPS = frozenset({"aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"})


def read_et(path: Path, advance: Callable[[int], None] | None = None) -> EtGraph:
    """The observer's top-level aten ops and their storage pairs. The file is streamed (an
    observer's trace of a long run is gigabytes): of each aten op only its buffers are kept. A
    file cut short (the observer writes as the program runs; a program that dies leaves it so)
    gives the ops up to the cut. `advance` is told the file's bytes as they are read (a progress bar)."""
    ops: list[_EtOp] = []
    parents: dict[int, int] = {}  # every node's parent (ctrl_deps)
    graph_inputs: dict[int, tuple[Buffers, str]] = {}  # a compiled graph's autograd function -> its inputs, kind
    kernels: list[_EtOp] = []  # inductor's Triton kernels: the buffers each was given (read or written)
    compiling: set[int] = set()  # torch.compile's compile scopes: their ops run on fake tensors
    truncated = False
    try:
        with _EtFile(Path(path), advance) as stream:
            try:
                for node in ijson.items(stream, "nodes.item", use_float=True):
                    parents[node["id"]] = node.get("ctrl_deps", -1)
                    name = node["name"]
                    if name.startswith("aten::"):
                        ops.append(_EtOp.of(node))
                    elif name.startswith(_COMPILED_CALL):
                        ops.append(_EtOp(node["id"], COMPILED_GRAPH_OP, parents[node["id"]], (), (), None, (), ()))
                    elif name in _COMPILED_FUNCTIONS:
                        graph_inputs[node["id"]] = (_EtOp.of(node).reads, _COMPILED_FUNCTIONS[name])
                    elif name.startswith(_TRITON):
                        kernels.append(_EtOp.of(node))
                    elif name in _COMPILE_SCOPES:
                        compiling.add(node["id"])
            except ijson.IncompleteJSONError as exc:
                if not parents or not any(cut in str(exc) for cut in ("premature EOF", "Incomplete")):
                    raise
                truncated = True
        if not parents and not _has_nodes(Path(path)):
            raise KeyError("nodes")
        ops = _outside(ops, parents, compiling)
        owners = _owners(ops + kernels, parents)
        return replace(_graph(_with_graph_inputs(ops, kernels, graph_inputs, owners), owners), truncated=truncated)
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, ijson.JSONError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else ""
        raise DfcompassError(f"{path}: not an execution trace ({type(exc).__name__}: {reason})") from exc


Buffers = tuple[tuple[int, str], ...]  # (buffer key, dtype) pairs


@dataclass(frozen=True)
class _EtOp:
    """What the graph needs of one aten op of the execution trace."""

    id: int
    name: str
    parent: int
    reads: Buffers  # its inputs' buffers
    first: Buffers  # its first argument's (`self`: what an in-place op writes)
    first_tensor: tuple[int, int] | None  # the first argument's (tensor id, storage id)
    outputs: Buffers
    output_ids: tuple[tuple[int, int], ...]  # its outputs' (tensor id, storage id)
    mutated: Buffers = ()  # the arguments its schema marks as written (`Tensor(a!) out` of mul.out)
    overwritten: tuple[int, ...] = ()  # of those, the buffers no other argument names: written, not read
    inner: tuple["_EtOp", ...] = ()  # a compiled graph's: its extern kernels and Triton kernels, in order
    kind: str = ""  # a compiled graph's: "forward", "backward", or "" (no autograd function around it)

    @staticmethod
    def of(node: dict[str, Any]) -> "_EtOp":
        inputs, outputs = node["inputs"], node["outputs"]
        values, types = inputs["values"], inputs.get("types")
        first = _tensors(values[0]) if values else []
        schema = next((a.get("value") for a in node.get("attrs", ()) if a.get("name") == "op_schema"), "")
        at = _mutated_positions(schema) if isinstance(schema, str) else ()
        mutated = {k: v for i in at if i < len(values)
                   for k, v in _storages(values[i:i + 1], (types or [])[i:i + 1]).items()}
        others = {k for i, value in enumerate(values) if i not in at
                  for k in _storages([value], (types or [])[i:i + 1])} if mutated else set()
        return _EtOp(node["id"], sys.intern(node["name"]), node.get("ctrl_deps", -1),
                     tuple(_storages(values, types).items()), tuple(_storages(values[:1], (types or [])[:1]).items()),
                     (first[0][0], first[0][1]) if first else None,
                     tuple(_storages(outputs["values"], outputs.get("types")).items()),
                     tuple((t[0], t[1]) for t in _tensors(outputs["values"])), tuple(mutated.items()),
                     tuple(k for k in mutated if k not in others))


@functools.lru_cache(maxsize=4096)
def _mutated_positions(schema: str) -> tuple[int, ...]:
    """The argument positions an op schema marks as written: ``Tensor(a!)``. ``*`` is no argument."""
    start, end = schema.find("("), schema.rfind(") ->")
    if start < 0 or end < start:
        return ()
    args, depth, current = [], 0, ""
    for char in schema[start + 1:end]:
        if char == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        depth += char in "([" and 1 or (-1 if char in ")]" else 0)
        current += char
    args.append(current.strip())
    args = [a for a in args if a and a != "*"]
    return tuple(i for i, arg in enumerate(args) if "!" in arg.split(" ")[0])


class _EtFile:
    """The file for ijson, decompressed if gzipped (``et.json.gz``), telling `advance` how many of
    its bytes (compressed, for a gzipped file) each read took."""

    def __init__(self, path: Path, advance: Callable[[int], None] | None = None) -> None:
        self._raw = open(path, "rb")
        packed = self._raw.read(2) == b"\x1f\x8b"
        self._raw.seek(0)
        self._stream: Any = gzip.GzipFile(fileobj=self._raw) if packed else self._raw
        self._advance, self._seen = advance, 0

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._stream.read(size)
        if self._advance is not None:
            position = self._raw.tell()
            self._advance(position - self._seen)
            self._seen = position
        return data

    def __enter__(self) -> "_EtFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()
        self._raw.close()


def _has_nodes(path: Path) -> bool:
    """Whether the file has a "nodes" list at the top (an empty one is a trace with no ops)."""
    with _EtFile(path) as stream:
        return any(prefix == "nodes" and event == "start_array" for prefix, event, _ in ijson.parse(stream))


# torch.compile: a compiled graph's call is one op, as the recorder makes it (docs/pytorch.md),
# reading the inputs its autograd function lists and writing what its inner aten ops (inductor's
# extern kernels) and Triton kernels make (:func:`_run_graph`). Written out, not imported: the
# reference uses nothing of what it checks.
_COMPILED_CALL = "## Call CompiledFxGraph "
COMPILED_GRAPH_OP = "inductor::compiled_graph"
_COMPILED_FUNCTIONS = {"CompiledFunction": "forward", "CompiledFunctionBackward": "backward"}
_TRITON = "triton_"  # inductor's kernels (triton_poi_..., triton_per_...): their arguments, not what they write


# Ops that allocate a buffer and write no data into it.
_ALLOCATE_ONLY = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                            "aten::new_empty_strided"})
_COMPILE_SCOPES = frozenset({"dynamo", "entire_frame_compile", "entire_backward_compile", "compile_fx_inner",
                             "backend_compile"})


def _outermost(nodes: list[int], parents: dict[int, int], marked: set[int]) -> dict[int, int | None]:
    """Each node's outermost ancestor in `marked`, itself included; None where none is."""
    outer: dict[int, int | None] = {}

    def walk(node: int) -> int | None:
        chain: list[int] = []
        while node not in outer:
            chain.append(node)
            parent = parents.get(node, -1)
            if parent == node or parent not in parents or len(chain) > len(parents):
                break
            node = parent
        found = outer.get(node)
        for link in reversed(chain):  # from the top down
            if found is None and link in marked:
                found = link
            outer[link] = found
        return found

    return {node: walk(node) for node in nodes}


def _outside(ops: list[_EtOp], parents: dict[int, int], scopes: set[int]) -> list[_EtOp]:
    """The ops under none of the `scopes` nodes (compile time: dynamo traces fake tensors)."""
    under = _outermost([op.id for op in ops], parents, scopes) if scopes else {}
    return [op for op in ops if under.get(op.id) is None]


def _owners(ops: list[_EtOp], parents: dict[int, int]) -> dict[int, int]:
    """Each op's outermost op (itself if none): the top-level op it runs in. Other nodes may come
    between: a compiled graph's first call on CUDA runs its extern kernels under ``PythonDispatchMode``."""
    ids = [op.id for op in ops]
    return {node: top if top is not None else node for node, top in _outermost(ids, parents, set(ids)).items()}


def _with_graph_inputs(ops: list[_EtOp], kernels: list[_EtOp], graph_inputs: dict[int, tuple[Buffers, str]],
                       owners: dict[int, int]) -> list[_EtOp]:
    """The compiled graphs' calls given their function's inputs and kind, and their inner ops and
    Triton kernels in order (:func:`_run_graph` reads them)."""
    inner: dict[int, list[_EtOp]] = {}
    for op in sorted(ops + kernels, key=lambda k: k.id):
        if owners[op.id] != op.id:
            inner.setdefault(owners[op.id], []).append(op)
    return [replace(op, reads=graph_inputs.get(op.parent, ((), ""))[0], kind=graph_inputs.get(op.parent, ((), ""))[1],
                    inner=tuple(inner.get(op.id, ()))) if op.name == COMPILED_GRAPH_OP else op for op in ops]


def _run_graph(op: _EtOp, writers: dict[int, int], touched: dict[int, int]) -> tuple[_EtOp, set[int], frozenset[int]]:
    """A compiled graph's reads, writes, the buffers it may have read (allowed, not required) and may
    have rewritten. It reads its function's inputs, writes what its inner ops make (outputs, ``out=``
    arguments: allocated unseen by the observer). Other buffers its kernels use are a forward graph's
    own; a backward graph's own unless a forward graph used them since their last write (saved tensors).
    Without an autograd function (inference): its inner ops' inputs are read, its Triton kernels unused."""
    inputs, backward, forward = dict(op.reads), op.kind == "backward", op.kind == "forward"
    reads: dict[int, str] = {}
    made: dict[int, str] = {}
    maybe: set[int] = set()  # Triton kernels' saved tensors, or their outputs where those were freed
    rewritten: set[int] = set()
    for kernel in op.inner:
        triton = kernel.name.startswith(_TRITON)
        for k, v in kernel.reads:
            if k in made or (triton and not op.kind):
                continue
            if k in inputs or k in reads or k in maybe:
                if backward and (triton or k in kernel.overwritten):
                    rewritten.add(k)  # used again: read again, or freed and reused
            elif k in kernel.overwritten or forward or (backward and touched.get(k, -2) < writers.get(k, -1)):
                made[k] = v
                if not triton and kernel.name.endswith("_"):
                    maybe.add(k)  # in place (fill_, copy_): read, as an op's self is (a graph's own state)
            elif triton:
                maybe.add(k)
                rewritten.add(k)
            else:
                reads[k] = v
        if not triton:
            made.update((k, v) for k, v in kernel.outputs if k not in dict(kernel.reads))
            made.update(kernel.mutated)
    reads = {**inputs, **reads}
    return replace(op, reads=tuple(reads.items()), outputs=tuple(made.items()),
                   mutated=tuple((k, v) for k, v in made.items() if k in reads)), maybe, frozenset(rewritten)


def _graph(ops: list[_EtOp], owners: dict[int, int]) -> EtGraph:
    top = sorted((op for op in ops if owners[op.id] == op.id), key=lambda op: op.id)
    inner: dict[int, dict[int, str]] = {}  # top-level op -> the buffers the ops inside it output
    for op in ops:
        if owners[op.id] != op.id:
            inner.setdefault(owners[op.id], {}).update(op.outputs)
    writers: dict[int, int] = {}  # storage -> its last top-level writer
    written_kind: dict[int, str] = {}  # storage -> dtype of its last write
    inner_writers: dict[int, int] = {}  # storage -> the last op whose inner ops made it
    inner_kind: dict[int, str] = {}
    aliases: dict[int, set[int]] = {}  # sparse tensor key -> the buffers it was built on
    wrote: list[tuple[int, ...]] = []
    read: list[tuple[int, ...]] = []
    last: set[tuple[int, int]] = set()
    output_at: dict[tuple[int, int], int] = {}  # (tensor id, storage id) -> the last op that output it
    writes_of: dict[int, list[int]] = {}
    rebound: dict[int, tuple[int, int]] = {}  # storage -> (the set_ that bound it, the writer before)
    touched: dict[int, int] = {}  # storage -> the last forward compiled graph that read or wrote it
    rewritten: dict[int, frozenset[int]] = {}
    for index, op in enumerate(top):
        maybe: set[int] = set()
        if op.name == COMPILED_GRAPH_OP and op.inner:
            op, maybe, rewritten[index] = _run_graph(op, writers, touched)
        fresh = op.name in FRESH_INPUT_OPS and _made_outside_ops(op.first_tensor, output_at, writers)
        reads = {} if fresh else dict(op.reads)
        # A sparse tensor built from index and value tensors keeps their buffers: reading it
        # reads them too (allowed, not required).
        aliased = {buffer for key in reads if key < 0 for buffer in aliases.get(key, ())}
        read.append(tuple(reads.keys() | aliased | maybe))
        sources = {k for k in reads if k not in dict(op.first)} if op.name == "aten::copy_" else set()
        for storage, kind in reads.items():
            writer, inner_last = writers.get(storage, -1), inner_writers.get(storage, -1)
            if storage in sources and storage in rebound and rebound[storage][0] == writer:
                writer = rebound[storage][1]  # share_memory_: the data copied is the old storage's writer's
            if writer >= 0 and writer > inner_last:
                if _same_kind(written_kind[storage], kind):
                    last.add((writer, index))
            elif inner_last >= 0 and _same_kind(inner_kind[storage], kind):
                # An inner op wrote it since (batch norm's saved statistics, where an older add's output was).
                last.add((inner_last, index))
        written = {k: v for k, v in op.outputs if k not in reads}
        if op.name == "aten::set_":
            # set_ binds a tensor to a storage: torch.load's, filled from the file, whose readers
            # read it from set_ (the observer, blind to frees, may know an older writer of that
            # address). share_memory_ binds a view of a parameter's storage only to copy_ it to
            # shared memory: that copy_ reads the data of the storage's writer before set_.
            for k in written:
                if writers.get(k, -1) >= 0 and top[writers[k]].name not in _ALLOCATE_ONLY:
                    rebound[k] = (index, writers[k])
        elif fresh or op.name.endswith("_"):  # in place, or a buffer made outside any op: it writes `self`
            written.update(op.first)
        written.update(op.mutated)  # out= arguments (DDP's reducer: mul.out into the gradient bucket)
        if "sparse_coo_tensor" in op.name or "sparse_csr_tensor" in op.name:
            for key in written:
                if key < 0:
                    aliases[key] = {k for k in reads if k > 0}
        for storage, kind in written.items():
            writers[storage] = index
            written_kind[storage] = kind
            writes_of.setdefault(storage, []).append(index)
        for output in op.output_ids:
            output_at[output] = index
        if op.kind == "forward":
            touched.update((k, index) for k in reads.keys() | written.keys())
        # What its inner ops made (saved for backward: dropout's mask, nll_loss's total weight) may
        # be read later too; the observer lists them under the inner ops only. Allowed; required
        # where no op wrote the storage since.
        made_inside = {k: v for k, v in inner.get(op.id, {}).items() if k not in reads and k not in written}
        for storage, kind in made_inside.items():
            inner_writers[storage] = index
            inner_kind[storage] = kind
        wrote.append(tuple(written.keys() | made_inside.keys()))
    return EtGraph([op.name for op in top], wrote, read, last, writes_of=writes_of, rewritten=rewritten)


def _made_outside_ops(first: tuple[int, int] | None, output_at: dict[tuple[int, int], int],
                      writers: dict[int, int]) -> bool:
    """Whether the first input of a fresh-tensor op was made outside any op: no op output that
    tensor on that buffer since the buffer's last write. The observer reuses the ids of freed
    tensors, and numpy's buffers take freed tensors' addresses: an id an op output on another
    buffer is another tensor."""
    if first is None:
        return False
    last_write = writers.get(first[1], -1)
    return last_write < 0 or output_at.get(first, -1) < last_write


def check_edges(trace: Path, et_path: Path, advance: Callable[[int], None] | None = None) -> EdgeCheck:
    """Compare `trace`'s tensor edges with the execution trace at `et_path` (same run); `advance`:
    see :func:`read_et`."""
    from tc_analyses.reader import read_trace

    t = read_trace(trace)
    _same_process(t, et_path)
    et = read_et(et_path, advance)
    begin = t.table("node_begin")
    order = sorted(zip(begin["timestamp"].tolist(), begin["node_id"].tolist(), begin.text("op")))
    index = {node: i for i, (_, node, _) in enumerate(order)}
    names = [op for _, _, op in order]
    edges = t.table("tensor_edge")
    triples = list(zip(edges["producer"].tolist(), edges["consumer"].tolist(), edges["tensor_id"].tolist()))
    pairs = {(index[p], index[c]) for p, c, _ in triples if p in index and c in index}
    to_et = align(names, et.names)
    mapped = {(to_et[p], to_et[c]) for p, c in pairs if p in to_et and c in to_et}
    matched = set(to_et.values())
    last = {(p, c) for p, c in et.last if p in matched and c in matched}
    false = {(p, c) for p, c in mapped if not et.allows(p, c)}
    # A last-writer pair is found by our edge from that writer, or from a compiled graph that ran
    # since: its kernels may have written the buffer unseen by the observer (which then names an
    # older writer, often of a freed buffer whose address the graph's output took).
    unseen = sum(1 for p, c in mapped if et.unseen_write(p, c) and (p, c) not in false)
    graph_edges: dict[int, list[int]] = {}  # reader -> the compiled graphs our edges into it leave
    for p, c in mapped:
        if et.names[p] == COMPILED_GRAPH_OP:
            graph_edges.setdefault(c, []).append(p)
    missing = {(p, c) for p, c in last - mapped
               if not any(p < g < c and _graph_may_have_rewritten(et, p, c, g) for g in graph_edges.get(c, ()))}
    children = _forked_children(Path(t.path))
    if not children:  # else the observer, inherited by forks, wrote their ops too: said in a notice
        _same_run(t.path, et_path, len(names), len(et.names), len(to_et))
    return EdgeCheck(
        ops_ours=len(names), ops_et=len(et.names), ops_matched=len(to_et), edges=len(mapped),
        false_edges=len(false), last_writer_edges=len(last), found=len(last) - len(missing),
        duplicates=len(triples) - len(set(triples)), unmatched_edges=len(pairs) - sum(
            1 for p, c in pairs if p in to_et and c in to_et), et_truncated=et.truncated,
        false_examples=_examples(false, et.names), missing_examples=_examples(missing, et.names),
        notices=_foreign_ops(Path(t.path), children, len(et.names) - len(to_et), len(et.names)) + (
            [f"{unseen:,} edges leave a compiled graph for a buffer the observer saw no op write (inductor's "
             "kernels write past it): allowed, not checked"] if unseen else []))


def _graph_may_have_rewritten(et: EtGraph, writer: int, reader: int, graph: int) -> bool:
    """Whether the compiled graph may have written what `reader` read of `writer`'s: not a buffer
    the graph only read (its inputs keep their writer)."""
    shared = set(et.wrote[writer]) & set(et.read[reader])
    return not shared or not shared <= set(et.read[graph]) - et.rewritten.get(graph, frozenset())


# An execution trace matched on fewer of its ops than this is of another run or program.
SAME_RUN_SHARE = 0.5


def _same_process(trace: Any, et_path: Path) -> None:
    """Refuse an execution trace written by another process than the trace's (its header says
    which: ``"pid": N`` comes before the ops), instead of printing low precision and recall."""
    try:
        with _EtFile(et_path) as stream:
            head = stream.read(4096).decode("utf-8", "replace")
    except (OSError, EOFError):
        return  # read_et names what is wrong with the file
    found = re.search(r'"pid"\s*:\s*(\d+)', head)
    pid = trace.metadata.env.get("pid")
    if found and isinstance(pid, int) and int(found.group(1)) != pid:
        raise DfcompassError(f"{et_path}: the execution trace of process {found.group(1)}, but {trace.path} is "
                             f"process {pid}'s: not the same run; record both in one run (docs/edge-check.md)")


def _same_run(trace: str | Path, et_path: Path, ours: int, theirs: int, matched: int) -> None:
    if min(ours, theirs) >= 20 and matched < SAME_RUN_SHARE * min(ours, theirs):
        raise DfcompassError(f"{et_path}: only {matched:,} of its {theirs:,} ops line up with the {ours:,} of "
                             f"{trace}: not the same run or not the same process; record both in one run "
                             "(docs/edge-check.md)")


def _forked_children(trace: Path) -> str:
    """The trace's children in its recorded job (DataLoader workers, other children), counted by
    role; "" for a lone trace or one whose other processes are ranks and launchers."""
    from tc_analyses.reader.job import CHILD, WORKER, job_traces_in, plural, roles
    from tc_analyses.reader.metadata import read_metadata
    from tracer import schema

    if not (trace / "metadata").is_file() or schema.ENV_PPID not in read_metadata(trace).env:
        return ""
    processes = job_traces_in(trace.parent)
    me = next((p for p in processes if p.path == trace), None)
    role = roles(processes)
    others = [role[p.path] for p in processes if me is not None and p.ppid == me.pid and p.host == me.host
              and role[p.path] in (WORKER, CHILD)]
    return ", ".join(plural(role, n) for role, n in sorted(Counter(others).items()))


def _foreign_ops(trace: Path, children: str, unmatched: int, total: int) -> list[str]:
    """A notice when many of the execution trace's ops match none of ours; with forked children in
    the trace's job, why: the observer, inherited by a fork, wrote their ops into the same file."""
    if total == 0 or unmatched <= 0.02 * total:
        return []
    if not children:
        return [f"{unmatched:,} of the execution trace's {total:,} ops match none of this trace's (not counted)"]
    return [f"{unmatched:,} of the execution trace's {total:,} ops match none of this trace's: the observer, "
            f"inherited by forked processes ({children} in {trace.parent}), also wrote their ops; precision and "
            "recall count this process's matched ops only"]


def _examples(pairs: set[tuple[int, int]], names: list[str], top: int = 5) -> list[tuple[str, str, int]]:
    counts = Counter((names[p], names[c]) for p, c in pairs)
    return [(p, c, n) for (p, c), n in counts.most_common(top)]
