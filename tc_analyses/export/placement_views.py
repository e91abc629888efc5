"""A recommended placement as files Trace Compass opens next to the real run.

* ``predicted/``: a dfcompass CTF trace of the predicted schedule. Each device has two rows
  (pseudo-threads): *kept here* for tasks that stay where they ran, and *moved here* for tasks
  the plan moves to this device, so the dataflow view marks every moved node. Predicted transfers
  are dfc:tensor_edge events. Timestamps start at the real trace's first step, so an experiment
  of both traces lines them up.
* ``xml/``: the analyses ``build-analyses`` makes for that trace (the dataflow time graph shows
  the plan); opening both traces as an experiment shows actual and recommended side by side.
* ``graph.dot`` / ``graph.graphml``: the graph coloured by the recommended device (above 2,000
  nodes, ``graph.graphml.gz`` alone).
"""

from __future__ import annotations

import gzip
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np

from tc_analyses.export.graph_formats import write_dot, write_graphml
from tc_analyses.perf.problem import Placement, PlacementProblem
from tracer.builder import TraceBuilder
from tracer.bounded_io import PLAN_LIMIT, read_text

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx

_KEPT_TID, _MOVED_TID = 1_000, 2_000  # pseudo-thread ids: + device index


@contextmanager
def plan_trace_builder(out: Path, problem: PlacementProblem, plan: Placement, start_ns: int,
                       clock_offset_ns: int) -> Iterator[TraceBuilder]:
    """The predicted trace's builder, its process, devices, two rows per device and the step begun;
    the step is ended at the plan's makespan when the block closes."""
    with TraceBuilder(out, clock_offset_ns=clock_offset_ns, overwrite=True,
                      trace_uuid=uuid.uuid5(uuid.NAMESPACE_URL, f"dfcompass-plan-{plan.algorithm}-{plan.makespan_ns}"),
                      env={"dfcompass_plan": plan.algorithm or "plan"}) as builder:
        builder.add("process_info", "plan", start_ns, 0, f"recommended placement ({plan.algorithm})", "")
        for i, device in enumerate(problem.devices):
            builder.device(device.name, start_ns, device.model)
            builder.add("thread_info", "plan", start_ns, 0, _KEPT_TID + i, f"{device.name}: kept here")
            builder.add("thread_info", "plan", start_ns, 0, _MOVED_TID + i, f"{device.name}: moved here")
        builder.add("step_begin", "plan", start_ns, 0, _KEPT_TID)
        yield builder
        builder.add("step_end", "plan", start_ns + plan.makespan_ns, 0, _KEPT_TID)


def write_predicted_trace(out: Path, problem: PlacementProblem, plan: Placement, start_ns: int,
                          clock_offset_ns: int) -> Path:
    """The predicted schedule as a dfcompass trace in `out` (replaced if present)."""
    tasks = {t.id: t for t in problem.tasks}
    index = {d.name: i for i, d in enumerate(problem.devices)}
    with plan_trace_builder(out, problem, plan, start_ns, clock_offset_ns) as builder:
        # Rows per pseudo-thread, added as columns (a Python call per event was most of this file's
        # cost on 10k nodes); the strings are interned in the order events one by one would use them.
        device_of = {device.name: builder.device(device.name, start_ns) for device in problem.devices}
        nodes: dict[int, list[tuple[int, ...]]] = {}
        end_of = {}
        for slot in sorted(plan.schedule, key=lambda s: (s.start_ns, s.task)):
            task = tasks[slot.task]
            moved = task.actual_device is not None and task.actual_device != slot.device
            tid = (_MOVED_TID if moved else _KEPT_TID) + index[slot.device]
            begin = start_ns + slot.start_ns
            label = f"{task.name} (from {task.actual_device})" if moved else task.name
            nodes.setdefault(tid, []).append((begin, start_ns + slot.end_ns, task.id, builder.intern(task.op, begin),
                                              builder.intern(label, begin), device_of[slot.device]))
            end_of[task.id] = (begin, slot.device, tid)
        for tid, rows in nodes.items():
            begins, ends, ids, ops, labels, devices = (np.array(c, dtype=np.int64) for c in zip(*rows))
            zeros, tids = np.zeros(len(rows), dtype=np.int64), np.full(len(rows), tid, dtype=np.int64)
            builder.add_columns("node_begin", f"t{tid}", begins, zeros, [ids, ops, labels, devices, tids, zeros])
            builder.add_columns("node_end", f"t{tid}", ends, zeros, [ids, devices, tids])
        transfers: dict[int, list[tuple[int, ...]]] = {}
        for (u, v), nbytes in sorted(problem.edges.items()):
            if u in end_of and v in end_of:
                begin, dst, tid = end_of[v]
                transfers.setdefault(tid, []).append((begin, u, v, v, nbytes, device_of[end_of[u][1]], device_of[dst]))
        for tid, rows in transfers.items():
            begins, *columns = (np.array(c, dtype=np.int64) for c in zip(*rows))
            builder.add_columns("tensor_edge", f"t{tid}", begins, np.zeros(len(rows), dtype=np.int64), columns)
    return out


# Above this many nodes a drawing is unreadable and the files outgrow the trace: the graph goes
# into one compressed GraphML file (the full data) and no DOT is written.
DRAWN_GRAPH_NODES = 2_000


def write_plan(out_dir: Path, text: str, ops: int) -> Path:
    """The plan's JSON as ``plan.json``; above :data:`DRAWN_GRAPH_NODES` ops, as ``plan.json.gz``
    (tens of MB of per-op rows otherwise: ``dfcompass verify`` and graph programs read both)."""
    plain, packed = out_dir / "plan.json", out_dir / "plan.json.gz"
    (packed if ops <= DRAWN_GRAPH_NODES else plain).unlink(missing_ok=True)  # an earlier run's: never applied
    if ops <= DRAWN_GRAPH_NODES:
        plain.write_text(text, encoding="utf-8")
        return plain
    with gzip.open(packed, "wt", encoding="utf-8", compresslevel=6) as handle:  # 9: 4x the time for 5% less
        handle.write(text)
    return packed


def written_plan_text(out_dir: Path) -> str:
    """The plan's JSON as :func:`write_plan` wrote it into `out_dir` (plain or gzipped)."""
    plain, packed = out_dir / "plan.json", out_dir / "plan.json.gz"
    return read_text(plain if plain.is_file() else packed, PLAN_LIMIT, "a plan")


def write_plan_graph(out_dir: Path, graph: nx.DiGraph, plan: Placement) -> list[Path]:
    """The graph with each node's recommended device, as DOT and GraphML (coloured by device);
    above :data:`DRAWN_GRAPH_NODES` nodes, as ``graph.graphml.gz`` alone."""
    planned = graph.copy()
    for node, device in plan.assignment.items():
        if node in planned:
            planned.nodes[node]["recommended_device"] = device
            planned.nodes[node]["device"] = device  # colours follow the plan
    if planned.number_of_nodes() > DRAWN_GRAPH_NODES:
        compressed = out_dir / "graph.graphml.gz"
        write_graphml(planned, compressed)  # networkx compresses a .gz path
        return [compressed]
    dot, graphml = out_dir / "graph.dot", out_dir / "graph.graphml"
    write_dot(planned, dot)
    write_graphml(planned, graphml)
    return [dot, graphml]
