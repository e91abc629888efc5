"""Export a dfcompass trace, or a job's process traces, as Chrome/Perfetto trace-event JSON.

ui.perfetto.dev (and chrome://tracing) open the file. Layout, per process trace:

* a process ``<label>: host`` with one track per thread: framework ops (``cat`` ``op``), user
  annotations (``user_annotation``), runtime API calls (``runtime``) and steps (``step``);
* a process ``<label>: <device>`` per GPU with one track per queue (stream): kernels, copies,
  memsets and synchronisations (``kernel``, ``memcpy``, ``memset``, ``sync``); work that overlaps
  on one queue (programmatic dependent launch) goes to a sub-track ``stream <q> (overlap lane <n>)``
  (:mod:`tc_analyses.model.lanes`), since trace viewers drop or misplace slices that overlap
  without nesting;
* counters: memory in use per device (bytes), the queue length of each GPU queue
  (:mod:`tc_analyses.analyses.queues`) and the copy bandwidth per kind (GB/s,
  :mod:`tc_analyses.analyses.bandwidth`), the counters HTA's ``generate_trace_with_counters`` adds;
* flow arrows (flow events v1, as Kineto writes them): ``tensor`` from a producer op to each
  consumer op, ``launch`` from a launch call to the GPU operation it launched (same correlation id),
  and the other node links (``fwdbwd``: a forward op to its backward op).

Times are the trace clock's (the CTF clock *without* its offset: microseconds with three decimals
keep ns exactly only below 2^53 ns, which epoch times pass); ``otherData.clock_offset_ns`` holds the
offset that gives Trace Compass's times. A job's processes share their host's clock.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tc_analyses.analyses.bandwidth import concurrent_series, kind_of
from tc_analyses.analyses.breakdown import gpu_events
from tc_analyses.analyses.kernels import display_name
from tc_analyses.analyses.queues import queue_series
from tc_analyses.model.activity import Activity, GpuOp, read_activity
from tc_analyses.model.lanes import lanes
from tc_analyses.reader.fast import DfcTrace, read_trace

Event = dict[str, Any]
PIDS_PER_PROCESS = 100  # pid = base + 0 for the host, base + 1 + i for the i-th GPU
LANE_TRACK = 1_000_000  # tid of lane n of queue q: q + n * LANE_TRACK


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


@dataclass
class _Builder:
    events: list[Event]
    next_flow: int = 1

    def meta(self, pid: int, name: str, tid: int | None = None, sort: int | None = None) -> None:
        if tid is None:
            self.events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
            if sort is not None:
                self.events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": sort}})
        else:
            self.events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})

    def slice(self, cat: str, title: str, pid: int, tid: int, start: int, end: int, **args: Any) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": title, "pid": pid, "tid": tid, "ts": _us(start),
                            "dur": _us(end - start), "args": args})

    def flow(self, cat: str, source: tuple[int, int, int], target: tuple[int, int, int]) -> None:
        """An arrow from the slice at `source` (pid, tid, ns) to the one starting at `target`."""
        flow_id, self.next_flow = self.next_flow, self.next_flow + 1
        (spid, stid, sts), (tpid, ttid, tts) = source, target
        self.events.append({"ph": "s", "id": flow_id, "cat": cat, "name": cat, "pid": spid, "tid": stid, "ts": _us(sts)})
        self.events.append({"ph": "f", "id": flow_id, "cat": cat, "name": cat, "pid": tpid, "tid": ttid, "ts": _us(tts),
                            "bp": "e"})

    def counter(self, name: str, pid: int, ns: int, values: dict[str, float]) -> None:
        self.events.append({"ph": "C", "name": name, "pid": pid, "ts": _us(ns), "args": values})


def _track(queue: int, lane: int) -> int:
    """The tid of a queue's lane: the queue itself, or a sub-track for work that overlaps on it."""
    return queue if not lane else queue + LANE_TRACK * lane


def _process(out: _Builder, trace: DfcTrace, label: str, base: int) -> None:
    activity: Activity = read_activity(trace)
    out.meta(base, f"{label}: host", sort=base)
    events = list(gpu_events(activity))
    gpus = sorted({o.device for o in events})
    gpu_pid = {device: base + 1 + i for i, device in enumerate(gpus)}
    for device, pid in gpu_pid.items():
        out.meta(pid, f"{label}: {device}", sort=pid)
    for tid in sorted({n.tid for n in activity.nodes} | {c.tid for c in activity.api}):
        out.meta(base, f"thread {tid}", tid)
    lane = lanes(events)  # work overlapping on one queue (PDL) goes to a sub-track, never dropped
    for device, queue, number in sorted({(o.device, o.queue, number) for o, number in zip(events, lane)}):
        name = "device-wide" if queue < 0 else f"stream {queue}"
        out.meta(gpu_pid[device], name if not number else f"{name} (overlap lane {number})", _track(queue, number))
    for s in activity.steps:
        out.slice("step", f"ProfilerStep#{s.step}", base, s.tid, s.start, s.end)
    for n in activity.nodes:
        out.slice("op", n.op or n.name, base, n.tid, n.start, n.end, name=n.name, device=n.device, step=n.step,
                  node_id=n.node_id)
    for a in activity.annotations:
        pid = gpu_pid.get(a.device, base) if a.on_gpu else base
        out.slice("gpu_user_annotation" if a.on_gpu else "user_annotation", a.name, pid, a.track, a.start, a.end)
    for c in activity.api:
        out.slice("runtime", c.name, base, c.tid, c.start, c.end, correlation=c.correlation_id)
    for op, number in zip(events, lane):
        pid, track = gpu_pid[op.device], _track(op.queue, number)
        out.slice(op.kind, display_name(op), pid, track, op.start, op.end, correlation=op.correlation_id,
                  **({"bytes": op.bytes} if op.kind in ("memcpy", "memset") else {}))
        call = activity.call_with_correlation(op.correlation_id)
        if call is not None:
            out.flow("launch", (base, call.tid, call.start), (pid, track, op.start))
    runs = {n.node_id: n for n in activity.nodes}
    edges = trace.table("tensor_edge")
    for producer, consumer, nbytes in zip(edges["producer"].tolist(), edges["consumer"].tolist(),
                                          edges["bytes"].tolist()):
        src, dst = runs.get(producer), runs.get(consumer)
        if src is not None and dst is not None and src is not dst:
            out.flow("tensor", (base, src.tid, src.start), (base, dst.tid, dst.start))
    links = trace.table("node_link")
    for source, target, kind in zip(links["source"].tolist(), links["target"].tolist(), links.text("kind").tolist()):
        src, dst = runs.get(source), runs.get(target)
        if src is not None and dst is not None:
            out.flow(kind or "link", (base, src.tid, src.start), (base, dst.tid, dst.start))
    for name in ("mem_alloc", "mem_free"):
        table = trace.table(name)
        for ts, dev, in_use in zip(table["timestamp"].tolist(), table["device"].tolist(),
                                   table["bytes_in_use"].tolist()):
            device = activity.device(dev).name
            out.counter(f"memory in use: {device}", gpu_pid.get(device, base), ts, {"bytes": in_use})
    for series in queue_series(activity):
        for ts, length in zip(series.times, series.lengths):
            out.counter(f"queue length: stream {series.queue}", gpu_pid[series.device], ts, {"length": length})
    copies: dict[tuple[str, str], list[GpuOp]] = defaultdict(list)
    for op in activity.gpu:
        if op.kind in ("memcpy", "memset"):
            copies[(op.device, kind_of(op))].append(op)
    for (device, kind), ops in sorted(copies.items()):  # HTA's generate_trace_with_counters draws these too
        for ts, gbps in concurrent_series(ops):
            out.counter(f"copy bandwidth: {kind}", gpu_pid[device], ts, {"GB/s": round(gbps, 6)})


def _sources(path: Path) -> Iterator[tuple[str, Path]]:
    from tc_analyses.reader.job import job_traces

    if (path / "metadata").is_file():
        yield path.name, path
        return
    processes = job_traces(path)
    if not processes:
        yield path.name, path  # the reader names what is wrong
    for process in processes:
        yield process.label, process.path


def to_trace_events(path: str | Path) -> dict[str, Any]:
    """The Chrome/Perfetto JSON object of the trace or job folder at `path`."""
    out = _Builder([])
    offsets = {}
    for index, (label, trace_path) in enumerate(_sources(Path(path))):
        trace = read_trace(trace_path)
        _process(out, trace, label, index * PIDS_PER_PROCESS)
        offsets[label] = trace.metadata.clock_offset_ns
    return {"traceEvents": out.events, "displayTimeUnit": "ns",
            "otherData": {"producer": "dfcompass export-perfetto", "source": str(path), "clock_offset_ns": offsets}}


def write(path: str | Path, output: Path) -> dict[str, int]:
    """Write the JSON (gzip-compressed when `output` ends in .gz); counts per event phase."""
    data = to_trace_events(path)
    text = json.dumps(data, separators=(",", ":"))
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.suffix == ".gz":
        output.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        output.write_text(text)
    counts: dict[str, int] = {}
    for event in data["traceEvents"]:
        counts[event["ph"]] = counts.get(event["ph"], 0) + 1
    return counts
