"""PyTorch tensor edges: which op last wrote each storage, so that a read links to its writer.

**Edges are exact.** A tensor is known by its storage pointer, which views share (not by the
profiler's TensorID, which is one for every tensor that ever had a null data pointer). An op
*writes* a tensor when the tensor's storage is allocated inside the op and survives it, or when
the op's schema marks that argument as written (in-place ops, ``out=``). A consumer links to the
last writer of each tensor it reads: views add no edge, in-place ops become the new writer, and
edges always point forward in time, so no cycles. Backward ops link to the saved forward tensors
they read, by the same rule.

Here is the bookkeeping: the writes of each storage address in time order, the frees that end
them, the arguments an op's schema writes, buffers made outside any op (numpy's), and sparse
tensors (no data pointer: known by their TensorImpl). :mod:`tracer.torch_convert` applies the
rule to a window's nodes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from tracer.torch_events import _Node

# Ops handed a new tensor by torch.tensor / as_tensor: made by an op just before (Python data) or
# outside any op (numpy's buffer).
FRESH_INPUT_OPS = frozenset({"aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"})


class _Writes:
    """Which arguments an op writes, from its schema (cached)."""

    def __init__(self, torch: Any) -> None:
        self._schemas = torch._C._jit_get_schemas_for_operator
        self.known: dict[tuple[str, str, int], tuple[int, ...]] = {}  # (op, overload, arity) -> written args

    def __call__(self, op: str, overload: str, arity: int) -> tuple[int, ...]:
        key = (op, overload, arity)
        found = self.known.get(key)
        if found is None:
            try:
                schemas = self._schemas(op)
            except RuntimeError:
                schemas = []
            exact = [s for s in schemas if s.overload_name == overload]
            candidates = exact or [s for s in schemas if len(s.arguments) == arity]
            found = tuple(sorted({i for s in candidates for i, a in enumerate(s.arguments)
                                  if a.alias_info is not None and a.alias_info.is_write}))
            self.known[key] = found
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


_MAX_PENDING_SPARSE = 64


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

    def add(self, node: _Node, own: set[int], entry: tuple[int, int, int, int]) -> None:
        inner = {meta.impl_ptr for _, ptr, meta in node.inner_reads if not ptr and _is_sparse(meta)} - own
        for impl in inner:
            self.made[impl] = (node.start, entry)
        if node.sparse_built and not inner:
            self.pending += [(node.start, dtype, entry) for dtype in node.sparse_built]
            del self.pending[:-_MAX_PENDING_SPARSE]
