"""PyTorch window conversion, GPU side: Kineto's GPU activity into dfcompass events.

**GPU** (when CUDA is available): runtime and driver API calls, kernels, memcpy and memset on their
(device, stream), and CUDA synchronisations, joined by correlation id; ``dfc:launch`` ties each
call to the GPU work it launched in the window. A copy's size comes from Kineto's metadata, else
from the op that launched it (:class:`_CopyBytes`).

The recorder (:mod:`tracer.torch_source`) runs :func:`write_gpu` on each window's Kineto events.
"""

from __future__ import annotations

import bisect
import json
from typing import Any, Callable

from tracer.batch import Batch
from tracer.copy_kinds import copy_ends, copy_kind_of
from tracer.importers.kineto_fields import kernel_config, kernel_dims
from tracer.importers.kineto_source import U32_MAX, U64_MAX, as_int, unsigned
from tracer.torch_events import GRAPH_LAUNCHES, _Collector, _Node


def write_gpu(batch: Batch, events: Any, collector: _Collector, cuda_type: Any, nbytes: Callable[[Any], int]) -> None:
    """Runtime and driver API calls, kernels, copies, memsets and syncs from Kineto's events.

    Kineto's event list also holds allocations (``[memory]``) and user annotations replayed on
    the GPU's streams with the GPU's device type: those are not GPU work and are left out.
    `cuda_type`: torch's ``DeviceType.CUDA``; `nbytes`: a tensor's bytes from its metadata.
    """
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
    copy_bytes = _CopyBytes(nbytes, collector, calls)
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


def mark_replays(events: Any, collector: _Collector, cuda_type: Any) -> None:
    """Flag the nodes that launched a CUDA graph (``cudaGraphLaunch`` inside their span, on their
    thread): their outputs are written unseen (torch_convert._replayed_into)."""
    by_tid: dict[int, tuple[list[int], list[_Node]]] | None = None
    for event in events:
        if event.name() not in GRAPH_LAUNCHES or gpu_activity(event, cuda_type) != "api":
            continue
        if by_tid is None:
            by_tid = nodes_by_tid(collector)
        tid = collector.os_tids.get(event.start_thread_id(), event.start_thread_id())
        starts, nodes = by_tid.get(tid, ([], []))
        at = event.start_ns()
        for index in range(bisect.bisect_right(starts, at) - 1, -1, -1):  # the outermost op around it
            if nodes[index].end >= at and (index == 0 or nodes[index - 1].end < at):
                nodes[index].replays = True
                break


def nodes_by_tid(collector: _Collector) -> dict[int, tuple[list[int], list[_Node]]]:
    """The window's nodes per OS thread, by start: (starts, nodes)."""
    found: dict[int, list[_Node]] = {}
    for node in collector.nodes:
        found.setdefault(collector.os_tids.get(node.ptid, node.ptid), []).append(node)
    return {tid: ([n.start for n in nodes], nodes) for tid, nodes in
            ((t, sorted(ns, key=lambda n: n.start)) for t, ns in found.items())}


class _CopyBytes:
    """A copy's size where torch does not give it (torch < 2.13 has no Kineto metadata): the bytes
    of the first tensor of the outermost op around the runtime call that launched it (``to``,
    ``copy_``, ``item``: source and destination have the same size)."""

    def __init__(self, nbytes: Callable[[Any], int], collector: _Collector, calls: list[tuple[int, int, int]]) -> None:
        self._nbytes, self._collector = nbytes, collector
        self._calls = {corr: (tid, start) for tid, start, corr in calls}
        self._by_tid: dict[int, tuple[list[int], list[_Node]]] | None = None

    def __call__(self, corr: int) -> int:
        call = self._calls.get(corr)
        if call is None:
            return 0
        if self._by_tid is None:
            self._by_tid = nodes_by_tid(self._collector)
        tid, at = call
        starts, nodes = self._by_tid.get(tid, ([], []))
        index = bisect.bisect_right(starts, at) - 1
        if index < 0 or nodes[index].end < at:
            return 0
        for value in nodes[index].inputs:
            if hasattr(value, "sizes") and hasattr(value, "dtype"):
                return self._nbytes(value)
        return 0


_SYNC_NAMES = frozenset({"Event Sync", "Stream Sync", "Context Sync", "Stream Wait Event"})
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
