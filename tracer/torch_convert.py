"""PyTorch window conversion, CPU side: each window's nodes, exact edges, collectives and memory.

* **Nodes** (:mod:`tracer.torch_events`) become ``dfc:node_begin``, ``dfc:node_args`` (input
  shapes and dtypes) and ``dfc:node_end`` on their OS thread.
* **Edges**: each read links to the last writer of its storage, by the rule of
  :mod:`tracer.torch_edges`; the writes of live storages carry over to the next window.
* **Collectives**: ``c10d::`` ops (all_reduce, broadcast, barrier, send/recv...) are nodes with a
  ``dfc:collective`` event: kind, bytes, and ``seq``, the op's place in this process's issue
  order, which is the same on every rank (ranks must issue collectives in one order). The
  profiler does not name the process group, so ``group`` is empty and ``seq`` counts the
  collectives of all groups together. The backend's communication spans (``gloo:*`` on its worker
  threads) are nodes too. ``dfc:process_rank`` gives rank, world size and backend once
  ``torch.distributed`` is initialised.
* **Memory**: every allocation and free with bytes in use per device.

GPU activity is converted by :mod:`tracer.torch_gpu`; the recorder (:mod:`tracer.torch_source`)
runs both on each window.
"""

from __future__ import annotations

import bisect

import os
from typing import Any

from tracer.batch import Batch
from tracer.collectives import collective_kind
from tracer.torch_edges import (FRESH_INPUT_OPS, _freed_between, _is_sparse, _made_outside_ops, _record_write,
                                _SparseTensors, _StorageWrites, _Writes)
from tracer.torch_events import _Collector, _Node, _tensors

_MAX_REBOUND = 100_000
_MAX_FREED = 200_000  # freed GPU addresses remembered across windows


def _freed_last(memory: list[tuple[int, int, str, int, int, int]]) -> dict[int, list[tuple[int, bool]]]:
    """Per storage address, its memory events in time order as (time, freed)."""
    events: dict[int, list[tuple[int, bool]]] = {}
    for ts, _ptid, _device, ptr, size, _total in memory:
        if size:
            events.setdefault(ptr, []).append((ts, size < 0))
    for found in events.values():
        found.sort()
    return events


def _replayed_into(replay: tuple[int, tuple[int, int, int], str, str] | None, ptr: int, at: int,
                   found: tuple[int, tuple[int, int, int]] | None, freed: dict[int, list[tuple[int, bool]]],
                   freed_before: dict[int, int], device: str) -> tuple[int, tuple[int, int, int]] | None:
    """The write of a CUDA graph replay that a read with no live writer sees, if that is what it is.

    A replay (torch.compile's reduce-overhead) writes its static outputs into the graph's memory
    pool without an allocation the profiler shows; what the caching allocator shows of that memory
    is a free (the previous generation's outputs). So a read of a GPU address whose last memory event
    before it is a free, with no write since, after a replay on that device, reads the replay's
    output. Nothing else reads freed memory: an eager op's buffer is allocated before it is written."""
    if replay is None or replay[0] > at or replay[2] != device or not device.startswith("cuda"):
        return None
    events = freed.get(ptr, [])
    k = bisect.bisect_right(events, (at, True)) - 1
    if k < 0 and ptr in freed_before:
        return replay[0], replay[1]  # freed in an earlier window, and nothing here before the read
    if k < 0 or not events[k][1] or (found is not None and found[0] >= replay[0]):
        return None  # never freed (a tensor made before recording, a parameter), or allocated since
    return replay[0], replay[1]


def _bound_by_set(ptr: int, at: int, set_at: int, freed: dict[int, list[tuple[int, bool]]],
                  unwritten: dict[int, int]) -> bool:
    """Whether a read at `at` of storage `ptr`, which no op wrote, may be of the storage that a
    set_ at `set_at` bound: one allocated before the set_ and neither freed nor reallocated
    since (in this window, or in `unwritten` from an earlier one). A tensor whose TensorImpl
    address was set_'s but whose storage came later (numpy's, unseen) is not taken for it."""
    events = freed.get(ptr) or []
    k = bisect.bisect_right(events, (at, True)) - 1
    if k < 0:  # no memory event here before the read: alive since an earlier window
        allocated = unwritten.get(ptr)
        return allocated is not None and allocated <= set_at
    return not events[k][1] and events[k][0] <= set_at


class _WindowWriter:
    """Writes each window's nodes, edges, collectives, rank and memory into a batch, and holds what
    outlives a window: each live tensor's last writer, the collectives issued so far, the rank."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._writes = _Writes(torch)
        self._itemsize: dict[Any, int] = {}
        self._args_cache: dict[tuple[Any, ...], tuple[str, str]] = {}
        # Outlive one window: each live tensor's last writer.
        self._carried: dict[int, tuple[int, int, int]] = {}  # storage ptr -> (node id, device, trace tensor)
        self._fresh: set[int] = set()  # trace tensor ids of buffers made outside any op (_made_outside_ops)
        self._sparse = _SparseTensors()
        # TensorImpl address -> (time, writer) of a tensor given a storage in place, before its
        # first read shows which storage: what set_ binds comes from outside any op. It may be read
        # windows later (a DataLoader rebuilds each batch it receives, and a batch that came early
        # waits its turn), so an entry holds until read; the storage read must be one that existed
        # at the set_ and that no op wrote: storage ptr -> allocation time of those that are alive.
        self._rebound: dict[int, tuple[int, tuple[int, int, int]]] = {}
        self._unwritten: dict[int, int] = {}
        # GPU addresses whose last memory event was a free, and the window of that free: a CUDA graph
        # replay may write there unseen (_replayed_into).
        self._freed_before: dict[int, int] = {}
        self._replay_outputs: dict[str, set[int]] = {}  # a replayed graph's name -> its static output addresses
        self._collectives = 0  # c10d ops issued so far: the next one's seq
        self._rank: tuple[int, int, str] | None = None  # rank, world size, backend, once distributed is up
        self._rank_written = False
        self.nodes_recorded = 0
        self.edges_recorded = 0

    def chain_state(self) -> dict[str, Any]:
        """What outlives a window, for the next window's converter child (tracer.fork_chain)."""
        state = {name: value for name, value in vars(self).items() if name not in ("_torch", "_writes")}
        state["writes_known"] = self._writes.known
        return state

    def take_chain_state(self, state: dict[str, Any]) -> None:
        """The previous converter's state; the rank learnt in this process stays if it had none."""
        rank = self._rank
        self._writes.known.update(state.pop("writes_known"))
        vars(self).update(state)
        if self._rank is None:
            self._rank = rank

    def nbytes(self, meta: Any) -> int:
        """The bytes of a tensor (the profiler's tensor metadata): its sizes times its dtype's item size."""
        size = self._itemsize.get(meta.dtype)
        if size is None:
            # The dtype's own size, not an op: a converter child must run no op (an execution trace
            # observer copied into it would write its buffer into the program's file).
            size = self._itemsize[meta.dtype] = meta.dtype.itemsize
        count = 1
        for dim in meta.sizes:
            count *= dim
        return count * size

    def write_nodes(self, batch: Batch, collector: _Collector, window: int) -> None:
        """Nodes and their exact input edges; see :mod:`tracer.torch_edges` for the writer rule.

        A tensor is known by its storage pointer, not by the profiler's TensorID: the profiler gives
        one id to every tensor that ever had a null data pointer (empty and sparse tensors, and
        outputs made empty and then resized, such as arange's and randperm's), so ids would join
        unrelated ops. A write is an allocation inside the op that it outlives, or an argument the
        op's schema marks as written; a read takes the last write of its storage unless that storage
        was freed in between. A tensor with no data pointer (sparse, zero-size) has no identity
        here: it gets no edge rather than a false one. Writes carry over to the next window in
        ``self._carried``, unless the storage is freed before the read. `window`: how many windows
        were written before this one.
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
        freed = _freed_last(collector.memory)
        replay: tuple[int, tuple[int, int, int], str, str] | None = None  # the last CUDA graph replay so far
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
            own = [(node.start, meta.storage_data_ptr, meta) for metas in tensors for meta in metas]
            own_sparse = {meta.impl_ptr for _, ptr, meta in own if not ptr and _is_sparse(meta)}
            for at, ptr, meta in own + node.inner_reads:
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
                    written = _replayed_into(replay, ptr, at, found, freed, self._freed_before, str(meta.device))
                    if written is not None and replay is not None:  # a CUDA graph replay's output, in its pool
                        written = (written[0], (written[1][0], written[1][1], session.new_tensor_id()))
                        _record_write(writes, ptr, *written)
                        self._replay_outputs.setdefault(replay[3], set()).add(ptr)  # its next replays write it too
                        producer = written[1]
                        batch.add("tensor_edge", key, node.start, producer[0], node_id, producer[2],
                                  self.nbytes(meta), producer[1], device)
                        self.edges_recorded += 1
                        continue
                    rebound = self._rebound.pop(meta.impl_ptr, None)
                    if rebound is None or rebound[0] > at or not _bound_by_set(ptr, at, rebound[0], freed,
                                                                               self._unwritten):
                        continue
                    found = rebound
                    _record_write(writes, ptr, *found)  # the storage it was given is now known
                producer = found[1]
                batch.add("tensor_edge", key, node.start, producer[0], node_id, producer[2],
                          self.nbytes(meta), producer[1], device)
                self.edges_recorded += 1
            for ptr in outside:
                entry = (node_id, device, session.new_tensor_id())
                self._fresh.add(entry[2])
                _record_write(writes, ptr, node.start, entry)
            for _tensor_id, net_bytes, ptr, allocated_at in node.allocations.values():
                if net_bytes > 0 and ptr:  # allocated here and still alive: an output
                    _record_write(writes, ptr, allocated_at, (node_id, device, session.new_tensor_id()))
            if node.sparse_built or any(not ptr and _is_sparse(meta) for _, ptr, meta in node.inner_reads):
                kept = sum(entry[1] for entry in node.allocations.values() if entry[1] > 0)  # indices + values
                self._sparse.add(node, own_sparse, (node_id, device, session.new_tensor_id(), kept))
            for index in self._writes(node.op, node.overload, len(node.inputs)):
                if index < len(node.inputs):
                    for meta in _tensors(node.inputs[index]):
                        if meta.storage_data_ptr:  # written in place: this op holds the new value
                            _record_write(writes, meta.storage_data_ptr, node.start,
                                          (node_id, device, session.new_tensor_id()))
                        elif node.op == "aten::set_":  # given a storage (torch.load rebuilds parameters so)
                            self._rebound[meta.impl_ptr] = (node.start, (node_id, device, session.new_tensor_id()))
            if node.replays:
                replay = (node.start, (node_id, device, session.new_tensor_id()), device_name, node.name)
                # A graph replays into the same static outputs each time: what its earlier replays wrote.
                for ptr in self._replay_outputs.get(node.name, ()):
                    _record_write(writes, ptr, node.start, (node_id, device, session.new_tensor_id()))
            batch.add("node_end", key, node.end, node_id, device, tid)
            self.nodes_recorded += 1
        if len(self._rebound) > _MAX_REBOUND:  # never read: keep the newest
            for impl in list(self._rebound)[: len(self._rebound) // 2]:
                del self._rebound[impl]
        for ptr, events in freed.items():
            if events[-1][1]:
                self._freed_before[ptr] = window
            else:
                self._freed_before.pop(ptr, None)
        if len(self._freed_before) > _MAX_FREED:  # the oldest frees go first
            for ptr in sorted(self._freed_before, key=self._freed_before.__getitem__)[: len(self._freed_before) // 2]:
                del self._freed_before[ptr]
        # What the next window may read: storages not freed since their last write here.
        carried.clear()
        for ptr, history in writes.items():
            if not _freed_between(frees.get(ptr), history.times[-1], float("inf")):
                carried[ptr] = history.entries[-1]
        self._fresh &= {entry[2] for entry in carried.values()}
        # Storages alive and unwritten at the window's end: what a set_ of a later window may have bound.
        unwritten = {ptr: at for ptr, at in self._unwritten.items() if ptr not in freed and ptr not in carried}
        for ptr, events in freed.items():
            if not events[-1][1] and ptr not in carried:
                unwritten[ptr] = events[-1][0]
        if len(unwritten) > _MAX_REBOUND:  # keep the newest
            unwritten = dict(sorted(unwritten.items(), key=lambda item: item[1])[len(unwritten) // 2:])
        self._unwritten = unwritten

    @property
    def rank(self) -> tuple[int, int, str] | None:
        """This process's rank, world size and backend, once torch.distributed was up."""
        return self._rank

    def note_rank(self) -> None:
        """Keep this process's rank while torch.distributed is up: the window that holds the last
        collectives is often converted after destroy_process_group."""
        if self._rank is not None:
            return
        dist = getattr(self._torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            self._rank = (dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))

    def write_rank(self, batch: Batch, tid: int, at: int | None = None) -> None:
        """dfc:process_rank, once, when the rank is known (:meth:`note_rank`), on thread `tid`, at
        `at` (the batch's clock; default: now)."""
        if self._rank is None or self._rank_written:
            return
        rank, world, backend = self._rank
        local = os.environ.get("LOCAL_RANK", "")
        batch.add("process_rank", f"torch-{tid}", batch.now() if at is None else at, rank,
                  int(local) if local.isdigit() else 0xFFFFFFFF, world, backend)
        self._rank_written = True

    def _write_collective(self, batch: Batch, key: str, node: _Node, node_id: int, kind: str,
                          tensors: list[list[Any]]) -> None:
        payload = sum(self.nbytes(meta) for meta in tensors[0]) if tensors else 0
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

    def predefine(self, batch: Batch, nodes: list[_Node]) -> None:
        """The strings of nodes still open at a window cut, defined at their start in this window:
        written with the window where the node ends, their definitions would go back in time."""
        for node in nodes:
            shapes, dtypes = self._args_text([_tensors(v) for v in node.inputs])
            for text in (node.op, node.name, shapes, dtypes):
                batch.define(text, node.start, f"torch-{node.ptid}")
            node.predefined = True

    def write_memory(self, batch: Batch, collector: _Collector) -> None:
        """dfc:mem_alloc and dfc:mem_free: every allocation and free, with the bytes in use on its device."""
        for ts, ptid, device_name, ptr, size, total in collector.memory:
            tid = collector.os_tids.get(ptid, ptid)
            device = batch.device(device_name)
            kind = "mem_alloc" if size > 0 else "mem_free"
            batch.add(kind, f"torch-{tid}", ts, device, ptr & 0xFFFFFFFFFFFFFFFF, abs(size), max(total, 0))
