"""Synthetic dfcompass traces of a chosen size, written fast with numpy.

Recording millions of events through the live API would take minutes, so the read benchmark's
trace is built directly: one numpy structured array per (event class, thread), written packet
by packet through the real CTF writer (:class:`tracer.ctf.TraceDirectory`), so packet framing,
metadata and file naming are exactly what a recorded trace has.

Shape of the trace (close to a recorded pipeline): a few threads each run a sequence of
nodes (node_begin/node_end pairs, random gaps and durations), about one tensor_edge per node
linking it to a recent node of the same thread, and a string table of a few hundred op and
node names defined before any event uses them.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tc_analyses.errors import TraceError
from tc_analyses.reader.fast import DTYPES, read_trace
from tracer import schema
from tracer.ctf import TraceDirectory, records_per_packet

GENERATOR_VERSION = 1  # bump when the generated trace changes, so old copies are regenerated
PACKET_SIZE = 64 * 1024
PID = 4242
BASE_TS = 1_000_000_000_000  # 1000 s after boot: a plausible CLOCK_MONOTONIC value
_C = schema.BY_SHORT


@dataclass(frozen=True)
class Strings:
    """The string table and the sids the generator needs."""

    values: list[str]
    argv0: int
    hostname: int
    thread_names: list[int]
    cpu: int
    empty: int
    ops: np.ndarray[Any, Any]  # op sid of each node-name index
    names: np.ndarray[Any, Any]  # sid of each node-name index


def _string_table(threads: int, n_ops: int = 40, n_names: int = 260) -> Strings:
    values = ["bench/workload.py", "bench-host", "", "cpu"]
    thread_names = []
    for t in range(threads):
        thread_names.append(len(values))
        values.append("MainThread" if t == 0 else f"worker-{t}")
    op_sids = []
    for i in range(n_ops):
        op_sids.append(len(values))
        values.append(f"aten::op_{i:02d}")
    name_sids = []
    for i in range(n_names):
        name_sids.append(len(values))
        values.append(f"layer{i // 10}.block{i % 10}.conv")
    ops = np.array([op_sids[i % n_ops] for i in range(n_names)], dtype="<u4")
    return Strings(values, 0, 1, thread_names, 3, 2, ops, np.array(name_sids, dtype="<u4"))


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _fixed_event_count(strings: Strings, threads: int) -> int:
    # string_def + process_info + thread_info per thread + device_info
    return len(strings.values) + 1 + threads + 1


def _thread_arrays(
    rng: np.random.Generator, t: int, threads: int, nodes: int, edges: int, edge_base: int, strings: Strings
) -> dict[str, np.ndarray[Any, Any]]:
    """node_begin, node_end and tensor_edge records of one thread, each sorted by timestamp."""
    gaps = rng.integers(50, 2_000, nodes, dtype=np.int64)
    durs = rng.exponential(5_000.0, nodes).astype(np.int64) + 100
    # Node i begins after every earlier node ended plus a gap: no overlap on one thread.
    begin = BASE_TS + 1_000 + np.cumsum(gaps) + np.concatenate(([0], np.cumsum(durs)[:-1]))
    end = begin + durs
    node_ids = (np.arange(nodes, dtype=np.int64) * threads + t).astype("<u4")  # unique in the trace
    name_idx = rng.zipf(1.3, nodes) % len(strings.names)  # a few hot names, a long tail
    tid = PID + t

    nb = np.zeros(nodes, DTYPES[_C["node_begin"].id])
    nb["id"], nb["timestamp"], nb["node_id"] = _C["node_begin"].id, begin, node_ids
    nb["op"], nb["name"] = strings.ops[name_idx], strings.names[name_idx]
    nb["device"], nb["tid"], nb["step"] = 0, tid, schema.NO_STEP

    ne = np.zeros(nodes, DTYPES[_C["node_end"].id])
    ne["id"], ne["timestamp"], ne["node_id"], ne["device"], ne["tid"] = _C["node_end"].id, end, node_ids, 0, tid

    consumers = np.sort(rng.integers(1, nodes, edges)) if nodes > 1 else np.zeros(edges, np.int64)
    producers = np.maximum(consumers - rng.integers(1, 9, edges), 0)  # a recent node of this thread
    te = np.zeros(edges, DTYPES[_C["tensor_edge"].id])
    te["id"], te["timestamp"] = _C["tensor_edge"].id, begin[consumers]  # an edge is stamped at its consumer's start
    te["producer"], te["consumer"] = node_ids[producers], node_ids[consumers]
    te["tensor_id"] = np.arange(edge_base, edge_base + edges, dtype=np.int64)
    te["bytes"] = np.left_shift(1, rng.integers(8, 24, edges))
    return {"node_begin": nb, "node_end": ne, "tensor_edge": te}


def _write_array(trace: TraceDirectory, cls: schema.EventClass, key: str, records: np.ndarray[Any, Any]) -> None:
    """Write sorted records as full packets, each a slice of the array."""
    stream = trace.stream(cls, key)
    per_packet = records_per_packet(cls, PACKET_SIZE)
    ts = records["timestamp"]
    for start in range(0, len(records), per_packet):
        stop = min(start + per_packet, len(records))
        stream.write_packet(records[start:stop].tobytes(), stop - start, int(ts[start]), int(ts[stop - 1]))


def _write_descriptions(trace: TraceDirectory, strings: Strings, keys: list[str]) -> None:
    """String table, process, threads and device: all before the first node."""
    first = BASE_TS - len(strings.values) - 10
    trace.write_events(schema.STRING_DEF, keys[0], [(first + i, i, v) for i, v in enumerate(strings.values)])
    trace.write_events(_C["process_info"], keys[0], [(BASE_TS, PID, strings.argv0, strings.hostname)])
    for t, key in enumerate(keys):
        trace.write_events(_C["thread_info"], key, [(BASE_TS + t, PID, PID + t, strings.thread_names[t])])
    trace.write_events(_C["device_info"], keys[0], [(BASE_TS + 100, 0, strings.cpu, strings.cpu, 0, strings.empty)])


def generate(path: Path, total_events: int, threads: int = 4, seed: int = 20240601,
             ctf_version: str = "1.8") -> dict[str, int]:
    """Write a trace of exactly `total_events` events to `path` (replaced); returns counts per class.
    `ctf_version` "2" gives the same streams under CTF 2 metadata."""
    if path.exists():
        shutil.rmtree(path)
    strings = _string_table(threads)
    payload = total_events - _fixed_event_count(strings, threads)
    if payload < 3 * threads:
        raise ValueError(f"{total_events} events is too few for {threads} threads")
    nodes = payload // 3
    edges = payload - 2 * nodes  # about one edge per node; takes the remainder so the total is exact
    rng = np.random.default_rng(seed)
    trace = TraceDirectory(
        path, clock_offset_ns=time.time_ns() - BASE_TS, trace_uuid=uuid.UUID(int=seed),
        hostname="bench-host", env={"pid": PID}, packet_size=PACKET_SIZE, ctf_version=ctf_version,
    )
    keys = [str(PID + t) for t in range(threads)]
    _write_descriptions(trace, strings, keys)
    edge_base = 0
    for t, (n, e) in enumerate(zip(_split(nodes, threads), _split(edges, threads), strict=True)):
        for short, records in _thread_arrays(rng, t, threads, n, e, edge_base, strings).items():
            _write_array(trace, _C[short], keys[t], records)
        edge_base += e
    trace.close()
    if trace.errors:
        raise RuntimeError(f"writing {path} failed: {trace.errors[0]}")
    counts = {"string_def": len(strings.values), "process_info": 1, "thread_info": threads, "device_info": 1,
              "node_begin": nodes, "node_end": nodes, "tensor_edge": edges}
    assert sum(counts.values()) == total_events
    return counts


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def trace_event_count(path: Path) -> int:
    """Events in a dfcompass trace according to our reader; -1 when it cannot be read."""
    try:
        trace = read_trace(path)
    except (TraceError, OSError):
        return -1
    return sum(len(t) for t in trace.tables.values())


def ensure_trace(path: Path, total_events: int) -> tuple[dict[str, int], bool]:
    """Reuse the trace at `path` when it is ours, current and complete; else generate it.

    Returns (counts per class, whether it was generated now).
    """
    manifest = _manifest_path(path)
    try:
        known = json.loads(manifest.read_text())
        if (known.get("generator_version") == GENERATOR_VERSION and known.get("total_events") == total_events
                and trace_event_count(path) == total_events):
            return dict(known["counts"]), False
    except (OSError, ValueError, KeyError):
        pass
    manifest.unlink(missing_ok=True)  # a half-written trace must not be reused next time
    counts = generate(path, total_events)
    manifest.write_text(json.dumps({"generator_version": GENERATOR_VERSION, "total_events": total_events,
                                    "counts": counts}, indent=2) + "\n")
    return counts, True
